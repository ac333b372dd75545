package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// An approval whose resume was cancelled after the approved call ran
// (POST /v1/runs/{id}/cancel, a shutdown) took effect: the refund is in
// the history. The approval sent again is told so
// (chat.ErrDecisionTookEffect), as after a crash at the same point,
// rather than that nothing awaits it, which would have the user ask for
// the refund again. An approval of a call that a new message superseded
// is still told that nothing awaits it.
func TestCancelledResumeTookEffect(t *testing.T) {
	ctx := context.Background()
	gs := newGated(t)
	m, release, srv := gs.m, gs.release, gs.srv
	suspend := func(session string) *chat.Suspended { return suspendRefund(t, srv, session) }
	approve := func(session string, s *chat.Suspended) chat.Outcome {
		t.Helper()
		resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: session, Signal: &adapter.Signal{SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Outcome
	}
	refused := func(out chat.Outcome, want bool) {
		t.Helper()
		e, ok := out.(*chat.Errored)
		if !ok || e.Category != errcat.HarnessSignalCorrelationFailed || errors.Is(e.Err, chat.ErrDecisionTookEffect) != want {
			t.Fatalf("the approval sent again: %#v, want took effect %v", out, want)
		}
	}

	s := suspend("s")
	first := make(chan chat.Outcome, 1)
	go func() { first <- approve("s", s) }()
	<-m.entered // the refund ran; the model is asked for the answer
	var running string
	for deadline := time.Now().Add(10 * time.Second); running == ""; time.Sleep(10 * time.Millisecond) {
		resp, err := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.Runs {
			if r.Status == runtime.StatusStarted {
				running = r.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the resume's run is not listed")
		}
	}
	if ok, err := srv.Cancel(ctx, server.DefaultTenant, running); err != nil || !ok {
		t.Fatalf("cancel: %v %v", ok, err)
	}
	if e, ok := (<-first).(*chat.Errored); !ok || e.Category != errcat.InvocationCancelled {
		t.Fatalf("the cancelled resume: %#v", e)
	}
	refused(approve("s", s), true)
	refused(approve("s", s), true)

	// Superseded: nothing awaits the approval, and it did not take
	// effect.
	release()
	s2 := suspend("s2")
	if resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s2", Message: llm.UserText("never mind")}); err != nil {
		t.Fatal(err)
	} else if _, ok := resp.Outcome.(*chat.Suspended); !ok {
		t.Fatalf("the second message: %#v", resp.Outcome)
	}
	refused(approve("s2", s2), false)
}

// The same on the Responses API: the approval sent again after its
// resume was cancelled (once the refund ran) is 409, "already
// answered", not 400 "a new message superseded it, or it was
// cancelled".
func TestCancelledResumeTookEffectResponses(t *testing.T) {
	m := &gatedResume{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	t.Cleanup(sync.OnceFunc(func() { close(m.gate) }))
	a, err := agent.New(agent.Config{Provider: m, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	susp, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 7"}`, nil)
	if resp.StatusCode != http.StatusOK || susp.XArmature.Outcome != "suspended" {
		t.Fatalf("the refund: %d %+v %+v", resp.StatusCode, susp, e)
	}
	body := fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
		"approval_request_id": %q, "approve": true}]}`, susp.ID, susp.Output[1].ID)
	first := make(chan int, 1)
	go func() {
		_, resp, _ := respond(t, ts, body, nil)
		first <- resp.StatusCode
	}()
	<-m.entered
	var runs struct {
		Runs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"runs"`
	}
	var running string
	for deadline := time.Now().Add(10 * time.Second); running == ""; time.Sleep(10 * time.Millisecond) {
		call(t, ts, http.MethodGet, "/v1/sessions/"+susp.XArmature.SessionID+"/runs", "", nil, &runs)
		for _, r := range runs.Runs {
			if r.Status == string(runtime.StatusStarted) {
				running = r.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resume's run is not listed: %+v", runs)
		}
	}
	if resp := call(t, ts, http.MethodPost, "/v1/runs/"+running+"/cancel", "", nil, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	<-first
	_, resp, e = respond(t, ts, body, nil)
	if resp.StatusCode != http.StatusConflict || e.Error.Code != string(errcat.HarnessSignalCorrelationFailed) {
		t.Fatalf("the approval sent again: %d %+v, want 409", resp.StatusCode, e)
	}
}

// An approval answered again over REST after its decision took effect
// is 409 Conflict (harness_signal_correlation_failed, "took effect"):
// the call is decided, unlike a signal nothing awaits (404: superseded,
// cancelled, deleted).
func TestRESTTookEffectConflict(t *testing.T) {
	srv := newDemoServer(t)
	S := srv.URL + "/v1/sessions"
	var o outcomeResp
	if post(t, S+"/x/messages", `{"content":"refund order 7"}`, &o); o.Outcome != "suspended" || o.Signal == nil {
		t.Fatalf("the refund: %+v", o)
	}
	body := `{"signal_id":"` + o.Signal.SignalID + `","payload":{"approval":{"approved":true}}}`
	var r outcomeResp
	if st := post(t, S+"/x/signals", body, &r); st != http.StatusOK || r.Outcome != "completed" {
		t.Fatalf("the approval: %d %+v", st, r)
	}
	var e outcomeResp
	if st := post(t, S+"/x/signals", body, &e); st != http.StatusConflict || e.Error == nil || e.Error.Category != "harness_signal_correlation_failed" {
		t.Fatalf("the approval sent again: %d %+v, want 409", st, e)
	}
}

// flakySessions fails every session load while fail is set.
type flakySessions struct {
	*sqlite.Store
	fail atomic.Bool
}

func (f *flakySessions) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	if f.fail.Load() {
		return nil, errors.New("disk I/O error")
	}
	return f.Store.Load(ctx, req)
}

// A signal that finds nothing awaiting it, when the session cannot be
// read to tell whether its decision took effect, is answered
// harness_signal_subscription_failed (retryable: the signal could not be
// resolved now), not "nothing awaits it", which could have the user ask
// again for a refund that was made, nor the read's session_load_failed,
// whose bucket (session_terminating) says not to retry.
func TestTookEffectUnknownOnLoadFailure(t *testing.T) {
	ctx := context.Background()
	store := servertest.SQLite(t)
	fs := &flakySessions{Store: store}
	a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: fs}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints())})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "x", Chat: h}}, Sessions: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(ctx) })
	s := suspendRefund(t, srv, "s")
	var resp *adapter.Response
	approve := adapter.SubmitRequest{SessionID: "s", Signal: &adapter.Signal{SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")}}
	if resp, err = srv.Submit(ctx, approve); err != nil {
		t.Fatal(err)
	} else if _, ok := resp.Outcome.(*chat.Completed); !ok {
		t.Fatalf("the approval: %#v", resp.Outcome)
	}
	fs.fail.Store(true)
	if resp, err = srv.Submit(ctx, approve); err != nil {
		t.Fatal(err)
	}
	if e, ok := resp.Outcome.(*chat.Errored); !ok || e.Category != errcat.HarnessSignalSubscriptionFailed || e.Bucket != harness.RetryableTransient {
		t.Fatalf("the approval sent again while the session cannot be read: %#v, want harness_signal_subscription_failed, retryable", resp.Outcome)
	}
	fs.fail.Store(false)
	if resp, err = srv.Submit(ctx, approve); err != nil {
		t.Fatal(err)
	}
	if e, ok := resp.Outcome.(*chat.Errored); !ok || !errors.Is(e.Err, chat.ErrDecisionTookEffect) {
		t.Fatalf("the approval sent again: %#v, want took effect", resp.Outcome)
	}
}

// suspendRefund sends srv's session a refund and returns the turn
// suspended for its approval.
func suspendRefund(t *testing.T, srv *server.Server, session string) *chat.Suspended {
	t.Helper()
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: session, Message: llm.UserText("refund order 7")})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := resp.Outcome.(*chat.Suspended)
	if !ok {
		t.Fatalf("the refund: %#v", resp.Outcome)
	}
	return s
}

