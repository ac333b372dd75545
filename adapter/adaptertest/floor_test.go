package adaptertest_test

import (
	"fmt"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
)

// BenchmarkFloor is the runtime's own cost per turn (overhead-ns/turn):
// a W2 reply and a W3 tool turn of an adapter that does no work,
// through server.Submit on the in-memory stores, against the same turn
// run directly.
//
//	go test -run '^$' -bench Floor -benchmem -count 6 ./adapter/adaptertest | benchstat -
//
// The garbage= rows add an upstream's garbage to each turn (allocated
// on both sides of the pair): what the runtime's cost becomes beside it.
// The cold rows evict the CPU caches (8 MB written) before each turn of
// either side: the runtime's cost from cold caches, as beside a real
// upstream, whose turn evicts the runtime's code and data between two
// of its turns.
func BenchmarkFloor(b *testing.B) {
	b.Run("W2", func(b *testing.B) { adaptertest.Floor(b, adaptertest.Scripted{}) })
	b.Run("W3", func(b *testing.B) { adaptertest.Floor(b, adaptertest.Scripted{Tool: true}) })
	for _, kb := range []int{32, 64} {
		b.Run(fmt.Sprintf("W2/garbage=%dKB", kb), func(b *testing.B) { adaptertest.Floor(b, adaptertest.Scripted{Garbage: kb << 10}) })
	}
	b.Run("W2/cold", func(b *testing.B) { adaptertest.Floor(b, adaptertest.Scripted{Evict: 8 << 20}) })
	b.Run("W3/cold", func(b *testing.B) { adaptertest.Floor(b, adaptertest.Scripted{Tool: true, Evict: 8 << 20}) })
}

// BenchmarkFloorGrowth is BenchmarkFloor on one session that holds
// history turns already (adaptertest.FloorGrowth): the runtime's own
// cost per turn must not grow with the session's history (BENCHMARKS.md:
// at history=10000 at most 1.5 x history=10).
//
//	go test -run '^$' -bench FloorGrowth -benchmem -count 6 ./adapter/adaptertest | benchstat -
func BenchmarkFloorGrowth(b *testing.B) {
	for _, w := range []struct {
		name string
		s    adaptertest.Scripted
	}{{"W2", adaptertest.Scripted{}}, {"W3", adaptertest.Scripted{Tool: true}}} {
		for _, h := range []int{10, 10000} {
			b.Run(fmt.Sprintf("%s/history=%d", w.name, h), func(b *testing.B) { adaptertest.FloorGrowth(b, w.s, h) })
		}
	}
}
