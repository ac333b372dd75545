package server

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/runtime"
)

// The OpenHarness endpoint as PROTOCOLS.md decides it: the points of
// protocol fidelity, each against the real request and response (every
// response validated against the schema by ohEnv.post).

func TestOpenHarnessConversationID(t *testing.T) {
	e := newOHEnv(t, nil)
	r := e.post(t, ohBody("cv1", `{"session_id": "s-conv", "conversation_id": "thread-9", "user_intent": "refund order 3"}`))
	x := r.ext(t)
	if x.ConversationID != "thread-9" || x.Outcome != "suspended" {
		t.Fatalf("extension = %+v", x)
	}
	// The resumed turn records the conversation its continuation names.
	rr := e.post(t, ohBody("cv2", fmt.Sprintf(`{"session_id": "s-conv", "conversation_id": "thread-9",
		"continuation": {"continuation_token": %q}, "extensions": {"dev.armature": {"option": "approve"}}}`, x.Continuation.ContinuationToken)))
	if rx := rr.ext(t); rx.ConversationID != "thread-9" || rx.Outcome != "completed" {
		t.Fatalf("resumed extension = %+v", rx)
	}
	// The conversation id is metadata: it does not split the history.
	e.post(t, ohBody("cv3", `{"session_id": "s-conv", "conversation_id": "thread-10", "user_intent": "where is order 3?"}`))
	var runs struct {
		Runs []struct {
			ID             string `json:"id"`
			ConversationID string `json:"conversationId"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(e.get(t, "/v1/sessions/s-conv/runs"), &runs); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range runs.Runs {
		got[r.ConversationID]++
	}
	if got["thread-9"] != 2 || got["thread-10"] != 1 {
		t.Errorf("conversation ids on the runs = %v", got)
	}
	var sess struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(e.get(t, "/v1/sessions/s-conv"), &sess); err != nil {
		t.Fatal(err)
	}
	if len(sess.Messages) != 9 { // 5 of the approved refund, 4 of the question
		t.Errorf("the session holds %d messages, want 9: %s", len(sess.Messages), e.get(t, "/v1/sessions/s-conv"))
	}
	t.Run("bounded", func(t *testing.T) {
		r := e.post(t, ohBody("cv4", fmt.Sprintf(`{"session_id": "s-conv", "conversation_id": %q, "user_intent": "hi"}`, strings.Repeat("c", 257))))
		ohWantProtocolError(t, r, "invalid_request", "request.context.conversation_id")
		r = e.post(t, ohBody("cv5", `{"session_id": "s-conv", "conversation_id": "a\u0001b", "user_intent": "hi"}`))
		ohWantProtocolError(t, r, "invalid_request", "request.context.conversation_id")
	})
}

func TestOpenHarnessDirectiveFields(t *testing.T) {
	e := newOHEnv(t, nil)
	r := e.post(t, ohBody("d1", `{"session_id": "s-dir", "user_intent": "refund order 3"}`))
	for _, d := range r.msg.Response.ActionDirectives {
		want := "normal"
		if d.ActionType == ohRequestApproval {
			want = "high"
		}
		if d.Priority != want || d.Execution != "sequential" {
			t.Errorf("%s: priority %q, execution %q", d.ActionType, d.Priority, d.Execution)
		}
	}
	// The demo's issue_refund is declared dangerous (agent.RiskDangerous).
	var approval ohDirective
	for _, d := range r.msg.Response.ActionDirectives {
		if d.ActionType == ohRequestApproval {
			approval = d
		}
	}
	if approval.RiskTier != "dangerous" || approval.DeadlineMS != nil {
		t.Errorf("request_approval: risk_tier %q, deadline_ms %v", approval.RiskTier, approval.DeadlineMS)
	}
}

func TestOpenHarnessApprovalDeadline(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		hint string
		want *int64
	}{
		{"PT30S", new(int64(30000))},
		{"PT1.5S", new(int64(1500))},
		{"P1DT2H", new(int64((26 * time.Hour).Milliseconds()))},
		{"PT5M", new(int64(300000))},
		{"P1W", new(int64((7 * 24 * time.Hour).Milliseconds()))},
		{"2026-11-25T12:00:10Z", new(int64(10000))},
		{"2026-11-25T11:00:00Z", new(int64(0))}, // past: due now
		{"P1M", nil},                            // months have no fixed length
		{"PT", nil},
		{"P", nil},
		{"30s", nil},
		{"PTS", nil},
		{"", nil},
	}
	for _, tc := range tests {
		t.Run(tc.hint, func(t *testing.T) {
			o := &chat.Suspended{Descriptor: graph.SignalDescriptor{SignalID: "approval:c1",
				Metadata: map[string]any{"timeout_hint": tc.hint, "timeout_ms": 5}}}
			d := ohApproval(o, &ohContinuation{RunID: "r", ContinuationToken: "t"}, now)
			switch {
			case tc.want == nil && d.DeadlineMS != nil:
				t.Errorf("deadline_ms = %d, want none", *d.DeadlineMS)
			case tc.want != nil && (d.DeadlineMS == nil || *d.DeadlineMS != *tc.want):
				t.Errorf("deadline_ms = %v, want %d", d.DeadlineMS, *tc.want)
			}
		})
	}
}

func FuzzISODuration(f *testing.F) {
	for _, s := range []string{"PT30S", "P1DT2H3M4.5S", "P1W", "PT", "P", "PT1.2.3S", "P99999999999999999999D"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseISODuration(s)
		if ok && d < 0 {
			t.Fatalf("parseISODuration(%q) = %v", s, d)
		}
	})
}

func TestOpenHarnessAttachmentsUploadDenied(t *testing.T) {
	e := newOHEnv(t, nil)
	r := e.post(t, `{"protocol_version": "1.0.0", "capabilities": {"openharness.attachments.upload": true, "openharness.ui.approval": true},
		"request": {"context": {"session_id": "s-att", "user_intent": "hi",
			"attachments": [{"ref_id": "up-1"}, {"asset_id": "as-2"}, {"uri": "https://example.com/a.png"}]}}}`)
	if len(r.msg.CapabilityDenials) != 1 || r.msg.CapabilityDenials[0].Capability != "openharness.attachments.upload" ||
		r.msg.CapabilityDenials[0].Code != "not_supported" {
		t.Errorf("capability_denials = %+v", r.msg.CapabilityDenials)
	}
	if _, ok := r.msg.SupportedCapabilities["openharness.attachments.upload"]; ok {
		t.Error("attachments.upload is still advertised")
	}
	if got := r.ext(t).UnusedAttachments; fmt.Sprint(got) != "[0 1]" {
		t.Errorf("unused_attachments = %v, want the two references by id", got)
	}
}

func TestOpenHarnessRequestIDHeader(t *testing.T) {
	e := newOHEnv(t, nil)
	body := `{"protocol_version": "1.0.0", "request": {"context": {"session_id": "s-rid", "user_intent": "where is order 5?"}}}`
	first := e.post(t, body, "X-Request-ID", "rid-0001")
	if first.msg.RequestID != "rid-0001" || first.header.Get("X-Request-ID") != "rid-0001" {
		t.Fatalf("request_id %q, X-Request-ID %q", first.msg.RequestID, first.header.Get("X-Request-ID"))
	}
	before := e.turns(t)
	again := e.post(t, body, "X-Request-ID", "rid-0001")
	if again.header.Get("Idempotent-Replayed") != "true" || e.turns(t) != before {
		t.Errorf("the retransmission under the same X-Request-ID ran a turn: %s", again.raw)
	}
	// The body's request_id wins over the header.
	other := e.post(t, ohBody("body-id", `{"session_id": "s-rid", "user_intent": "where is order 5?"}`), "X-Request-ID", "rid-0001")
	if other.msg.RequestID != "body-id" || other.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("request_id %q, Idempotent-Replayed %q", other.msg.RequestID, other.header.Get("Idempotent-Replayed"))
	}
	// One the engine cannot take (a space, over 128 bytes) is refused,
	// naming it, and runs nothing: ignored, its retransmission ran the
	// turn again.
	for _, rid := range []string{"retry me 1", strings.Repeat("r", 129)} {
		before := e.turns(t)
		r := e.post(t, body, "X-Request-ID", rid)
		if r.errCode() != "invalid_request" || !strings.Contains(string(r.raw), "X-Request-ID") || e.turns(t) != before {
			t.Errorf("X-Request-ID %q: %s", rid, r.raw)
		}
	}
}

func TestOpenHarnessTraceparent(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	e := newOHEnvWith(t, filepath.Join(t.TempDir(), "a.db"), func(c *chat.Config) { c.Tracer = tp.Tracer("test") }, nil)
	const trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r := e.post(t, ohBody("tp1", `{"session_id": "s-tp", "user_intent": "hello"}`), "traceparent", "00-"+trace+"-"+parent+"-01")
	if r.msg.Response.Status != "success" {
		t.Fatalf("got %s", r.raw)
	}
	ended := spans.Ended()
	if len(ended) == 0 {
		t.Fatal("no span")
	}
	var roots int
	for _, s := range ended {
		if s.SpanContext().TraceID().String() != trace {
			t.Errorf("span %q is in trace %s, not the caller's", s.Name(), s.SpanContext().TraceID())
		}
		if s.Parent().SpanID().String() == parent {
			roots++
			if !s.Parent().IsRemote() {
				t.Errorf("span %q: its parent is not the remote caller", s.Name())
			}
		}
	}
	if roots == 0 {
		t.Error("no span is a child of the caller's span")
	}
	// Without a traceparent, the turn starts its own trace.
	spans2 := len(ended)
	e.post(t, ohBody("tp2", `{"session_id": "s-tp", "user_intent": "hello again"}`))
	for _, s := range spans.Ended()[spans2:] {
		if s.SpanContext().TraceID().String() == trace {
			t.Errorf("span %q joined the earlier caller's trace", s.Name())
		}
	}
}

// TestOpenHarnessRunIDs checks that one run has one id on every surface:
// the OpenHarness run_id, the REST run_id and invocation_id, the OpenAI
// x_armature run_id and the run inspector.
func TestOpenHarnessRunIDs(t *testing.T) {
	e := newOHEnv(t, nil)
	x := e.post(t, ohBody("ids-1", `{"session_id": "s-ids", "user_intent": "where is order 5?"}`)).ext(t)
	if x.RunID == "" || x.InvocationID != x.RunID {
		t.Fatalf("run_id %q, invocation_id %q", x.RunID, x.InvocationID)
	}
	var run runtime.Run
	if err := json.Unmarshal(e.get(t, "/v1/runs/"+x.RunID), &run); err != nil {
		t.Fatal(err)
	}
	if run.ID != x.RunID || run.Status != runtime.StatusCompleted || run.SessionID != "s-ids" {
		t.Errorf("run = %+v", run)
	}
	// A replayed request names the run that answered it first.
	if r := e.post(t, ohBody("ids-1", `{"session_id": "s-ids", "user_intent": "where is order 5?"}`)); r.ext(t).RunID != x.RunID ||
		r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: run_id %q, Idempotent-Replayed %q", r.ext(t).RunID, r.header.Get("Idempotent-Replayed"))
	}
}
