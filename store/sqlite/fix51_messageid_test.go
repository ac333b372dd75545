package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/runtime/runtimetest"
	"github.com/armature-go/armature/store/sqlite"
)

// A file at schema version 10 (before runs.message_id) upgrades in
// place: its runs are kept, without a message id, and listed as before;
// runs started after the upgrade record theirs and are found by prefix
// through runs_message.
func TestRunsMessageIDMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	if err := sqlite.MigrateFileTo(ctx, path, 10); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for i, id := range []string{"old-1", "old-2", "old-3"} {
		exec(t, db, `INSERT INTO runs (pos, tenant, id, session_id, agent_id, parent_id, correlation_id, invocation_id,
			status, last_seq, started_at, ended_at, conversation_id) VALUES (?, 'acme', ?, 's', 'a', '', '', '', 'completed', 0, ?, ?, '')`,
			i+1, id, 1000+i, 2000+i)
	}

	s, _ := openStore(t, sqlite.Config{Path: path})
	rs := s.Runs()
	var version int64
	if err := db.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&version); err != nil || version != 11 {
		t.Fatalf("schema version %d, %v; want 11", version, err)
	}
	var index string
	if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = 'runs_message'`).Scan(&index); err != nil ||
		!strings.Contains(index, "(tenant, message_id, pos)") {
		t.Fatalf("runs_message: %q, %v", index, err)
	}
	if old, err := rs.Run(ctx, "acme", "old-2"); err != nil || old.Status != runtime.StatusCompleted {
		t.Fatalf("an old run after the upgrade = %+v, %v", old, err)
	}
	runtimetest.MessageIDUpgraded(t, rs)
}
