package eino_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

type a57Model struct {
	mu   sync.Mutex
	reqs [][]llm.Message
}

func (*a57Model) Ready(context.Context) error { return nil }
func (m *a57Model) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, slices.Clone(req.Messages))
	m.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	if last.Role == llm.RoleTool {
		return &llm.Response{Message: llm.AssistantText("noted"), FinishReason: llm.FinishStop}, nil
	}
	if strings.HasPrefix(last.Text(), "refund") {
		return &llm.Response{Message: llm.AssistantToolCalls(llm.ToolCall{ID: "call_0", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"7","amount":1}`)}), FinishReason: llm.FinishToolCalls}, nil
	}
	return &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop}, nil
}

type a57Refund struct {
	mu      sync.Mutex
	runs    int
	started chan struct{}
	release chan struct{}
}

func (s *a57Refund) tool() agent.Tool {
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
		<-s.release // a payment call that, once sent, completes
		return "refunded order " + a.Order, nil
	}).WithApproval()
}

// TestCancelWhileApprovedCallRuns: the resumed turn is cancelled
// while the approved refund runs; the refund completes. The model's next
// request must not say the call was "Not run: … cancelled before it was
// approved": it was approved and it ran.
func TestCancelWhileApprovedCallRuns(t *testing.T) {
	ctx := context.Background()
	m := &a57Model{}
	tl := &a57Refund{started: make(chan struct{}, 1), release: make(chan struct{})}
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	reg := &adapter.Registry{}
	if err := eino.Register(reg); err != nil {
		t.Fatal(err)
	}
	ckdir := filepath.Join(t.TempDir(), "ckpt")
	section := `{"checkpoint":{"driver":"file","dir":` + strconvQuote(ckdir) + `}}`
	defer func() {
		ents, _ := os.ReadDir(ckdir)
		t.Logf("checkpoint files left: %d", len(ents))
	}()
	ag := &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: []agent.Tool{tl.tool()}, Provider: m, Model: "m", Config: json.RawMessage(section)}
	a, err := reg.Build(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	defer a.(*eino.Adapter).Close()
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: st.sessions}), graph.WithCheckpointStore(st.cps))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.cps), OnDelete: adapter.OnDelete(a)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Send(ctx, "acme/s", llm.UserText("refund 7"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok {
		t.Fatalf("send: %#v %v", out, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		o, e := h.SignalFunc(cctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}, func(c chat.Chunk) bool {
			if c.Tool != nil {
				t.Logf("tool chunk: %+v", *c.Tool)
			}
			return true
		})
		if eo, ok := o.(*chat.Errored); ok {
			t.Logf("cancelled resume: bucket=%s category=%s", eo.Bucket, eo.Category)
		}
		t.Logf("cancelled resume: %T %v", o, e)
	}()
	select {
	case <-tl.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool never started")
	}
	cancel()
	time.Sleep(100 * time.Millisecond)
	close(tl.release)
	<-done
	o2, e2 := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	t.Logf("approval sent again: %T %v", o2, e2)
	if _, err := h.Send(ctx, "acme/s", llm.UserText("hello")); err != nil {
		t.Fatal(err)
	}
	if tl.runs != 1 {
		t.Fatalf("the refund ran %d times", tl.runs)
	}
	last := m.reqs[len(m.reqs)-1]
	var shape []string
	ran := false
	for _, msg := range last {
		shape = append(shape, string(msg.Role)+":"+msg.Text())
		ran = ran || (msg.Role == llm.RoleTool && strings.Contains(msg.Text(), "refunded order 7"))
	}
	if !ran {
		t.Fatalf("the approved refund ran, but the model's next request says otherwise: %q", shape)
	}
}
