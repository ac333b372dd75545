package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
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
