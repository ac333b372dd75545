package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/jsonvalid"
)

// TestOHFingerprint: the fingerprint of a request_id's request compares
// what determines the turn, canonically.
func TestOHFingerprint(t *testing.T) {
	demo, other := &Agent{ID: "demo"}, &Agent{ID: "other"}
	const base = `{"protocol_version": "1.0.0", "request_id": "r", "request": {"context": {"session_id": "s", "user_intent": "hi", "attachments": [{"uri": "https://x.test/a.png", "mime_type": "image/png"}]}}}`
	cont := func(ext string) string {
		return `{"protocol_version": "1.0.0", "request_id": "r", "request": {"context": {"session_id": "s", "user_intent": "ok",
			"continuation": {"run_id": "run-1", "continuation_token": "oh1.t"}, "extensions": {"dev.armature": ` + ext + `}}}}`
	}
	for _, tc := range []struct {
		name       string
		a, b       string
		agentB     *Agent
		same       bool
		contA, cnB bool
	}{
		{name: "identical", a: base, b: base, same: true},
		{name: "white space and key order", a: base, b: `{"request":{"context":{"attachments":[{"mime_type":"image/png","uri":"https://x.test/a.png"}],"user_intent":"hi","session_id":"s"}},"request_id":"r","protocol_version":"1.0.0"}`, same: true},
		{name: "trace, capabilities, shell, environment, conversation", a: base,
			b: strings.Replace(base, `"context": {`, `"auth": {"credential_ref": "c"}, "extensions": {"x": 1}, "context": {"conversation_id": "c2", "shell": {"shell_kind": "k"}, "environment_state": {"os": "linux"}, "task_hint": {"business_key": "b"}, `, 1), same: true},
		{name: "another agent", a: base, b: base, agentB: other, same: false},
		{name: "another intent", a: base, b: strings.Replace(base, `"hi"`, `"hi!"`, 1), same: false},
		{name: "an attachment's mime type", a: base, b: strings.Replace(base, `image/png`, `image/jpeg`, 1), same: false},
		{name: "no attachments", a: base, b: strings.Replace(base, `, "attachments": [{"uri": "https://x.test/a.png", "mime_type": "image/png"}]`, "", 1), same: false},
		{name: "payload key order", a: cont(`{"signal_payload": {"a": 1, "b": {"c": true, "d": "x"}}}`), b: cont(`{"signal_payload": {"b": {"d": "x", "c": true}, "a": 1.0}}`), same: true},
		{name: "another payload", a: cont(`{"signal_payload": {"a": 1}}`), b: cont(`{"signal_payload": {"a": 2}}`), same: false},
		{name: "another option", a: cont(`{"option": "approve"}`), b: cont(`{"option": "deny"}`), same: false},
		{name: "an option's intent does not count", a: cont(`{"option": "approve"}`), b: strings.Replace(cont(`{"option": "approve"}`), `"ok"`, `"sure"`, 1), same: true},
		{name: "a reply's intent counts", a: cont(`{}`), b: strings.Replace(cont(`{}`), `"ok"`, `"sure"`, 1), same: false},
		{name: "another token", a: cont(`{}`), b: strings.Replace(cont(`{}`), `oh1.t`, `oh1.u`, 1), same: false},
		{name: "a turn and a continuation", a: base, b: cont(`{}`), same: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := func(body string, a *Agent) string {
				t.Helper()
				req, fail := parseOHRequest([]byte(body))
				if fail != nil {
					t.Fatalf("parse: %+v", fail)
				}
				ch, fail := req.Request.Context.choice()
				if fail != nil {
					t.Fatalf("choice: %+v", fail)
				}
				return req.fingerprint(a, req.Request.Context.Continuation, ch)
			}
			agentB := demo
			if tc.agentB != nil {
				agentB = tc.agentB
			}
			if got := fp(tc.a, demo) == fp(tc.b, agentB); got != tc.same {
				t.Errorf("same = %v, want %v", got, tc.same)
			}
		})
	}
}

