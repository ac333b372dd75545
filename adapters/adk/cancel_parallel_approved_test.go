package adk_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// stepRefund: the first run returns at once, the second blocks until
// released (whichever order ADK-Go runs the step's calls in).
type stepRefund struct {
	mu      sync.Mutex
	runs    map[string]int
	total   int
	started chan struct{}
	release chan struct{}
}

func (s *stepRefund) tool() agent.Tool {
	type args struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
	}
	return agent.MustTool("issue_refund", "Refund an order (needs approval)", func(ctx context.Context, a args) (string, error) {
		s.mu.Lock()
		s.runs[a.Order]++
		s.total++
		second := s.total == 2
		s.mu.Unlock()
		if second {
			select {
			case s.started <- struct{}{}:
			default:
			}
			<-s.release
		}
		return "refunded order " + a.Order, nil
	}).WithApproval()
}

func (s *stepRefund) count(o string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.runs[o] }

// TestCancelKeepsEveryApprovedCallOfTheStep: two approved calls of one step;
// the fast one returns before the cancel, the slow one after. Both ran:
// both must be kept, and the approval sent again must run neither.
func TestCancelKeepsEveryApprovedCallOfTheStep(t *testing.T) {
	for _, driver := range []string{"memory", "sqlite"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			section := `{}`
			if driver == "sqlite" {
				section = `{"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
			}
			m := &orderScript{}
			tl := &stepRefund{runs: map[string]int{}, started: make(chan struct{}, 1), release: make(chan struct{})}
			st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
			h, closeA := approvalHarness(t, section, m, tl.tool(), st)
			defer closeA()
			out, err := h.Send(ctx, "acme/s", llm.UserText("refund two 7"))
			s, ok := out.(*chat.Suspended)
			if err != nil || !ok {
				t.Fatalf("send: %#v %v", out, err)
			}
			// Approve every pending call until the last approval's resume
			// runs the tools.
			var sig chat.Signal
			for {
				sig = chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}
				cctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				var rout chat.Outcome
				var rerr error
				go func() {
					defer close(done)
					rout, rerr = h.Signal(cctx, sig)
				}()
				select {
				case <-tl.started:
					cancel()
					time.Sleep(100 * time.Millisecond)
					close(tl.release)
					<-done
					t.Logf("cancelled resume: %T %v", rout, rerr)
				case <-done:
					cancel()
					if s2, ok := rout.(*chat.Suspended); ok {
						s = s2
						continue
					}
					t.Fatalf("resume ended without running the slow tool: %#v %v", rout, rerr)
				}
				break
			}
			if rec, _ := st.sessions.Load(ctx, session.LoadRequest{SessionID: "acme/s"}); rec != nil {
				b, _ := json.Marshal(rec.State["messages"])
				t.Logf("history after the cancel: %s", b)
				for _, r := range []string{`"content":"refunded order 7","tool_call_id":"call_0"`, `"content":"refunded order 7b","tool_call_id":"call_1"`} {
					if !strings.Contains(string(b), r) {
						t.Errorf("the runtime's history after the cancel lacks %s (both calls ran)", r)
					}
				}
			}
			out2, err2 := h.Signal(ctx, sig)
			t.Logf("approval sent again: %T %v", out2, err2)
			out3, err3 := h.Send(ctx, "acme/s", llm.UserText("hello"))
			t.Logf("next: %T %v", out3, err3)
			if n7, n7b := tl.count("7"), tl.count("7b"); n7 != 1 || n7b != 1 {
				t.Errorf("runs: order 7 ran %d times, 7b %d times (want once each)", n7, n7b)
			}
			reqs := m.requests()
			last := reqs[len(reqs)-1]
			var shape []string
			for _, msg := range last {
				shape = append(shape, string(msg.Role)+":"+msg.Text())
			}
			t.Logf("last request: %q", shape)
			for _, want := range []string{"refunded order 7b", "refunded order 7"} {
				found := false
				for _, msg := range last {
					if msg.Role == llm.RoleTool && msg.Text() == want {
						found = true
					}
				}
				if !found {
					t.Errorf("the model's next request lacks %q", want)
				}
			}
		})
	}
}

// TestCancelKeepsASiblingsDenial: one step, two
// approval-gated calls; the user denies one and approves the other, and
// the turn is cancelled while the approved one runs. The denial took
// effect (nothing runs again): the model's next request must say the
// user denied that call, not that it still "requires confirmation".
func TestCancelKeepsASiblingsDenial(t *testing.T) {
	for _, driver := range []string{"memory", "sqlite"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			section := `{}`
			if driver == "sqlite" {
				section = `{"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
			}
			m := &orderScript{}
			tl := &stepRefund{runs: map[string]int{}, started: make(chan struct{}, 1), release: make(chan struct{})}
			tl.total = 1 // the first run blocks
			st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
			h, closeA := approvalHarness(t, section, m, tl.tool(), st)
			defer closeA()
			out, err := h.Send(ctx, "acme/s", llm.UserText("refund two 7"))
			s, ok := out.(*chat.Suspended)
			if err != nil || !ok {
				t.Fatalf("send: %#v %v", out, err)
			}
			// Deny the first call asked about, approve the second.
			denied := s.Descriptor.SignalID
			out, err = h.Signal(ctx, chat.Signal{SignalID: denied, SessionID: "acme/s", Payload: agent.Deny("wrong order")})
			s, ok = out.(*chat.Suspended)
			if err != nil || !ok {
				t.Fatalf("deny: %#v %v", out, err)
			}
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = h.Signal(cctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
			}()
			select {
			case <-tl.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the approved tool never started")
			}
			cancel()
			time.Sleep(100 * time.Millisecond)
			close(tl.release)
			<-done
			if rec, _ := st.sessions.Load(ctx, session.LoadRequest{SessionID: "acme/s"}); rec != nil {
				b, _ := json.Marshal(rec.State["messages"])
				t.Logf("history after the cancel: %s", b)
			}
			out3, err3 := h.Send(ctx, "acme/s", llm.UserText("hello"))
			t.Logf("next: %T %v", out3, err3)
			reqs := m.requests()
			last := reqs[len(reqs)-1]
			var shape []string
			deniedSeen := false
			for _, msg := range last {
				shape = append(shape, string(msg.Role)+":"+msg.Text())
				if msg.Role == llm.RoleTool && strings.Contains(msg.Text(), "denied") {
					deniedSeen = true
				}
			}
			t.Logf("last request: %q", shape)
			if !deniedSeen {
				t.Errorf("the user's denial (signal %s) is lost: the model's next request does not say the call was denied", denied)
			}
		})
	}
}
