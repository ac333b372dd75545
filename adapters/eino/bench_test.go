package eino_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	einoadk "github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// The workloads of BENCHMARKS.md on one Eino agent (a ChatModelAgent on
// the scripted demo model with the demo tools, an in-memory checkpoint
// store), run directly (Eino's runner, as its own program would) and
// through Armature's runtime (the adapter's chat graph under the chat
// harness, on the in-memory stores). The difference is the runtime's
// overhead per turn; the target is at most 20 µs.
//
// BenchmarkAdapter splits the difference into the adapter's translation
// and the runtime layer; BenchmarkOverhead measures it in one loop.
//
//	go test -run '^$' -bench . -benchmem -count 6 ./ | benchstat -
var workloads = []struct {
	name, text string
	replies    int // messages a runtime turn adds after the user's
}{
	{"W2", "hello", 1},             // first turn of a new session
	{"W3", "where is order 7?", 3}, // tool turn: call, result, answer
}

// newEngine is the benchmarks' engine. Streaming is set false, as the
// benchmarks measured it before streaming became the Config's default:
// the workloads stay comparable with earlier runs, and the direct turn
// (which runs the upstream's runner without streaming) with the
// runtime's.
func newEngine(b *testing.B) *eino.Engine {
	b.Helper()
	e, err := eino.NewEngine(context.Background(), eino.Config{Tools: demo.Tools(), Streaming: new(false)})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

func BenchmarkDirect(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			adaptertest.Sequential(b, w.name+"-", directTurn(b, ctx, newEngine(b).Runner(), w.text))
		})
	}
}

// BenchmarkRuntime runs the agent through the adapter's chat graph
// under the chat harness (the runtime's session handling), on the
// in-memory stores.
func BenchmarkRuntime(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			h := chatHarness(b, session.NewMemoryStore(session.MemoryConfig{}))
			adaptertest.Sequential(b, w.name+"-", adaptertest.ChatTurn(b, h, llm.UserText(w.text), w.replies))
		})
	}
}

// BenchmarkAdapter calls the adapter's Run directly, without the
// runtime (no chat graph, no Armature session; events go to an emitter
// that drops them): BenchmarkAdapter minus BenchmarkDirect is the
// adapter's own translation per turn, BenchmarkRuntime minus
// BenchmarkAdapter the runtime layer's.
func BenchmarkAdapter(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			a := &eino.Adapter{Engine: newEngine(b)}
			ag := &adapter.Agent{ID: "bench", Backend: eino.Name, Tools: demo.Tools()}
			drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
			msg := llm.UserText(w.text)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				res, err := a.Run(ctx, &adapter.Request{Agent: ag, SessionID: w.name, RequestID: strconv.Itoa(i), Input: msg}, drop)
				if err != nil {
					b.Fatal(err)
				}
				if res.Output == nil || len(res.Output.Messages) != w.replies {
					b.Fatalf("%s turn: %#v", w.name, res)
				}
			}
		})
	}
}

// BenchmarkAdapterOverhead pairs the direct turn with the adapter's Run
// (as BenchmarkAdapter) in one loop, as BenchmarkOverhead does:
// overhead-ns/turn is the adapter's own translation, with no runtime.
func BenchmarkAdapterOverhead(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			r := newEngine(b).Runner()
			a := &eino.Adapter{Engine: newEngine(b)}
			ag := &adapter.Agent{ID: "bench", Backend: eino.Name, Tools: demo.Tools()}
			drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
			msg := llm.UserText(w.text)
			adaptertest.Paired(b, directTurn(b, ctx, r, w.text), func(id string) {
				res, err := a.Run(ctx, &adapter.Request{Agent: ag, SessionID: id, RequestID: id, Input: msg}, drop)
				if err != nil || res.Output == nil || len(res.Output.Messages) != w.replies {
					b.Fatalf("%s turn: %#v, %v", w.name, res, err)
				}
			})
		})
	}
}

// BenchmarkOverhead measures the runtime's overhead per turn in one loop:
// each iteration runs the turn directly (as BenchmarkDirect) and through
// the runtime (as BenchmarkRuntime), each on a new session, in
// alternating order, and reports the median time of each and their
// difference (overhead-ns/turn). A change of the machine's load between
// two benchmarks cannot skew it; GC pauses mostly fall outside medians.
func BenchmarkOverhead(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			r := newEngine(b).Runner()
			h := chatHarness(b, session.NewMemoryStore(session.MemoryConfig{}))
			adaptertest.Paired(b, directTurn(b, ctx, r, w.text), adaptertest.ChatTurn(b, h, llm.UserText(w.text), w.replies))
		})
	}
}

// BenchmarkServerOverhead is BenchmarkOverhead through server.Submit:
// what the whole runtime short of HTTP, run records included, adds to
// the agent's turn, paired in one loop.
func BenchmarkServerOverhead(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			r := newEngine(b).Runner()
			sessions := session.NewMemoryStore(session.MemoryConfig{})
			submit := adaptertest.MemoryServer(b, &server.Agent{ID: "bench", Chat: chatHarness(b, sessions), Backend: eino.Name}, sessions, w.replies)
			msg := llm.UserText(w.text)
			adaptertest.Paired(b, directTurn(b, ctx, r, w.text), func(id string) { submit(id, msg) })
		})
	}
}

