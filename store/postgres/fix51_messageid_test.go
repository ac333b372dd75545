package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/postgres"
)

// A schema at version 8 (before runs.message_id) upgrades in place: its
// runs are kept, without a message id, and listed as before; runs
// started after the upgrade record theirs and are found by prefix
// through runs_message. The version 8 schema is the current one with
// migration 9 undone.
func TestRunsMessageIDMigration(t *testing.T) {
	ctx := t.Context()
	schema, url := pgtest.Schema(t)
	openAt := func() *postgres.Store {
		t.Helper()
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st, err := postgres.Open(octx, postgres.Config{URL: pgtest.URL(), Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := openAt()
	for _, id := range []string{"old-1", "old-2", "old-3"} {
		if err := st.Runs().StartRun(ctx, runtime.Run{ID: id, Tenant: "acme", SessionID: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{
		`DROP INDEX runs_message`,
		`ALTER TABLE runs DROP COLUMN message_id`,
		`DELETE FROM schema_migrations WHERE version = 9`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	st = openAt()
	defer st.Close()
	var version int
	if err := conn.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&version); err != nil || version != 9 {
		t.Fatalf("schema version %d, %v; want 9", version, err)
	}
	var index string
	if err := conn.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'runs_message'`,
		schema).Scan(&index); err != nil {
		t.Fatalf("runs_message: %v", err)
	}
	rs := st.Runs()
	old, err := rs.Run(ctx, "acme", "old-2")
	if err != nil || old.MessageID != "" {
		t.Fatalf("an old run after the upgrade = %+v, %v", old, err)
	}
	for _, id := range []string{"new-1", "new-2"} {
		if err := rs.StartRun(ctx, runtime.Run{ID: id, Tenant: "acme", SessionID: "s", MessageID: "retry-abc-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(req runtime.ListRunsRequest) []string {
		t.Helper()
		resp, err := rs.ListRuns(ctx, req)
		if err != nil {
			t.Fatalf("ListRuns(%+v): %v", req, err)
		}
		var out []string
		for _, r := range resp.Runs {
			out = append(out, r.ID+" "+r.MessageID)
		}
		return out
	}
	if diff := cmp.Diff([]string{"new-2 retry-abc-new-2", "new-1 retry-abc-new-1", "old-3 ", "old-2 ", "old-1 "},
		ids(runtime.ListRunsRequest{Tenant: "acme"})); diff != "" {
		t.Errorf("all runs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"new-2 retry-abc-new-2", "new-1 retry-abc-new-1"},
		ids(runtime.ListRunsRequest{Tenant: "acme", MessageIDPrefix: "retry-abc-"})); diff != "" {
		t.Errorf("by prefix (-want +got):\n%s", diff)
	}
}
