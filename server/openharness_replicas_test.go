package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/sqlite"
)

// newOHReplicas serves two servers on one SQLite store, each with its
// own chat harness (and graph session cache), run recorder and
// OpenHarness caches: two replicas of armature serve on one database.
func newOHReplicas(t *testing.T) (a, b *ohEnv) {
	t.Helper()
	ohRefDir(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "armature.db")
	store, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	replica := func() *ohEnv {
		ag, err := demo.New()
		if err != nil {
			t.Fatal(err)
		}
		g, err := ag.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints()),
			Locker: store.SessionLocker(sqlite.LockerConfig{})})
		if err != nil {
			t.Fatal(err)
		}
		runs, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { runs.Close(context.Background()) })
		srv, err := New(Config{Agents: []*Agent{{ID: "demo", Chat: h, Model: demo.ModelName}}, Sessions: store, Runs: runs})
		if err != nil {
			t.Fatal(err)
		}
		return &ohEnv{srv: srv, h: srv.Handler(), store: store, path: path}
	}
	return replica(), replica()
}

// do sends a request without a body and returns its status.
func (e *ohEnv) do(t *testing.T, method, path string) int {
	t.Helper()
	req := httptest.NewRequest(method, "http://localhost"+path, nil)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec.Code
}

// TestOpenHarnessRequestIDAfterDelete: a request_id's answer is the
// store's on every replica, and nothing of a deleted session is served
// from a replica's memory. A request answered on replica A, its
// session then deleted on replica B: the retransmission to A runs the
// turn again (as REST message_id and the OpenAI Idempotency-Key do, the
// record being gone), in a new session, and from then on both replicas
// answer that new run, replayed. A delete on the replica that remembers
// the answer is honoured too.
func TestOpenHarnessRequestIDAfterDelete(t *testing.T) {
	a, b := newOHReplicas(t)
	body := ohBody("req-del-1", `{"user_intent": "What is my order status?"}`)

	first := a.post(t, body)
	x1 := first.ext(t)
	if first.msg.Response.Status != "success" || x1.RunID == "" {
		t.Fatalf("first answer: %s", first.raw)
	}
	if again := a.post(t, body); again.header.Get("Idempotent-Replayed") != "true" || again.ext(t).RunID != x1.RunID {
		t.Fatalf("a retransmission before the delete: %s", again.raw)
	}
	if code := b.do(t, http.MethodDelete, "/v1/sessions/"+x1.SessionID); code != http.StatusNoContent {
		t.Fatalf("delete on replica B: %d", code)
	}
	if code := a.do(t, http.MethodGet, "/v1/sessions/"+x1.SessionID); code != http.StatusNotFound {
		t.Fatalf("the deleted session: %d", code)
	}
	turns := a.turns(t) + b.turns(t)

	// Replica A remembers the first answer: it must not serve it.
	rerun := a.post(t, body)
	x2 := rerun.ext(t)
	if rerun.header.Get("Idempotent-Replayed") == "true" || x2.Replayed || x2.RunID == x1.RunID {
		t.Fatalf("replica A answered the deleted conversation from memory: %s", rerun.raw)
	}
	if n := a.turns(t) + b.turns(t); n != turns+1 {
		t.Fatalf("turns run for the retransmission after the delete: %d, want 1", n-turns)
	}
	// Both replicas now answer the new run, replayed, and run nothing.
	for name, e := range map[string]*ohEnv{"A": a, "B": b} {
		r := e.post(t, body)
		if r.header.Get("Idempotent-Replayed") != "true" || r.ext(t).RunID != x2.RunID {
			t.Errorf("replica %s answered %s, want the replayed run %s", name, r.raw, x2.RunID)
		}
	}
	if n := a.turns(t) + b.turns(t); n != turns+1 {
		t.Fatalf("turns run by the retransmissions: %d, want none", n-turns-1)
	}

	// A delete on the replica that remembers the answer.
	if code := a.do(t, http.MethodDelete, "/v1/sessions/"+x2.SessionID); code != http.StatusNoContent {
		t.Fatalf("delete on replica A: %d", code)
	}
	r := a.post(t, body)
	if r.header.Get("Idempotent-Replayed") == "true" || r.ext(t).RunID == x2.RunID {
		t.Fatalf("replica A answered the session it deleted from memory: %s", r.raw)
	}
}

// TestOpenHarnessSpentTokenAfterDelete: a spent continuation token is
// answered from a replica's memory only while its session lives: once
// the session is deleted on another replica, the token's retransmission
// (under its request_id, or under another) is answered as the store
// answers it, on either replica alike, and never with the deleted
// conversation's resumed turn.
func TestOpenHarnessSpentTokenAfterDelete(t *testing.T) {
	a, b := newOHReplicas(t)
	s := a.post(t, ohBody("", `{"user_intent": "refund order 9"}`))
	x := s.ext(t)
	cont := x.Continuation
	if cont == nil {
		t.Fatalf("no suspension: %s", s.raw)
	}
	resumed := a.post(t, ohDecide("tok-1", x.SessionID, cont.RunID, cont.ContinuationToken, "approve"))
	if resumed.ext(t).Outcome != "completed" {
		t.Fatalf("the resume: %s", resumed.raw)
	}
	if again := a.post(t, ohDecide("tok-2", "", cont.RunID, cont.ContinuationToken, "approve")); again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the spent token before the delete: %s", again.raw)
	}
	if code := b.do(t, http.MethodDelete, "/v1/sessions/"+x.SessionID); code != http.StatusNoContent {
		t.Fatalf("delete on replica B: %d", code)
	}
	for _, rid := range []string{"tok-1", "tok-3"} {
		for name, e := range map[string]*ohEnv{"A": a, "B": b} {
			r := e.post(t, ohDecide(rid, x.SessionID, cont.RunID, cont.ContinuationToken, "approve"))
			if r.header.Get("Idempotent-Replayed") == "true" || r.msg.Response.Status == "success" {
				t.Errorf("replica %s, request_id %s: the deleted session's resumed turn was answered: %s", name, rid, r.raw)
			}
		}
	}
}
