package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
)

// longIDModel is the demo model giving every tool call an id of more
// than 300 bytes, as an upstream may.
type longIDModel struct{ demo.Model }

func (m longIDModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp, err := m.Model.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	for i := range resp.Message.ToolCalls {
		resp.Message.ToolCalls[i].ID = "call_" + strings.Repeat("L", 300) + resp.Message.ToolCalls[i].ID
	}
	return resp, nil
}

// A tool call whose upstream id is longer than a signal id may be can
// still be approved by the id the runtime hands out, on every surface:
// the runtime keeps such a call under a short id of its own. Before,
// the turn suspended on a signal id of 314 bytes that the REST signal
// and the Responses approval both refused (at most 256 bytes).
func TestLongUpstreamCallIDCanBeApproved(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: longIDModel{}, System: "demo", Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)

	t.Run("rest", func(t *testing.T) {
		var sus struct {
			Outcome string `json:"outcome"`
			Signal  struct {
				SignalID string `json:"signal_id"`
			} `json:"signal"`
		}
		call(t, ts, http.MethodPost, "/v1/sessions/long/messages", `{"content":"please refund order 7"}`, nil, &sus)
		if sus.Outcome != "suspended" || len(sus.Signal.SignalID) > 256 || !strings.HasPrefix(sus.Signal.SignalID, agent.SignalPrefix) {
			t.Fatalf("the refund: %+v (a signal id of %d bytes)", sus, len(sus.Signal.SignalID))
		}
		var done struct {
			Outcome string `json:"outcome"`
			Replies []struct {
				Content string `json:"content"`
			} `json:"replies"`
		}
		body := fmt.Sprintf(`{"signal_id":%q,"payload":{"approval":{"approved":true}}}`, sus.Signal.SignalID)
		if resp := call(t, ts, http.MethodPost, "/v1/sessions/long/signals", body, nil, &done); resp.StatusCode != 200 || done.Outcome != "completed" ||
			!strings.Contains(fmt.Sprint(done.Replies), "refunded $30.00 for order 7") {
			t.Fatalf("the approval by its signal id: %d %+v", resp.StatusCode, done)
		}
	})

	t.Run("responses", func(t *testing.T) {
		susp, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 7"}`, nil)
		if resp.StatusCode != http.StatusOK || susp.XArmature.Outcome != "suspended" || len(susp.Output) != 2 {
			t.Fatalf("%d %+v %+v", resp.StatusCode, e, susp)
		}
		ar := susp.Output[1]
		if len(ar.ID) > 256 {
			t.Fatalf("approval_request_id of %d bytes", len(ar.ID))
		}
		body := fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
			"approval_request_id": %q, "approve": true}]}`, susp.ID, ar.ID)
		done, resp, e := respond(t, ts, body, nil)
		if resp.StatusCode != http.StatusOK || done.XArmature.Outcome != "completed" {
			t.Fatalf("the approval: %d %+v %+v", resp.StatusCode, e, done)
		}
		if all := fmt.Sprintf("%s %v", done.text(), deref(done.Output[0].Output)); !strings.Contains(all, "refunded $30.00 for order 7") {
			t.Fatalf("resumed output %q", all)
		}
	})
}
