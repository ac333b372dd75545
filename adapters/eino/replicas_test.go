package eino_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/postgres"
)

// TestReplicasApproveOnce: three replicas (each its own store
// connection, Eino engine and server) on one PostgreSQL database, Eino's
// checkpoints in it too, all started at once. An approval sent to all
// three at once resumes the turn on exactly one: the tool runs once, the
// others fail with harness_signal_correlation_failed, and no checkpoint
// is left; a session deleted on one replica loses the checkpoint of a
// suspension another replica created.
func TestReplicasApproveOnce(t *testing.T) {
	url, table := postgresTable(t)
	ctx := context.Background()
	schema := table // a fresh name for Armature's tables too
	t.Cleanup(func() {
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	type replica struct {
		srv *server.Server
	}
	replicas := make([]replica, 3)
	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	for i := range replicas {
		wg.Go(func() {
			st, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: schema})
			if err != nil {
				errs[i] = err
				return
			}
			t.Cleanup(st.Close)
			cps, err := eino.NewPostgresStore(ctx, url, table)
			if err != nil {
				errs[i] = err
				return
			}
			t.Cleanup(func() { _ = cps.Close() })
			e, err := eino.NewEngine(ctx, eino.Config{Tools: adaptertest.Tools(), Store: cps, Model: eino.NewProviderModel(adaptertest.NewModel())})
			if err != nil {
				errs[i] = err
				return
			}
			ag := &adapter.Agent{ID: "agent", Backend: eino.Name, Tools: adaptertest.Tools()}
			served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: &eino.Adapter{Engine: e}, Agent: ag, Sessions: st,
				Records: st.Checkpoints(), Locker: st.SessionLocker(postgres.LockerConfig{})})
			if err != nil {
				errs[i] = err
				return
			}
			rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: st.Runs()})
			if err != nil {
				errs[i] = err
				return
			}
			srv, err := server.New(server.Config{Agents: []*server.Agent{served}, Sessions: st, Runs: rec})
			if err != nil {
				errs[i] = err
				return
			}
			t.Cleanup(func() { _ = srv.Stop(ctx); _ = rec.Close(ctx) })
			replicas[i] = replica{srv}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("a replica did not start: %v", err)
		}
	}
	checkpoints := func() int {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	view := httptest.NewServer(replicas[2].srv.Handler())
	defer view.Close()
	for round := range 5 {
		id := "s" + string(rune('0'+round))
		resp, err := replicas[round%3].srv.Submit(ctx, adapter.SubmitRequest{SessionID: id, Message: llm.UserText("please refund order 7")})
		if err != nil {
			t.Fatal(err)
		}
		s, ok := resp.Outcome.(*chat.Suspended)
		if !ok {
			t.Fatalf("round %d: %#v", round, resp.Outcome)
		}
		outs := make([]*adapter.Response, len(replicas))
		for i, r := range replicas {
			wg.Go(func() {
				outs[i], errs[i] = r.srv.Submit(ctx, adapter.SubmitRequest{SessionID: id,
					Signal: &adapter.Signal{SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")}})
			})
		}
		wg.Wait()
		won := 0
		for i, o := range outs {
			switch {
			case errs[i] != nil:
				t.Fatalf("round %d, replica %d: %v", round, i, errs[i])
			case isCompleted(o.Outcome):
				won++
			case !isCategory(o.Outcome, "harness_signal_correlation_failed"):
				t.Fatalf("round %d, replica %d: %#v", round, i, o.Outcome)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d replicas resumed the approval", round, won)
		}
		var sess struct {
			Messages []llm.Message `json:"messages"`
		}
		res, err := http.Get(view.URL + "/v1/sessions/" + id)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(res.Body).Decode(&sess)
		res.Body.Close()
		tools := 0
		for _, m := range sess.Messages {
			if m.Role == llm.RoleTool {
				tools++
			}
		}
		if err != nil || tools != 1 {
			t.Fatalf("round %d: %d tool results in the history (%v)", round, tools, err)
		}
	}
	if n := checkpoints(); n != 0 {
		t.Fatalf("%d checkpoints left after the approvals", n)
	}
	// A suspension created on one replica, its session deleted on another.
	if resp, err := replicas[0].srv.Submit(ctx, adapter.SubmitRequest{SessionID: "gone", Message: llm.UserText("please refund order 8")}); err != nil || !isSuspended(resp.Outcome) {
		t.Fatalf("refund: %v %#v", err, resp)
	}
	if n := checkpoints(); n != 1 {
		t.Fatalf("%d checkpoints for one suspension", n)
	}
	ts := httptest.NewServer(replicas[1].srv.Handler())
	defer ts.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, ts.URL+"/v1/sessions/gone", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("delete on another replica: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	if n := checkpoints(); n != 0 {
		t.Fatalf("%d checkpoints left after the session's delete", n)
	}
}

func isCompleted(o chat.Outcome) bool { _, ok := o.(*chat.Completed); return ok }

func isSuspended(o chat.Outcome) bool { _, ok := o.(*chat.Suspended); return ok }

// isCategory reports whether o errored in the category named cat.
func isCategory(o chat.Outcome, cat string) bool {
	e, ok := o.(*chat.Errored)
	return ok && errcat.Of(e.Err).String() == cat
}
