package peers_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/bench/peers"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// histories are the W1 history lengths of BENCHMARKS.md.
var histories = []int{10, 1000, 10000}

// W1: a warm chat turn at history H. The session grows by two messages an
// op; once it has grown by max(H/10, 10) messages the benchmark moves to a
// freshly seeded session with the timer stopped, so every op runs at H plus
// at most 10 %.
func BenchmarkW1(b *testing.B) {
	for _, h := range histories {
		b.Run(fmt.Sprintf("peer=adk/store=memory/history=%d", h), func(b *testing.B) {
			a, n := newADK(b, peers.ADKConfig{}), 0
			w1ADK(b, h, func() (*peers.ADK, string) {
				n++
				id := fmt.Sprintf("w1-%d", n)
				seed(b, a, id, h)
				return a, id
			})
		})
	}
	for _, full := range []bool{false, true} {
		store := "sqlite"
		if full {
			store = "sqlite/sync=full"
		}
		for _, h := range histories {
			b.Run(fmt.Sprintf("peer=adk/store=%s/history=%d", store, h), func(b *testing.B) {
				var a *peers.ADK
				w1ADK(b, h, func() (*peers.ADK, string) {
					if a != nil {
						_ = a.Close()
					}
					a = seededSQLite(b, h, full)
					return a, templateSession
				})
			})
		}
	}
	// PostgreSQL: the template session is seeded once in the benchmark's
	// schema; each fresh session is a SQL copy of its rows, and the
	// previous copy is deleted, so the tables hold the template and one
	// session of about H events.
	for _, h := range histories {
		b.Run(fmt.Sprintf("peer=adk/store=postgres/history=%d", h), func(b *testing.B) {
			s := newPGSchema(b)
			a := newADK(b, peers.ADKConfig{PostgresURL: s.url})
			seed(b, a, templateSession, h)
			n, id := 0, ""
			w1ADK(b, h, func() (*peers.ADK, string) {
				if id != "" {
					s.deleteSession(b, id)
				}
				n++
				id = fmt.Sprintf("w1-%d", n)
				s.copySession(b, a, templateSession, id, h)
				return a, id
			})
		})
	}
	// Eino keeps no chat history: the application holds it and passes it
	// in the input, which is the idiomatic equivalent of a warm turn. The
	// reply is returned, not stored, so H stays fixed.
	for _, h := range histories {
		b.Run(fmt.Sprintf("peer=eino/store=memory/history=%d", h), func(b *testing.B) {
			e := newEinoRunner(b, peers.EinoNoTool)
			einoTurns(b, h, func(ctx context.Context, in []*schema.Message) error {
				_, _, err := e.Send(ctx, in)
				return err
			})
		})
	}
	for _, h := range histories {
		b.Run(fmt.Sprintf("peer=eino-graph/store=memory/history=%d", h), func(b *testing.B) {
			g := newEinoGraph(b, false)
			einoTurns(b, h, func(ctx context.Context, in []*schema.Message) error {
				_, err := g.Generate(ctx, in)
				return err
			})
		})
	}
}

