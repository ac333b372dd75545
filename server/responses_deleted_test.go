package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/server"
)

// TestPreviousResponseOfDeletedSession: a previous_response_id whose
// session was deleted is 404 previous_response_not_found, also when its
// run records outlived the delete (--keep-runs-on-delete here; a crash
// between the delete and the purge of its runs leaves the same) and
// when the session id already holds a new conversation: the stale
// response neither continues nor supersedes it, and the new
// conversation's approval still works. Before, the continuation ran in
// the new conversation and closed its pending approval.
func TestPreviousResponseOfDeletedSession(t *testing.T) {
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a, func(c *server.Config) { c.KeepRunsOnDelete = true })
	hdr := map[string]string{server.SessionHeader: "S"}
	old, resp, e := respond(t, ts, `{"model": "demo", "input": "where is order 1?"}`, hdr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the first response: %d %+v", resp.StatusCode, e)
	}
	if resp := call(t, ts, http.MethodDelete, "/v1/sessions/S", "", nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	cont := func(prev string) (*http.Response, apiError) {
		_, resp, e := respond(t, ts, fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": "where is order 9?"}`, prev), nil)
		return resp, e
	}
	// The session is gone: nothing to continue.
	if resp, e := cont(old.ID); resp.StatusCode != http.StatusNotFound || e.Error.Code != server.CodePreviousResponseNotFound {
		t.Fatalf("continuing a deleted session's response: %d %+v", resp.StatusCode, e)
	}
	// A new conversation under the same id, awaiting an approval.
	susp, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 6"}`, hdr)
	if resp.StatusCode != http.StatusOK || susp.XArmature.Outcome != "suspended" {
		t.Fatalf("the new conversation's refund: %d %+v %+v", resp.StatusCode, susp, e)
	}
	if resp, e := cont(old.ID); resp.StatusCode != http.StatusNotFound || e.Error.Code != server.CodePreviousResponseNotFound {
		t.Fatalf("continuing the old conversation's response in the new one: %d %+v", resp.StatusCode, e)
	}
	approved, resp, e := respond(t, ts, fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
		"approval_request_id": %q, "approve": true}]}`, susp.ID, susp.Output[1].ID), nil)
	if resp.StatusCode != http.StatusOK || approved.Status != "completed" {
		t.Fatalf("the new conversation's approval: %d %+v %+v", resp.StatusCode, approved, e)
	}
	if resp, e := cont(approved.ID); resp.StatusCode != http.StatusOK {
		t.Fatalf("continuing the new conversation: %d %+v", resp.StatusCode, e)
	}
}
