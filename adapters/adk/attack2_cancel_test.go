package adk_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestCancelAtInterrupt: a turn cancelled as its model step selects an
// approval-gated call (ADK-Go then records the call and, unless the
// cancellation stops it first, its confirmation request), on each
// session service, first turn or not: the next message completes, its
// model request answers every call it holds exactly once and holds no
// "requires confirmation", and the tool never ran.
func TestCancelAtInterrupt(t *testing.T) {
	for _, driver := range []string{"memory", "sqlite"} {
		for _, first := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/first=%v", driver, first), func(t *testing.T) {
				ctx := context.Background()
				section := `{}`
				if driver == "sqlite" {
					section = `{"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
				}
				w := &randWorld{t: t, section: section, m: &orderScript{}, tools: &refundCounter{runs: map[string]int{}},
					st: stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}}
				w.restart()
				defer func() {
					for _, c := range w.closers {
						c()
					}
				}()
				if !first {
					if _, err := w.h.Send(ctx, "acme/s", llm.UserText("hello 0")); err != nil {
						t.Fatal(err)
					}
				}
				cctx, cancel := context.WithCancel(ctx)
				out, err := w.h.SendFunc(cctx, "acme/s", llm.UserText("refund one 7"), func(c chat.Chunk) bool {
					if c.Tool != nil {
						cancel()
					}
					return true
				})
				cancel()
				t.Logf("cancelled turn: %T %v", out, err)
				out, err = w.h.Send(ctx, "acme/s", llm.UserText("hello 1"))
				if _, ok := out.(*chat.Completed); err != nil || !ok {
					t.Fatalf("next message: %T %v", out, err)
				}
				reqs := w.m.requests()
				last := reqs[len(reqs)-1]
				checkRequest(func(f string, a ...any) { t.Helper(); t.Fatalf(f, a...) }, last, nil)
				var shape []string
				for _, m := range last {
					shape = append(shape, string(m.Role)+":"+m.Text())
				}
				t.Logf("the model's request: %q", shape)
				if n := strings.Count(strings.Join(shape, "\n"), "refund one 7"); n > 1 {
					t.Fatalf("the cancelled message reached the model %d times", n)
				}
				if w.tools.runs["7"] != 0 {
					t.Fatalf("the refund ran")
				}
			})
		}
	}
}

// TestCancelledRunIsACancellation: a run cancelled while ADK-Go's agent
// is under way (at a text delta, at a tool call's selection, on a
// resume at the approved call's result) fails with the context's error
// (errors.Is context.Canceled), not with the error ADK-Go v2.2.0's
// workflow scheduler reports then ("node "assistant" panicked: runtime
// error: range function continued iteration…": its dynamic node yields
// the cancellation after its consumer stopped), which read as a crash
// in the run record and the logs.
func TestCancelledRunIsACancellation(t *testing.T) {
	for _, c := range []struct {
		name, text string
		at         adk.EventKind
		confirm    bool
	}{
		{"text", "hello", adk.EventDelta, false},
		{"tool call", "refund one 7", adk.EventToolStart, false},
		{"approved call", "refund one 7", adk.EventToolResult, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &orderScript{}
			counter := &refundCounter{runs: map[string]int{}}
			e, err := adk.NewEngine(context.Background(), adk.Config{Tools: []agent.Tool{counter.tool()}, LLM: adk.NewProviderModel("m", m)})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := func(ev adk.Event) {
				if ev.Kind == c.at {
					cancel()
				}
			}
			if c.confirm {
				res, err := e.SendMessage(context.Background(), "u", "s", llm.UserText(c.text), func(adk.Event) {})
				if err != nil || len(res.Pending) != 1 {
					t.Fatalf("%+v %v", res, err)
				}
				_, err = e.Confirm(ctx, "u", "s", stop, adk.Decision{ConfirmationID: res.Pending[0].ConfirmationID, Confirmed: true})
				checkCancelled(t, err)
				return
			}
			_, err = e.SendMessage(ctx, "u", "s", llm.UserText(c.text), stop)
			checkCancelled(t, err)
		})
	}
}

func checkCancelled(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, context.Canceled) || strings.Contains(fmt.Sprint(err), "panicked") {
		t.Fatalf("err = %v, want the cancellation", err)
	}
}
