package eino_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// stores are Armature's session and checkpoint stores, shared across a
// simulated restart (a new adapter and harness over the same stores and
// the same Eino checkpoint directory).
type stores struct {
	sessions *session.MemoryStore
	cps      checkpoint.Store
}

func newHarness(t *testing.T, st stores, section string) *chat.Harness {
	t.Helper()
	reg := &adapter.Registry{}
	if err := eino.Register(reg); err != nil {
		t.Fatal(err)
	}
	ag := &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools(), Config: json.RawMessage(section)}
	a, err := reg.Build(context.Background(), adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.(*eino.Adapter).Close() })
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: st.sessions}), graph.WithCheckpointStore(st.cps))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.cps)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func lastText(t *testing.T, out chat.Outcome) string {
	t.Helper()
	c, ok := out.(*chat.Completed)
	if !ok || len(c.Replies) == 0 {
		t.Fatalf("want a completed turn, got %#v", out)
	}
	return c.Replies[len(c.Replies)-1].Text()
}

func TestAdapterTurns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ckpt")
	section := `{"checkpoint":{"driver":"file","dir":` + strconvQuote(path) + `}}`
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	h := newHarness(t, st, section)

	out, err := h.Send(ctx, "acme/s1", llm.UserText("hello"))
	if err != nil || !strings.HasPrefix(lastText(t, out), "You said") {
		t.Fatalf("plain turn: %#v %v", out, err)
	}
	out, err = h.Send(ctx, "acme/s1", llm.UserText("where is order 7?"))
	if err != nil || lastText(t, out) != "Here is what I found: order 7: shipped, arriving Thursday" {
		t.Fatalf("tool turn: %#v %v", out, err)
	}
	out, err = h.Send(ctx, "acme/s1", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok || s.Descriptor.Metadata[agent.MetadataTool] != "issue_refund" {
		t.Fatalf("approval turn: %#v %v", out, err)
	}

	// Restart: a new Eino engine on the same checkpoint directory, a new harness
	// on the same Armature stores; the approval resumes there.
	h = newHarness(t, st, section)
	out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s1", Payload: agent.Approve("")})
	if err != nil || lastText(t, out) != "Here is what I found: refunded $30.00 for order 7" {
		t.Fatalf("resumed turn: %#v %v", out, err)
	}

	out, _ = h.Send(ctx, "acme/s1", llm.UserText("refund order 8 too"))
	s, ok = out.(*chat.Suspended)
	if !ok {
		t.Fatalf("second approval turn: %#v", out)
	}
	out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s1", Payload: agent.Deny("no")})
	if err != nil || !strings.Contains(lastText(t, out), "denied") {
		t.Fatalf("denied turn: %#v %v", out, err)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// twoRefunds is a model that calls issue_refund twice in one step, then
// answers with the results it got.
type twoRefunds struct{}

func (twoRefunds) Ready(context.Context) error { return nil }

func (twoRefunds) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
		var results []string
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool {
				results = append(results, m.Text())
			}
		}
		return &llm.Response{Message: llm.AssistantText(strings.Join(results, " | ")), FinishReason: llm.FinishStop}, nil
	}
	return &llm.Response{Message: llm.AssistantToolCalls(
		llm.ToolCall{ID: "r1", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"1","amount":10}`)},
		llm.ToolCall{ID: "r2", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"2","amount":20}`)}), FinishReason: llm.FinishToolCalls}, nil
}

// modelHarness builds ag's Eino agent through the registry and serves it
// with the chat harness, on in-memory sessions and checkpoints.
func modelHarness(t *testing.T, ag *adapter.Agent) *chat.Harness {
	t.Helper()
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	reg := &adapter.Registry{}
	if err := eino.Register(reg); err != nil {
		t.Fatal(err)
	}
	a, err := reg.Build(context.Background(), adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: st.sessions}), graph.WithCheckpointStore(st.cps))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.cps)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestParallelApprovals: two approval-gated calls of one step interrupt;
