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
	var a llm.Accumulator
	start := time.Now()
	for i := range n {
		// Indexes out of order, each call in two deltas.
		idx := (i * 7919) % n
		a.Add(&llm.Chunk{ToolCalls: []llm.ToolCallDelta{{Index: idx, ID: fmt.Sprint("c", idx), Name: "f", Arguments: `{"i":`}}})
	}
	for i := range n {
		a.Add(&llm.Chunk{ToolCalls: []llm.ToolCallDelta{{Index: (i * 7919) % n, Arguments: fmt.Sprint(i, "}")}}})
	}
	a.Add(&llm.Chunk{FinishReason: llm.FinishToolCalls})
	resp, err := a.Response()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("assembling %d tool calls took %v", n, d)
	}
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
