package server

import (
	"context"
	"strings"
	"testing"
)

// TestOpenHarnessTookUpFailureEveryFormAfterRestart: a resume took its suspension
// up (the refund ran) and failed on an overloaded upstream; then the
// process restarts. The same continuation sent again, by token (same
// and new request_id) and by run_id, must not resume anything and must
// not tell the Shell to retry, nor that a later message superseded it.
func TestOpenHarnessTookUpFailureEveryFormAfterRestart(t *testing.T) {
	m := &failAfterRefund{}
	e := newOHEnvAgent(t, m)
	s := e.post(t, ohBody("rid-s", `{"session_id": "s-rs", "user_intent": "refund order 7"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("no continuation: %s", s.raw)
	}
	m.fail.Store(true)
	first := e.post(t, ohDecide("rid-c", "s-rs", cont.RunID, cont.ContinuationToken, "approve"))
	m.fail.Store(false)
	t.Logf("first: %s", first.raw)
	if first.ext(t).Outcome != "errored" {
		t.Fatalf("first: %s", first.raw)
	}
	if err := e.store.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e = newOHEnvAgentAt(t, e.path, m, 0)
	for name, body := range map[string]string{
		"token same rid":  ohDecide("rid-c", "s-rs", cont.RunID, cont.ContinuationToken, "approve"),
		"token only same": ohDecide("rid-c", "s-rs", "", cont.ContinuationToken, "approve"),
		"token new rid":   ohDecide("rid-c2", "s-rs", cont.RunID, cont.ContinuationToken, "approve"),
		"run_id new rid":  ohDecide("rid-c3", "s-rs", cont.RunID, "", "approve"),
		"run_id same rid": ohDecide("rid-c", "s-rs", cont.RunID, "", "approve"),
		"run_id no rid":   ohDecide("", "s-rs", cont.RunID, "", "approve"),
		"token no rid":    ohDecide("", "s-rs", "", cont.ContinuationToken, "approve"),
	} {
		r := e.post(t, body)
		t.Logf("%s: %s", name, r.raw)
		x := r.ext(t)
		if x.Outcome == "completed" {
			t.Errorf("%s: resumed again after a restart: %s", name, r.raw)
			continue
		}
		er := r.msg.Response.Error
		if er == nil {
			t.Errorf("%s: no error: %s", name, r.raw)
			continue
		}
		if er.Retryable != nil && *er.Retryable {
			t.Errorf("%s: retryable true: %s", name, r.raw)
		}
		if strings.Contains(er.Message, "superseded") || strings.Contains(er.Message, "reused") {
			t.Errorf("%s: misleading: %s", name, er.Message)
		}
	}
	if n := m.afterTool.Load(); n != 1 {
		t.Errorf("the model saw the refund's result %d times", n)
	}
}
