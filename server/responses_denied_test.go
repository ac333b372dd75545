package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// TestResponsesStreamedDenial: a streamed mcp_approval_response that
// denies the call streams the failed mcp_call item at the index the
// final response (and a later GET) gives it, failed in each.
func TestResponsesStreamedDenial(t *testing.T) {
	ts := newOpenAIServer(t)
	susp, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 7"}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
	ar := susp.Output[1]
	body := fmt.Sprintf(`{"model": "demo", "stream": true, "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
		"approval_request_id": %q, "approve": false, "reason": "no"}]}`, susp.ID, ar.ID)
	evs := readRespSSE(t, postStream(t, ts, body))
	raw, _ := json.Marshal(evs[len(evs)-1].data["response"])
	var final responseObj
	if err := json.Unmarshal(raw, &final); err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.name != "response.output_item.done" {
			continue
		}
		i := int(ev.data["output_index"].(float64))
		it := ev.data["item"].(map[string]any)
		if i >= len(final.Output) || final.Output[i].ID != it["id"] || final.Output[i].Status != it["status"] {
			t.Errorf("streamed item %d %v; final output %+v", i, it, final.Output)
		}
	}
	var got responseObj
	call(t, ts, http.MethodGet, "/v1/responses/"+final.ID, "", nil, &got)
	if len(got.Output) != len(final.Output) {
		t.Fatalf("GET %+v, final %+v", got.Output, final.Output)
	}
	for i := range got.Output {
		if got.Output[i].ID != final.Output[i].ID || got.Output[i].Status != final.Output[i].Status {
			t.Errorf("item %d: GET %+v, streamed final %+v", i, got.Output[i], final.Output[i])
		}
	}
	t.Logf("final kinds %s; statuses %v", final.kinds(), []string{final.Output[0].Status})
}

// TestResponsesDenialPostAndGet: the POST answering a denial and a GET
// of the same response agree on the denied call's status.
func TestResponsesDenialPostAndGet(t *testing.T) {
	ts := newOpenAIServer(t)
	susp, _, _ := respond(t, ts, `{"model": "demo", "input": "refund order 7"}`, nil)
	body := fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
		"approval_request_id": %q, "approve": false, "reason": "no"}]}`, susp.ID, susp.Output[1].ID)
	done, resp, e := respond(t, ts, body, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
	var got responseObj
	call(t, ts, http.MethodGet, "/v1/responses/"+done.ID, "", nil, &got)
	if got.Output[0].Status != done.Output[0].Status {
		t.Errorf("denied call: POST status %q, GET status %q", done.Output[0].Status, got.Output[0].Status)
	}
}