// einoTurns runs turns on a history of h messages held by the caller.
func einoTurns(b *testing.B, h int, send func(context.Context, []*schema.Message) error) {
	ctx := context.Background()
	history := make([]*schema.Message, h, h+1)
	for i := range history {
		history[i] = schema.AssistantMessage(peers.HistoryText(i), nil)
		if peers.HistoryRole(i) {
			history[i] = schema.UserMessage(peers.HistoryText(i))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := send(ctx, append(history[:h:h], schema.UserMessage(peers.UserText))); err != nil {
			b.Fatal(err)
		}
	}
}

// w1ADK runs W1 on ADK; fresh returns a peer and the id of a session of h
// messages on it.
func w1ADK(b *testing.B, h int, fresh func() (*peers.ADK, string)) {
	ctx := context.Background()
	every := max(h/10, 10) / 2
	a, id := fresh()
	b.ReportAllocs()
	b.ResetTimer()
	ops := 0
	for b.Loop() {
		if ops == every {
			b.StopTimer()
			a, id = fresh()
			ops = 0
			b.StartTimer()
		}
		ops++
		if _, err := a.Send(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// W2: the first turn of a new session, one fresh session id an op.
func BenchmarkW2(b *testing.B) {
	b.Run("peer=adk/store=memory", func(b *testing.B) { newSessionTurns(b, newADK(b, peers.ADKConfig{}), "w2") })
	b.Run("peer=adk/store=sqlite", func(b *testing.B) { newSessionTurns(b, newADK(b, sqliteConfig(b, false)), "w2") })
	b.Run("peer=adk/store=postgres", func(b *testing.B) { newSessionTurns(b, newADK(b, postgresConfig(b, false)), "w2") })
	b.Run("peer=eino/store=memory", func(b *testing.B) {
		e := newEinoRunner(b, peers.EinoNoTool)
		einoTurns(b, 0, func(ctx context.Context, in []*schema.Message) error { _, _, err := e.Send(ctx, in); return err })
	})
	b.Run("peer=eino-graph/store=memory", func(b *testing.B) {
		g := newEinoGraph(b, false)
		einoTurns(b, 0, func(ctx context.Context, in []*schema.Message) error { _, err := g.Generate(ctx, in); return err })
	})
}

// W3: a tool turn (tool call, tool result, answer) as the first turn of a
// new session, one fresh session id an op.
func BenchmarkW3(b *testing.B) {
	b.Run("peer=adk/store=memory", func(b *testing.B) { newSessionTurns(b, newADK(b, peers.ADKConfig{Tool: true}), "w3") })
	b.Run("peer=adk/store=sqlite", func(b *testing.B) { newSessionTurns(b, newADK(b, sqliteConfig(b, true)), "w3") })
	b.Run("peer=adk/store=postgres", func(b *testing.B) { newSessionTurns(b, newADK(b, postgresConfig(b, true)), "w3") })
	b.Run("peer=eino/store=memory", func(b *testing.B) {
		e := newEinoRunner(b, peers.EinoWeatherTool)
		einoTurns(b, 0, func(ctx context.Context, in []*schema.Message) error { _, _, err := e.Send(ctx, in); return err })
	})
	b.Run("peer=eino-graph/store=memory", func(b *testing.B) {
		g := newEinoGraph(b, true)
		einoTurns(b, 0, func(ctx context.Context, in []*schema.Message) error { _, err := g.Generate(ctx, in); return err })
	})
}

// W4: an approval cycle. ADK-Go has no suspend/resume outcome, and Eino
// no history store, so only Eino in memory runs: interrupt at the tool,
// checkpoint, resume with the payload, tool, answer. Each op uses a new
// checkpoint id (an existing one would be resumed).
func BenchmarkW4(b *testing.B) {
	b.Run("peer=eino/store=memory", func(b *testing.B) {
		e := newEinoRunner(b, peers.EinoApprovalTool)
		cycles(b, func(ctx context.Context, id string) error { _, err := e.Cycle(ctx, id); return err })
	})
	b.Run("peer=eino-graph/store=memory", func(b *testing.B) {
		g, err := peers.NewEinoApproval(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		cycles(b, func(ctx context.Context, id string) error { _, err := g.Cycle(ctx, id); return err })
	})
}

func cycles(b *testing.B, cycle func(context.Context, string) error) {
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if err := cycle(ctx, fmt.Sprintf("w4-%d", n)); err != nil {
			b.Fatal(err)
		}
	}
}

func newSessionTurns(b *testing.B, a *peers.ADK, prefix string) {
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if _, err := a.Send(ctx, fmt.Sprintf("%s-%d", prefix, n)); err != nil {
			b.Fatal(err)
		}
	}
}

func newEinoRunner(tb testing.TB, t peers.EinoTool) *peers.EinoRunner {
	tb.Helper()
	e, err := peers.NewEinoRunner(context.Background(), t)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func newEinoGraph(tb testing.TB, withTool bool) *react.Agent {
	tb.Helper()
	g, err := peers.NewEinoAgent(context.Background(), withTool)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

func newADK(tb testing.TB, cfg peers.ADKConfig) *peers.ADK {
	tb.Helper()
	a, err := peers.NewADK(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = a.Close() })
	return a
}

func sqliteConfig(tb testing.TB, withTool bool) peers.ADKConfig {
	return peers.ADKConfig{Tool: withTool, Path: filepath.Join(tb.TempDir(), "adk.db")}
}

// postgresConfig is an ADK peer's configuration on a PostgreSQL schema of
// tb's own.
func postgresConfig(tb testing.TB, withTool bool) peers.ADKConfig {
	return peers.ADKConfig{Tool: withTool, PostgresURL: newPGSchema(tb).url}
}

func seed(tb testing.TB, a *peers.ADK, id string, h int) {
	tb.Helper()
	if err := a.Seed(context.Background(), id, h); err != nil {
		tb.Fatal(err)
	}
}

// templateSession is the session the W1 templates hold (SQLite files,
// PostgreSQL schemas).
const templateSession = "w1"

// templateDir holds one SQLite file per history length, seeded once per
// test binary (seeding 10 000 events, one transaction each, takes long);
// each W1 SQLite run works on a copy.
var (
	templateDir string
	templates   sync.Map // int -> *template
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "peers-templates")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	templateDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

type template struct {
	once sync.Once
	path string
	err  error
}

// seededSQLite returns an ADK peer on a fresh copy of a SQLite file whose
// session [templateSession] holds h messages; with full, the copy is on
// the disk (diskDir) and runs with synchronous=FULL.
func seededSQLite(tb testing.TB, h int, full bool) *peers.ADK {
	tb.Helper()
	v, _ := templates.LoadOrStore(h, &template{})
	t := v.(*template)
	t.once.Do(func() {
		t.path = filepath.Join(templateDir, fmt.Sprintf("history-%d.db", h))
		a, err := peers.NewADK(peers.ADKConfig{Path: t.path})
		if err != nil {
			t.err = err
			return
		}
		t.err = errors.Join(a.Seed(context.Background(), templateSession, h), a.Close())
	})
	if t.err != nil {
		tb.Fatal(t.err)
	}
	dir := tb.TempDir()
	if full {
		dir = diskDir(tb)
	}
	path := filepath.Join(dir, "adk.db")
	if err := copyFile(t.path, path); err != nil {
		tb.Fatal(err)
	}
	return newADK(tb, peers.ADKConfig{Path: path, FullSync: full})
}

// diskDir returns a new directory in the package directory, removed when
// tb ends: on the disk whatever TMPDIR is (a tmpfs TMPDIR makes fsync
// free, which would void the synchronous=FULL figures).
func diskDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp(".", ".bench-disk-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	abs, err := filepath.Abs(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return abs
}

// W5: throughput, 100 sessions x 100 turns a block driven by 2 x
// GOMAXPROCS goroutines (peers.W5Block), one op a turn, turns/s
// reported, as the main module's BenchmarkW5. The SQLite files are on
// the disk at both levels.
func BenchmarkW5(b *testing.B) {
	for _, w := range []struct {
		name string
		cfg  func(testing.TB) peers.ADKConfig
	}{
		{"memory", func(testing.TB) peers.ADKConfig { return peers.ADKConfig{} }},
		{"sqlite/sync=normal", func(tb testing.TB) peers.ADKConfig {
			return peers.ADKConfig{Path: filepath.Join(diskDir(tb), "adk.db")}
		}},
		{"sqlite/sync=full", func(tb testing.TB) peers.ADKConfig {
			return peers.ADKConfig{Path: filepath.Join(diskDir(tb), "adk.db"), FullSync: true}
		}},
		{"postgres", func(tb testing.TB) peers.ADKConfig { return postgresConfig(tb, false) }},
	} {
		b.Run("peer=adk/store="+w.name, func(b *testing.B) {
			a := newADK(b, w.cfg(b))
			w5(b, func(ctx context.Context, id string) error {
				n, err := a.Send(ctx, id)
				if err == nil && n != 1 {
					err = fmt.Errorf("turn on %s yielded %d events, want 1", id, n)
				}
				return err
			})
		})
	}
}

// w5 runs b.N turns with send in blocks of W5Sessions x W5Turns, each
// on new sessions, and reports turns/s.
func w5(b *testing.B, send func(ctx context.Context, id string) error) {
	ctx := context.Background()
	drivers := 2 * runtime.GOMAXPROCS(0)
	block := peers.W5Sessions * peers.W5Turns
	b.ReportAllocs()
	b.ResetTimer()
	for start, n := 0, 0; start < b.N; start += block {
		n++
		if err := peers.W5Block(ctx, fmt.Sprintf("w5-%d-", n), min(block, b.N-start), drivers, send); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}

// postgresURL is the PostgreSQL database of the Postgres peer:
// $ARMATURE_POSTGRES_URL, or the local server (trust authentication).
func postgresURL() string {
	if u := os.Getenv("ARMATURE_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// pgSchema is a PostgreSQL schema of a test's or benchmark's own.
type pgSchema struct {
	name string
	url  string  // postgresURL with search_path set to the schema
	db   *sql.DB // on postgresURL as is: names are schema-qualified

	copies map[string]string // table -> copyStatement
}

// newPGSchema creates an empty schema peers_<random>, dropped with
// everything in it when tb ends. Without a reachable database tb skips,
// or fails if $CI is set.
func newPGSchema(tb testing.TB) *pgSchema {
	tb.Helper()
	pc, err := pgx.ParseConfig(postgresURL())
	if err != nil {
		tb.Fatal(err)
	}
	db := stdlib.OpenDB(*pc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		where := fmt.Sprintf("%s:%d/%s", pc.Host, pc.Port, pc.Database) // no password in the log
		if os.Getenv("CI") != "" {
			tb.Fatalf("PostgreSQL at %s is required in CI: %v", where, err)
		}
		tb.Skipf("no PostgreSQL at %s: %v", where, err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	s := &pgSchema{name: "peers_" + hex.EncodeToString(rnd[:]), db: db, copies: map[string]string{}}
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+pgx.Identifier{s.name}.Sanitize()); err != nil {
		_ = db.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := db.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.name}.Sanitize()+" CASCADE")
		if err := errors.Join(err, db.Close()); err != nil {
			tb.Errorf("dropping schema %s: %v", s.name, err)
		}
	})
	// The name is [a-z0-9_]: it needs no quoting in the parameter.
	u := postgresURL()
	switch {
	case !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://"):
		s.url = u + " search_path=" + s.name // key=value form
	case strings.Contains(u, "?"):
		s.url = u + "&search_path=" + s.name
	default:
		s.url = u + "?search_path=" + s.name
	}
	return s
}

// copyStatement returns the statement copying the rows of table whose
// column key is $2 under key $1, every other column as is. The columns
// are read from the schema ADK's AutoMigrate created.
func (s *pgSchema) copyStatement(tb testing.TB, table, key string) string {
	tb.Helper()
	if q, ok := s.copies[table]; ok {
		return q
	}
	rows, err := s.db.Query(`SELECT column_name FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`, s.name, table)
	if err != nil {
		tb.Fatal(err)
	}
	var cols, sel []string
	found := false
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			tb.Fatal(err)
		}
		cols = append(cols, pgx.Identifier{c}.Sanitize())
		if c == key {
			sel, found = append(sel, "$1::text"), true
		} else {
			sel = append(sel, pgx.Identifier{c}.Sanitize())
		}
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	if !found {
		tb.Fatalf("table %s.%s has no column %s (columns %v)", s.name, table, key, cols)
	}
	t := pgx.Identifier{s.name, table}.Sanitize()
	q := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s = $2",
		t, strings.Join(cols, ", "), strings.Join(sel, ", "), t, pgx.Identifier{key}.Sanitize())
	s.copies[table] = q
	return q
}

// copySession copies session from, its row and its events' rows, to a new
// session id to, in one transaction, and checks that a sees h events in it.
func (s *pgSchema) copySession(tb testing.TB, a *peers.ADK, from, to string, h int) {
	tb.Helper()
	ctx := context.Background()
	sessions, events := s.copyStatement(tb, "sessions", "id"), s.copyStatement(tb, "events", "session_id")
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, sessions, to, from)
	if err == nil {
		if n, _ := res.RowsAffected(); n != 1 {
			err = fmt.Errorf("copied %d session rows, want 1", n)
		}
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, events, to, from)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		tb.Fatalf("copying session %s to %s: %v", from, to, err)
	}
	if n, err := a.Len(ctx, to); err != nil || n != h {
		tb.Fatalf("Len(%s) = %d, %v after the copy; want %d", to, n, err, h)
	}
}

// deleteSession deletes session id and its events.
func (s *pgSchema) deleteSession(tb testing.TB, id string) {
	tb.Helper()
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "DELETE FROM "+pgx.Identifier{s.name, "events"}.Sanitize()+" WHERE session_id = $1", id)
	if err == nil {
		_, err = tx.ExecContext(ctx, "DELETE FROM "+pgx.Identifier{s.name, "sessions"}.Sanitize()+" WHERE id = $1", id)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		tb.Fatalf("deleting session %s: %v", id, err)
	}
}

