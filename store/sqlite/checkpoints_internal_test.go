package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/checkpoint"
)

// TestListCheckpointsPlans checks that every List filter is served by an
// index in invocation-id order: no full scan, no sort.
func TestListCheckpointsPlans(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "armature.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	k := checkpoint.KindSuspended
	for _, tc := range []struct {
		req   checkpoint.ListRequest
		index string
	}{
		{checkpoint.ListRequest{Kind: k}, "sqlite_autoindex_checkpoint_records_1"},
		{checkpoint.ListRequest{Kind: k, SignalID: "s"}, "checkpoint_records_signal"},
		{checkpoint.ListRequest{Kind: k, SessionID: "s"}, "checkpoint_records_session"},
		{checkpoint.ListRequest{Kind: k, CorrelationID: "c"}, "checkpoint_records_correlation"},
	} {
		for _, after := range []string{"", "x"} {
			q, args := listCheckpointsQuery(tc.req, after, 101)
			text := queryPlan(t, s.reader, q, args...)
			t.Logf("%+v after %q: %s", tc.req, after, text)
			if !strings.Contains(text, "USING INDEX "+tc.index) || strings.Contains(text, "TEMP B-TREE") {
				t.Errorf("List(%+v, after %q) plan %q, want an ordered search of %s", tc.req, after, text, tc.index)
			}
		}
	}
}

// queryPlan returns the steps of q's query plan on db, joined by "; ".
func queryPlan(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}
