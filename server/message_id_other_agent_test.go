package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// TestRESTMessageIDOtherAgent: a REST message_id names one request, its
// agent included, as the OpenAI Idempotency-Key does with its model. The
// same id and message sent to another agent of the workspace is refused
// as the id with another message is (errored, message_id_reused) and
// runs nothing: never answered with the other agent's turn. The id's own retransmission is still answered.
func TestRESTMessageIDOtherAgent(t *testing.T) {
	store := servertest.SQLite(t)
	fake, other := &namedModel{name: "fake"}, &namedModel{name: "demo"}
	agents := namedAgents(t, store, fake, other)
	ts := servertest.Serve(t, server.Config{Agents: agents, Sessions: store,
		Tokens: []server.Token{{Secret: oaiToken, Tenant: "acme"}}})
	post := func(agentID, content string) (int, string) {
		t.Helper()
		body := fmt.Sprintf(`{"agent":%q,"content":%q,"message_id":"m-1"}`, agentID, content)
		req, _ := http.NewRequest("POST", ts.URL+"/v1/sessions/s1/messages", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+oaiToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	if status, raw := post("fake", "hello"); status != http.StatusOK || !strings.Contains(raw, "Answer from fake.") {
		t.Fatalf("first request: %d %s", status, raw)
	}
	calls := fake.calls.Load() + other.calls.Load()
	category := func(raw string) string {
		var o struct {
			Outcome string `json:"outcome"`
			Error   struct {
				Category string `json:"category"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(raw), &o)
		return o.Outcome + " " + o.Error.Category
	}
	wantStatus, wantRaw := post("fake", "something else")
	if category(wantRaw) != "errored message_id_reused" {
		t.Fatalf("the id with another message: %d %s", wantStatus, wantRaw)
	}
	status, raw := post("demo", "hello")
	if status != wantStatus || category(raw) != "errored message_id_reused" || !strings.Contains(raw, "another agent") {
		t.Errorf("the id with another agent: %d %s, want as the id with another message (%d), naming the other agent", status, raw, wantStatus)
	}
	if strings.Contains(raw, "Answer from") {
		t.Errorf("the id with another agent was answered with a turn's text: %s", raw)
	}
	if n := fake.calls.Load() + other.calls.Load(); n != calls {
		t.Errorf("model calls for the refused request: %d", n-calls)
	}
	if status, raw := post("fake", "hello"); status != http.StatusOK || !strings.Contains(raw, "Answer from fake.") {
		t.Errorf("the retransmission: %d %s", status, raw)
	}
}

// TestOpenHarnessRequestIDOtherAgent: an OpenHarness request_id sent
// again with the same intent to another agent (task_hint
// dev.armature.agent) is refused, code message_id_reused, and runs
// nothing; the request_id's own retransmission is still answered.
func TestOpenHarnessRequestIDOtherAgent(t *testing.T) {
	store := servertest.SQLite(t)
	fake, other := &namedModel{name: "fake"}, &namedModel{name: "demo"}
	agents := namedAgents(t, store, fake, other)
	// Two servers on the same store (two replicas, or one restarted):
	// the second has no memory of the request, the store answers.
	serve := func() *httptest.Server {
		rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rec.Close(context.Background()) })
		return servertest.Serve(t, server.Config{Agents: agents, Sessions: store, Runs: rec,
			Tokens: []server.Token{{Secret: oaiToken, Tenant: "acme"}}})
	}
	ts, ts2 := serve(), serve()
	post := func(url, agentID string) string {
		t.Helper()
		body := fmt.Sprintf(`{"protocol_version":"1.0.0","request_id":"r-1","session_id":"s1","request":{"context":{"user_intent":"hello","task_hint":{"dev.armature.agent":%q}}}}`, agentID)
		req, _ := http.NewRequest("POST", url+"/v1/openharness", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+oaiToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return string(raw)
	}
	if raw := post(ts.URL, "fake"); !strings.Contains(raw, "Answer from fake.") {
		t.Fatalf("first request: %s", raw)
	}
	calls := fake.calls.Load() + other.calls.Load()
	for _, url := range []string{ts.URL, ts2.URL} {
		if raw := post(url, "demo"); !strings.Contains(raw, `"code":"message_id_reused"`) || strings.Contains(raw, "Answer from") {
			t.Errorf("the request_id with another agent: %s, want code message_id_reused", raw)
		}
	}
	if n := fake.calls.Load() + other.calls.Load(); n != calls {
		t.Errorf("model calls for the refused request: %d", n-calls)
	}
	if raw := post(ts2.URL, "fake"); !strings.Contains(raw, "Answer from fake.") {
		t.Errorf("the retransmission: %s", raw)
	}
}

// TestRESTSignalRequestIDOtherAgent: a REST signal's request_id names
// one request, its agent included: the decision's request_id sent again
// naming another agent is refused (errored, message_id_reused), never
// answered with the first agent's resumed turn; sent again naming the
// same agent, or none, it is answered by the recorded outcome.
func TestRESTSignalRequestIDOtherAgent(t *testing.T) {
	store := servertest.SQLite(t)
	refunds, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	other, err := agent.New(agent.Config{Provider: &namedModel{name: "other"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.Serve(t, server.Config{Sessions: store, Agents: []*server.Agent{
		{ID: "demo", Chat: servertest.Harness(t, store, refunds)}, {ID: "other", Chat: servertest.Harness(t, store, other)}}})
	signalID := refundAwaitingApproval(t, ts.URL, "s1")
	type outcome struct {
		Outcome string `json:"outcome"`
		Error   struct {
			Category string `json:"category"`
		} `json:"error"`
		Replayed bool `json:"replayed"`
	}
	signal := func(agentID string) outcome {
		t.Helper()
		var out outcome
		post(t, ts.URL+"/v1/sessions/s1/signals", `{"signal_id":"`+signalID+`","request_id":"d-1","agent":"`+agentID+`","payload":{"approval":{"approved":true}}}`, &out)
		return out
	}
	if out := signal("demo"); out.Outcome != "completed" {
		t.Fatalf("the approval: %+v", out)
	}
	if out := signal("other"); out.Outcome != "errored" || out.Error.Category != "message_id_reused" {
		t.Errorf("the approval's request_id naming another agent: %+v, want errored message_id_reused", out)
	}
	for _, agentID := range []string{"demo", ""} {
		if out := signal(agentID); out.Outcome != "completed" || !out.Replayed {
			t.Errorf("the approval sent again naming %q: %+v, want the recorded outcome", agentID, out)
		}
	}
}

// namedAgents is one agent per model, each named after its model, on
// store.
func namedAgents(t *testing.T, store *sqlite.Store, models ...*namedModel) []*server.Agent {
	t.Helper()
	var agents []*server.Agent
	for _, m := range models {
		a, err := agent.New(agent.Config{Provider: m})
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, &server.Agent{ID: m.name, Chat: servertest.Harness(t, store, a)})
	}
	return agents
}
