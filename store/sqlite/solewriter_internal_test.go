package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
)

// A sole writer applies the version effects of the writes a batch
// commits, in order, and drops those of a write rolled back to its
// savepoint or of a batch that does not commit.
func TestSoleWriterEffectsFollowCommits(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "e.db"), SoleWriter: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	op := func(id string, version int64, fail bool) *writeOp {
		return &writeOp{ctx: ctx, op: "test", id: id, done: make(chan error, 1),
			fn: func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, schema_version, version, created_at, updated_at)
					VALUES (?, '', ?, 0, 0) ON CONFLICT (id) DO UPDATE SET version = excluded.version`, id, version); err != nil {
					return err
				}
				s.vers.note(id, verStamp{version: version})
				if fail {
					return errors.New("this write fails after its effect")
				}
				return nil
			}}
	}
	claim := func() {
		s.wq.mu.Lock()
		for !s.wq.claimIdleLocked() {
			s.wq.mu.Unlock()
			s.wq.mu.Lock()
		}
		s.wq.mu.Unlock()
	}
	// A batch: a, then b failing (rolled back to its savepoint), then a
	// again at a later version.
	claim()
	s.commitBatch([]*writeOp{op("a", 3, false), op("b", 5, true), op("a", 4, false)})
	s.wq.release()
	if v, ok := s.vers.get("a"); !ok || v.version != 4 {
		t.Errorf("a: %d, %t; want 4 (the batch's last effect)", v.version, ok)
	}
	if v, ok := s.vers.get("b"); ok {
		t.Errorf("b: %d; its write failed", v.version)
	}
	// A lone write that fails: nothing committed, nothing applied.
	claim()
	s.commitBatch([]*writeOp{op("c", 2, true)})
	s.wq.release()
	if v, ok := s.vers.get("c"); ok {
		t.Errorf("c: %d; its write failed", v.version)
	}
	if len(s.vers.pending) != 0 {
		t.Errorf("%d effects left pending", len(s.vers.pending))
	}
}
