package server

import (
	"testing"
)

// A request_id names a request of one session (PROTOCOLS.md §1: "the
// same request_id for the same session"). A continuation sent by its
// token alone names its session through the token. Two sessions'
// approvals sent token-only under the same request_id (a Shell numbering
// its requests per conversation) are two requests: the second resumes
// its own session's turn, from memory as after a restart (or on another
// replica), where the store answers. (The memory once keyed such a
// continuation by the session as sent, "", and refused the second as
// message_id_reused.)
func TestOpenHarnessContinuationRequestIDPerSession(t *testing.T) {
	e := newOHEnv(t, nil)
	var toks []string
	for _, s := range []string{"s-a", "s-b"} {
		r := e.post(t, ohBody("m1", `{"session_id": "`+s+`", "user_intent": "refund order 7"}`))
		x := r.ext(t)
		if x.Outcome != "suspended" || x.Continuation == nil {
			t.Fatalf("setup %s: %s", s, r.raw)
		}
		toks = append(toks, x.Continuation.ContinuationToken)
	}
	a := e.post(t, ohDecide("c1", "", "", toks[0], "approve"))
	if a.ext(t).Outcome != "completed" || a.ext(t).SessionID != "s-a" {
		t.Fatalf("session a's approval: %s", a.raw)
	}
	b := e.post(t, ohDecide("c1", "", "", toks[1], "approve"))
	if got := b.errCode(); got != "" || b.ext(t).Outcome != "completed" || b.ext(t).SessionID != "s-b" {
		// What the store answers for the same request after a restart:
		e2 := e.restart(t)
		again := e2.post(t, ohDecide("c1", "", "", toks[1], "approve"))
		t.Fatalf("session b's approval under request_id c1 = %s (error %q); after a restart the same request answers outcome %q in session %q",
			b.ext(t).Outcome, got, again.ext(t).Outcome, again.ext(t).SessionID)
	}
}

// A request the endpoint refused without running anything (a
// user_correctable chat_message_shape_invalid: an empty user_intent)
// records nothing in the store. The Shell that corrects it and sends it
// again under the same request_id gets the corrected turn, as after a
// restart or on another replica (and as REST does for a message_id whose
// message was refused): the memory does not keep a refusal that ran
// nothing as the request_id's first request.
func TestOpenHarnessCorrectedRequestSameRequestID(t *testing.T) {
	e := newOHEnv(t, nil)
	bad := e.post(t, ohBody("rid-fix", `{"session_id": "s-fix", "user_intent": "   "}`))
	if bad.errCode() != "chat_message_shape_invalid" {
		t.Fatalf("setup: %s", bad.raw)
	}
	fixed := `{"session_id": "s-fix", "user_intent": "where is order 5?"}`
	got := e.post(t, ohBody("rid-fix", fixed))
	// The same pair of requests on a fresh replica: the refusal, a
	// restart, then the correction.
	f := newOHEnv(t, nil)
	f.post(t, ohBody("rid-fix", `{"session_id": "s-fix", "user_intent": "   "}`))
	f = f.restart(t)
	after := f.post(t, ohBody("rid-fix", fixed))
	if got.errCode() != after.errCode() || got.ext(t).Outcome != after.ext(t).Outcome {
		t.Fatalf("the corrected request under the same request_id: %q/%s without a restart, %q/%s after one",
			got.errCode(), got.ext(t).Outcome, after.errCode(), after.ext(t).Outcome)
	}
}

// A retransmission's capabilities are answered per request, and the
// recorded outcome is rendered for them: a Shell that first declared
// openharness.ui.approval false (capability_required) and retransmits
// declaring it true gets the suspension's request_approval, from memory
// as after a restart: a capability_required answer is not kept in
// memory for the request_id.
func TestOpenHarnessRetransmissionCapabilities(t *testing.T) {
	body := func(approval string) string {
		return `{"protocol_version": "1.0.0", "request_id": "rid-cap", "capabilities": {"openharness.ui.approval": ` + approval + `},
			"request": {"context": {"session_id": "s-cap", "user_intent": "refund order 7"}}}`
	}
	e := newOHEnv(t, nil)
	if r := e.post(t, body("false")); r.errCode() != ohCodeCapabilityRequired {
		t.Fatalf("setup: %s", r.raw)
	}
	cached := e.post(t, body("true"))
	e = e.restart(t)
	stored := e.post(t, body("true"))
	if cached.errCode() != stored.errCode() {
		t.Fatalf("retransmission declaring approval: error %q from memory (supported_capabilities %s), %q after a restart",
			cached.errCode(), cached.msg.SupportedCapabilities, stored.errCode())
	}
}
