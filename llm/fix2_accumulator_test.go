package llm_test

import (
	"fmt"
	"testing"

	"github.com/armature-go/armature/llm"
)

// TestAccumulatorManyToolCalls: a stream whose deltas each open a new
// tool call (an upstream gone wrong, or hostile: 200 000 such events fit
// well within a stream's bound) assembles, and the calls keep their
// first-seen order with their deltas joined. That it assembles in linear
// time (a scan of every call so far for each delta took half a minute of
// CPU) is measured by BenchmarkAccumulatorManyToolCalls, not timed here.
func TestAccumulatorManyToolCalls(t *testing.T) {
	const n = 200_000
	deltas := manyCallDeltas(n)
	var a llm.Accumulator
	for i := range deltas {
		a.Add(&deltas[i])
	}
	resp, err := a.Response()
	if err != nil {
		t.Fatal(err)
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

// manyCallDeltas is a stream of n tool calls, each opened by a delta of
// its own with indexes out of order, then completed by a second delta.
func manyCallDeltas(n int) []llm.Chunk {
	deltas := make([]llm.Chunk, 0, 2*n+1)
	for i := range n {
		idx := (i * 7919) % n
		deltas = append(deltas, llm.Chunk{ToolCalls: []llm.ToolCallDelta{{Index: idx, ID: fmt.Sprint("c", idx), Name: "f", Arguments: `{"i":`}}})
	}
	for i := range n {
		deltas = append(deltas, llm.Chunk{ToolCalls: []llm.ToolCallDelta{{Index: (i * 7919) % n, Arguments: fmt.Sprint(i, "}")}}})
	}
	return append(deltas, llm.Chunk{FinishReason: llm.FinishToolCalls})
}

// BenchmarkAccumulatorManyToolCalls assembles streams of n tool calls:
// ns/call stays flat as n grows (linear assembly).
//
//	go test -run '^$' -bench AccumulatorManyToolCalls ./llm
func BenchmarkAccumulatorManyToolCalls(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint("calls=", n), func(b *testing.B) {
			deltas := manyCallDeltas(n)
			for b.Loop() {
				var a llm.Accumulator
				for i := range deltas {
					a.Add(&deltas[i])
				}
				if _, err := a.Response(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/call")
		})
	}
}
