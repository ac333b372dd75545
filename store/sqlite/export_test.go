package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/armature-go/armature/runtime"
)

// MigrateFileTo creates or migrates the file at path to schema version
// (1 = sessions only), as an older release of this package left it.
func MigrateFileTo(ctx context.Context, path string, version int) error {
	db, err := sql.Open("sqlite", dsn(path, "", "busy_timeout(5000)"))
	if err != nil {
		return err
	}
	defer db.Close()
	return migrateTo(ctx, db, migrations[:version], time.Now, slog.New(slog.DiscardHandler))
}

// HoldWriter queues a write that blocks the store's writer goroutine,
// waits until the writer runs it, and returns the function that lets it
// commit (and waits for that). Writes issued meanwhile queue up and are
// then committed together.
func HoldWriter(s *Store) (release func()) {
	taken, rel, errc := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		errc <- s.write(context.Background(), "hold", "", "", func(context.Context, *sql.Tx) error {
			close(taken)
			<-rel
			return nil
		})
	}()
	<-taken
	return func() {
		close(rel)
		if err := <-errc; err != nil {
			panic(err)
		}
	}
}

// QueuedWrites returns the number of writes waiting for the writer.
func QueuedWrites(s *Store) int {
	s.wq.mu.Lock()
	defer s.wq.mu.Unlock()
	n := 0
	for _, w := range s.wq.ops {
		if w.state.Load() == opQueued {
			n++
		}
	}
	return n
}

// SetBatchHook makes the writer call fn(n) after it took a batch of n
// writes, before it runs them; nil removes the hook.
func SetBatchHook(s *Store, fn func(n int)) {
	if fn == nil {
		s.wq.onBatch.Store(nil)
		return
	}
	s.wq.onBatch.Store(&fn)
}

// Batches returns the number of write transactions the writer ran.
func Batches(s *Store) int64 { return s.wq.batches.Load() }

// WriterClosing reports whether Close began: writes are refused.
func WriterClosing(s *Store) bool {
	s.wq.mu.Lock()
	defer s.wq.mu.Unlock()
	return s.wq.closing
}

// SchemaVersions lists the versions of every migration this code knows.
func SchemaVersions() []int64 {
	out := make([]int64, len(migrations))
	for i, m := range migrations {
		out[i] = int64(m.version)
	}
	return out
}

// SweepMarks runs one sweep of expired marks now.
func SweepMarks(ctx context.Context, s *Store) error { return s.sweepMarks(ctx) }

// Synchronous returns PRAGMA synchronous as the write connection and the
// checkpointer's connection read it (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA),
// and the write connection's journal mode.
func Synchronous(ctx context.Context, s *Store) (writer, ckpt int, journal string, err error) {
	err = s.write(ctx, "pragma", "", "", func(ctx context.Context, tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&writer); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal)
	})
	if err != nil {
		return 0, 0, "", err
	}
	err = s.ckpt.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&ckpt)
	return writer, ckpt, journal, err
}

// WALSyncs returns the fsyncs of the WAL the store ran (DurabilityFull),
// and whether it syncs the WAL itself at all.
func WALSyncs(s *Store) (n int64, on bool) {
	if s.wal == nil {
		return 0, false
	}
	s.wal.mu.Lock()
	defer s.wal.mu.Unlock()
	for s.wal.syncing {
		s.wal.cond.Wait()
	}
	return s.wal.syncs, true
}

// LoadTailSQL is the one-statement tail load, for its query plan.
const LoadTailSQL = loadTailSQL

// LoadPageSQL is the one-statement page load, for its query plan.
const LoadPageSQL = loadPageSQL

// EncodeChunk encodes evs (their Type, Time and Data) as an event
// chunk's data column, and returns it with its size column.
func EncodeChunk(evs []runtime.Event) ([]byte, int64) { return appendChunk(nil, evs) }
