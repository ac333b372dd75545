package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/session/sessiontest"
	"github.com/armature-go/armature/store/sqlite"
)

// openStore opens a store on a fresh file in t's temp dir and closes it
// at cleanup. It returns the store and the file path.
func openStore(t testing.TB, cfg sqlite.Config) (*sqlite.Store, string) {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "armature.db")
	}
	s, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, cfg.Path
}

// rawDB opens the file directly, bypassing the store, to inspect or
// damage it.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func exec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func TestStore(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store {
		s, _ := openStore(t, sqlite.Config{})
		return s
	})
}

// The session contract holds for a sole writer, whose version checks
// come from memory.
func TestStoreSoleWriter(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store {
		s, _ := openStore(t, sqlite.Config{SoleWriter: true})
		return s
	})
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  sqlite.Config
		ok   bool
		name string
	}{
		{sqlite.Config{}, false, "empty path"},
		{sqlite.Config{Path: "x.db"}, true, "minimal"},
		{sqlite.Config{Path: ":memory:"}, false, "memory"},
		{sqlite.Config{Path: "file:x.db?mode=ro"}, false, "uri"},
		{sqlite.Config{Path: "x.db", BusyTimeout: -1}, false, "negative busy timeout"},
		{sqlite.Config{Path: "x.db", SoleWriter: true, Shared: true}, false, "sole writer and shared"},
		{sqlite.Config{Path: "x.db", ReadConns: -1}, false, "negative read conns"},
		{sqlite.Config{Path: "x.db", Durability: sqlite.DurabilityFull}, true, "durability full"},
		{sqlite.Config{Path: "x.db", Durability: sqlite.Durability(7)}, false, "unknown durability"},
		{sqlite.Config{Path: "x.db", Durability: sqlite.Durability(-1)}, false, "negative durability"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, sqlite.ErrInvalidConfig) {
				t.Errorf("Validate() = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := sqlite.Open(t.Context(), sqlite.Config{}); !errors.Is(err, sqlite.ErrInvalidConfig) {
		t.Errorf("Open(zero Config) = %v, want ErrInvalidConfig", err)
	}
}

func TestErrorPrefixes(t *testing.T) {
	for _, err := range []error{sqlite.ErrInvalidConfig, sqlite.ErrCorrupt, sqlite.ErrSchemaTooNew, sqlite.ErrMigration} {
		if !strings.HasPrefix(err.Error(), "sqlite: ") {
			t.Errorf("sentinel %q lacks the sqlite: prefix", err)
		}
	}
	s, _ := openStore(t, sqlite.Config{})
	ctx := t.Context()
	_, e1 := s.Load(ctx, session.LoadRequest{SessionID: "missing"})
	_, e2 := s.Append(ctx, session.AppendRequest{SessionID: "missing", ExpectedVersion: 1})
	_, e3 := s.Save(ctx, session.SaveRequest{SessionID: ""})
	_, e4 := s.List(ctx, session.ListRequest{PageToken: "%%"})
	for _, err := range []error{e1, e2, e3, e4} {
		if err == nil || !strings.HasPrefix(err.Error(), "sqlite: ") {
			t.Errorf("error %v lacks the sqlite: prefix", err)
		}
	}
}

func TestPathWithSpecialCharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a dir?x=1&y#", "file %20.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	s, _ := openStore(t, sqlite.Config{Path: path})
	if _, err := s.Save(t.Context(), session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{"n": json.RawMessage("1")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at the configured path: %v", err)
	}
}

func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	clock := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	now := func() time.Time { return clock }
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Save(ctx, session.SaveRequest{SessionID: "s", SchemaVersion: "v1",
		State: map[string]json.RawMessage{"messages": json.RawMessage(`[1]`), "n": json.RawMessage(`{"a":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: w.Version,
		Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`2`), json.RawMessage(`3`)}}}); err != nil {
		t.Fatal(err)
	}
	want, err := s.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
	if _, err := s.Load(ctx, session.LoadRequest{SessionID: "s"}); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Load after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "s"}); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Save after Close = %v, want ErrClosed", err)
	}
	if _, err := s.List(ctx, session.ListRequest{}); !errors.Is(err, session.ErrClosed) {
		t.Errorf("List after Close = %v, want ErrClosed", err)
	}

	s2, _ := openStore(t, sqlite.Config{Path: path, Now: now})
	got, err := s2.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record changed across Close/Open (-want +got):\n%s", diff)
	}
	if !got.UpdatedAt.Equal(clock) || !got.CreatedAt.Equal(clock) {
		t.Errorf("timestamps %v/%v, want %v", got.CreatedAt, got.UpdatedAt, clock)
	}
	if string(got.State["messages"]) != `[1,2,3]` {
		t.Errorf("messages = %s", got.State["messages"])
	}
}

func TestWALMode(t *testing.T) {
	s, path := openStore(t, sqlite.Config{})
	if _, err := s.Save(t.Context(), session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{"n": json.RawMessage("1")}}); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := rawDB(t, path).QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("no WAL file next to the database: %v", err)
	}
}

func TestSchemaMigrations(t *testing.T) {
	ctx := t.Context()
	s, path := openStore(t, sqlite.Config{})
	_ = s.Close(ctx)
	db := rawDB(t, path)
	var n, maxV int64
	if err := db.QueryRow(`SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &maxV); err != nil {
		t.Fatal(err)
	}
	if n != maxV || n < 1 {
		t.Errorf("schema_migrations has %d rows, max version %d", n, maxV)
	}
	// Reopening an up-to-date file applies nothing and succeeds.
	s2, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	_ = s2.Close(ctx)

	// A file migrated by newer code is refused.
	exec(t, db, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from the future', 0)`, maxV+1)
	_, err = sqlite.Open(ctx, sqlite.Config{Path: path})
	if !errors.Is(err, sqlite.ErrSchemaTooNew) || errcat.Of(err) != errcat.SessionLoadFailed || !strings.HasPrefix(err.Error(), "sqlite: ") {
		t.Fatalf("Open of a newer schema = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(maxV+1)) {
		t.Errorf("error %q does not name the file's schema version", err)
	}

	// Tables without their migration record are inconsistent: the
	// migration cannot be applied again.
	exec(t, db, `DELETE FROM schema_migrations`)
	if _, err := sqlite.Open(ctx, sqlite.Config{Path: path}); !errors.Is(err, sqlite.ErrMigration) || errcat.Of(err) != errcat.SessionLoadFailed {
		t.Fatalf("Open with inconsistent migrations = %v, want ErrMigration", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	ctx := t.Context()
	s1, path := openStore(t, sqlite.Config{})
	// A second Store on the same file stands in for a second process:
	// its writer contends for the file lock, not just the pool.
	s2, _ := openStore(t, sqlite.Config{Path: path})
	stores := []*sqlite.Store{s1, s2}
	if _, err := s1.Save(ctx, session.SaveRequest{SessionID: "shared", State: map[string]json.RawMessage{"log": json.RawMessage(`[]`)}}); err != nil {
		t.Fatal(err)
	}
	const workers, turns = 8, 25
	var wg sync.WaitGroup
	var sharedOK atomic.Int64
	for w := range workers {
		wg.Go(func() {
			s := stores[w%2]
			own := fmt.Sprintf("own-%d", w)
			v, err := s.Save(ctx, session.SaveRequest{SessionID: own, State: map[string]json.RawMessage{}})
			if err != nil {
				t.Error(err)
				return
			}
			for i := range turns {
				// Own session: never conflicts.
				v, err = s.Append(ctx, session.AppendRequest{SessionID: own, ExpectedVersion: v.Version,
					Append: map[string][]json.RawMessage{"log": {json.RawMessage(fmt.Sprint(i))}}})
				if err != nil {
					t.Errorf("append to %s: %v", own, err)
					return
				}
				// Shared session: retry on conflict until it lands.
				for {
					r, err := s.Load(ctx, session.LoadRequest{SessionID: "shared"})
					if err != nil {
						t.Errorf("load shared: %v", err)
						return
					}
					_, err = s.Append(ctx, session.AppendRequest{SessionID: "shared", ExpectedVersion: r.Version,
						Append: map[string][]json.RawMessage{"log": {json.RawMessage(fmt.Sprintf(`"%d-%d"`, w, i))}}})
					if err == nil {
						sharedOK.Add(1)
						break
					}
					if !errors.Is(err, session.ErrWriteConflict) {
						t.Errorf("append to shared: %v", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	r, err := s1.Load(ctx, session.LoadRequest{SessionID: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	if err := json.Unmarshal(r.State["log"], &log); err != nil {
		t.Fatal(err)
	}
	if len(log) != workers*turns || sharedOK.Load() != workers*turns || r.Version != workers*turns+1 {
		t.Errorf("shared log has %d items, %d successful appends, version %d; want %d", len(log), sharedOK.Load(), r.Version, workers*turns)
	}
	for w := range workers {
		r, err := s2.Load(ctx, session.LoadRequest{SessionID: fmt.Sprintf("own-%d", w)})
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		if err := json.Unmarshal(r.State["log"], &got); err != nil || len(got) != turns || got[turns-1] != turns-1 {
			t.Errorf("own-%d log = %s (%v)", w, r.State["log"], err)
		}
	}
}

func TestCorruptRows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage []string
	}{
		{"field value not JSON", []string{`UPDATE session_fields SET value = X'7b6e6f7065' WHERE field = 'n'`}},
		{"truncated field value", []string{`UPDATE session_fields SET value = substr(value, 1, 3) WHERE field = 'meta'`}},
		{"empty field value", []string{`UPDATE session_fields SET value = X'' WHERE field = 'n'`}},
		{"item not JSON", []string{`UPDATE session_items SET value = X'ff00' WHERE seq = 1`}},
		{"item smuggling two values", []string{`UPDATE session_items SET value = CAST('1,2' AS BLOB) WHERE seq = 0`}},
		{"version zero", []string{`UPDATE sessions SET version = 0`}},
		{"field both value and items", []string{`INSERT INTO session_fields (session_id, field, value) VALUES ('s', 'messages', X'5b5d')`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s, path := openStore(t, sqlite.Config{})
			w, err := s.Save(ctx, session.SaveRequest{SessionID: "s", SchemaVersion: "v1", State: map[string]json.RawMessage{
				"n": json.RawMessage(`1`), "meta": json.RawMessage(`{"k":"value"}`), "messages": json.RawMessage(`[]`),
			}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: w.Version,
				Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`"a"`), json.RawMessage(`"b"`)}}}); err != nil {
				t.Fatal(err)
			}
			db := rawDB(t, path)
			for _, q := range tc.damage {
				exec(t, db, q)
			}
			_, err = s.Load(ctx, session.LoadRequest{SessionID: "s"})
			if errcat.Of(err) != errcat.SessionLoadFailed || !errors.Is(err, sqlite.ErrCorrupt) {
				t.Fatalf("Load of a damaged record = %v, want session_load_failed wrapping ErrCorrupt", err)
			}
			if !strings.HasPrefix(err.Error(), "sqlite: ") {
				t.Errorf("error %q lacks the sqlite: prefix", err)
			}
		})
	}
	t.Run("List", func(t *testing.T) {
		s, path := openStore(t, sqlite.Config{})
		if _, err := s.Save(t.Context(), session.SaveRequest{SessionID: "s"}); err != nil {
			t.Fatal(err)
		}
		exec(t, rawDB(t, path), `UPDATE sessions SET version = -3`)
		_, err := s.List(t.Context(), session.ListRequest{})
		if errcat.Of(err) != errcat.SessionLoadFailed || !errors.Is(err, sqlite.ErrCorrupt) {
			t.Fatalf("List over a damaged record = %v, want session_load_failed", err)
		}
	})
	t.Run("Append to a damaged list", func(t *testing.T) {
		s, path := openStore(t, sqlite.Config{})
		w, err := s.Save(t.Context(), session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{"l": json.RawMessage(`[1]`)}})
		if err != nil {
			t.Fatal(err)
		}
		exec(t, rawDB(t, path), `UPDATE session_fields SET value = X'5b31'`) // "[1"
		_, err = s.Append(t.Context(), session.AppendRequest{SessionID: "s", ExpectedVersion: w.Version,
			Append: map[string][]json.RawMessage{"l": {json.RawMessage(`2`)}}})
		if !errors.Is(err, session.ErrInvalidRequest) {
			t.Fatalf("Append to a damaged list = %v, want ErrInvalidRequest", err)
		}
	})
}

func TestAppendLayout(t *testing.T) {
	ctx := t.Context()
	s, path := openStore(t, sqlite.Config{})
	db := rawDB(t, path)
	count := func(table string) (n int) {
		t.Helper()
		if err := db.QueryRow(`SELECT count(*) FROM ` + table + ` WHERE session_id = 's'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	w, err := s.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{
		"messages": json.RawMessage(`[1, 2]`), "nul": json.RawMessage(`null`), "x": json.RawMessage(`"x"`),
		"nul2": json.RawMessage(`null`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if f, i := count("session_fields"), count("session_items"); f != 4 || i != 0 {
		t.Fatalf("after Save: %d field rows, %d item rows", f, i)
	}
	appendItems := func(set map[string]json.RawMessage, add map[string][]json.RawMessage) {
		t.Helper()
		w, err = s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: w.Version, Set: set, Append: add})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The first append moves the saved list into item rows, once.
	appendItems(nil, map[string][]json.RawMessage{"messages": {json.RawMessage(`3`)}, "nul": {json.RawMessage(`"n"`)}, "empty": nil, "nul2": nil})
	if f, i := count("session_fields"), count("session_items"); f != 3 || i != 4 {
		t.Errorf("after Append: %d field rows (want x, empty, nul2), %d item rows (want 4)", f, i)
	}
	appendItems(nil, map[string][]json.RawMessage{"messages": {json.RawMessage(`4`), json.RawMessage(`5`)}})
	if i := count("session_items"); i != 6 {
		t.Errorf("after second Append: %d item rows, want 6", i)
	}
	r, err := s.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"messages": `[1,2,3,4,5]`, "nul": `["n"]`, "x": `"x"`, "empty": `[]`, "nul2": `[]`}
	got := map[string]string{}
	for k, v := range r.State {
		got[k] = string(v)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	// Set replaces a list field: its items go.
	appendItems(map[string]json.RawMessage{"messages": json.RawMessage(`"reset"`)}, nil)
	if i := count("session_items"); i != 1 {
		t.Errorf("after Set: %d item rows, want 1 (nul)", i)
	}
	// Delete cascades.
	if err := s.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if f, i := count("session_fields"), count("session_items"); f != 0 || i != 0 {
		t.Errorf("after Delete: %d field rows, %d item rows", f, i)
	}
}

func TestListPrefixAndTimes(t *testing.T) {
	ctx := t.Context()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	now := func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }
	s, _ := openStore(t, sqlite.Config{Now: now})
	tick.Store(0) // Open read the clock too
	ids := []string{"a%", "a%b", "a_", "ab", "a\u00ff", "a\u00ff\u00ff", "b", "\U0010ffff", "\U0010ffffx"}
	for _, id := range ids {
		if _, err := s.Save(ctx, session.SaveRequest{SessionID: id, SchemaVersion: "v1"}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(req session.ListRequest) []string {
		t.Helper()
		resp, err := s.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, sum := range resp.Sessions {
			out = append(out, sum.SessionID)
		}
		return out
	}
	for _, tc := range []struct {
		req  session.ListRequest
		want []string
	}{
		{session.ListRequest{IDPrefix: "a%"}, []string{"a%", "a%b"}},
		{session.ListRequest{IDPrefix: "a_"}, []string{"a_"}},
		{session.ListRequest{IDPrefix: "a\u00ff"}, []string{"a\u00ff", "a\u00ff\u00ff"}},
		{session.ListRequest{IDPrefix: "\U0010ffff"}, []string{"\U0010ffff", "\U0010ffffx"}},
		{session.ListRequest{IDPrefix: "\xff"}, []string{}},
		{session.ListRequest{UpdatedAfter: base.Add(7 * time.Second)}, []string{"\U0010ffff", "\U0010ffffx"}},
		{session.ListRequest{CreatedAfter: base.Add(8 * time.Second), IDPrefix: "\U0010ffff"}, []string{"\U0010ffffx"}},
		{session.ListRequest{UpdatedAfter: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}, []string{}},
		{session.ListRequest{CreatedAfter: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), IDPrefix: "b"}, []string{"b"}},
		{session.ListRequest{SchemaVersion: "v2"}, []string{}},
	} {
		if diff := cmp.Diff(tc.want, list(tc.req)); diff != "" {
			t.Errorf("List(%+v) (-want +got):\n%s", tc.req, diff)
		}
	}
	// Exact page boundary: no token when nothing follows.
	resp, err := s.List(ctx, session.ListRequest{PageSize: len(ids)})
	if err != nil || len(resp.Sessions) != len(ids) || resp.NextPageToken != "" {
		t.Errorf("List(PageSize=all) = %d sessions, token %q, %v", len(resp.Sessions), resp.NextPageToken, err)
	}
}

func TestCanceledContext(t *testing.T) {
	s, _ := openStore(t, sqlite.Config{})
	if _, err := s.Save(t.Context(), session.SaveRequest{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, e1 := s.Load(ctx, session.LoadRequest{SessionID: "s"})
	_, e2 := s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: 1})
	e3 := s.Delete(ctx, "s")
	_, e4 := s.List(ctx, session.ListRequest{})
	for i, err := range []error{e1, e2, e3, e4} {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("op %d with a canceled context = %v, want context.Canceled", i, err)
		}
	}
}
