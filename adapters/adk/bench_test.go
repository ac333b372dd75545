package adk_test

import (
	"context"
	"strconv"
	"testing"

	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// The workloads of BENCHMARKS.md on one ADK-Go agent (the scripted demo
// model, the demo tools, ADK-Go's in-memory session service), run
// directly (ADK-Go's runner, as its own program would) and through
// Armature's runtime (the adapter's chat graph under the chat harness,
// on the in-memory stores). The difference is the runtime's overhead per
// turn; the target is at most 20 µs.
//
//	go test -run '^$' -bench . -benchmem -count 6 ./ | benchstat -
var workloads = []struct {
	name, text string
	replies    int // messages a runtime turn adds after the user's
}{
	{"W2", "hello", 1},             // first turn of a new session
	{"W3", "where is order 7?", 3}, // tool turn: call, result, answer
}

func newEngine(b *testing.B) *adk.Engine {
	b.Helper()
	e, err := adk.NewEngine(context.Background(), adk.Config{Tools: demo.Tools()})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

func BenchmarkDirect(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			r := newEngine(b).Runner()
			msg := genai.NewContentFromText(w.text, genai.RoleUser)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				for _, err := range r.Run(ctx, "user", w.name+"-"+strconv.Itoa(i), msg, adkagent.RunConfig{}) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func BenchmarkRuntime(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			ag := &adapter.Agent{ID: "bench", Backend: adk.Name, Tools: demo.Tools()}
			g, err := adapter.Compile(&adk.Adapter{Engine: newEngine(b)}, nil, ag,
				graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}),
				graph.WithCheckpointStore(checkpoint.NewMemoryStore(nil)))
			if err != nil {
				b.Fatal(err)
			}
			h, err := chat.New(chat.Config{Graph: g})
			if err != nil {
				b.Fatal(err)
			}
			msg := llm.UserText(w.text)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				out, err := h.Send(ctx, w.name+"-"+strconv.Itoa(i), msg)
				if err != nil {
					b.Fatal(err)
				}
				if c, ok := out.(*chat.Completed); !ok || len(c.Replies) != w.replies {
					b.Fatalf("%s turn: %#v", w.name, out)
				}
			}
		})
	}
}
