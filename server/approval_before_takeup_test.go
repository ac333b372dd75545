package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// blipLocker is the store's session locker, except that while
// fail is set its Lock (and TryLock) fail as a store that cannot be
// reached (a PostgreSQL connection reset while taking a replica's lock).
type blipLocker struct {
	l    *sqlite.Locker
	fail atomic.Bool
}

func (b *blipLocker) Lock(ctx context.Context, id string) (func(), error) {
	if b.fail.Load() {
		return nil, fmt.Errorf("lock: %w", session.ErrUnavailable)
	}
	return b.l.Lock(ctx, id)
}

// TestLockFailureBeforeTakeUpIsNotFinal: an approval sent through
// the Responses API whose session lock cannot be taken (the store is
// unreachable for a moment) resumed nothing: the paused record is
// intact, and the same approval sent again resumes the turn. The answer
// must be the retryable 503 session_store_unavailable. It is a final
// 503 (X-Should-Retry: false) that says "Your decision took effect, but
// the turn failed after it ... The decision cannot be given again", so
// the SDK does not retry and the user is told a refund that never ran
// ran (resumedSomething counts any category but the refusals as
// resumed).
func TestLockFailureBeforeTakeUpIsNotFinal(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: demo.Model{}, System: "demo", Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	locker := &blipLocker{l: store.SessionLocker(sqlite.LockerConfig{})}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints()), Locker: locker})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.Serve(t, server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h}}, Sessions: store,
		Tokens: []server.Token{{Secret: oaiToken, Tenant: "acme"}}})
	susp, resp, e := respond(t, ts, `{"model": "demo", "input": "please refund order 7"}`, nil)
	if resp.StatusCode != http.StatusOK || susp.XArmature.Outcome != "suspended" {
		t.Fatalf("the refund: %d %+v %+v", resp.StatusCode, susp, e)
	}
	approval := ""
	for _, o := range susp.Output {
		if o.Type == "mcp_approval_request" {
			approval = o.ID
		}
	}
	body := fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
		"approval_request_id": %q, "approve": true}]}`, susp.ID, approval)
	locker.fail.Store(true)
	_, resp, e = respond(t, ts, body, nil)
	locker.fail.Store(false)
	first := fmt.Sprintf("%d (X-Should-Retry %q, Retry-After %q) %+v", resp.StatusCode, resp.Header.Get(server.ShouldRetryHeader), resp.Header.Get("Retry-After"), e)
	t.Logf("during the blip: %s", first)
	again, resp2, e2 := respond(t, ts, body, nil)
	t.Logf("sent again: %d %s %+v", resp2.StatusCode, again.XArmature.Outcome, e2)
	if resp2.StatusCode != http.StatusOK || again.XArmature.Outcome != "completed" {
		t.Fatalf("the same approval after the blip did not resume: %d %+v (no defect: the blip used the suspension up)", resp2.StatusCode, e2)
	}
	if resp.Header.Get(server.ShouldRetryHeader) == "false" {
		t.Fatalf("the lock could not be taken, nothing ran and the same approval then resumed the turn, yet the first answer was final: %s", first)
	}
}
