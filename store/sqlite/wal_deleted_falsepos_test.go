package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// False positives of the WAL-deleted detection (DurabilityFull): things
// that are not a deletion by hand must not fail writes.
func TestWALDeletedNoFalsePositives(t *testing.T) {
	ctx := t.Context()
	save := func(t *testing.T, s *sqlite.Store, id string) {
		t.Helper()
		if _, err := s.Save(ctx, session.SaveRequest{SessionID: id}); err != nil {
			t.Fatalf("save %s: %v", id, err)
		}
	}
	t.Run("second store of the process opened and closed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "a.db")
		a, err := sqlite.Open(ctx, sqlite.Config{Path: path, Durability: sqlite.DurabilityFull})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close(ctx)
		for i := range 5 {
			save(t, a, fmt.Sprintf("a%d", i))
			b, err := sqlite.Open(ctx, sqlite.Config{Path: path, Durability: sqlite.DurabilityFull})
			if err != nil {
				t.Fatal(err)
			}
			save(t, b, fmt.Sprintf("b%d", i))
			if err := b.Close(ctx); err != nil {
				t.Fatal(err)
			}
			save(t, a, fmt.Sprintf("a%d-after", i))
			if err := a.Ping(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
	for _, stmt := range []string{"PRAGMA wal_checkpoint(TRUNCATE)", "VACUUM", "PRAGMA journal_size_limit=0", "PRAGMA wal_checkpoint(RESTART)"} {
		for _, vfs := range []string{"unix-excl", ""} {
			t.Run(stmt+" vfs="+vfs, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "a.db")
				shared := vfs == ""
				a, err := sqlite.Open(ctx, sqlite.Config{Path: path, Durability: sqlite.DurabilityFull, Shared: shared})
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close(ctx)
				for i := range 3 {
					save(t, a, fmt.Sprintf("x%d", i))
					d := "file:" + path + "?_pragma=busy_timeout(2000)"
					if vfs != "" {
						d += "&vfs=" + vfs
					}
					db, err := sql.Open("sqlite", d)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := db.Exec(stmt); err != nil {
						t.Logf("%s: %v", stmt, err)
					}
					db.Close()
					save(t, a, fmt.Sprintf("y%d", i))
					if err := a.Ping(ctx); err != nil && strings.Contains(err.Error(), "WAL") {
						t.Fatal(err)
					}
				}
			})
		}
	}
}
