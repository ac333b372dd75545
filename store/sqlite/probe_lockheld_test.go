package sqlite_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// A Shared Store opened while another connection (another replica) holds
// the write lock longer than the busy timeout.
func TestOpenProbeWhileWriteLockHeld(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "x"}); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s2, err := sqlite.Open(ctx, sqlite.Config{Path: path, Shared: true, BusyTimeout: 300 * time.Millisecond})
	t.Logf("open while write lock held: %v (after %v); ErrLocked=%v session_load_failed=%v",
		err, time.Since(start), errors.Is(err, sqlite.ErrLocked), errors.Is(err, errcat.SessionLoadFailed))
	if err == nil {
		s2.Close(ctx)
	}
	conn.ExecContext(ctx, "ROLLBACK")
}
