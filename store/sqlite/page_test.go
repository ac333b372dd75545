package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/session/sessiontest"
	"github.com/armature-go/armature/store/sqlite"
)

// TestPagePlan checks that a page is read by ranges of the primary key,
// never by a scan of the session's items (which would cost the list).
func TestPagePlan(t *testing.T) {
	s, path := openStore(t, sqlite.Config{})
	ctx := t.Context()
	// A long list, and the statistics of the tables (as the store
	// gathers them), with which SQLite may choose another plan.
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "x", State: map[string]json.RawMessage{"m": json.RawMessage(`[]`)}}); err != nil {
		t.Fatal(err)
	}
	add := make([]json.RawMessage, 2000)
	for i := range add {
		add[i] = json.RawMessage(fmt.Sprint(i))
	}
	if _, err := s.Append(ctx, session.AppendRequest{SessionID: "x", ExpectedVersion: 1, Append: map[string][]json.RawMessage{"m": add}}); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	exec(t, db, `ANALYZE`)
	plan := queryPlan(t, db, sqlite.LoadPageSQL, "x", "m", 10, 3)
	// The list's length is one probe of the index's end; its items are
	// read by a range of seq.
	var ranges, probes int
	for _, d := range plan {
		switch {
		case strings.Contains(d, "session_items") && strings.Contains(d, "seq>? AND seq<?"):
			ranges++
		case strings.Contains(d, "session_items") && strings.Contains(d, "COVERING INDEX") && strings.HasSuffix(d, "(session_id=? AND field=?)"):
			probes++
		case strings.Contains(d, "session_items"):
			t.Errorf("page plan %q: reads session_items by %q", plan, d)
		}
	}
	if ranges != 1 || probes != 1 {
		t.Errorf("page plan %q: %d ranges and %d probes of session_items, want one of each", plan, ranges, probes)
	}
	for _, d := range plan {
		if strings.HasPrefix(d, "SCAN session_items") || strings.Contains(d, "session_items") && strings.HasSuffix(d, "(session_id=?)") ||
			strings.HasPrefix(d, "SCAN session") {
			t.Errorf("page plan %q: scans the session's items", plan)
		}
	}
}

// queryPlan returns the details of SQLite's plan for query.
func queryPlan(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	t.Logf("plan: %q", plan)
	if len(plan) == 0 {
		t.Fatal("no query plan")
	}
	return plan
}

// TestPageGap: a hole in a list's item numbers, or a missing item, is
// reported as corruption, not as a shorter page.
func TestPageGap(t *testing.T) {
	s, path := openStore(t, sqlite.Config{})
	ctx := t.Context()
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "g", State: map[string]json.RawMessage{"l": json.RawMessage(`[]`)}}); err != nil {
		t.Fatal(err)
	}
	var add []json.RawMessage
	for i := range 10 {
		add = append(add, json.RawMessage(fmt.Sprint(i)))
	}
	if _, err := s.Append(ctx, session.AppendRequest{SessionID: "g", ExpectedVersion: 1, Append: map[string][]json.RawMessage{"l": add}}); err != nil {
		t.Fatal(err)
	}
	exec(t, rawDB(t, path), `DELETE FROM session_items WHERE session_id = 'g' AND seq = 4`)
	for _, before := range []int{-1, 6, 5} {
		p, err := s.LoadPage(ctx, session.PageRequest{SessionID: "g", Field: "l", Before: before, Max: 3})
		if before == -1 {
			if err != nil || len(p.Items) != 3 || p.Length != 10 {
				t.Errorf("a page clear of the hole: %+v, %v", p, err)
			}
			continue
		}
		if errcat.Of(err) != errcat.SessionLoadFailed || !errors.Is(err, sqlite.ErrCorrupt) {
			t.Errorf("a page over the hole (before %d) = %+v, %v; want session_load_failed, corrupt", before, p, err)
		}
	}
	// The last item gone: the length read is one less, the page whole.
	exec(t, rawDB(t, path), `DELETE FROM session_items WHERE session_id = 'g' AND seq = 9`)
	if p, err := s.LoadPage(ctx, session.PageRequest{SessionID: "g", Field: "l", Before: -1, Max: 3}); err != nil || p.Length != 9 || p.Offset != 6 {
		t.Errorf("after the last item went: %+v, %v", p, err)
	}
}

// BenchmarkLoadPage: a page of 50 from the middle of a list of 1 000 and
// of 100 000 items: the same cost (the list's length is one probe, the
// page a range).
func BenchmarkLoadPage(b *testing.B) {
	sessiontest.BenchmarkPage(b, func(b *testing.B) session.Store {
		s, err := sqlite.Open(b.Context(), sqlite.Config{Path: b.TempDir() + "/p.db"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close(context.Background()) })
		return s
	})
}
