package adk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestConcurrentApprovals: the same approval sent twice at once, or an
// approval and a denial at once, on one server and on two (two
// adapters over the same stores and the same ADK-Go session database,
// SQLite or PostgreSQL): the tool runs at most once, and exactly one of the
// signals resumes the turn.
func TestConcurrentApprovals(t *testing.T) {
	for _, driver := range []string{"memory", "sqlite", "postgres"} {
		for _, twoServers := range []bool{false, true} {
			if driver == "memory" && twoServers {
				continue // in-memory ADK sessions are not shared
			}
			for _, mixed := range []bool{false, true} {
				name := driver
				if twoServers {
					name += "/two servers"
				}
				if mixed {
					name += "/approve+deny"
				}
				t.Run(name, func(t *testing.T) {
					ctx := context.Background()
					section := `{}`
					switch driver {
					case "sqlite":
						section = `{"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
					case "postgres":
						url := os.Getenv("ARMATURE_POSTGRES_URL")
						if url == "" {
							t.Skip("ARMATURE_POSTGRES_URL is not set")
						}
						schema := fmt.Sprintf("adk_conc_%d", time.Now().UnixNano())
						t.Cleanup(func() { dropSchema(url, schema) })
						section = `{"session":{"driver":"postgres","url_env":"ARMATURE_POSTGRES_URL","schema":"` + schema + `"}}`
					}
					w := &randWorld{t: t, section: section, m: &orderScript{}, tools: &refundCounter{runs: map[string]int{}},
						st: stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}}
					w.restart()
					h1 := w.h
					h2 := h1
					if twoServers {
						first := w.closers
						w.closers = nil
						w.restart()
						h2 = w.h
						w.closers = append(w.closers, first...)
					}
					defer func() {
						for _, c := range w.closers {
							c()
						}
					}()
					out, err := h1.Send(ctx, "acme/s", llm.UserText("refund one 7"))
					s, ok := out.(*chat.Suspended)
					if err != nil || !ok {
						t.Fatalf("send: %#v %v", out, err)
					}
					var wg sync.WaitGroup
					outs := make([]chat.Outcome, 2)
					errs := make([]error, 2)
					for i, h := range []*chat.Harness{h1, h2} {
						payload := agent.Approve("")
						if mixed && i == 1 {
							payload = agent.Deny("no")
						}
						wg.Go(func() {
							outs[i], errs[i] = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: payload})
						})
					}
					wg.Wait()
					completed := 0
					for i := range outs {
						if _, ok := outs[i].(*chat.Completed); ok && errs[i] == nil {
							completed++
						}
						t.Logf("signal %d: %T %v", i, outs[i], errs[i])
					}
					w.tools.mu.Lock()
					runs := w.tools.runs["7"]
					w.tools.mu.Unlock()
					if completed != 1 || runs > 1 || (!mixed && runs != 1) {
						t.Fatalf("%d signals resumed the turn, the refund ran %d times", completed, runs)
					}
				})
			}
		}
	}
}
