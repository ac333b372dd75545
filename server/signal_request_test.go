package server_test

import (
	"testing"
)

// TestSignalRequestID: a REST signal with a request_id is idempotent: a
// retransmission (a retry after a dropped connection) answers the turn
// the first one resumed, replayed, and resumes nothing; another
// request_id is refused (404), as a second decision is. Before, a
// retry was refused with 404 even when it repeated the decision that
// took effect.
func TestSignalRequestID(t *testing.T) {
	ts := newDemoServer(t)
	var sus struct {
		Outcome string `json:"outcome"`
		Signal  struct {
			SignalID string `json:"signal_id"`
		} `json:"signal"`
	}
	post(t, ts.URL+"/v1/sessions/r/messages", `{"content":"please refund order 7"}`, &sus)
	if sus.Outcome != "suspended" {
		t.Fatalf("the refund: %+v", sus)
	}
	body := func(rid string) string {
		return `{"signal_id":"` + sus.Signal.SignalID + `","request_id":"` + rid + `","payload":{"approval":{"approved":true}}}`
	}
	type answer struct {
		Outcome  string `json:"outcome"`
		RunID    string `json:"run_id"`
		Replayed bool   `json:"replayed"`
		Replies  []struct {
			Content string `json:"content"`
		} `json:"replies"`
	}
	var first, again, other answer
	if code := post(t, ts.URL+"/v1/sessions/r/signals", body("decision-1"), &first); code != 200 || first.Outcome != "completed" || first.Replayed {
		t.Fatalf("the approval: %d %+v", code, first)
	}
	if code := post(t, ts.URL+"/v1/sessions/r/signals", body("decision-1"), &again); code != 200 || again.Outcome != "completed" || !again.Replayed ||
		len(again.Replies) != len(first.Replies) {
		t.Fatalf("its retransmission: %d %+v, want the first's outcome, replayed", code, again)
	}
	if code := post(t, ts.URL+"/v1/sessions/r/signals", body("decision-2"), &other); code != 404 {
		t.Fatalf("another decision: %d %+v, want 404", code, other)
	}
}
