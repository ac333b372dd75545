package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/server"
)

// TestSignalRequestID: a REST signal with a request_id is idempotent: a
// retransmission (a retry after a dropped connection) answers the turn
// the first one resumed, replayed, and resumes nothing; another
// request_id is refused (409: the first decision took effect), as a
// second decision is. Before, a
// retry was refused with 404 even when it repeated the decision that
// took effect.
func TestSignalRequestID(t *testing.T) {
	ts := newDemoServer(t)
	signalID := refundAwaitingApproval(t, ts.URL, "r")
	body := func(rid string) string {
		return `{"signal_id":"` + signalID + `","request_id":"` + rid + `","payload":{"approval":{"approved":true}}}`
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
	if code := post(t, ts.URL+"/v1/sessions/r/signals", body("decision-2"), &other); code != http.StatusConflict {
		t.Fatalf("another decision: %d %+v, want 409 (the first took effect)", code, other)
	}
}

// TestSignalRequestIDAnotherDecision: a request_id given again with
// another decision (approve after deny, another payload) is refused,
// message_id_reused, as a message id given again with another message
// is: the client learns that its decision did not take effect. Before,
// it answered 200 with the first decision's outcome, marked replayed,
// as if it had. The same decision with the same id is still replayed.
func TestSignalRequestIDAnotherDecision(t *testing.T) {
	ts := newDemoServer(t)
	signalID := refundAwaitingApproval(t, ts.URL, "r")
	body := func(approved bool) string {
		return fmt.Sprintf(`{"signal_id":%q,"request_id":"decision-1","payload":{"approval":{"approved":%t}}}`, signalID, approved)
	}
	type answer struct {
		Outcome  string `json:"outcome"`
		Replayed bool   `json:"replayed"`
		Error    *struct {
			Category string `json:"category"`
		} `json:"error"`
		Replies []struct {
			Content string `json:"content"`
		} `json:"replies"`
	}
	var denied, flipped, again answer
	if code := post(t, ts.URL+"/v1/sessions/r/signals", body(false), &denied); code != 200 || denied.Outcome != "completed" {
		t.Fatalf("the denial: %d %+v", code, denied)
	}
	code := post(t, ts.URL+"/v1/sessions/r/signals", body(true), &flipped)
	if flipped.Outcome != "errored" || flipped.Error == nil || flipped.Error.Category != "message_id_reused" {
		t.Fatalf("the same request_id approving: %d %+v, want errored message_id_reused", code, flipped)
	}
	if code := post(t, ts.URL+"/v1/sessions/r/signals", body(false), &again); code != 200 || !again.Replayed || len(again.Replies) != len(denied.Replies) {
		t.Fatalf("the denial's retransmission: %d %+v, want the denial, replayed", code, again)
	}
	var hist struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	getJSON(t, ts.URL+"/v1/sessions/r", &hist)
	for _, m := range hist.Messages {
		if strings.Contains(m.Content, "refunded") {
			t.Fatalf("the refund ran: %+v", hist.Messages)
		}
	}
}

// TestResponsesApprovalKeyAnotherDecision: on the Responses API, an
// Idempotency-Key sent again with the opposite decision on the same
// approval is refused, 400 message_id_reused, and runs nothing; the
// same decision with the key is replayed. Before, the approval answered
// 200 with the denial's output, marked replayed.
func TestResponsesApprovalKeyAnotherDecision(t *testing.T) {
	ts := newOpenAIServer(t)
	susp, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 7"}`, nil)
	if resp.StatusCode != http.StatusOK || susp.XArmature.Outcome != "suspended" {
		t.Fatalf("the refund: %d %+v %+v", resp.StatusCode, susp, e)
	}
	decide := func(approve bool) (responseObj, *http.Response, apiError) {
		return respond(t, ts, fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
			"approval_request_id": %q, "approve": %t}]}`, susp.ID, susp.Output[1].ID, approve), map[string]string{"Idempotency-Key": "K-1"})
	}
	denied, resp, e := decide(false)
	if resp.StatusCode != http.StatusOK || strings.Contains(denied.text(), "refunded") {
		t.Fatalf("the denial: %d %+v %+v", resp.StatusCode, denied, e)
	}
	flipped, resp, e := decide(true)
	if resp.StatusCode != http.StatusBadRequest || e.Error.Code != "message_id_reused" {
		t.Fatalf("the approval with the denial's key: %d %+v %+v, want 400 message_id_reused", resp.StatusCode, flipped, e)
	}
	again, resp, e := decide(false)
	if resp.StatusCode != http.StatusOK || again.ID != denied.ID {
		t.Fatalf("the denial again: %d %+v %+v, want the denial's response %s", resp.StatusCode, again, e, denied.ID)
	}
}

// refundAwaitingApproval sends a refund to session id, which suspends
// for approval, and returns its signal id.
func refundAwaitingApproval(t *testing.T, base, id string) string {
	t.Helper()
	var sus struct {
		Outcome string `json:"outcome"`
		Signal  struct {
			SignalID string `json:"signal_id"`
		} `json:"signal"`
	}
	post(t, base+"/v1/sessions/"+id+"/messages", `{"content":"please refund order 7"}`, &sus)
	if sus.Outcome != "suspended" {
		t.Fatalf("the refund: %+v", sus)
	}
	return sus.Signal.SignalID
}

// TestResponsesKeyOneRequest: on the Responses API, an Idempotency-Key
// names one request in its session: a key that answered an approval
// decision, sent again with a message (or one that answered a message,
// sent again with a decision), is refused 400 message_id_reused and
// runs nothing. Before, each ran, under a key that already answered
// the other.
func TestResponsesKeyOneRequest(t *testing.T) {
	ts := newOpenAIServer(t)
	hdr := func(k string) map[string]string {
		return map[string]string{"Idempotency-Key": k, server.SessionHeader: "S"}
	}
	susp, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 7"}`, map[string]string{server.SessionHeader: "S"})
	if resp.StatusCode != http.StatusOK || susp.XArmature.Outcome != "suspended" {
		t.Fatalf("the refund: %d %+v %+v", resp.StatusCode, susp, e)
	}
	decision := fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
		"approval_request_id": %q, "approve": true}]}`, susp.ID, susp.Output[1].ID)
	if _, resp, e := respond(t, ts, decision, hdr("K-decided")); resp.StatusCode != http.StatusOK {
		t.Fatalf("the approval: %d %+v", resp.StatusCode, e)
	}
	if _, resp, e := respond(t, ts, `{"model": "demo", "input": "where is order 4?"}`, hdr("K-decided")); resp.StatusCode != http.StatusBadRequest ||
		e.Error.Code != "message_id_reused" {
		t.Fatalf("a message with the approval's key: %d %+v, want 400 message_id_reused", resp.StatusCode, e)
	}
	said, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 8"}`, hdr("K-said"))
	if resp.StatusCode != http.StatusOK || said.XArmature.Outcome != "suspended" {
		t.Fatalf("the second refund: %d %+v %+v", resp.StatusCode, said, e)
	}
	decision = fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
		"approval_request_id": %q, "approve": true}]}`, said.ID, said.Output[1].ID)
	if _, resp, e := respond(t, ts, decision, hdr("K-said")); resp.StatusCode != http.StatusBadRequest || e.Error.Code != "message_id_reused" {
		t.Fatalf("a decision with the message's key: %d %+v, want 400 message_id_reused", resp.StatusCode, e)
	}
	// The approval with a key of its own still works.
	if done, resp, e := respond(t, ts, decision, hdr("K-other")); resp.StatusCode != http.StatusOK || done.Status != "completed" {
		t.Fatalf("the approval with its own key: %d %+v %+v", resp.StatusCode, done, e)
	}
	var hist struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	call(t, ts, http.MethodGet, "/v1/sessions/S", "", nil, &hist)
	for _, m := range hist.Messages {
		if m.Content == "where is order 4?" {
			t.Fatalf("the refused message ran: %+v", hist.Messages)
		}
	}
}

// A message and an approval decision sent with one Idempotency-Key at
// the same instant never both take effect: whichever takes the session
// first runs, and the other is 400 message_id_reused, checked under the
// session's lock (the check before it sees neither recorded yet).
func TestResponsesKeyOneRequestConcurrent(t *testing.T) {
	ts := newOpenAIServer(t)
	for round := range 10 {
		sid := fmt.Sprintf("C%d", round)
		susp, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 7"}`, map[string]string{server.SessionHeader: sid})
		if resp.StatusCode != http.StatusOK || susp.XArmature.Outcome != "suspended" {
			t.Fatalf("the refund: %d %+v %+v", resp.StatusCode, susp, e)
		}
		hdr := map[string]string{"Idempotency-Key": "K", server.SessionHeader: sid}
		decision := fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
			"approval_request_id": %q, "approve": true}]}`, susp.ID, susp.Output[1].ID)
		var codes [2]string
		var statuses [2]int
		var wg sync.WaitGroup
		for i, body := range []string{decision, `{"model": "demo", "input": "where is order 4?"}`} {
			wg.Go(func() {
				_, resp, e := respond(t, ts, body, hdr)
				statuses[i], codes[i] = resp.StatusCode, e.Error.Code
			})
		}
		wg.Wait()
		reused := 0
		for _, c := range codes {
			if c == "message_id_reused" {
				reused++
			}
		}
		if reused != 1 {
			t.Fatalf("round %d: decision %d %q, message %d %q: want exactly one message_id_reused", round, statuses[0], codes[0], statuses[1], codes[1])
		}
	}
}
