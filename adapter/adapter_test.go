package adapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/session"
)

// refunder is a fake upstream: "refund" asks for approval of issue_refund
// (resume state: the amount), anything else is echoed.
type refunder struct{ seen []*adapter.Request }

func (r *refunder) Name() string { return "fake" }

func (r *refunder) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	r.seen = append(r.seen, req)
	if req.Resume != nil {
		if !req.Resume.Approved {
			return adapter.Text("refund cancelled: " + req.Resume.Comment), nil
		}
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolStart, ToolCall: &req.Resume.ToolCall})
		emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &req.Resume.ToolCall, Output: "ok"})
		return &adapter.Result{Output: &adapter.Output{Text: "refunded " + string(req.Resume.State),
			Messages:  []llm.Message{llm.ToolResult(req.Resume.ToolCall.ID, "ok"), llm.AssistantText("refunded " + string(req.Resume.State))},
			Artifacts: []runtime.Artifact{{Name: "receipt", MediaType: "text/plain", Text: "receipt"}}}}, nil
	}
	if strings.Contains(req.Input.Text(), "refund") {
		return &adapter.Result{Suspension: &adapter.Suspension{
			ToolCall: llm.ToolCall{ID: "c1", Name: "issue_refund", Arguments: json.RawMessage(`{"amount":30}`)},
			State:    json.RawMessage(`30`)}}, nil
	}
	emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseOutputDelta, Text: "you said "})
	return adapter.Text("you said " + req.Input.Text()), nil
}

func newHarness(t *testing.T, a adapter.Adapter) *chat.Harness {
	t.Helper()
	return adaptertest.Harness(t, a, &adapter.Agent{ID: "helper", Backend: a.Name()}, session.NewMemoryStore(session.MemoryConfig{}))
}

func TestCompileTurns(t *testing.T) {
	ctx := context.Background()
	f := &refunder{}
	h := newHarness(t, f)
	out, err := h.Send(ctx, "acme/s1", llm.UserText("hello"))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := out.(*chat.Completed)
	if !ok || c.Replies[0].Text() != "you said hello" {
		t.Fatalf("plain turn: %#v", out)
	}
	if got := f.seen[0]; got.SessionID != "s1" || got.Tenant != "acme" || got.RequestID == "" || len(got.History) != 0 {
		t.Errorf("request identity: %+v", got)
	}

	out, _ = h.Send(ctx, "acme/s1", llm.UserText("refund please"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("refund turn: %#v", out)
	}
	if s.Descriptor.SignalID != agent.SignalPrefix+"c1" || s.Descriptor.Metadata[agent.MetadataTool] != "issue_refund" {
		t.Errorf("descriptor: %+v", s.Descriptor)
	}
	if n := len(s.PendingMessages); n != 2 || len(s.PendingMessages[0].ToolCalls) != 1 {
		t.Errorf("pending messages: %+v", s.PendingMessages)
	}
	if len(f.seen[1].History) != 2 {
		t.Errorf("history of the second turn: %d messages", len(f.seen[1].History))
	}

	// A payload that is no approval is refused before the adapter runs.
	if _, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s1", Payload: graph.Update{"x": 1}}); err == nil {
		t.Error("a non-approval payload resumed the turn")
	}
	out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s1", Payload: agent.Approve("")})
	if err != nil {
		t.Fatal(err)
	}
	c, ok = out.(*chat.Completed)
	if !ok {
		t.Fatalf("resumed: %#v", out)
	}
	last := f.seen[len(f.seen)-1]
	if last.Resume == nil || !last.Resume.Approved || string(last.Resume.State) != "30" || last.Resume.ToolCall.Name != "issue_refund" {
		t.Errorf("resume: %+v", last.Resume)
	}
	var texts []string
	for _, m := range c.Replies {
		texts = append(texts, m.Text())
	}
	if diff := cmp.Diff([]string{"ok", "refunded 30"}, texts); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
}

// badAdapter returns an invalid result.
type badAdapter struct{ res *adapter.Result }

