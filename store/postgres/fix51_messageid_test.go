package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/runtime/runtimetest"
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
	runtimetest.MessageIDUpgraded(t, st.Runs())
}
