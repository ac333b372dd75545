package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/runtime"
)

// TestListRunsPositionsFollowCommitOrder: a run's listing position
// (runs.pos) follows commit order across replicas, as event ids do, so a
// client paging a session's runs newest first (GET
// /v1/sessions/{id}/runs, page_token = the last position seen) never
// misses one: a run that commits during a pass is listed above every run
// the pass listed, found by the next pass from the top.
//
// Before, a group-committed turn (WriteTurns) drew its run's position
// when it inserted the run, then waited for the event lock another
// writer held; a run started meanwhile committed first with a larger
// position, and a pager whose cursor passed between them skipped the
// first run for good (it was below the cursor when it committed).
func TestListRunsPositionsFollowCommitOrder(t *testing.T) {
	ctx := context.Background()
	st := open(t)
	rs := st.Runs()
	mk := func(id string) runtime.Run {
		return runtime.Run{ID: id, Tenant: "t", SessionID: "s", AgentID: "a"}
	}
	for _, id := range []string{"w0", "w1"} {
		if err := rs.StartRun(ctx, mk(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Another writer's event transaction holds the event lock (as any
	// replica's Append / WriteTurns with events does until it commits).
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(0x61726d2d657673)); err != nil {
		t.Fatal(err)
	}
	// Turn x is group-committed, then run y starts on the direct path.
	done := make(chan error, 2)
	go func() {
		x := mk("x")
		_, err := rs.WriteTurns(ctx, []runtime.TurnRecord{{Start: &x, Append: runtime.AppendRequest{Tenant: "t", RunID: "x",
			Events: []runtime.Event{{Type: runtime.EventRequestStarted, Data: json.RawMessage(`{}`)}}}}})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	go func() { done <- rs.StartRun(ctx, mk("y")) }()
	time.Sleep(300 * time.Millisecond)
	// A pass starts: its first page holds two runs.
	page1, err := rs.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "t", SessionID: "s", PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx) // the other writer ends; x and y commit
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, r := range page1.Runs {
		seen[r.ID] = true
	}
	for tok := page1.NextPageToken; tok != ""; {
		p, err := rs.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "t", SessionID: "s", PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Runs {
			seen[r.ID] = true
		}
		tok = p.NextPageToken
	}
	// The next pass, from the top, finds every run the first missed
	// before the first run it listed.
	all, err := rs.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "t", SessionID: "s", PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	known := false
	for _, r := range all.Runs {
		order = append(order, r.ID)
		if seen[r.ID] {
			known = true
		} else if known {
			t.Errorf("run %q is listed below runs the first pass listed: a pager never finds it", r.ID)
		}
	}
	if len(all.Runs) != 4 {
		t.Errorf("the store lists %v, want 4 runs", order)
	}
	t.Logf("first pass %v; the runs, newest first: %v", seen, order)
}