func (b badAdapter) Name() string { return "bad" }
func (b badAdapter) Run(context.Context, *adapter.Request, adapter.Emitter) (*adapter.Result, error) {
	return b.res, nil
}

func TestInvalidResults(t *testing.T) {
	for name, res := range map[string]*adapter.Result{
		"nil":          nil,
		"both":         {Output: &adapter.Output{}, Suspension: &adapter.Suspension{}},
		"no call id":   {Suspension: &adapter.Suspension{ToolCall: llm.ToolCall{Name: "x"}}},
		"neither":      {},
		"no call name": {Suspension: &adapter.Suspension{ToolCall: llm.ToolCall{ID: "x"}}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, badAdapter{res})
			out, _ := h.Send(context.Background(), "s", llm.UserText("hi"))
			e, ok := out.(*chat.Errored)
			if !ok || !errors.Is(e.Err, adapter.ErrInvalidResult) {
				t.Fatalf("outcome %#v", out)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	var r adapter.Registry
	f := func(context.Context, adapter.FactoryRequest) (adapter.Adapter, error) { return &refunder{}, nil }
	for _, tc := range []struct {
		name string
		f    adapter.Factory
		want error
	}{
		{"fake", f, nil},
		{"fake", f, adapter.ErrDuplicate},
		{"Bad Name", f, adapter.ErrInvalidConfig},
		{"nofactory", nil, adapter.ErrInvalidConfig},
	} {
		if err := r.Register(tc.name, tc.f); !errors.Is(err, tc.want) {
			t.Errorf("Register(%q) = %v, want %v", tc.name, err, tc.want)
		}
	}
	if diff := cmp.Diff([]string{"fake"}, r.Names()); diff != "" {
		t.Error(diff)
	}
	if _, err := r.Build(context.Background(), adapter.FactoryRequest{Agent: &adapter.Agent{ID: "a", Backend: "nope"}}); !errors.Is(err, adapter.ErrUnknownAdapter) {
		t.Errorf("unknown backend: %v", err)
	}
	a, err := r.Build(context.Background(), adapter.FactoryRequest{Agent: &adapter.Agent{ID: "a", Backend: "fake"}})
	if err != nil || a.Name() != "fake" {
		t.Errorf("Build = %v, %v", a, err)
	}
}

func TestDecodeConfig(t *testing.T) {
	type cfg struct {
		Model string `json:"model"`
	}
	for _, tc := range []struct {
		raw  string
		want cfg
		err  error
	}{
		{``, cfg{}, nil},
		{`null`, cfg{}, nil},
		{`{"model":"m"}`, cfg{Model: "m"}, nil},
		{`{"modle":"m"}`, cfg{}, adapter.ErrInvalidConfig},
	} {
		var got cfg
		err := (&adapter.Agent{ID: "a", Backend: "adk", Config: json.RawMessage(tc.raw)}).DecodeConfig(&got)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("DecodeConfig(%s) = %+v, %v", tc.raw, got, err)
		}
	}
}

func TestErrorPrefixes(t *testing.T) {
	for _, err := range []error{adapter.ErrInvalidConfig, adapter.ErrUnknownAdapter, adapter.ErrDuplicate, adapter.ErrInvalidResult, adapter.ErrGraphOnly, adapter.ErrTextOnly} {
		if !strings.HasPrefix(err.Error(), "adapter: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
	}
}

// TestSupersededSuspension: a message sent while a turn awaits approval
// supersedes it; the next turns run afresh, and so do those after a
// cancelled suspension.
func TestSupersededSuspension(t *testing.T) {
	ctx := context.Background()
	f := &refunder{}
	h := newHarness(t, f)
	for _, tc := range []struct {
		name   string
		cancel bool
	}{{"superseded", false}, {"cancelled", true}} {
		t.Run(tc.name, func(t *testing.T) {
			key := "acme/" + tc.name
			out, _ := h.Send(ctx, key, llm.UserText("refund please"))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("refund: %#v", out)
			}
			if tc.cancel {
				if err := h.CancelSuspended(ctx, key, s.InvocationID); err != nil {
					t.Fatal(err)
				}
			}
			for _, text := range []string{"hello", "again"} {
				out, err := h.Send(ctx, key, llm.UserText(text))
				if err != nil {
					t.Fatal(err)
				}
				c, ok := out.(*chat.Completed)
				if !ok || c.Replies[len(c.Replies)-1].Text() != "you said "+text {
					t.Fatalf("after the suspension: %#v", out)
				}
				if last := f.seen[len(f.seen)-1]; last.Resume != nil || last.Input.Text() != text {
					t.Fatalf("request %+v", last)
				}
			}
		})
	}
}

// graphWorkflow is an adapter that runs a graph workflow.
type graphWorkflow struct{ refunder }

func (graphWorkflow) WorkflowID() string { return "triage" }

func TestWorkflowOf(t *testing.T) {
	if got := adapter.WorkflowOf(&graphWorkflow{}); got != "triage" {
		t.Errorf("WorkflowOf(workflow) = %q", got)
	}
	if got := adapter.WorkflowOf(&refunder{}); got != "" {
		t.Errorf("WorkflowOf(plain) = %q", got)
	}
}

// TestDeniedApprovalClosesTheCall: an adapter answering a denial with
// text alone still leaves the suspended call answered in the history.
func TestDeniedApprovalClosesTheCall(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, &refunder{})
	out, _ := h.Send(ctx, "d", llm.UserText("refund please"))
	s := out.(*chat.Suspended)
	out, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "d", Payload: agent.Deny("too much")})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := out.(*chat.Completed)
	if !ok {
		t.Fatalf("denied: %#v", out)
	}
	var got []string
	for _, m := range c.Replies {
		got = append(got, string(m.Role)+": "+m.Text())
	}
	want := []string{"tool: The user denied this call. Reason: too much", "assistant: refund cancelled: too much"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
}

