package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// countedTools are the demo's tools (issue_refund needs approval), each
// call counted by name.
func countedTools(calls map[string]*atomic.Int64) []agent.Tool {
	tools := demo.Tools()
	for i := range tools {
		n, call := new(atomic.Int64), tools[i].Call
		calls[tools[i].Definition.Name] = n
		tools[i].Call = func(ctx context.Context, args json.RawMessage) (string, error) {
			n.Add(1)
			return call(ctx, args)
		}
	}
	return tools
}

// TestDirectToolNeedsApprovalRefused: a tool that needs approval is
// never called through POST /v1/agents/{agent}/tools/{tool}, whether
// direct_tools grants the tenant "*" or names the tool, on an agent
// served as server.Agent with its Gateway and on one built from an
// adapter's agent (server.NewAdapterAgent, the path of every backend):
// 403 approval_required, no run recorded, the tool not run. A tool
// without approval is still called.
func TestDirectToolNeedsApprovalRefused(t *testing.T) {
	calls := map[string]*atomic.Int64{}
	tools := countedTools(calls)
	a, err := agent.New(agent.Config{Provider: demo.Model{}, System: "demo", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	adapted, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: adapter.NewNative(a),
		Agent: &adapter.Agent{ID: "adapted", Model: demo.ModelName, Tools: tools}, Sessions: store, Records: store.Checkpoints()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Sessions: store, Agents: []*server.Agent{
		{ID: "demo", Chat: servertest.Harness(t, store, a), Model: demo.ModelName, Gateway: tools}, adapted},
		Tokens:      []server.Token{{Secret: "ops-secret-0000001", Tenant: "ops"}, {Secret: "named-secret-00001", Tenant: "named"}},
		DirectTools: map[string][]string{"ops": {"*"}, "named": {"lookup_order", "issue_refund"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	post := func(t *testing.T, secret, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+secret)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		raw, _ := io.ReadAll(r.Body)
		return r.StatusCode, raw
	}
	for _, agentID := range []string{"demo", "adapted"} {
		for _, tc := range []struct{ tenant, secret string }{{"ops", "ops-secret-0000001"}, {"named", "named-secret-00001"}} {
			t.Run(agentID+"/"+tc.tenant, func(t *testing.T) {
				session := "gated-" + agentID + "-" + tc.tenant
				status, raw := post(t, tc.secret, "/v1/agents/"+agentID+"/tools/issue_refund",
					`{"arguments":{"order":"1","amount":500},"session_id":"`+session+`"}`)
				var body struct {
					Error struct{ Code, Message string } `json:"error"`
				}
				_ = json.Unmarshal(raw, &body)
				if status != http.StatusForbidden || body.Error.Code != "approval_required" {
					t.Fatalf("issue_refund: status %d, body %s; want 403 approval_required", status, raw)
				}
				if strings.Contains(string(raw), "refunded") {
					t.Errorf("the refusal carries the tool's output: %s", raw)
				}
				if n := calls["issue_refund"].Load(); n != 0 {
					t.Fatalf("issue_refund ran %d times without approval", n)
				}
				runs, err := srv.Runs(context.Background(), runtime.ListRunsRequest{Tenant: tc.tenant, SessionID: session})
				if err != nil || len(runs.Runs) != 0 {
					t.Fatalf("the refused call recorded runs %+v, %v", runs.Runs, err)
				}

				// A tool without approval is still called directly.
				before := calls["lookup_order"].Load()
				status, raw = post(t, tc.secret, "/v1/agents/"+agentID+"/tools/lookup_order", `{"arguments":{"order":"7"}}`)
				if status != http.StatusOK || !strings.Contains(string(raw), "order 7") || calls["lookup_order"].Load() != before+1 {
					t.Fatalf("lookup_order: status %d, body %s", status, raw)
				}
			})
		}
	}
}
