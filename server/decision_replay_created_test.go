package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/servertest"
)

// TestDecisionReplayKeepsCreatedAt: a Responses approval decision
// retried with the same Idempotency-Key must answer the first try's
// response, created_at included (GET /v1/responses/{id} says so too).
// Before, the replay answered the retry's own time.
func TestDecisionReplayKeepsCreatedAt(t *testing.T) {
	ts := servertest.NewDemo(t)
	post := func(body, key string) map[string]any {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/responses", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return out
	}
	first := post(`{"model":"demo","input":"refund order 3"}`, "")
	sig := ""
	for _, it := range first["output"].([]any) {
		if m := it.(map[string]any); m["type"] == "mcp_approval_request" {
			sig = m["id"].(string)
		}
	}
	dec := `{"model":"demo","previous_response_id":"` + first["id"].(string) + `","input":[{"type":"mcp_approval_response","approval_request_id":"` + sig + `","approve":true}]}`
	d1 := post(dec, "dk")
	time.Sleep(2100 * time.Millisecond)
	d2 := post(dec, "dk")
	if d1["id"] != d2["id"] {
		t.Fatalf("replay answered another response: %v vs %v", d1["id"], d2["id"])
	}
	if d1["created_at"] != d2["created_at"] {
		t.Errorf("replayed decision: created_at %v, first answer %v", d2["created_at"], d1["created_at"])
	}
}