// discarder is a refunder that keeps upstream state per suspension and
// records the suspensions the runtime discards; a "fail" message fails
// its turn.
type discarder struct {
	refunder
	discarded []*adapter.Discarded
	reqs      []*adapter.Request
}

var _ adapter.Discarder = (*discarder)(nil)

func (d *discarder) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	if req.Input.Text() == "fail" {
		return nil, errors.New("upstream down")
	}
	return d.refunder.Run(ctx, req, emit)
}

func (d *discarder) Discard(_ context.Context, req *adapter.Request, s *adapter.Discarded) error {
	d.discarded, d.reqs = append(d.discarded, s), append(d.reqs, req)
	return errors.New("ignored")
}

// TestDiscarder: a suspension superseded by a new message, or cancelled,
// is handed to the adapter's Discard in the session's next turn, once
// that turn's Run succeeded; a cancelled one also with the cancel; a
// resumed one never is.
func TestDiscarder(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name                            string
		cancel, fail, resume, lostWrite bool
	}{{name: "superseded"}, {name: "cancelled", cancel: true}, {name: "failed turn", fail: true}, {name: "resumed", resume: true},
		{name: "superseding turn not committed", lostWrite: true}} {
		t.Run(tc.name, func(t *testing.T) {
			d := &discarder{}
			sessions := &adaptertest.FlakySessions{Store: session.NewMemoryStore(session.MemoryConfig{})}
			h := adaptertest.Harness(t, d, &adapter.Agent{ID: "helper", Backend: d.Name()}, sessions)
			out, _ := h.Send(ctx, "acme/s", llm.UserText("refund please"))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("refund: %#v", out)
			}
			switch {
			case tc.cancel:
				if err := h.CancelSuspended(ctx, "acme/s", s.InvocationID); err != nil {
					t.Fatal(err)
				}
				// Discarded with the cancel (OnCancel), as no resume can
				// take it any more.
				if len(d.discarded) != 1 || d.discarded[0].SignalID != s.Descriptor.SignalID ||
					d.reqs[0].SessionID != "s" || d.reqs[0].Tenant != "acme" {
					t.Fatalf("discarded with the cancel: %+v, %+v", d.discarded, d.reqs)
				}
				d.discarded, d.reqs = nil, nil
			case tc.fail:
				if out, _ := h.Send(ctx, "acme/s", llm.UserText("fail")); !isErrored(out) {
					t.Fatalf("failing turn: %#v", out)
				}
				if len(d.discarded) != 0 {
					t.Fatalf("a failed turn discarded the suspension: %+v", d.discarded)
				}
				// The suspension is still resumable.
				out, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
				if _, ok := out.(*chat.Completed); !ok || err != nil {
					t.Fatalf("resume after a failed turn: %#v, %v", out, err)
				}
			case tc.lostWrite:
				// The superseding turn ran but was not committed: the
				// suspension stays resumable, its upstream state in place.
				sessions.FailNext(1)
				if out, _ := h.Send(ctx, "acme/s", llm.UserText("hello")); !isErrored(out) {
					t.Fatalf("superseding turn: %#v", out)
				}
				if len(d.discarded) != 0 {
					t.Fatalf("an uncommitted turn discarded the suspension: %+v", d.discarded)
				}
				out, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
				if c, ok := out.(*chat.Completed); !ok || err != nil || c.Replies[len(c.Replies)-1].Text() != "refunded 30" {
					t.Fatalf("resume after an uncommitted superseding turn: %#v, %v", out, err)
				}
			case tc.resume:
				if _, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.Send(ctx, "acme/s", llm.UserText("hello")); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Send(ctx, "acme/s", llm.UserText("again")); err != nil {
				t.Fatal(err)
			}
			if tc.resume || tc.fail || tc.lostWrite {
				if len(d.discarded) != 0 {
					t.Fatalf("discarded %+v", d.discarded)
				}
				return
			}
			if len(d.discarded) != 1 {
				t.Fatalf("discarded %d suspensions, want 1", len(d.discarded))
			}
			got := d.discarded[0]
			if got.SignalID != s.Descriptor.SignalID || got.ToolCall.Name != "issue_refund" || string(got.State) != "30" {
				t.Errorf("discarded %+v", got)
			}
			// The turn after the committed superseding one discards it.
			if r := d.reqs[0]; r.Input.Text() != "again" || r.SessionID != "s" || r.Tenant != "acme" {
				t.Errorf("discarding turn %+v", r)
			}
		})
	}
}

