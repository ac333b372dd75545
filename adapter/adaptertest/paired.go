package adaptertest

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// Paired measures what Armature's runtime adds to an upstream agent's
// turn: each iteration of b runs direct (the upstream alone) and
// viaRuntime (the same agent behind the runtime) once, each on a new
// session id, alternating which goes first, and reports the median
// time of each ("direct-ns/turn", "runtime-ns/turn") and their
// difference ("overhead-ns/turn"). Alternating in one loop exposes both
// sides to the same machine load, which separate benchmarks run minutes
// apart do not.
func Paired(b *testing.B, direct, viaRuntime func(session string)) {
	var d, r []time.Duration
	timed := func(f func(string), id string, into *[]time.Duration) {
		t := time.Now()
		f(id)
		*into = append(*into, time.Since(t))
	}
	i := 0
	for b.Loop() {
		i++
		id := strconv.Itoa(i)
		if i%2 == 0 {
			timed(direct, "d-"+id, &d)
			timed(viaRuntime, "r-"+id, &r)
		} else {
			timed(viaRuntime, "r-"+id, &r)
			timed(direct, "d-"+id, &d)
		}
	}
	md, mr := median(d), median(r)
	b.ReportMetric(md, "direct-ns/turn")
	b.ReportMetric(mr, "runtime-ns/turn")
	b.ReportMetric(mr-md, "overhead-ns/turn")
}

func median(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[len(d)/2])
}

// MemoryServer returns the runtime's server over in-memory stores
// (sessions, run records) serving a, an agent whose chat harness runs on
// sessions, and a submit function running one turn through its
// RuntimeClient (Server.Submit: the run record and its events included)
// that fails b unless the turn completes with replies messages. The
// server and its recorder stop when b ends.
func MemoryServer(b testing.TB, a *server.Agent, sessions session.Store, replies int) (submit func(session string, msg llm.Message)) {
	b.Helper()
	ctx := context.Background()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runtime.NewMemoryStore(runtime.MemoryConfig{})})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{a}, Sessions: sessions, Runs: rec})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop(ctx); _ = rec.Close(ctx) })
	return func(id string, msg llm.Message) {
		resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: id, Message: msg})
		if err != nil {
			b.Fatal(err)
		}
		if c, ok := resp.Outcome.(*chat.Completed); !ok || len(c.Replies) != replies {
			b.Fatalf("turn: %#v", resp.Outcome)
		}
	}
}