// chatHarness is the adapter's chat graph under the chat harness, on
// sessions and an in-memory checkpoint store.
func chatHarness(b *testing.B, sessions session.Store) *chat.Harness {
	b.Helper()
	return adaptertest.Harness(b, &eino.Adapter{Engine: newEngine(b)}, &adapter.Agent{ID: "bench", Backend: eino.Name, Tools: demo.Tools()}, sessions)
}

// directTurn runs a turn with Eino's runner alone, on a new checkpoint
// id.
func directTurn(b *testing.B, ctx context.Context, r *einoadk.Runner, text string) func(id string) {
	return func(id string) {
		it := r.Run(ctx, []*schema.Message{schema.UserMessage(text)}, einoadk.WithCheckPointID(id))
		for {
			ev, ok := it.Next()
			if !ok {
				return
			}
			if ev.Err != nil {
				b.Fatal(ev.Err)
			}
		}
	}
}

// BenchmarkSubmitLayer pairs the same agent's turn through the chat
// harness alone and through server.Submit, on the same harness
// (adaptertest.SubmitLayer): what the RuntimeClient layer adds on top of
// the chat layer, overhead-ns/turn.
func BenchmarkSubmitLayer(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			sessions := session.NewMemoryStore(session.MemoryConfig{})
			adaptertest.SubmitLayer(b, chatHarness(b, sessions), eino.Name, sessions, llm.UserText(w.text), w.replies)
		})
	}
}

// BenchmarkHistory is W1 on an Eino agent with a window: a warm turn on
// a session of H messages through the runtime, in memory, the agent's
// window holding 20 of them. Eino keeps no history, so without a window
// it is handed (and its model sent) the whole history each turn; with
// one, neither the runtime's work nor the upstream's grows with H.
func BenchmarkHistory(b *testing.B) {
	for _, h := range []int{10, 1000, 10000} {
		b.Run("H="+strconv.Itoa(h), func(b *testing.B) {
			ctx := context.Background()
			// Not streamed, as measured before streaming became the
			// default (newEngine).
			e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Streaming: new(false)})
			if err != nil {
				b.Fatal(err)
			}
			ag := &adapter.Agent{ID: "bench", Backend: eino.Name, Tools: demo.Tools(), Window: agent.Window{MaxMessages: 20}}
			sessions := session.NewMemoryStore(session.MemoryConfig{})
			hist := make([]llm.Message, 0, h)
			for i := range h / 2 {
				hist = append(hist, llm.UserText("message "+strconv.Itoa(i)), llm.AssistantText("You said: message "+strconv.Itoa(i)))
			}
			raw, err := json.Marshal(hist)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sessions.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{chat.MessagesField: raw}}); err != nil {
				b.Fatal(err)
			}
			turn := adaptertest.ChatTurn(b, adaptertest.Harness(b, &eino.Adapter{Engine: e}, ag, sessions), llm.UserText("hello"), 1)
			turn("s") // warm: the session decoded and cached
			b.ReportAllocs()
			for b.Loop() {
				turn("s")
			}
		})
	}
}

// BenchmarkFloorBeside is the runtime's own cost beside Eino
// (adaptertest.FloorBeside): a scripted turn through server.Submit
// paired with Eino's direct turn; runtime-ns/turn is the runtime alone
// between two Eino turns.
func BenchmarkFloorBeside(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			adaptertest.FloorBeside(b, adaptertest.Scripted{Tool: w.replies > 1}, directTurn(b, context.Background(), newEngine(b).Runner(), w.text))
		})
	}
}

// timed is the adapter with its turns timed from inside the runtime
// (adaptertest.Timings); it embeds the adapter, so the runtime sees
// every capability the adapter has.
type timed struct {
	*eino.Adapter
	t *adaptertest.Timings
}

func (a timed) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	return a.t.Time(ctx, req, emit, a.Adapter.Run)
}

// BenchmarkInside is BenchmarkServerOverhead with the adapter's Run
// timed inside the runtime: run-ns/turn against direct-ns/turn is what
// the upstream's turn costs more inside the runtime's (the events it
// records, emit-ns/turn, included); the rest of runtime-ns/turn is the
// runtime's layers around it.
func BenchmarkInside(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			var t adaptertest.Timings
			sessions := session.NewMemoryStore(session.MemoryConfig{})
			h := adaptertest.Harness(b, timed{&eino.Adapter{Engine: newEngine(b)}, &t}, &adapter.Agent{ID: "bench", Backend: eino.Name, Tools: demo.Tools()}, sessions)
			submit := adaptertest.MemoryServer(b, &server.Agent{ID: "bench", Chat: h, Backend: eino.Name}, sessions, w.replies)
			msg := llm.UserText(w.text)
			adaptertest.Paired(b, directTurn(b, context.Background(), newEngine(b).Runner(), w.text), func(id string) { submit(id, msg) })
			t.Report(b)
		})
	}
}
