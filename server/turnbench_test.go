package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// BenchmarkRESTTurn is one unstreamed REST turn of the demo agent (a
// model call, a tool call, a second model call) over SQLite, recorded
// as a run and answered once its record is durable: serially, and from
// parallel clients (8 per CPU) on their own sessions.
func BenchmarkRESTTurn(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(fmt.Sprintf("parallel=%t", parallel), func(b *testing.B) {
			s := newTruthServer(b, mustDemo(b), 0)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var sessions atomic.Int64
			turn := func(session int64, i int) { // a new session every 8 turns: histories stay short
				resp, err := client.Post(fmt.Sprintf("%s/v1/sessions/b%d-%d/messages", s.ts.URL, session, i/8), "application/json",
					strings.NewReader(fmt.Sprintf(`{"content":"where is order %d?"}`, i)))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			b.ResetTimer()
			if !parallel {
				for i := range b.N {
					turn(0, i)
				}
				return
			}
			b.SetParallelism(8) // 8 clients per CPU
			b.RunParallel(func(pb *testing.PB) {
				session := sessions.Add(1)
				for i := 0; pb.Next(); i++ {
					turn(session, i)
				}
			})
		})
	}
}

// BenchmarkChatTurnStreamed compares, on the chat harness alone (the
// demo agent over SQLite), a turn run with Send and the same turn run
// with SendStreaming and its chunks consumed, as the server now runs
// every turn: the cost of streaming a turn nobody streams.
func BenchmarkChatTurnStreamed(b *testing.B) {
	for _, streamed := range []bool{false, true} {
		b.Run(fmt.Sprintf("streamed=%t", streamed), func(b *testing.B) {
			s := newTruthServer(b, mustDemo(b), 0)
			ctx := b.Context()
			b.ResetTimer()
			for i := range b.N {
				msg := llm.UserText(fmt.Sprintf("where is order %d?", i))
				key := fmt.Sprintf("default/c%d", i/8)
				if !streamed {
					if _, err := s.chat.Send(ctx, key, msg); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for c, err := range s.chat.SendStreaming(ctx, key, msg) {
					if c.Kind == chat.ChunkOutcome && err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkSubmitOverhead pairs, on in-memory sessions and runs, a turn
// of the demo agent through its chat harness (Send) with the same turn
// through the server's RuntimeClient (Submit: run record, runtime
// events), alternating in one loop (adaptertest.Paired):
// overhead-ns/turn is what the runtime adds to a turn.
func BenchmarkSubmitOverhead(b *testing.B) {
	for _, w := range []struct{ name, text string }{
		{"reply", "hello"},
		{"tool", "where is order 7?"},
	} {
		b.Run(w.name, func(b *testing.B) {
			sessions := session.NewMemoryStore(session.MemoryConfig{})
			g, err := mustDemo(b).Compile(graph.WithSessions(graph.SessionConfig{Store: sessions}),
				graph.WithCheckpointStore(checkpoint.NewMemoryStore(nil)))
			if err != nil {
				b.Fatal(err)
			}
			h, err := chat.New(chat.Config{Graph: g})
			if err != nil {
				b.Fatal(err)
			}
			replies := 1
			if w.name == "tool" {
				replies = 3
			}
			submit := adaptertest.MemoryServer(b, &server.Agent{ID: "demo", Chat: h, Model: demo.ModelName}, sessions, replies)
			msg := llm.UserText(w.text)
			ctx := b.Context()
			adaptertest.Paired(b, func(id string) {
				if _, err := h.Send(ctx, id, msg); err != nil {
					b.Fatal(err)
				}
			}, func(id string) { submit(id, msg) })
		})
	}
}
