package sqlite_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// TestDurabilityPragma opens a store at each level and reads the setting
// back from its connections: the write connection and the checkpointer
// run synchronous=NORMAL in WAL mode at both levels, and only
// DurabilityFull syncs the WAL itself before a write returns.
func TestDurabilityPragma(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    sqlite.Durability
		want int // PRAGMA synchronous: 1 NORMAL
		sync bool
	}{
		{"zero value", 0, 1, false},
		{"normal", sqlite.DurabilityNormal, 1, false},
		{"full", sqlite.DurabilityFull, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openStore(t, sqlite.Config{Durability: tc.d})
			writer, ckpt, journal, err := sqlite.Synchronous(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]any{tc.want, tc.want, "wal"}, []any{writer, ckpt, journal}); diff != "" {
				t.Errorf("(writer synchronous, checkpointer synchronous, journal mode) mismatch (-want +got):\n%s", diff)
			}
			// A write that returned was fsynced (full) or not (normal).
			saveLogSessions(t, s, 1)
			n, on := sqlite.WALSyncs(s)
			if on != tc.sync || (tc.sync && n == 0) {
				t.Errorf("WAL syncs %d (store syncs: %v), want syncs: %v", n, on, tc.sync)
			}
		})
	}
}

func TestDurabilityText(t *testing.T) {
	for _, tc := range []struct {
		text    string
		want    sqlite.Durability
		wantErr error
	}{
		{"normal", sqlite.DurabilityNormal, nil},
		{"full", sqlite.DurabilityFull, nil},
		{"FULL", 0, sqlite.ErrInvalidConfig},
		{"", 0, sqlite.ErrInvalidConfig},
		{"extra", 0, sqlite.ErrInvalidConfig},
	} {
		t.Run(tc.text, func(t *testing.T) {
			var d sqlite.Durability
			err := d.UnmarshalText([]byte(tc.text))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("UnmarshalText(%q) = %v, want %v", tc.text, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if d != tc.want {
				t.Errorf("UnmarshalText(%q) = %v, want %v", tc.text, d, tc.want)
			}
			back, err := d.MarshalText()
			if err != nil || string(back) != tc.text {
				t.Errorf("MarshalText = %q, %v; want %q", back, err, tc.text)
			}
		})
	}
	if _, err := sqlite.Durability(9).MarshalText(); !errors.Is(err, sqlite.ErrInvalidConfig) {
		t.Errorf("MarshalText(9) = %v, want ErrInvalidConfig", err)
	}
	if got := sqlite.Durability(9).String(); got != "Durability(9)" {
		t.Errorf("String = %q", got)
	}
}

// TestGroupCommitBatchesAtEveryDurability queues turns of several
// sessions behind a held writer and checks that they commit as one
// transaction, so one commit (one WAL fsync under DurabilityFull) serves
// them all, and that each got its version.
func TestGroupCommitBatchesAtEveryDurability(t *testing.T) {
	for _, d := range []sqlite.Durability{sqlite.DurabilityNormal, sqlite.DurabilityFull} {
		t.Run(d.String(), func(t *testing.T) {
			ctx := t.Context()
			s, _ := openStore(t, sqlite.Config{Durability: d})
			const sessions = 16
			saveLogSessions(t, s, sessions)
			var (
				mu    sync.Mutex
				sizes []int
			)
			sqlite.SetBatchHook(s, func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() })
			before := sqlite.Batches(s)
			release := sqlite.HoldWriter(s)
			var wg sync.WaitGroup
			versions := make([]int64, sessions)
			for i := range sessions {
				wg.Go(func() {
					res, err := s.Append(ctx, appendReq(fmt.Sprintf("s%d", i), 1, "turn"))
					if err != nil {
						t.Errorf("append s%d: %v", i, err)
						return
					}
					versions[i] = res.Version
				})
			}
			waitQueued(t, s, sessions)
			release()
			wg.Wait()
			sqlite.SetBatchHook(s, nil)
			// The held write's transaction, then one for the 16 turns.
			if got := sqlite.Batches(s) - before; got != 2 {
				t.Errorf("%d transactions for the held write and %d queued turns, want 2", got, sessions)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]int{1, sessions}, sizes); diff != "" {
				t.Errorf("batch sizes mismatch (-want +got):\n%s", diff)
			}
			for i, v := range versions {
				if v != 2 {
					t.Errorf("s%d at version %d, want 2", i, v)
				}
			}
		})
	}
}

// TestWALSyncsArePipelined: under DurabilityFull, concurrent writers'
// commits share fsyncs of the WAL (one fsync acknowledges every commit
// made before it started), so fsyncs stay well under commits.
func TestWALSyncsArePipelined(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, sqlite.Config{Durability: sqlite.DurabilityFull})
	const sessions, turns = 8, 25
	saveLogSessions(t, s, sessions)
	before, _ := sqlite.WALSyncs(s)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			for v := range turns {
				if _, err := s.Append(ctx, appendReq(fmt.Sprintf("s%d", i), int64(v+1), "turn")); err != nil {
					t.Errorf("append s%d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	after, _ := sqlite.WALSyncs(s)
	if n := after - before; n == 0 || n >= sessions*turns {
		t.Fatalf("%d fsyncs for %d concurrent writes, want at least one and fewer than the writes", n, sessions*turns)
	}
}

// TestCloseWhileWritesWaitForTheWAL closes a DurabilityFull store while
// writers are still running: every write either returned nil, and is then
// in the reopened store, or failed because the store closed.
func TestCloseWhileWritesWaitForTheWAL(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Durability: sqlite.DurabilityFull})
	if err != nil {
		t.Fatal(err)
	}
	const sessions = 8
	saveLogSessions(t, s, sessions)
	var wg sync.WaitGroup
	acked := make([]int64, sessions)
	for i := range sessions {
		wg.Go(func() {
			for v := int64(1); ; v++ {
				if _, err := s.Append(ctx, appendReq(fmt.Sprintf("s%d", i), v, "turn")); err != nil {
					if !errors.Is(err, session.ErrClosed) {
						t.Errorf("append s%d: %v", i, err)
					}
					return
				}
				acked[i] = v + 1
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s2, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	for i, v := range acked {
		rec, err := s2.Load(ctx, session.LoadRequest{SessionID: fmt.Sprintf("s%d", i)})
		if err != nil || rec.Version < v {
			t.Errorf("s%d: %+v, %v; acknowledged version %d", i, rec, err, v)
		}
	}
}
