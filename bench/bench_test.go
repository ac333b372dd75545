package bench_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/bench"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
	"github.com/armature-go/armature/store/sqlite"
)

var histories = []int{10, 1000, 10000}

// backends are the stores every chat workload runs on.
var backends = []struct {
	name string
	open func(testing.TB) bench.Backend
}{
	{"memory", func(testing.TB) bench.Backend { return bench.MemoryBackend() }},
	{"sqlite", func(tb testing.TB) bench.Backend { return bench.SQLiteBackend(openSQLite(tb)) }},
	{"postgres", func(tb testing.TB) bench.Backend { return bench.PostgresBackend(openPostgres(tb)) }},
}

// openPostgres opens the PostgreSQL store in a schema of its own
// (pgtest: skipped without a database, failed in CI).
func openPostgres(tb testing.TB) *postgres.Store {
	tb.Helper()
	schema, _ := pgtest.Schema(tb)
	st, err := postgres.Open(context.Background(), postgres.Config{URL: pgtest.URL(), Schema: schema})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	return st
}

// BenchmarkB0Postgres is the PostgreSQL storage floor (bench.B0Postgres).
func BenchmarkB0Postgres(b *testing.B) {
	schema, _ := pgtest.Schema(b)
	bench.B0Postgres(b, pgtest.URL(), schema)
}

// sqliteFull is the SQLite store at sqlite.DurabilityFull (a WAL fsync
// per commit), its file on the disk (diskDir), for the W1 and W5 rows
// of the durability the server runs with by default.
var sqliteFull = struct {
	name string
	open func(testing.TB) bench.Backend
}{"sqlite/sync=full", func(tb testing.TB) bench.Backend {
	return bench.SQLiteBackend(openSQLiteAt(tb, filepath.Join(diskDir(tb), "bench.db"), sqlite.DurabilityFull))
}}

func BenchmarkW1(b *testing.B) {
	for _, be := range append(backends[:len(backends):len(backends)], sqliteFull) {
		for _, h := range histories {
			b.Run(fmt.Sprintf("store=%s/history=%d", be.name, h), func(b *testing.B) {
				bench.ChatW1(b, be.open(b), h)
			})
		}
	}
}

// BenchmarkW1Agent is W1 through the agent graph (bench.ChatW1Agent).
func BenchmarkW1Agent(b *testing.B) {
	for _, be := range backends {
		for _, h := range histories {
			b.Run(fmt.Sprintf("store=%s/history=%d", be.name, h), func(b *testing.B) {
				bench.ChatW1Agent(b, be.open(b), h)
			})
		}
	}
}

// BenchmarkW3Agent is the tool turn on a warm session (bench.ChatW3Agent).
func BenchmarkW3Agent(b *testing.B) {
	for _, be := range backends {
		for _, h := range histories {
			b.Run(fmt.Sprintf("store=%s/history=%d", be.name, h), func(b *testing.B) {
				bench.ChatW3Agent(b, be.open(b), h)
			})
		}
	}
}

// BenchmarkW1MessageID is W1 with a client message id on every Send.
func BenchmarkW1MessageID(b *testing.B) {
	for _, be := range backends {
		for _, h := range []int{10, 1000} {
			b.Run(fmt.Sprintf("store=%s/history=%d", be.name, h), func(b *testing.B) {
				bench.ChatW1MessageID(b, be.open(b), h)
			})
		}
	}
}

// BenchmarkW1Observed is W1 with the OTel observer installed and a
// no-op exporter (bench.ChatW1Observed); compare's -otel rows hold it to
// 1.25 x BenchmarkW1.
func BenchmarkW1Observed(b *testing.B) {
	for _, be := range backends[:2] {
		for _, h := range histories {
			b.Run(fmt.Sprintf("store=%s/history=%d", be.name, h), func(b *testing.B) {
				bench.ChatW1Observed(b, be.open(b), h)
			})
		}
	}
}

// BenchmarkW3Observed is W3 with the OTel observer installed and a
// no-op exporter (bench.ChatW3Observed); compare's -otel rows hold it to
// 1.25 x BenchmarkW3.
func BenchmarkW3Observed(b *testing.B) {
	for _, be := range backends[:2] {
		b.Run("store="+be.name, func(b *testing.B) { bench.ChatW3Observed(b, be.open(b)) })
	}
}

// BenchmarkOTelFloor is the OpenTelemetry SDK's own cost of the spans the
// OTel observer renders for a W1 and a W3 turn (bench.OTelFloor): the
// floor under what BenchmarkW1Observed and BenchmarkW3Observed add.
func BenchmarkOTelFloor(b *testing.B) {
	b.Run("W1", func(b *testing.B) { bench.OTelFloor(b, backends[0].open(b), bench.ReplyGraph, 1) })
	b.Run("W3", func(b *testing.B) { bench.OTelFloor(b, backends[0].open(b), bench.ToolGraph, 3) })
}

func BenchmarkW2(b *testing.B) {
	for _, be := range backends {
		b.Run("store="+be.name, func(b *testing.B) { bench.ChatW2(b, be.open(b)) })
	}
}

// BenchmarkW2Agent is W2 through the agent graph (bench.ChatW2Agent).
func BenchmarkW2Agent(b *testing.B) {
	for _, be := range backends {
		b.Run("store="+be.name, func(b *testing.B) { bench.ChatW2Agent(b, be.open(b)) })
	}
}

