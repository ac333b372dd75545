package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// vanishingRuns is a run store whose run events are gone (the run was
// deleted with its session) while gone is set: the run itself still
// reads, as between the two reads of a request that races a DELETE.
type vanishingRuns struct {
	runtime.Store
	gone atomic.Bool
}

func (s *vanishingRuns) Events(ctx context.Context, req runtime.EventsRequest) ([]runtime.Event, error) {
	if req.RunID != "" && s.gone.Load() {
		return nil, fmt.Errorf("test: read events of %q: %w", req.RunID, runtime.ErrNotFound)
	}
	return s.Store.Events(ctx, req)
}

// TestResponseDeletedBetweenReads: a response whose session is deleted
// between the read of its run and the read of its events is not found:
// GET /v1/responses/{id} answers 404 and a request that continues it
// (previous_response_id, a message or an approval decision) 404
// previous_response_not_found. Before, each answered 500 internal_error
// ("read events of ...: not found"), found by a decision racing a
// DELETE of its session.
func TestResponseDeletedBetweenReads(t *testing.T) {
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	runs := &vanishingRuns{Store: store.Runs()}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close(context.Background()) })
	ts := newOpenAIServerWith(t, a, func(c *server.Config) {
		c.Agents[0].Chat = servertest.Harness(t, store, a)
		c.Sessions, c.Runs = store, rec
	})
	susp, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 6"}`, nil)
	if resp.StatusCode != http.StatusOK || susp.XArmature.Outcome != "suspended" {
		t.Fatalf("the refund: %d %+v %+v", resp.StatusCode, susp, e)
	}
	runs.gone.Store(true)
	var ge apiError
	if resp := call(t, ts, http.MethodGet, "/v1/responses/"+susp.ID, "", nil, &ge); resp.StatusCode != http.StatusNotFound || ge.Error.Code != server.CodeNotFound {
		t.Errorf("GET of a response deleted between its reads: %d %+v", resp.StatusCode, ge)
	}
	for name, body := range map[string]string{
		"message": fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": "hello"}`, susp.ID),
		"decision": fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
			"approval_request_id": %q, "approve": true}]}`, susp.ID, susp.Output[1].ID),
	} {
		if _, resp, e := respond(t, ts, body, nil); resp.StatusCode != http.StatusNotFound || e.Error.Code != server.CodePreviousResponseNotFound {
			t.Errorf("a %s continuing a response deleted between its reads: %d %+v", name, resp.StatusCode, e)
		}
	}
}