// TestDiscarderUnpersistedSuspension: a suspension whose session write
// fails is never recorded, so nothing would resume or supersede it: the
// suspending turn discards it. One whose write succeeds is not
// discarded, and its approval resumes it.
func TestDiscarderUnpersistedSuspension(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		failing bool
	}{{name: "write fails", failing: true}, {name: "write succeeds"}} {
		t.Run(tc.name, func(t *testing.T) {
			d := &discarder{}
			sessions := &adaptertest.FlakySessions{Store: session.NewMemoryStore(session.MemoryConfig{})}
			h := adaptertest.Harness(t, d, &adapter.Agent{ID: "helper", Backend: d.Name()}, sessions)
			if _, err := h.Send(ctx, "acme/s", llm.UserText("hello")); err != nil {
				t.Fatal(err)
			}
			if tc.failing {
				sessions.FailNext(1)
			}
			out, _ := h.Send(ctx, "acme/s", llm.UserText("refund please"))
			if !tc.failing {
				s, ok := out.(*chat.Suspended)
				if !ok {
					t.Fatalf("refund: %#v", out)
				}
				if len(d.discarded) != 0 {
					t.Fatalf("a recorded suspension was discarded: %+v", d.discarded)
				}
				out, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
				if c, ok := out.(*chat.Completed); !ok || err != nil || c.Replies[len(c.Replies)-1].Text() != "refunded 30" {
					t.Fatalf("approval: %#v, %v", out, err)
				}
				if len(d.discarded) != 0 {
					t.Fatalf("a resumed suspension was discarded: %+v", d.discarded)
				}
				return
			}
			e, ok := out.(*chat.Errored)
			if !ok || e.Category != errcat.SuspensionPersistenceFailed {
				t.Fatalf("refund with a failing write: %#v", out)
			}
			want := []*adapter.Discarded{{SignalID: agent.SignalPrefix + "c1",
				ToolCall: llm.ToolCall{ID: "c1", Name: "issue_refund", Arguments: json.RawMessage(`{"amount":30}`)}, State: json.RawMessage(`30`)}}
			if diff := cmp.Diff(want, d.discarded); diff != "" {
				t.Fatalf("discarded (-want +got):\n%s", diff)
			}
			if r := d.reqs[0]; r.SessionID != "s" || r.Tenant != "acme" || r.RequestID == "" || len(r.History) == 0 {
				t.Errorf("discarding request %+v", r)
			}
			// The session goes on without the suspension, which no later
			// turn discards again.
			for _, text := range []string{"hello", "again"} {
				if out, err := h.Send(ctx, "acme/s", llm.UserText(text)); err != nil || !isCompleted(out) {
					t.Fatalf("turn %q: %#v, %v", text, out, err)
				}
			}
			if len(d.discarded) != 1 {
				t.Fatalf("discarded %d times, want once", len(d.discarded))
			}
		})
	}
}

