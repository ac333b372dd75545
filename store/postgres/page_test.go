package postgres_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/session/sessiontest"
	"github.com/armature-go/armature/store/postgres"
)

// TestPagePlan checks that a page of a long list reads its own rows of
// session_items and no others, on a table never analyzed (a fresh
// database's) and with the generic plan a prepared statement settles on:
// a plan that reads the list whole (an aggregate for its length, a join
// filter for the bounds) would cost the list.
func TestPagePlan(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "p", State: map[string]json.RawMessage{"m": json.RawMessage(`[]`)}}); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	add := make([]json.RawMessage, n)
	for i := range add {
		add[i] = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
	}
	if _, err := s.Append(ctx, session.AppendRequest{SessionID: "p", ExpectedVersion: 1, Append: map[string][]json.RawMessage{"m": add}}); err != nil {
		t.Fatal(err)
	}
	conn, err := postgres.Pool(s).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	rowsRe := regexp.MustCompile(`actual time=\S+ rows=(\d+) loops=(\d+)`)
	for _, mode := range []string{"auto", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		for _, before := range []int64{-1, n / 2, 10} {
			rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+postgres.LoadPageSQL, "p", "m", before, int64(50))
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			for _, line := range plan {
				if !strings.Contains(line, "on session_items") {
					continue
				}
				m := rowsRe.FindStringSubmatch(line)
				if m == nil {
					continue // never executed
				}
				r, _ := strconv.Atoi(m[1])
				l, _ := strconv.Atoi(m[2])
				if r*l > 50 {
					t.Errorf("%s, before %d: a scan of session_items reads %d rows:\n%s", mode, before, r*l, strings.Join(plan, "\n"))
					break
				}
			}
		}
	}
	// The page itself, from the store.
	p, err := s.LoadPage(ctx, session.PageRequest{SessionID: "p", Field: "m", Before: n / 2, Max: 50})
	if err != nil || p.Offset != n/2-50 || p.Length != n || len(p.Items) != 50 || string(p.Items[0]) != fmt.Sprintf(`{"n":%d}`, n/2-50) {
		t.Fatalf("page = %+v, %v", p, err)
	}
}

// BenchmarkLoadPage: a page of 50 from the middle of a list of 1 000 and
// of 100 000 items: the same cost (the list's length is one probe, the
// page a range).
func BenchmarkLoadPage(b *testing.B) {
	sessiontest.BenchmarkPage(b, func(b *testing.B) session.Store { return open(b) })
}