// A stale approval of a call that needed no approval (its id repeats
// one of the session's calls: a model numbering its calls per
// conversation, in a session deleted and begun again) is told that
// nothing awaits it (404), not that its decision took effect: no
// decision on it was ever consumed. Before, any result of a call of
// that id in the history read as the decision's.
func TestTookEffectNeedsADecision(t *testing.T) {
	srv := newDemoServer(t)
	S := srv.URL + "/v1/sessions"
	var o outcomeResp
	if post(t, S+"/x/messages", `{"content":"where is order 7?"}`, &o); o.Outcome != "completed" {
		t.Fatalf("the lookup: %+v", o)
	}
	var sess struct {
		Messages []llm.Message `json:"messages"`
	}
	getJSON(t, S+"/x", &sess)
	var call string
	for _, m := range sess.Messages {
		if len(m.ToolCalls) > 0 {
			call = m.ToolCalls[0].ID
		}
	}
	if call == "" {
		t.Fatalf("no tool call in %+v", sess.Messages)
	}
	var e outcomeResp
	if st := post(t, S+"/x/signals", `{"signal_id":"approval:`+call+`","payload":{"approval":{"approved":true}}}`, &e); st != http.StatusNotFound ||
		e.Error == nil || e.Error.Category != "harness_signal_correlation_failed" {
		t.Fatalf("an approval of the lookup: %d %+v, want 404", st, e)
	}
}

// A stale approval naming its invocation, which a delete removed, is
// told that nothing awaits it (404) even though the session's next
// conversation approved a call of the same id (the demo numbers its
// calls per conversation): that decision was another invocation's.
// Before, it was told its decision took effect (409), and a client that
// had sent a denial would believe it applied.
func TestTookEffectOfTheNamedInvocation(t *testing.T) {
	srv := newDemoServer(t)
	S := srv.URL + "/v1/sessions"
	suspend := func() outcomeResp {
		t.Helper()
		var o outcomeResp
		if post(t, S+"/x/messages", `{"content":"refund order 7"}`, &o); o.Outcome != "suspended" || o.Signal == nil {
			t.Fatalf("the refund: %+v", o)
		}
		return o
	}
	first := suspend()
	req, _ := http.NewRequest(http.MethodDelete, S+"/x", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %v %v", resp, err)
	}
	second := suspend()
	if second.Signal.SignalID != first.Signal.SignalID {
		t.Skipf("the call ids differ (%s, %s): nothing to test", first.Signal.SignalID, second.Signal.SignalID)
	}
	body := func(inv string) string {
		return `{"signal_id":"` + second.Signal.SignalID + `","invocation_id":"` + inv + `","payload":{"approval":{"approved":true}}}`
	}
	if st := post(t, S+"/x/signals", body(second.InvocationID), nil); st != http.StatusOK {
		t.Fatalf("the approval: %d", st)
	}
	if st := post(t, S+"/x/signals", body(first.InvocationID), nil); st != http.StatusNotFound {
		t.Errorf("the deleted invocation's approval: %d, want 404", st)
	}
	if st := post(t, S+"/x/signals", body(second.InvocationID), nil); st != http.StatusConflict {
		t.Errorf("the approved invocation's approval again: %d, want 409", st)
	}
}
