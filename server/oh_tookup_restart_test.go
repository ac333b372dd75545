package server

import (
	"context"
	"path/filepath"
	"testing"
)

// TestOpenHarnessTookUpFailureStaysFinalAfterRestart: the took-up failure is final
// after a restart too: the continuation resent (same or new request_id,
// token or run_id) never runs the approved refund again.
func TestOpenHarnessTookUpFailureStaysFinalAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	m := &failAfterRefund{}
	e := newOHEnvAgentAt(t, path, m, 0)
	s := e.post(t, ohBody("rid-s", `{"session_id": "s-rs", "user_intent": "refund order 7"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("no continuation: %s", s.raw)
	}
	m.fail.Store(true)
	first := e.post(t, ohDecide("rid-c", "s-rs", cont.RunID, cont.ContinuationToken, "approve"))
	if first.ext(t).Outcome != "errored" {
		t.Fatalf("first: %s", first.raw)
	}
	if err := e.srv.runs.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	m2 := &failAfterRefund{}
	next := newOHEnvAgentAt(t, path, m2, 0)
	for _, body := range []string{
		ohDecide("rid-c", "s-rs", cont.RunID, cont.ContinuationToken, "approve"),
		ohDecide("rid-c4", "s-rs", cont.RunID, cont.ContinuationToken, "approve"),
		ohDecide("rid-c5", "s-rs", cont.RunID, "", "approve"),
	} {
		r := next.post(t, body)
		t.Logf("after restart: %s", r.raw)
		if r.ext(t).Outcome == "completed" || m2.afterTool.Load() != 0 {
			t.Fatalf("after a restart the took-up continuation resumed again: %s", r.raw)
		}
	}
}
