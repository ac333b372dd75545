package adk_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// The workloads of BENCHMARKS.md on one ADK-Go agent (the scripted demo
// model, the demo tools, ADK-Go's in-memory session service), run
// directly (ADK-Go's runner, as its own program would) and through
// Armature's runtime (the adapter's chat graph under the chat harness,
// on the in-memory stores). The difference is the runtime's overhead per
// turn; the target is at most 20 µs.
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
func newEngine(b *testing.B) *adk.Engine {
	b.Helper()
	e, err := adk.NewEngine(context.Background(), adk.Config{Tools: demo.Tools(), Streaming: new(false)})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

func BenchmarkDirect(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			adaptertest.Sequential(b, w.name+"-", directTurn(b, ctx, newEngine(b).Runner(), genai.NewContentFromText(w.text, genai.RoleUser)))
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
			a := &adk.Adapter{Engine: newEngine(b)}
			ag := &adapter.Agent{ID: "bench", Backend: adk.Name, Tools: demo.Tools()}
			drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
			msg := llm.UserText(w.text)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				res, err := a.Run(ctx, &adapter.Request{Agent: ag, SessionID: w.name + "-" + strconv.Itoa(i), Input: msg}, drop)
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
			a := &adk.Adapter{Engine: newEngine(b)}
			ag := &adapter.Agent{ID: "bench", Backend: adk.Name, Tools: demo.Tools()}
			drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
			msg := llm.UserText(w.text)
			adaptertest.Paired(b, directTurn(b, ctx, r, genai.NewContentFromText(w.text, genai.RoleUser)), func(id string) {
				res, err := a.Run(ctx, &adapter.Request{Agent: ag, SessionID: id, Input: msg}, drop)
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
			dmsg := genai.NewContentFromText(w.text, genai.RoleUser)
			adaptertest.Paired(b, directTurn(b, ctx, r, dmsg), adaptertest.ChatTurn(b, h, llm.UserText(w.text), w.replies))
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
			submit := adaptertest.MemoryServer(b, &server.Agent{ID: "bench", Chat: chatHarness(b, sessions), Backend: adk.Name}, sessions, w.replies)
			dmsg := genai.NewContentFromText(w.text, genai.RoleUser)
			msg := llm.UserText(w.text)
			adaptertest.Paired(b, directTurn(b, ctx, r, dmsg), func(id string) { submit(id, msg) })
		})
	}
}

// directTurn runs a turn with ADK-Go's runner alone, on a new session.
func directTurn(b *testing.B, ctx context.Context, r *runner.Runner, msg *genai.Content) func(id string) {
	return func(id string) {
		for _, err := range r.Run(ctx, "user", id, msg, adkagent.RunConfig{}) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// chatHarness is the adapter's chat graph under the chat harness, on
// sessions and an in-memory checkpoint store.
func chatHarness(b *testing.B, sessions session.Store) *chat.Harness {
	b.Helper()
	return adaptertest.Harness(b, &adk.Adapter{Engine: newEngine(b)}, &adapter.Agent{ID: "bench", Backend: adk.Name, Tools: demo.Tools()}, sessions)
}

// BenchmarkSubmitLayer pairs the same agent's turn through the chat
// harness alone and through server.Submit, on the same harness
// (adaptertest.SubmitLayer): what the RuntimeClient layer adds on top of
// the chat layer, overhead-ns/turn.
func BenchmarkSubmitLayer(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			sessions := session.NewMemoryStore(session.MemoryConfig{})
			adaptertest.SubmitLayer(b, chatHarness(b, sessions), adk.Name, sessions, llm.UserText(w.text), w.replies)
		})
	}
}

// BenchmarkSeed gives a new ADK-Go session a 100-message history
// (Engine.Seed), as a stateless client of the OpenAI-compatible endpoint
// makes the adapter do on each request, on each session database.
func BenchmarkSeed(b *testing.B) {
	dbs := map[string]func(b *testing.B) adk.SessionConfig{
		"sqlite": func(b *testing.B) adk.SessionConfig {
			return adk.SessionConfig{Driver: adk.SessionSQLite, Path: filepath.Join(b.TempDir(), "adk.db")}
		},
		"postgres": func(b *testing.B) adk.SessionConfig {
			return adk.SessionConfig{Driver: adk.SessionPostgres, URL: postgresURL(b)}
		},
	}
	var history []llm.Message
	for i := range 50 {
		history = append(history, llm.UserText(fmt.Sprint("question ", i)), llm.AssistantText(fmt.Sprint("answer ", i)))
	}
	for name, cfg := range dbs {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			e, err := adk.NewEngine(ctx, adk.Config{Session: cfg(b)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = e.Close() })
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				if n, err := e.Seed(ctx, "user", strconv.Itoa(i), history); n != len(history) || err != nil {
					b.Fatalf("seed: %d, %v", n, err)
				}
			}
		})
	}
}

// BenchmarkFloorBeside is the runtime's own cost beside ADK-Go
// (adaptertest.FloorBeside): a scripted turn through server.Submit
// paired with ADK-Go's direct turn; runtime-ns/turn is the runtime
// alone between two ADK-Go turns.
func BenchmarkFloorBeside(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			r := newEngine(b).Runner()
			dmsg := genai.NewContentFromText(w.text, genai.RoleUser)
			adaptertest.FloorBeside(b, adaptertest.Scripted{Tool: w.replies > 1}, directTurn(b, context.Background(), r, dmsg))
		})
	}
}

// timed is the adapter with its turns timed from inside the runtime
// (adaptertest.Timings); it embeds the adapter, so the runtime sees
// every capability the adapter has.
type timed struct {
	*adk.Adapter
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
			r := newEngine(b).Runner()
			var t adaptertest.Timings
			sessions := session.NewMemoryStore(session.MemoryConfig{})
			h := adaptertest.Harness(b, timed{&adk.Adapter{Engine: newEngine(b)}, &t}, &adapter.Agent{ID: "bench", Backend: adk.Name, Tools: demo.Tools()}, sessions)
			submit := adaptertest.MemoryServer(b, &server.Agent{ID: "bench", Chat: h, Backend: adk.Name}, sessions, w.replies)
			dmsg := genai.NewContentFromText(w.text, genai.RoleUser)
			msg := llm.UserText(w.text)
			adaptertest.Paired(b, directTurn(b, context.Background(), r, dmsg), func(id string) { submit(id, msg) })
			t.Report(b)
		})
	}
}
