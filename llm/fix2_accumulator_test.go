package llm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/armature-go/armature/llm"
)

// TestAccumulatorManyToolCalls: a stream whose deltas each open a new
// tool call (an upstream gone wrong, or hostile: 200 000 such events fit
// well within a stream's bound) assembles in linear time (before: a scan
// of every call so far for each delta, half a minute of CPU here), and
// the calls keep their first-seen order with their deltas joined.
func TestAccumulatorManyToolCalls(t *testing.T) {
	const n = 200_000
	// The deltas, made first: the test times their assembly alone, against
	// a linear pass over them (a copy of each) in the same run, so that a
	// loaded machine slows both alike.
	deltas := make([]llm.Chunk, 0, 2*n+1)
	for i := range n {
		// Indexes out of order, each call in two deltas.
		idx := (i * 7919) % n
		deltas = append(deltas, llm.Chunk{ToolCalls: []llm.ToolCallDelta{{Index: idx, ID: fmt.Sprint("c", idx), Name: "f", Arguments: `{"i":`}}})
	}
	for i := range n {
		deltas = append(deltas, llm.Chunk{ToolCalls: []llm.ToolCallDelta{{Index: (i * 7919) % n, Arguments: fmt.Sprint(i, "}")}}})
	}
	deltas = append(deltas, llm.Chunk{FinishReason: llm.FinishToolCalls})
	start := time.Now()
	copies := make([]llm.ToolCallDelta, 0, len(deltas))
	for i := range deltas {
		copies = append(copies, deltas[i].ToolCalls...)
	}
	linear := time.Since(start)
	var a llm.Accumulator
	start = time.Now()
	for i := range deltas {
		a.Add(&deltas[i])
	}
	resp, err := a.Response()
	if err != nil {
		t.Fatal(err)
	}
	// Linear assembly costs a small multiple of the pass; a scan of the
	// calls so far for each delta costs about n/2 passes' worth.
	if d := time.Since(start); d > 25*linear+time.Second {
		t.Errorf("assembling %d tool calls took %v, %.0f times a linear pass over them (%v)", n, d, float64(d)/float64(linear), linear)
	}
	_ = copies
	calls := resp.Message.ToolCalls
	if len(calls) != n {
		t.Fatalf("%d calls, want %d", len(calls), n)
	}
	for _, i := range []int{0, 1, 17, n / 2, n - 1} {
		idx := (i * 7919) % n
		if calls[i].ID != fmt.Sprint("c", idx) || string(calls[i].Arguments) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("call %d = %+v", i, calls[i])
		}
	}
}