// TestOHTooDeep: the depth count ignores brackets in strings (escaped
// quotes too) and trips just past the limit.
func TestOHTooDeep(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want bool
	}{
		{"at the limit", strings.Repeat("[", ohMaxDepth) + strings.Repeat("]", ohMaxDepth), false},
		{"past the limit", strings.Repeat("[", ohMaxDepth+1) + strings.Repeat("]", ohMaxDepth+1), true},
		{"past the limit, cut short", strings.Repeat(`{"a":`, ohMaxDepth+1), true},
		{"in a string", `["` + strings.Repeat("[", 2*ohMaxDepth) + `"]`, false},
		{"after an escaped quote", `["\"` + strings.Repeat("[", 2*ohMaxDepth) + `"]`, false},
		{"after an escaped backslash", `["\\"` + strings.Repeat(",[", ohMaxDepth+1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ohTooDeep([]byte(tc.body)); got != tc.want {
				t.Errorf("ohTooDeep = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzOHTooDeep: a body jsonvalid accepts is never too deep.
func FuzzOHTooDeep(f *testing.F) {
	f.Add([]byte(`{"a": ["[[", "\"[", {"b": [[[]]]}]}`))
	f.Add([]byte(strings.Repeat("[", 50) + strings.Repeat("]", 50)))
	f.Fuzz(func(t *testing.T, body []byte) {
		if jsonvalid.Valid(body) && ohTooDeep(body) {
			t.Fatalf("valid JSON reported too deep: %q", body)
		}
	})
}

// TestOHDeclined: false and null decline a capability; anything else
// (true, a string, an object) asks for it.
func TestOHDeclined(t *testing.T) {
	for v, want := range map[string]bool{"false": true, " null ": true, "true": false, `"false"`: false, `{}`: false, "0": false} {
		if got := ohDeclined([]byte(v)); got != want {
			t.Errorf("ohDeclined(%s) = %v, want %v", v, got, want)
		}
	}
}

// TestOHRequestIDAfterSpentElsewhere: a continuation's request_id whose
// first request (a deny) resumed the turn on another replica, or before
// a restart, keeps answering that request's retransmissions here, also
// after a continuation with the other decision under the same id was
// answered here with the recorded outcome (the spent token's repeat).
// Before, that answer was remembered under the id with the other
// decision's contents, and the genuine retransmission was refused,
// message_id_reused.
func TestOHRequestIDAfterSpentElsewhere(t *testing.T) {
	e := newOHEnv(t, nil)
	s := e.post(t, ohBody("", `{"user_intent": "refund order 9"}`))
	x := s.ext(t)
	cont := x.Continuation
	if cont == nil {
		t.Fatalf("got %s", s.raw)
	}
	first := e.post(t, ohDecide("q1", x.SessionID, cont.RunID, cont.ContinuationToken, "deny"))
	if first.msg.Response.Status != "success" {
		t.Fatalf("the deny: %s", first.raw)
	}
	n := e.restart(t) // another replica, or this one restarted: no cache
	other := n.post(t, ohDecide("q1", x.SessionID, cont.RunID, cont.ContinuationToken, "approve"))
	if other.msg.Response.Error != nil && other.msg.Response.Error.Code != "message_id_reused" {
		t.Fatalf("the other decision under q1: %s", other.raw)
	}
	again := n.post(t, ohDecide("q1", x.SessionID, cont.RunID, cont.ContinuationToken, "deny"))
	if again.msg.Response.Status != "success" || again.msg.Response.Error != nil {
		t.Fatalf("the deny's retransmission: %s, want its recorded answer", again.raw)
	}
}

// TestOHContinuationWhoseClientLeft: a continuation whose client left
// before its signal was resolved (its request context ended: a closed
// or half-closed connection) resumes nothing and says so, retryable,
// and its request_id's retransmission then resumes the turn. Before,
// the failed look-up was answered "the continuation matches no
// suspended turn", remembered under the request_id, and replayed to
// every retransmission: the approval was never applied. (And any
// retryable failure of a continuation was remembered under its
// request_id, so that its retries were answered the failure again.)
func TestOHContinuationWhoseClientLeft(t *testing.T) {
	e := newOHEnv(t, nil)
	s := e.post(t, ohBody("", `{"user_intent": "refund order 22"}`))
	x := s.ext(t)
	cont := x.Continuation
	if cont == nil {
		t.Fatalf("got %s", s.raw)
	}
	body := ohDecide("hco1", x.SessionID, cont.RunID, cont.ContinuationToken, "approve")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client is gone before the request is served
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://localhost/v1/openharness", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if strings.Contains(rec.Body.String(), string(errcat.HarnessSignalCorrelationFailed)) {
		t.Fatalf("the abandoned continuation: %d %s, want no correlation failure", rec.Code, rec.Body)
	}
	again := e.post(t, body)
	if again.msg.Response.Status != "success" || again.ext(t).Outcome != "completed" {
		t.Fatalf("its retransmission: %s, want the approval applied", again.raw)
	}
}
