package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// healthyFile writes a database file of a few hundred pages (sessions
// with sizable values), checkpointed into the main file with no WAL
// left, and returns its path and page size.
func healthyFile(t *testing.T) (string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "armature.db")
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", 3000) + `"`)
	for i := range 200 {
		if _, err := s.Save(t.Context(), session.SaveRequest{SessionID: fmt.Sprintf("s-%03d", i),
			State: map[string]json.RawMessage{"v": big, "messages": json.RawMessage(`["a","b"]`)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pageSize int
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	return path, pageSize
}

// TestOpenCorruptFile: Open refuses a damaged database file, at once,
// with ErrCorrupt in category session_load_failed (not at the first
// turn that reads the damaged page, and not as an uncategorized driver
// error): a garbage header, a file that is no database, a damaged page
// in the middle, a truncated file, an empty file beside a write-ahead
// log that is not (found by a helper: the server started empty, the
// log's 12 MB discarded). An intact file opens, and with
// IntegrityCheck negative a damaged page in the middle goes unnoticed,
// as before.
func TestOpenCorruptFile(t *testing.T) {
	garbage := bytes.Repeat([]byte{0xa5, 0x5a, 0x00, 0xff}, 1024)
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, f *os.File, pageSize int, size int64)
		check   sqlite.Config
		corrupt bool
	}{
		{"intact", func(*testing.T, *os.File, int, int64) {}, sqlite.Config{}, false},
		{"garbage header", func(t *testing.T, f *os.File, _ int, _ int64) {
			mustWriteAt(t, f, garbage[:100], 0)
		}, sqlite.Config{}, true},
		{"not a database", func(t *testing.T, f *os.File, _ int, _ int64) {
			mustTruncate(t, f, 0)
			mustWriteAt(t, f, []byte("version: 3\nthis is a YAML file, not SQLite\n"), 0)
		}, sqlite.Config{}, true},
		{"damaged page in the middle", func(t *testing.T, f *os.File, pageSize int, size int64) {
			n := size / int64(pageSize)
			mustWriteAt(t, f, garbage[:pageSize], (n/2)*int64(pageSize))
		}, sqlite.Config{}, true},
		{"truncated", func(t *testing.T, f *os.File, pageSize int, size int64) {
			mustTruncate(t, f, (size/int64(pageSize)/2)*int64(pageSize))
		}, sqlite.Config{}, true},
		{"empty beside its write-ahead log", func(t *testing.T, f *os.File, _ int, _ int64) {
			// A botched copy: SQLite would discard the log and start an
			// empty database, losing every write in it.
			mustTruncate(t, f, 0)
			if err := os.WriteFile(f.Name()+"-wal", garbage, 0o600); err != nil {
				t.Fatal(err)
			}
		}, sqlite.Config{}, true},
		{"empty, no write-ahead log", func(t *testing.T, f *os.File, _ int, _ int64) {
			mustTruncate(t, f, 0) // a new database
		}, sqlite.Config{}, false},
		{"damaged page, no check", func(t *testing.T, f *os.File, pageSize int, size int64) {
			n := size / int64(pageSize)
			mustWriteAt(t, f, garbage[:pageSize], (n/2)*int64(pageSize))
		}, sqlite.Config{IntegrityCheck: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, pageSize := healthyFile(t)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, f, pageSize, fi.Size())
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			cfg := tc.check
			cfg.Path, cfg.SoleWriter = path, true
			s, err := sqlite.Open(context.Background(), cfg)
			if !tc.corrupt {
				if err != nil {
					t.Fatalf("Open = %v", err)
				}
				if err := s.Ping(t.Context()); err != nil {
					t.Errorf("Ping = %v", err)
				}
				_ = s.Close(context.Background())
				return
			}
			if err == nil {
				s.Close(context.Background())
				t.Fatal("Open of a damaged file succeeded")
			}
			if !errors.Is(err, sqlite.ErrCorrupt) || errcat.Of(err) != errcat.SessionLoadFailed || !strings.HasPrefix(err.Error(), "sqlite: open ") ||
				!strings.Contains(err.Error(), path) {
				t.Errorf("Open = %v (category %q), want sqlite: open <path>: ... wrapping ErrCorrupt in session_load_failed", err, errcat.Of(err))
			}
			t.Log(err)
		})
	}
}

// TestPingAfterCorruption: Ping is nil for a healthy store, reports a
// damage an operation ran into after Open (ErrCorrupt), and
// session.ErrClosed once closed.
func TestPingAfterCorruption(t *testing.T) {
	path, pageSize := healthyFile(t)
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping of a healthy store = %v", err)
	}
	// Damage every page but the first underneath the open store, and
	// read: SQLite reads the pages again (its cache holds none of them
	// yet, or the change counter tells it they are stale).
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	junk := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, pageSize/4)
	for off := int64(pageSize); off < fi.Size(); off += int64(pageSize) {
		mustWriteAt(t, f, junk, off)
	}
	f.Close()
	sawCorrupt := false
	for i := range 200 {
		_, err := s.Load(t.Context(), session.LoadRequest{SessionID: fmt.Sprintf("s-%03d", i)})
		if errors.Is(err, session.ErrNotFound) || err == nil {
			continue
		}
		sawCorrupt = true
		break
	}
	if !sawCorrupt {
		t.Skip("the damage was not read (cached pages)")
	}
	if err := s.Ping(t.Context()); !errors.Is(err, sqlite.ErrCorrupt) {
		t.Errorf("Ping after a corrupt read = %v, want ErrCorrupt", err)
	}
	_ = s.Close(context.Background())
	if err := s.Ping(t.Context()); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Ping after Close = %v, want session.ErrClosed", err)
	}
}

func mustWriteAt(t *testing.T, f *os.File, b []byte, off int64) {
	t.Helper()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func mustTruncate(t *testing.T, f *os.File, size int64) {
	t.Helper()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}