// TestADKPostgres checks the PostgreSQL peer as TestADK checks the others,
// W1 on a session copied from a seeded template as BenchmarkW1 runs it.
func TestADKPostgres(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		tool      bool
		history   int
		wantOut   int // events the turn yields
		wantAfter int // events stored after the turn
	}{
		{name: "W1", history: 10, wantOut: 1, wantAfter: 12},
		{name: "W2", wantOut: 1, wantAfter: 2},
		{name: "W3", tool: true, wantOut: 3, wantAfter: 4},
	}
	t.Run("schema", func(t *testing.T) {
		s := newPGSchema(t)
		newADK(t, peers.ADKConfig{PostgresURL: s.url})
		var n int
		err := s.db.QueryRow(`SELECT count(*) FROM information_schema.tables
			WHERE table_schema = $1 AND table_name IN ('sessions', 'events')`, s.name).Scan(&n)
		if err != nil || n != 2 {
			t.Errorf("ADK's tables in the schema the URL selects: %d, %v; want 2", n, err)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newPGSchema(t)
			a := newADK(t, peers.ADKConfig{Tool: tt.tool, PostgresURL: s.url})
			if tt.history > 0 {
				seed(t, a, templateSession, tt.history)
				s.copySession(t, a, templateSession, "s", tt.history)
			}
			out, err := a.Send(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			after, err := a.Len(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			if out != tt.wantOut || after != tt.wantAfter {
				t.Errorf("(yielded, stored) = (%d, %d), want (%d, %d)", out, after, tt.wantOut, tt.wantAfter)
			}
			if tt.history > 0 {
				if n, err := a.Len(ctx, templateSession); err != nil || n != tt.history {
					t.Errorf("template Len = %d, %v after a turn on the copy; want %d", n, err, tt.history)
				}
				s.deleteSession(t, "s")
				if _, err := a.Len(ctx, "s"); err == nil {
					t.Error("the deleted copy is still there")
				}
			}
		})
	}
}
