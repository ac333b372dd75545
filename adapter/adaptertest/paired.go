package adaptertest

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
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
	paired(b, nil, direct, viaRuntime)
}

// paired is Paired, calling prep (when not nil) untimed before each
// timed turn.
func paired(b *testing.B, prep func(), direct, viaRuntime func(session string)) {
	var d, r []time.Duration
	timed := func(f func(string), id string, into *[]time.Duration) {
		if prep != nil {
			prep()
		}
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

// Sequential runs turn once per iteration of b, each on a new session id
// (prefix, then the iteration's number), reporting allocations: one side
// of Paired measured alone.
func Sequential(b *testing.B, prefix string, turn func(session string)) {
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		turn(prefix + strconv.Itoa(i))
	}
}

// Harness compiles adapter a's chat graph for agent ag (adapter.Compile)
// under the chat harness, with sessions on sessions and paused turns in
// an in-memory checkpoint store; deleting a session deletes the
// upstream's (adapter.OnDelete).
func Harness(t testing.TB, a adapter.Adapter, ag *adapter.Agent, sessions session.Store) *chat.Harness {
	t.Helper()
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: sessions}),
		graph.WithCheckpointStore(checkpoint.NewMemoryStore(nil)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, OnDelete: adapter.OnDelete(a), OnCancel: adapter.OnCancel(a, g)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// ChatTurn returns a turn through the chat harness h: msg sent on the
// given session, failing b unless the turn completes with replies
// messages.
func ChatTurn(b testing.TB, h *chat.Harness, msg llm.Message, replies int) func(session string) {
	ctx := context.Background()
	return func(id string) {
		out, err := h.Send(ctx, id, msg)
		if err != nil {
			b.Fatal(err)
		}
		completed(b, out, replies)
	}
}

// completed fails b unless out completed with replies messages.
func completed(b testing.TB, out chat.Outcome, replies int) {
	if c, ok := out.(*chat.Completed); !ok || len(c.Replies) != replies {
		b.Fatalf("turn: %#v", out)
	}
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
		completed(b, resp.Outcome, replies)
	}
}

// SubmitLayer pairs a turn of h's agent through the chat harness alone
// (the "direct" side) with the same turn through server.Submit on the
// same harness and sessions (the "runtime" side), in one loop as Paired
// does: overhead-ns/turn is what the RuntimeClient layer (the run
// record, its events, the turn recorder) adds on top of the chat layer.
// backend names the agent's adapter.
func SubmitLayer(b *testing.B, h *chat.Harness, backend string, sessions session.Store, msg llm.Message, replies int) {
	b.Helper()
	submit := MemoryServer(b, &server.Agent{ID: "bench", Chat: h, Backend: backend}, sessions, replies)
	Paired(b, ChatTurn(b, h, msg, replies), func(id string) { submit(id, msg) })
}