func isErrored(o chat.Outcome) bool {
	_, ok := o.(*chat.Errored)
	return ok
}

func TestCompleted(t *testing.T) {
	msgs := []llm.Message{llm.AssistantText("hi")}
	r := adapter.Completed("hi", msgs)
	if r.Suspension != nil || r.Output == nil || r.Output.Text != "hi" || len(r.Output.Messages) != 1 {
		t.Fatalf("Completed = %+v", r)
	}
	if r := adapter.Completed("x", nil); r.Output.Text != "x" || r.Output.Messages != nil {
		t.Fatalf("Completed without messages = %+v", r.Output)
	}
}

// Wraps tells the scaffolding Compile builds around an adapter from
// any other graph: a GraphAdapter's own, or one that merely shares node
// names.
func TestWraps(t *testing.T) {
	if g := newHarness(t, &refunder{}).Harness().Graph(); !adapter.Wraps(g) {
		t.Error("Wraps(Compile's graph) = false")
	}
	schema, err := chat.NewSchema()
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, graph.State) (graph.Update, error) { return nil, nil }
	look, err := graph.NewBuilder(schema).AddNode(adapter.NodeRun, noop).AddNode(adapter.NodeAwait, noop).
		AddEdge(adapter.NodeRun, adapter.NodeAwait).AddEdge(adapter.NodeAwait, graph.End).SetEntry(adapter.NodeRun).Compile()
	if err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]*graph.Graph{"nil": nil, "same node names": look} {
		if adapter.Wraps(g) {
			t.Errorf("Wraps(%s) = true", name)
		}
	}
}

// cursorKeeper returns the cursor its script gives each turn and
// records the cursor each turn is handed.
type cursorKeeper struct {
	next   []string // the cursor each Run returns ("" none, "!" not JSON)
	handed []string
}

func (c *cursorKeeper) Name() string { return "cursors" }

func (c *cursorKeeper) Run(ctx context.Context, req *adapter.Request, _ adapter.Emitter) (*adapter.Result, error) {
	c.handed = append(c.handed, string(req.Cursor))
	var res *adapter.Result
	if req.Resume == nil && strings.Contains(req.Input.Text(), "refund") {
		res = &adapter.Result{Suspension: &adapter.Suspension{ToolCall: llm.ToolCall{ID: "c1", Name: "issue_refund"}}}
	} else {
		res = adapter.Text("ok")
	}
	switch next := c.next[0]; next {
	case "":
	case "!":
		res.Cursor = json.RawMessage(`{"n":`)
	default:
		res.Cursor = json.RawMessage(next)
	}
	c.next = c.next[1:]
	return res, nil
}

