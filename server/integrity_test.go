package server_test

import (
	"net/http"
	"testing"

	"github.com/armature-go/armature/llm"
)

type outcomeResp struct {
	Outcome      string        `json:"outcome"`
	InvocationID string        `json:"invocation_id"`
	Superseded   []string      `json:"superseded"`
	Replayed     bool          `json:"replayed"`
	Replies      []llm.Message `json:"replies"`
	Signal       *struct {
		SignalID string `json:"signal_id"`
	} `json:"signal"`
	Error *struct {
		Category string `json:"category"`
	} `json:"error"`
}

// The reproduction over REST: an approval answered after a later
// turn completed changes nothing and loses nothing.
func TestRESTSupersedeDeleteAndStrictSignals(t *testing.T) {
	srv := newDemoServer(t)
	S := srv.URL + "/v1/sessions"
	var o outcomeResp
	if post(t, S+"/x/messages", `{"content":"refund order 91"}`, &o); o.Outcome != "suspended" || o.Signal == nil {
		t.Fatalf("first turn: %+v", o)
	}
	sig := o.Signal.SignalID
	var c outcomeResp
	if post(t, S+"/x/messages", `{"content":"where is order 92?","message_id":"m92"}`, &c); c.Outcome != "completed" || len(c.Superseded) != 1 || c.Superseded[0] != sig {
		t.Fatalf("second turn: %+v", c)
	}
	var e outcomeResp
	if st := post(t, S+"/x/signals", `{"signal_id":"`+sig+`","payload":{"approval":{"approved":true}}}`, &e); st != http.StatusNotFound || e.Error == nil || e.Error.Category != "harness_signal_correlation_failed" {
		t.Fatalf("stale signal: %d %+v", st, e)
	}
	var sess struct {
		Messages []llm.Message `json:"messages"`
	}
	getJSON(t, S+"/x", &sess)
	if err := llm.CheckHistory(nil, sess.Messages); err != nil || len(sess.Messages) != 8 {
		t.Fatalf("history (%d messages): %v", len(sess.Messages), err)
	}
	var r outcomeResp
	if post(t, S+"/x/messages", `{"content":"where is order 92?","message_id":"m92"}`, &r); !r.Replayed {
		t.Fatalf("retransmit: %+v", r)
	}

	// Malformed approvals are 400 and leave the approval pending.
	post(t, S+"/y/messages", `{"content":"refund order 5"}`, &o)
	sig = o.Signal.SignalID
	for _, body := range []string{`{"signal_id":"` + sig + `","payload":{"approval":{"approved":1}}}`, `{"signal_id":"` + sig + `"}`} {
		var b outcomeResp
		if st := post(t, S+"/y/signals", body, &b); st != http.StatusBadRequest || b.Error.Category != "suspension_resume_payload_invalid" {
			t.Fatalf("%s: %d %+v", body, st, b)
		}
	}
	// Delete is final: the approval then answers 404.
	req, _ := http.NewRequest(http.MethodDelete, S+"/y", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %v %v", resp, err)
	}
	resp.Body.Close()
	if st := post(t, S+"/y/signals", `{"signal_id":"`+sig+`","payload":{"approval":{"approved":true}}}`, nil); st != http.StatusNotFound {
		t.Fatalf("approval after delete: %d", st)
	}
	if st := getJSON(t, S+"/y", nil); st != http.StatusNotFound {
		t.Fatalf("deleted session: %d", st)
	}
}