// they are asked for one after the other, each resume targeted at its
// interrupt.
func TestParallelApprovals(t *testing.T) {
	ctx := context.Background()
	h := modelHarness(t, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools(), Provider: twoRefunds{}, Model: "two"})
	var err error
	out, _ := h.Send(ctx, "s", llm.UserText("refund both"))
	var signals []string
	for _, approve := range []bool{true, false} {
		s, ok := out.(*chat.Suspended)
		if !ok {
			t.Fatalf("want a suspension, got %#v", out)
		}
		signals = append(signals, s.Descriptor.SignalID)
		payload := agent.Approve("")
		if !approve {
			payload = agent.Deny("")
		}
		if out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	got := lastText(t, out)
	if !strings.Contains(got, "refunded $10.00 for order 1") || !strings.Contains(got, "denied") {
		t.Fatalf("signals %v, answer %q", signals, got)
	}
	calls, results := map[string]int{}, map[string]int{}
	for _, m := range chat.Messages.Get(out.(*chat.Completed).FinalState) {
		for _, tc := range m.ToolCalls {
			calls[tc.ID]++
		}
		if m.Role == llm.RoleTool {
			results[m.ToolCallID]++
		}
	}
	if calls["r1"] != 1 || calls["r2"] != 1 || results["r1"] != 1 || results["r2"] != 1 {
		t.Errorf("the history's tool calls %v and results %v", calls, results)
	}
}

// TestDiscardedCheckpoints: the checkpoint of a suspension superseded by
// a new message, or cancelled, is deleted in the session's next turn;
// one resumed is deleted when its run ends; a deleted session's are
// deleted with it.
func TestDiscardedCheckpoints(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"superseded", "cancelled", "resumed", "session deleted"} {
		t.Run(how, func(t *testing.T) {
			ms := eino.NewMemoryStore()
			e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: ms})
			if err != nil {
				t.Fatal(err)
			}
			h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
				session.NewMemoryStore(session.MemoryConfig{}))
			out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
			s, ok := out.(*chat.Suspended)
			if !ok || ms.Len() != 1 {
				t.Fatalf("approval turn: %#v, %d checkpoints", out, ms.Len())
			}
			switch how {
			case "cancelled":
				if err := h.CancelSuspended(ctx, "acme/s", s.InvocationID); err != nil {
					t.Fatal(err)
				}
			case "resumed":
				if _, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}); err != nil {
					t.Fatal(err)
				}
			case "session deleted":
				// Another session's pending checkpoint stays.
				if out, _ := h.Send(ctx, "acme/s2", llm.UserText("please refund order 8")); ms.Len() != 2 {
					t.Fatalf("approval turn in s2: %#v, %d checkpoints", out, ms.Len())
				}
				if err := h.Delete(ctx, "acme/s"); err != nil {
					t.Fatal(err)
				}
				if n := ms.Len(); n != 1 {
					t.Fatalf("%d checkpoints after the session's delete, want s2's alone", n)
				}
				if err := h.Delete(ctx, "acme/s2"); err != nil {
					t.Fatal(err)
				}
			}
			if out, err := h.Send(ctx, "acme/s", llm.UserText("hello")); err != nil || !strings.HasPrefix(lastText(t, out), "You said") {
				t.Fatalf("next turn: %#v %v", out, err)
			}
			// A superseded or cancelled suspension's checkpoint goes at
			// the turn after the one that superseded it was committed.
			if _, err := h.Send(ctx, "acme/s", llm.UserText("hello again")); err != nil {
				t.Fatal(err)
			}
			if n := ms.Len(); n != 0 {
				t.Errorf("%d checkpoints left", n)
			}
		})
	}
}

