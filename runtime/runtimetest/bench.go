package runtimetest

import (
	"fmt"
	"testing"

	"github.com/armature-go/armature/runtime"
)

// BenchmarkTurn measures what recording one turn costs on s: Begin, ten
// adapter events (a handoff, tool start and result, output deltas, node
// completions) and Complete, with nobody subscribed, through a Recorder.
func BenchmarkTurn(b *testing.B, s runtime.Store) {
	n := 0
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: s, NewID: func() string {
		n++
		return fmt.Sprintf("bench-%d", n)
	}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	phases := []string{runtime.PhaseHandoff, runtime.PhaseToolStart, runtime.PhaseToolResult}
	for range 6 {
		phases = append(phases, runtime.PhaseOutputDelta)
	}
	phases = append(phases, runtime.PhaseNodeCompleted)
	b.ReportAllocs()
	for b.Loop() {
		turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "bench", SessionID: "s", AgentID: "agent"})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range phases {
			if err := turn.Adapter(tctx, p, map[string]any{"adapter": "armature", "text": "hello"}); err != nil {
				b.Fatal(err)
			}
		}
		if err := turn.Complete(tctx, map[string]string{"text": "hello world"}); err != nil {
			b.Fatal(err)
		}
	}
}
