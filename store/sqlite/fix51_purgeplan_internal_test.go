package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/runtime"
)

// TestPurgeSessionPlan checks that a session purge searches the chunks
// of the session, not of its tenant, on a database without statistics
// (a new one, or one whose process never closed it): reading every
// chunk of the tenant made each delete take time in proportion to the
// tenant's history, holding the writer.
func TestPurgeSessionPlan(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "armature.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.writer.ExecContext(ctx, `DROP TABLE IF EXISTS sqlite_stat1`); err != nil {
		t.Fatal(err)
	}
	q := `SELECT (SELECT coalesce(sum(c.n), 0) FROM run_event_chunks c ` + purgeChunksSQL + `)`
	text := queryPlan(t, s.writer, q, "acme", "s", int64(1), "[]", "[]", "[]")
	t.Log(text)
	if strings.Contains(text, "SCAN c") || strings.Contains(text, "(tenant=?)") {
		t.Errorf("the purge's chunk search %q reads the tenant's chunks, want those of the session", text)
	}
}

// TestOptimizeGathersStatistics: the housekeeping's optimize gives the
// planner statistics on a database that never had any (one never
// closed cleanly), once its tables hold rows.
func TestOptimizeGathersStatistics(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "armature.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	rs := s.Runs()
	for i := range 200 {
		if err := rs.StartRun(ctx, runtime.Run{ID: fmt.Sprintf("r%d", i), Tenant: "acme", SessionID: fmt.Sprintf("s%d", i%7)}); err != nil {
			t.Fatal(err)
		}
	}
	var before int
	if err := s.writer.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if before != 0 {
		if _, err := s.writer.ExecContext(ctx, `DELETE FROM sqlite_stat1`); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.optimize(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.writer.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'runs'`).Scan(&n); err != nil || n == 0 {
		t.Fatalf("statistics of runs after optimize: %d rows, %v", n, err)
	}
}