// TestCheckpointOfAnUnrecordedSuspension: the checkpoint of an approval
// turn whose session write fails (suspension_persistence_failed: no
// paused turn is recorded, so nothing resumes or supersedes it) is
// deleted by that turn; one whose write succeeds stays for its approval.
func TestCheckpointOfAnUnrecordedSuspension(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		failing bool
	}{{name: "write fails", failing: true}, {name: "write succeeds"}} {
		t.Run(tc.name, func(t *testing.T) {
			ms := eino.NewMemoryStore()
			e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: ms})
			if err != nil {
				t.Fatal(err)
			}
			sessions := &adaptertest.FlakySessions{Store: session.NewMemoryStore(session.MemoryConfig{})}
			h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()}, sessions)
			if tc.failing {
				sessions.FailNext(1)
			}
			out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
			if tc.failing {
				if e, ok := out.(*chat.Errored); !ok || e.Category != errcat.SuspensionPersistenceFailed {
					t.Fatalf("approval turn with a failing write: %#v", out)
				}
				if n := ms.Len(); n != 0 {
					t.Fatalf("%d checkpoints left by the unrecorded suspension", n)
				}
				if out, err := h.Send(ctx, "acme/s", llm.UserText("hello")); err != nil || !strings.HasPrefix(lastText(t, out), "You said") {
					t.Fatalf("next turn: %#v %v", out, err)
				}
				return
			}
			s, ok := out.(*chat.Suspended)
			if !ok || ms.Len() != 1 {
				t.Fatalf("approval turn: %#v, %d checkpoints", out, ms.Len())
			}
			out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
			if err != nil || !isCompleted(out) {
				t.Fatalf("approval: %#v %v", out, err)
			}
			if n := ms.Len(); n != 0 {
				t.Errorf("%d checkpoints left after the approval", n)
			}
		})
	}
}

// TestCheckpointOfAFailedResume: a resume that ran the approved call and
// then failed (its turn cancelled before the model answered) spent its
// suspension (the call's result is kept); the interrupted run's
// checkpoint goes with the failed resume. (It went at the session's
// second committed turn after it, kept until then, and for good in a
// session with fewer.)
func TestCheckpointOfAFailedResume(t *testing.T) {
	ctx := context.Background()
	resumed, cut := context.WithCancel(ctx)
	defer cut()
	refund := agent.MustTool("issue_refund", "Refund an order", func(context.Context, struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
	}) (string, error) {
		cut() // the turn is cancelled once the refund ran
		return "refunded", nil
	}).WithApproval()
	tools := []agent.Tool{refund}
	ms := eino.NewMemoryStore()
	e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Store: ms})
	if err != nil {
		t.Fatal(err)
	}
	h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: tools},
		session.NewMemoryStore(session.MemoryConfig{}))
	out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok || ms.Len() != 1 {
		t.Fatalf("approval turn: %#v, %d checkpoints", out, ms.Len())
	}
	if out, _ := h.Signal(resumed, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}); isCompleted(out) {
		t.Fatalf("the resume cancelled after the refund completed: %#v", out)
	}
	if n := ms.Len(); n != 0 {
		t.Errorf("%d checkpoints left after the failed resume", n)
	}
	for _, text := range []string{"hello", "hello again"} {
		if out, err := h.Send(ctx, "acme/s", llm.UserText(text)); !isCompleted(out) {
			t.Fatalf("%s: %#v %v", text, out, err)
		}
	}
	if n := ms.Len(); n != 0 {
		t.Errorf("%d checkpoints left", n)
	}
}

// deadStore is a checkpoint store whose deletes fail while dead is set:
// a process killed before it could delete.
type deadStore struct {
	*eino.MemoryStore
	dead atomic.Bool
}

func (s *deadStore) Delete(ctx context.Context, id string) error {
	if s.dead.Load() {
		return errors.New("the process was killed")
	}
	return s.MemoryStore.Delete(ctx, id)
}