// TestCursor: a turn's cursor is committed with it and handed to the
// session's next Run, a resume included; a turn without one keeps the
// stored cursor; an errored turn's cursor is not committed; a cursor
// that is not JSON fails the turn.
func TestCursor(t *testing.T) {
	ctx := context.Background()
	c := &cursorKeeper{next: []string{`{"n":1}`, "", "!", `{"n":2}`, `{"n":3}`, ""}}
	h := newHarness(t, c)
	for _, text := range []string{"one", "two", "three"} {
		out, _ := h.Send(ctx, "s", llm.UserText(text))
		e, failed := out.(*chat.Errored)
		if failed != (text == "three") || (failed && !errors.Is(e.Err, adapter.ErrInvalidResult)) {
			t.Fatalf("turn %q: %#v", text, out)
		}
	}
	out, _ := h.Send(ctx, "s", llm.UserText("refund please"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("refund: %#v", out)
	}
	if out, _ := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")}); !isCompleted(out) {
		t.Fatalf("resume: %#v", out)
	}
	if _, err := h.Send(ctx, "s", llm.UserText("last")); err != nil {
		t.Fatal(err)
	}
	want := []string{"", `{"n":1}`, `{"n":1}`, `{"n":1}`, `{"n":2}`, `{"n":3}`}
	if diff := cmp.Diff(want, c.handed); diff != "" {
		t.Fatalf("cursors handed (-want +got):\n%s", diff)
	}
}

func isCompleted(o chat.Outcome) bool {
	_, ok := o.(*chat.Completed)
	return ok
}

// TestTextOnly: a message or history holding an image fails with
// ErrTextOnly, categorized provider_unsupported_content_block; text
// blocks and thinking do not.
func TestTextOnly(t *testing.T) {
	img := llm.Message{Role: llm.RoleUser, Content: llm.Blocks(llm.TextBlock("what is this?"), llm.ImageURL("https://example.com/a.png"))}
	text := llm.Message{Role: llm.RoleUser, Content: llm.Blocks(llm.TextBlock("hello"), llm.TextBlock(" there"))}
	for _, c := range []struct {
		name string
		req  adapter.Request
		fail bool
	}{
		{"text", adapter.Request{Input: llm.UserText("hi"), History: []llm.Message{text}}, false},
		{"an image in the message", adapter.Request{Input: img}, true},
		{"an image in the history", adapter.Request{Input: llm.UserText("and now?"), History: []llm.Message{text, img}}, true},
	} {
		err := adapter.TextOnly("adk", &c.req)
		if (err != nil) != c.fail || (c.fail && (!errors.Is(err, adapter.ErrTextOnly) || errcat.Of(err) != errcat.ProviderUnsupportedContentBlock)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestForeignResume: graphs sharing one checkpoint store without names
// (graph.WithName), a native agent's and a backend adapter's: a signal
// for the native agent's suspension resolved through the adapter's
// harness fails harness_signal_correlation_failed without running the
// upstream. Before, the upstream ran again from the user's message and
// the decision applied to whatever it asked next.
func TestForeignResume(t *testing.T) {
	ctx := context.Background()
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	records := checkpoint.NewMemoryStore(nil)
	build := func(a adapter.Adapter, ag *adapter.Agent) *chat.Harness {
		g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: sessions}), graph.WithCheckpointStore(records))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(records)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	natAgent := &adapter.Agent{ID: "nat", Backend: adapter.Native, Provider: adaptertest.NewModel(), Tools: adaptertest.Tools()}
	nat, err := adapter.NativeFactory(ctx, adapter.FactoryRequest{Agent: natAgent})
	if err != nil {
		t.Fatal(err)
	}
	f := &refunder{}
	native, other := build(nat, natAgent), build(f, &adapter.Agent{ID: "helper", Backend: f.Name()})
	out, _ := native.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("the native refund: %#v", out)
	}
	out, _ = other.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	e, ok := out.(*chat.Errored)
	if !ok || e.Category != errcat.HarnessSignalCorrelationFailed {
		t.Fatalf("the native suspension resumed by the adapter's graph: %#v, want harness_signal_correlation_failed", out)
	}
	if len(f.seen) != 0 {
		t.Fatalf("the upstream ran: %+v", f.seen[0])
	}
}
