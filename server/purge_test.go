package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// Deleting a session deletes its run records too (their events hold the
// conversation), on the memory and the SQLite run stores: the tenant's
// runs of the session, a run of a session whose only turn left no
// history, and the records of a turn that ended just before (still
// queued for the group commit); not another tenant's session of the
// same id, nor the tenant's other sessions. With KeepRunsOnDelete they
// stay for audit.
func TestDeleteSessionPurgesRuns(t *testing.T) {
	for _, c := range []struct {
		name   string
		sqlite bool
		keep   bool
	}{{"memory", false, false}, {"sqlite", true, false}, {"sqlite/keep", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			store := servertest.SQLite(t)
			var runs runtime.Store = runtime.NewMemoryStore(runtime.MemoryConfig{})
			if c.sqlite {
				runs = store.Runs()
			}
			rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runs})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rec.Close(context.Background()) })
			a, err := demo.New()
			if err != nil {
				t.Fatal(err)
			}
			ts := servertest.On(t, store, a, func(cfg *server.Config) {
				cfg.Tokens = []server.Token{{Secret: secretA, Tenant: "a"}, {Secret: secretB, Tenant: "b"}}
				cfg.Runs, cfg.KeepRunsOnDelete = rec, c.keep
			})
			send := func(secret, session, text string) string {
				t.Helper()
				resp := tenantReq(ctx, t, ts.URL, secret, "POST", "/v1/sessions/"+session+"/messages", `{"content":"`+text+`"}`)
				defer resp.Body.Close()
				var o struct {
					RunID string `json:"run_id"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&o); err != nil || resp.StatusCode != http.StatusOK || o.RunID == "" {
					t.Fatalf("send %s: %d %+v %v", session, resp.StatusCode, o, err)
				}
				return o.RunID
			}
			status := func(secret, method, path string) int {
				t.Helper()
				resp := tenantReq(ctx, t, ts.URL, secret, method, path, "")
				resp.Body.Close()
				return resp.StatusCode
			}
			sessionRuns := func(secret, session string) int {
				t.Helper()
				resp := tenantReq(ctx, t, ts.URL, secret, "GET", "/v1/sessions/"+session+"/runs", "")
				defer resp.Body.Close()
				var page struct {
					Runs []runtime.Run `json:"runs"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
					t.Fatal(err)
				}
				return len(page.Runs)
			}
			first := send(secretA, "s", "where is order 7?")
			last := send(secretA, "s", "hello") // its records may still be queued
			send(secretA, "t", "hello")
			send(secretB, "s", "hello")
			// A turn that left no history (it failed), only its run.
			tr, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "a", SessionID: "ghost", AgentID: "demo"})
			if err != nil {
				t.Fatal(err)
			}
			_ = tr.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "my card number"})
			_ = tr.Fail(tctx, runtime.RunError{Bucket: "b", Category: "c", Message: "m"})

			for _, session := range []string{"s", "ghost"} {
				if st := status(secretA, "DELETE", "/v1/sessions/"+session); st != http.StatusNoContent {
					t.Fatalf("DELETE %s: %d", session, st)
				}
			}
			wantGone := 0
			if c.keep {
				wantGone = 2
			}
			if n := sessionRuns(secretA, "s"); n != wantGone {
				t.Errorf("tenant a's session s has %d runs after its delete, want %d", n, wantGone)
			}
			for _, id := range []string{first, last} {
				want := http.StatusNotFound
				if c.keep {
					want = http.StatusOK
				}
				if st := status(secretA, "GET", "/v1/runs/"+id); st != want {
					t.Errorf("GET /v1/runs/%s after the delete: %d, want %d", id, st, want)
				}
				if st := status(secretA, "GET", "/v1/runs/"+id+"/events"); st != want {
					t.Errorf("GET /v1/runs/%s/events after the delete: %d, want %d", id, st, want)
				}
			}
			if n := sessionRuns(secretA, "ghost"); n != wantGone/2 {
				t.Errorf("the failed turn's session has %d runs after its delete, want %d", n, wantGone/2)
			}
			if n := sessionRuns(secretA, "t"); n != 1 {
				t.Errorf("tenant a's other session has %d runs, want 1", n)
			}
			if n := sessionRuns(secretB, "s"); n != 1 {
				t.Errorf("tenant b's session s has %d runs, want 1 (another tenant's delete)", n)
			}
			if st := status(secretA, "DELETE", "/v1/sessions/s"); st != http.StatusNoContent {
				t.Errorf("DELETE of a deleted session: %d, want 204 (idempotent)", st)
			}
			// The session begins again, with runs of its own.
			send(secretA, "s", "hello again")
			if n := sessionRuns(secretA, "s"); n != 1+wantGone {
				t.Errorf("the session begun again has %d runs, want %d", n, 1+wantGone)
			}
		})
	}
}

// A message sent to one agent while a DELETE of the session waits for
// another agent's turn begins a new session, with its history and its
// run record, on a server of several agents over one store. Before, the
// delete went through each agent's harness in turn, taking and releasing
// the session's lock for each: the message ran in the gap, and the next
// agent's delete (and the purge) deleted its history and run.
func TestDeleteWithSeveralAgents(t *testing.T) {
	ctx := t.Context()
	store := servertest.SQLite(t)
	locker := store.SessionLocker(sqlite.LockerConfig{})
	gate, started := make(chan struct{}), make(chan struct{}, 4)
	gated, err := chat.New(chat.Config{Graph: gatedGraph(t, store, gate, started), Locker: locker})
	if err != nil {
		t.Fatal(err)
	}
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	dg, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	dh, err := chat.New(chat.Config{Graph: dg, Coordinator: harness.NewStoreCoordinator(store.Checkpoints()), Locker: locker})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.Serve(t, server.Config{Agents: []*server.Agent{{ID: "gated", Chat: gated}, {ID: "demo", Chat: dh}}, Sessions: store})
	status := make(chan int, 2)
	var newRun string
	go func() { status <- post(t, ts.URL+"/v1/sessions/s/messages", `{"content":"slow"}`, nil) }()
	<-started
	del := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, ts.URL+"/v1/sessions/s", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			del <- 0
			return
		}
		resp.Body.Close()
		del <- resp.StatusCode
	}()
	time.Sleep(100 * time.Millisecond) // the delete waits for the slow turn
	go func() {
		var o struct {
			Outcome string `json:"outcome"`
			RunID   string `json:"run_id"`
		}
		st := post(t, ts.URL+"/v1/sessions/s/messages", `{"content":"hello","agent":"demo"}`, &o)
		newRun = o.RunID
		if o.Outcome != "completed" {
			st = -st
		}
		status <- st
	}()
	time.Sleep(100 * time.Millisecond) // the new message waits behind the delete
	close(gate)
	if st := <-del; st != http.StatusNoContent {
		t.Fatalf("DELETE: %d", st)
	}
	for range 2 {
		if st := <-status; st != http.StatusOK {
			t.Fatalf("a message: %d", st)
		}
	}
	var sess struct {
		Messages []llm.Message `json:"messages"`
	}
	if st := getJSON(t, ts.URL+"/v1/sessions/s", &sess); st != http.StatusOK || len(sess.Messages) != 2 || sess.Messages[0].Text() != "hello" {
		t.Fatalf("the new session: %d %+v", st, sess.Messages)
	}
	if st := getJSON(t, ts.URL+"/v1/runs/"+newRun, nil); st != http.StatusOK {
		t.Fatalf("the new message's run %s: %d", newRun, st)
	}
}
