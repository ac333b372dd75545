package adaptertest

import (
	"context"
	"encoding/json"
	runtime2 "runtime"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// Scripted is an adapter that does no work of its own: each turn emits
// the events and returns the messages of the workload it was built for,
// as an upstream agent would, and nothing else. Through the runtime it
// measures what the runtime itself costs per turn ([Floor]): an
// upstream adds its own work on top, never less.
type Scripted struct {
	// Tool makes each turn a W3 tool turn: a tool call, its result and
	// the answer (agent.tool.start, agent.tool.result, the answer's
	// text, agent.node.completed). Otherwise a turn is a W2 reply: its
	// text and agent.node.completed.
	Tool bool
	// Garbage, when positive, is how many bytes each turn allocates and
	// drops, in pieces of 40 to 103 bytes, as an upstream agent's turn
	// does (an ADK-Go W2 turn makes about 26 KB in 430 allocations):
	// the runtime's cost beside an upstream's garbage, with none of its
	// other work.
	Garbage int
	// Evict, when positive, is how many bytes of memory Floor writes
	// (untimed) before each turn on either side of the pair, evicting
	// the turn's code and data from the CPU caches as an upstream's
	// turn between two of the runtime's does: the runtime's cost from
	// cold caches, which is most of what it adds beside a real upstream
	// (measured beside ADK-Go, the warm floor cost about doubles). Each
	// side starts cold, so the overhead stays the runtime's own.
	Evict int
}

// Name implements adapter.Adapter.
func (Scripted) Name() string { return "scripted" }

// Run implements adapter.Adapter.
func (s Scripted) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	litter(s.Garbage)
	if !s.Tool {
		const text = "Hello! How can I help?"
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseOutputDelta, Text: text})
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseNodeCompleted, Node: "agent"})
		return adapter.Completed(text, nil), nil
	}
	const text = "Order 7 shipped yesterday."
	// The call's id is unique in the session, as an upstream's is: the
	// runtime refuses a history that reuses one.
	id := "call-1"
	if req != nil && req.RequestID != "" {
		id = "call-" + req.RequestID
	}
	tc := llm.ToolCall{ID: id, Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`)}
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolStart, ToolCall: &tc})
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &tc, Output: `{"status":"shipped"}`})
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseOutputDelta, Text: text})
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseNodeCompleted, Node: "agent"})
	return adapter.Completed(text, []llm.Message{llm.AssistantToolCalls(tc), llm.ToolResult(tc.ID, `{"status":"shipped"}`),
		llm.AssistantText(text)}), nil
}

// litter allocates n bytes in small pieces, keeping the last few alive
// for a while as a turn's working data is.
func litter(n int) {
	var keep [16][]byte
	for i := 0; n > 0; i++ {
		b := make([]byte, 40+i%64)
		keep[i%len(keep)] = b
		n -= len(b)
	}
	runtime2.KeepAlive(keep)
}

// Floor pairs a turn of s run directly (its Run, events dropped) with
// the same turn through the runtime (server.Submit over the adapter's
// chat graph, on in-memory stores), in one loop as [Paired] does:
// overhead-ns/turn is the runtime's own cost per turn, with no upstream
// work for its allocations and caches to interact with.
func Floor(b *testing.B, s Scripted) {
	b.Helper()
	var prep func()
	if s.Evict > 0 {
		mem := make([]byte, s.Evict)
		prep = func() { evict(mem) }
	}
	paired(b, prep, directRun(b, s), floorSubmit(b, s))
}

// directRun is a turn of s run directly, on the session it is given:
// its Run, events dropped.
func directRun(b *testing.B, s Scripted) func(session string) {
	ctx := context.Background()
	ag := &adapter.Agent{ID: "bench", Backend: s.Name()}
	drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	msg := llm.UserText("hello")
	return func(id string) {
		if _, err := s.Run(ctx, &adapter.Request{Agent: ag, SessionID: id, Input: msg}, drop); err != nil {
			b.Fatal(err)
		}
	}
}

// FloorGrowth is Floor on one long session: the session first holds
// history turns of s, then every timed turn, direct or through the
// runtime, adds to it. overhead-ns/turn at a history of 10 000 turns
// against 10 is what BENCHMARKS.md's growth target bounds (at most 1.5
// times): a turn through the runtime costs the same however long its
// session's history.
func FloorGrowth(b *testing.B, s Scripted, history int) {
	b.Helper()
	submit, direct := floorSubmit(b, s), directRun(b, s)
	const id = "long"
	for range history {
		submit(id)
	}
	paired(b, nil, func(string) { direct(id) }, func(string) { submit(id) })
}

// FloorBeside pairs direct, a turn of an upstream agent run on its own,
// with a turn of s through the runtime (as [Floor]), in one loop:
// runtime-ns/turn is what the runtime alone costs between two of that
// upstream's turns (its caches, its collector, its goroutines), with
// none of the upstream's work inside it. Set s.Tool for the W3 turn.
// (overhead-ns/turn compares two different turns and means nothing
// here.)
func FloorBeside(b *testing.B, s Scripted, direct func(session string)) {
	b.Helper()
	Paired(b, direct, floorSubmit(b, s))
}

// floorSubmit is a turn of s through server.Submit on in-memory stores.
func floorSubmit(b *testing.B, s Scripted) func(session string) {
	ag := &adapter.Agent{ID: "bench", Backend: s.Name()}
	replies := 1
	if s.Tool {
		replies = 3
	}
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	submit := MemoryServer(b, &server.Agent{ID: "bench", Chat: Harness(b, s, ag, sessions), Backend: s.Name()}, sessions, replies)
	msg := llm.UserText("hello")
	return func(id string) { submit(id, msg) }
}

// Timings times an adapter's turns from inside the runtime: how long
// each Run took and, within it, the Emit calls (the runtime recording
// the adapter's events). Wrap the adapter's Run with Time in a type
// that embeds the adapter (so that the runtime still sees every
// capability it has), and Report when the benchmark's loop is done.
// Not safe for concurrent turns.
type Timings struct {
	run, emit []time.Duration
	events    int
}

// Time runs run (an adapter's Run) on ctx, req and emit, timing it and
// the Emit calls it makes.
func (t *Timings) Time(ctx context.Context, req *adapter.Request, emit adapter.Emitter,
	run func(context.Context, *adapter.Request, adapter.Emitter) (*adapter.Result, error)) (*adapter.Result, error) {
	var in time.Duration
	n := 0
	start := time.Now()
	res, err := run(ctx, req, adapter.EmitterFunc(func(ctx context.Context, ev adapter.Event) bool {
		s := time.Now()
		ok := emit.Emit(ctx, ev)
		in += time.Since(s)
		n++
		return ok
	}))
	t.run = append(t.run, time.Since(start))
	t.emit = append(t.emit, in)
	t.events = n
	return res, err
}

// Report reports the median Run ("run-ns/turn"), the median time of its
// Emit calls ("emit-ns/turn") and the last turn's event count
// ("events/turn").
func (t *Timings) Report(b *testing.B) {
	b.ReportMetric(median(t.run), "run-ns/turn")
	b.ReportMetric(median(t.emit), "emit-ns/turn")
	b.ReportMetric(float64(t.events), "events/turn")
}

// evict writes one byte in every cache line of mem.
func evict(mem []byte) {
	for i := 0; i < len(mem); i += 64 {
		mem[i]++
	}
}