// TestCheckpointOfAKilledResume: a process killed once an approved call
// ran, before the resume's end deleted the interrupted run's checkpoint
// (its delete fails here, as the process would not have made it), left
// the checkpoint for good: the decision had taken effect (saved with the
// call's result) and the suspension was gone from the session, so no
// later turn knew of it. The next committed turn discards it now.
func TestCheckpointOfAKilledResume(t *testing.T) {
	ctx := context.Background()
	st := &deadStore{MemoryStore: eino.NewMemoryStore()}
	resumed, cut := context.WithCancel(ctx)
	defer cut()
	refund := agent.MustTool("issue_refund", "Refund an order", func(context.Context, struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
	}) (string, error) {
		st.dead.Store(true) // killed once the refund's result is saved
		return "refunded", nil
	}).WithApproval()
	tools := []agent.Tool{refund}
	e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	sessions := &killingSessions{MemoryStore: session.NewMemoryStore(session.MemoryConfig{}), dead: &st.dead, kill: cut}
	h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: tools}, sessions)
	out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok || st.Len() != 1 {
		t.Fatalf("approval turn: %#v, %d checkpoints", out, st.Len())
	}
	if out, _ := h.Signal(resumed, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}); isCompleted(out) {
		t.Fatalf("the resume killed after the refund completed: %#v", out)
	}
	if out, _ := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}); isCompleted(out) {
		t.Fatalf("the approval given again after it took effect: %#v", out)
	}
	st.dead.Store(false) // restarted
	if n := st.Len(); n != 1 {
		t.Fatalf("%d checkpoints after the killed resume, want its own", n)
	}
	if out, err := h.Send(ctx, "acme/s", llm.UserText("hello")); !isCompleted(out) {
		t.Fatalf("the next turn: %#v %v", out, err)
	}
	if out, err := h.Send(ctx, "acme/s", llm.UserText("hello again")); !isCompleted(out) {
		t.Fatalf("the turn after: %#v %v", out, err)
	}
	if n := st.Len(); n != 0 {
		t.Errorf("%d checkpoints left after two committed turns", n)
	}
}

// killingSessions is a session store that ends the turn (kill) after the
// first write made once dead is set: the process dies once the write is
// durable.
type killingSessions struct {
	*session.MemoryStore
	dead *atomic.Bool
	kill func()
}

func (k *killingSessions) Save(ctx context.Context, req session.SaveRequest) (session.WriteResult, error) {
	r, err := k.MemoryStore.Save(ctx, req)
	if k.dead.Load() {
		k.kill()
	}
	return r, err
}

func (k *killingSessions) Append(ctx context.Context, req session.AppendRequest) (session.WriteResult, error) {
	r, err := k.MemoryStore.Append(ctx, req)
	if k.dead.Load() {
		k.kill()
	}
	return r, err
}

// refundLoop is a model that calls issue_refund at every step, each
// call with an id of its own.
type refundLoop struct{ n atomic.Int32 }

func (*refundLoop) Ready(context.Context) error { return nil }

func (m *refundLoop) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	i := m.n.Add(1)
	return &llm.Response{Message: llm.AssistantToolCalls(llm.ToolCall{ID: fmt.Sprintf("loop%d", i), Name: "issue_refund",
		Arguments: json.RawMessage(fmt.Sprintf(`{"order":"%d","amount":1}`, i))}), FinishReason: llm.FinishToolCalls}, nil
}

// TestStepLimitAcrossApprovals: a turn whose every step is an approved
// call reaches max_iterations in a resumed run and says it stopped
// after the turn's steps, not after the resumed run's (it said "after 0
// steps": that run's messages hold no model call).
func TestStepLimitAcrossApprovals(t *testing.T) {
	ctx := context.Background()
	h := modelHarness(t, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools(), Provider: &refundLoop{}, Model: "loop",
		Config: json.RawMessage(`{"max_iterations":3}`)})
	var err error
	out, _ := h.Send(ctx, "s", llm.UserText("refund everything"))
	for range 10 {
		s, ok := out.(*chat.Suspended)
		if !ok {
			break
		}
		if out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")}); err != nil {
			t.Fatal(err)
		}
	}
	if got := lastText(t, out); got != eino.StoppedText(3) {
		t.Fatalf("the turn's answer %q, want %q", got, eino.StoppedText(3))
	}
}
