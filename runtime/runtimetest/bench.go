package runtimetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/runtime"
)

// benchPhases are a benchmark turn's adapter events: a handoff, tool
// start and result, six output deltas and a node completion.
var benchPhases = func() []string {
	p := []string{runtime.PhaseHandoff, runtime.PhaseToolStart, runtime.PhaseToolResult}
	for range 6 {
		p = append(p, runtime.PhaseOutputDelta)
	}
	return append(p, runtime.PhaseNodeCompleted)
}()

// benchModes are the Recorder configurations benchmarked: "sync" writes
// each turn on its own path (two transactions), "group" group-commits.
var benchModes = []struct {
	name string
	sync bool
}{{"sync", true}, {"group", false}}

func benchRecorder(b *testing.B, s runtime.Store, mode string, sync bool) *runtime.Recorder {
	b.Helper()
	var n atomic.Int64
	prefix := "bench-" + mode + "-" + rand.Text()[:8] // the store outlives one recorder
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: s, Synchronous: sync, NewID: func() string {
		return fmt.Sprintf("%s-%d", prefix, n.Add(1))
	}})
	if err != nil {
		b.Fatal(err)
	}
	return rec
}

func benchTurn(b *testing.B, ctx context.Context, rec *runtime.Recorder, session string) {
	turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "bench", SessionID: session, AgentID: "agent"})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range benchPhases {
		if err := turn.Adapter(tctx, p, map[string]any{"adapter": "armature", "text": "hello"}); err != nil {
			b.Fatal(err)
		}
	}
	if err := turn.Complete(tctx, map[string]string{"text": "hello world"}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTurn measures what recording one turn costs on s: Begin, ten
// adapter events and Complete, with nobody subscribed, through a
// Recorder, one turn at a time; "sync" with RecorderConfig.Synchronous,
// "group" with group commit. The group timing includes draining the
// queue (Close), so it is the amortized cost.
func BenchmarkTurn(b *testing.B, s runtime.Store) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			rec := benchRecorder(b, s, m.name, m.sync)
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				benchTurn(b, ctx, rec, "s")
			}
			if err := rec.Close(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkTurnConcurrent is BenchmarkTurn with 50 goroutines per
// GOMAXPROCS each recording the turns of its own session, as a server
// under load does; ns/op is the recording cost per turn, amortized over
// the concurrency (and, for "group", including the final drain).
func BenchmarkTurnConcurrent(b *testing.B, s runtime.Store) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			rec := benchRecorder(b, s, m.name, m.sync)
			ctx := b.Context()
			var sessions atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(50)
			b.RunParallel(func(pb *testing.PB) {
				session := fmt.Sprintf("s-%d", sessions.Add(1))
				for pb.Next() {
					benchTurn(b, ctx, rec, session)
				}
			})
			if err := rec.Close(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}
