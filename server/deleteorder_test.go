package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// runsAtDelete is a session store that, when a session is deleted,
// counts the session's run records still stored: what a process killed
// right after the history's delete would leave.
type runsAtDelete struct {
	*sqlite.Store
	left []int
}

func (s *runsAtDelete) Delete(ctx context.Context, sessionID string) error {
	resp, err := s.Runs().ListRuns(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: sessionID[len(server.DefaultTenant)+1:]})
	if err != nil {
		return err
	}
	s.left = append(s.left, len(resp.Runs))
	return s.Store.Delete(ctx, sessionID)
}

// TestDeleteHistoryGoesLast: a DELETE removes the session's run records
// before its history, so a process killed in between leaves a session
// that still exists (its delete visibly did not finish, and is done
// again), never a deleted session whose runs and events stay readable
// and are listed with a new conversation begun under its id. Before,
// the history went first, and a crash right after left all of the
// conversation's runs and events (found by killing the server 4-14 ms
// after a DELETE).
func TestDeleteHistoryGoesLast(t *testing.T) {
	ctx := context.Background()
	store := servertest.SQLite(t)
	sessions := &runsAtDelete{Store: store}
	a := mustDemo(t)
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: sessions}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints()), Locker: store.SessionLocker(sqlite.LockerConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "x", Chat: h}}, Sessions: store, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); _ = srv.Stop(ctx); _ = rec.Close(ctx) })
	for _, msg := range []string{"where is order 7?", "hello"} {
		if st := post(t, hs.URL+"/v1/sessions/s/messages", `{"content":"`+msg+`"}`, nil); st != http.StatusOK {
			t.Fatalf("%q: %d", msg, st)
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodDelete, hs.URL+"/v1/sessions/s", nil)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if len(sessions.left) != 1 || sessions.left[0] != 0 {
		t.Fatalf("run records stored when the history was deleted: %v, want none", sessions.left)
	}
}
