package adk_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// slowRefund is an approval-gated issue_refund that blocks until
// released and then completes its side effect, as a payment API call
// that cannot be taken back once sent does (it does not watch ctx).
type slowRefund struct {
	mu      sync.Mutex
	runs    int
	started chan struct{}
	release chan struct{}
}

func (s *slowRefund) tool() agent.Tool {
	type args struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
	}
	return agent.MustTool("issue_refund", "Refund an order (needs approval)", func(ctx context.Context, a args) (string, error) {
		s.mu.Lock()
		s.runs++
		s.mu.Unlock()
		select {
		case s.started <- struct{}{}:
		default:
		}
		<-s.release
		return "refunded order " + a.Order, nil
	}).WithApproval()
}

func (s *slowRefund) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.runs }

func approvalHarness(t *testing.T, section string, m llm.Provider, tl agent.Tool, st stores) (*chat.Harness, func()) {
	reg := &adapter.Registry{}
	if err := adk.Register(reg); err != nil {
		t.Fatal(err)
	}
	ag := &adapter.Agent{ID: "helper", Backend: adk.Name, Tools: []agent.Tool{tl}, Provider: m, Model: "script", Config: json.RawMessage(section)}
	a, err := reg.Build(context.Background(), adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: st.sessions}), graph.WithCheckpointStore(st.cps))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.cps), OnDelete: adapter.OnDelete(a)})
	if err != nil {
		t.Fatal(err)
	}
	return h, func() { a.(*adk.Adapter).Close() }
}

// TestCancelWhileApprovedCallRuns: the approved call's tool is
// running (its side effect under way) when the resumed turn is cancelled;
// the tool then completes. The refund happened: the session must say so
// (its result), and the same approval sent again must not run it a
// second time.
func TestCancelWhileApprovedCallRuns(t *testing.T) {
	for _, driver := range []string{"memory", "sqlite"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			section := `{}`
			if driver == "sqlite" {
				section = `{"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
			}
			m := &orderScript{}
			tl := &slowRefund{started: make(chan struct{}, 1), release: make(chan struct{})}
			st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
			h, closeA := approvalHarness(t, section, m, tl.tool(), st)
			defer closeA()
			out, err := h.Send(ctx, "acme/s", llm.UserText("refund one 7"))
			s, ok := out.(*chat.Suspended)
			if err != nil || !ok {
				t.Fatalf("send: %#v %v", out, err)
			}
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			var rout chat.Outcome
			var rerr error
			go func() {
				defer close(done)
				rout, rerr = h.SignalFunc(cctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}, func(c chat.Chunk) bool {
					if c.Tool != nil {
						t.Logf("tool chunk: %+v", *c.Tool)
					}
					return true
				})
			}()
			select {
			case <-tl.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the tool never started")
			}
			cancel()
			time.Sleep(100 * time.Millisecond)
			close(tl.release) // the refund went through
			<-done
			if eo, ok := rout.(*chat.Errored); ok {
				t.Logf("cancelled resume: bucket=%s category=%s", eo.Bucket, eo.Category)
			}
			t.Logf("cancelled resume: %T %v", rout, rerr)
			if rec, _ := st.sessions.Load(ctx, session.LoadRequest{SessionID: "acme/s"}); rec != nil {
				t.Logf("history after the cancel: %s", rec.State["messages"])
			}
			out2, err2 := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
			t.Logf("approval sent again: %T %v", out2, err2)
			if n := tl.count(); n != 1 {
				t.Fatalf("the approved refund ran %d times (a cancel during the tool, then the same approval again)", n)
			}
			out3, err3 := h.Send(ctx, "acme/s", llm.UserText("hello"))
			t.Logf("next: %T %v", out3, err3)
			reqs := m.requests()
			last := reqs[len(reqs)-1]
			found := false
			for _, msg := range last {
				if msg.Role == llm.RoleTool && msg.Text() != "" && strings.Contains(msg.Text(), "refunded order 7") {
					found = true
				}
			}
			if !found {
				var shape []string
				for _, m := range last {
					shape = append(shape, string(m.Role)+":"+m.Text())
				}
				t.Fatalf("the refund ran but the model's next request does not say so: %q", shape)
			}
		})
	}
}
