//go:build race

package llm_test

// raceEnabled is set under the race detector, whose sync.Pool drops
// items at random, so pooled buffers (json.Valid's scanner) allocate.
const raceEnabled = true
