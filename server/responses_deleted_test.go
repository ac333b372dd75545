package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
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

// TestGetResponseAfterMarkRetention: GET /v1/responses/{id} answers a
// stored response for as long as its run record is kept, also once the
// outcome its turn recorded with the session write has expired
// (sqlite.Config.MarkRetention, 24 hours by default; 1 ms here): the
// run record holds the replies, and a suspended run's events its
// approval request. Before, such a response was 404 a day after it was
// made, though previous_response_id still continued it.
func TestGetResponseAfterMarkRetention(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db"), MarkRetention: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(ctx) })
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.On(t, store, a, func(c *server.Config) {
		c.Agents[0].Tools = []string{"lookup_order", "issue_refund"}
		c.Tokens = []server.Token{{Secret: oaiToken, Tenant: "acme"}}
	})
	for _, input := range []string{"where is order 4?", "refund order 6"} {
		made, resp, e := respond(t, ts, fmt.Sprintf(`{"model": "demo", "input": %q}`, input), nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: %d %+v", input, resp.StatusCode, e)
		}
		time.Sleep(5 * time.Millisecond) // past the marks' retention
		var got responseObj
		if resp := call(t, ts, http.MethodGet, "/v1/responses/"+made.ID, "", nil, &got); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %q's response once its marks expired: %d", input, resp.StatusCode)
		}
		if got.ID != made.ID || got.Status != made.Status || got.kinds() != made.kinds() || got.text() != made.text() ||
			got.XArmature.Outcome != made.XArmature.Outcome || got.XArmature.SessionID != made.XArmature.SessionID {
			t.Fatalf("GET %q's response: %+v\nwant as made: %+v", input, got, made)
		}
		if made.XArmature.Outcome == "suspended" && (len(got.Output) != 2 || got.Output[1].ID != made.Output[1].ID) {
			t.Fatalf("the approval request: %+v, want %+v", got.Output, made.Output)
		}
	}
}

// TestPreviousResponseFailedFirst: a failed first response of a session
// left no trace of its turn, and the client's next message begins the
// session; previous_response_id naming the failed response still
// continues it. (Its session began after it ended, which for a response
// that wrote its session means a later conversation.)
func TestPreviousResponseFailedFirst(t *testing.T) {
	p := llmtest.New(llmtest.Fail(errcat.Wrap(errcat.ProviderUnavailable, "upstream", errors.New("503 from the model"))),
		llmtest.Reply("Hello."), llmtest.Reply("Hello again."))
	a, err := agent.New(agent.Config{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	hdr := map[string]string{server.SessionHeader: "F"}
	if _, resp, _ := respond(t, ts, `{"model": "demo", "input": "hi"}`, hdr); resp.StatusCode == http.StatusOK {
		t.Fatal("the first response did not fail")
	}
	var runs struct {
		Runs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"runs"`
	}
	call(t, ts, http.MethodGet, "/v1/sessions/F/runs", "", nil, &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].Status != "failed" {
		t.Fatalf("the session's runs: %+v", runs)
	}
	if _, resp, e := respond(t, ts, `{"model": "demo", "input": "hi again"}`, hdr); resp.StatusCode != http.StatusOK {
		t.Fatalf("the next message: %d %+v", resp.StatusCode, e)
	}
	body := fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": "and now?"}`, runs.Runs[0].ID)
	if _, resp, e := respond(t, ts, body, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("continuing the failed response: %d %+v", resp.StatusCode, e)
	}
}