func BenchmarkW3(b *testing.B) {
	for _, be := range backends {
		b.Run("store="+be.name, func(b *testing.B) { bench.ChatW3(b, be.open(b)) })
	}
}

func BenchmarkW4(b *testing.B) {
	for _, be := range backends {
		b.Run("store="+be.name, func(b *testing.B) { bench.ChatW4(b, be.open(b)) })
	}
}

// BenchmarkW4History is W4 on a warm session (bench.ChatW4History).
func BenchmarkW4History(b *testing.B) {
	for _, be := range backends {
		for _, h := range histories {
			b.Run(fmt.Sprintf("store=%s/history=%d", be.name, h), func(b *testing.B) {
				bench.ChatW4History(b, be.open(b), h)
			})
		}
	}
}

func BenchmarkB0(b *testing.B) {
	bench.B0(b, filepath.Join(b.TempDir(), "b0.db"), sqlite.DurabilityNormal)
}

// BenchmarkB0Full is the storage floor at sqlite.DurabilityFull
// (synchronous=FULL: one fsync per transaction), on the disk.
func BenchmarkB0Full(b *testing.B) {
	bench.B0(b, filepath.Join(diskDir(b), "b0.db"), sqlite.DurabilityFull)
}

// BenchmarkW5 is W5, throughput (bench.ChatW5): one op is one turn; it
// reports turns/s. The SQLite files are on the disk (diskDir) at both
// levels: under synchronous=FULL every commit fsyncs, which a tmpfs
// would make free.
func BenchmarkW5(b *testing.B) {
	for _, w := range []struct {
		name string
		open func(testing.TB) bench.Backend
	}{
		backends[0],
		{"sqlite/sync=normal", func(tb testing.TB) bench.Backend {
			return bench.SQLiteBackend(openSQLiteAt(tb, filepath.Join(diskDir(tb), "bench.db"), sqlite.DurabilityNormal))
		}},
		sqliteFull,
		backends[2],
	} {
		b.Run("store="+w.name, func(b *testing.B) { bench.ChatW5(b, w.open(b)) })
	}
}

// diskDir returns a new directory in the package directory, removed when
// tb ends: on the worktree's disk whatever TMPDIR is (a tmpfs TMPDIR
// makes fsync free, which would void the synchronous=FULL figures).
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

// BenchmarkEngineW1 is W1 on the engine alone (no chat harness).
func BenchmarkEngineW1(b *testing.B) {
	for _, h := range histories {
		b.Run(fmt.Sprintf("store=memory/history=%d", h), func(b *testing.B) {
			bench.W1(b, session.NewMemoryStore(session.MemoryConfig{}), h)
		})
		b.Run(fmt.Sprintf("store=sqlite/history=%d", h), func(b *testing.B) {
			bench.W1(b, openSQLite(b), h)
		})
	}
}

// BenchmarkSuspendResume is suspend → resume on the engine alone.
func BenchmarkSuspendResume(b *testing.B) {
	b.Run("store=memory", func(b *testing.B) { bench.SuspendResume(b) })
}

func openSQLite(tb testing.TB) *sqlite.Store {
	tb.Helper()
	return openSQLiteAt(tb, filepath.Join(tb.TempDir(), "bench.db"), sqlite.DurabilityNormal)
}

// openSQLiteAt opens the store on path at durability d, closed when tb
// ends.
func openSQLiteAt(tb testing.TB, path string, d sqlite.Durability) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Durability: d})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// BenchmarkAdapterW2 and BenchmarkAdapterW3 measure the adapter layer:
// the W2 and W3 turns of a backend adapter through the runtime (memory
// and SQLite stores) and its Run called directly. Through the runtime
// minus the native BenchmarkW2/W3 is the adapter's overhead per turn
// (target: at most 20 µs in memory).
func BenchmarkAdapterW2(b *testing.B) {
	for _, be := range backends {
		b.Run("store="+be.name, func(b *testing.B) { bench.AdapterW2(b, be.open(b)) })
	}
	b.Run("direct", func(b *testing.B) { bench.AdapterDirect(b, bench.ReplyAdapter{}, 1) })
}

func BenchmarkAdapterW3(b *testing.B) {
	for _, be := range backends {
		b.Run("store="+be.name, func(b *testing.B) { bench.AdapterW3(b, be.open(b)) })
	}
	a, err := bench.NewToolAdapter()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("direct", func(b *testing.B) { bench.AdapterDirect(b, a, 3) })
}

// BenchmarkColdTurn is a turn of an agent with a context window on a
// session outside the engine's cache (cache=cold: every turn loads it,
// by its tail) or inside it (cache=warm), bench.ChatColdTurn.
func BenchmarkColdTurn(b *testing.B) {
	for _, be := range backends {
		for _, h := range []int{10, 10000} {
			for _, cold := range []bool{true, false} {
				name := map[bool]string{true: "cold", false: "warm"}[cold]
				b.Run(fmt.Sprintf("store=%s/history=%d/cache=%s", be.name, h, name), func(b *testing.B) {
					bench.ChatColdTurn(b, be.open(b), h, cold)
				})
			}
		}
	}
}
