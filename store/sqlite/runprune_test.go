package sqlite_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/sqlite"
)

// TestRunPruneUnderLoad prunes by size in batches while turns are
// recorded through the group-committing Recorder: no turn fails, the
// size estimate kept from the writes matches a fresh count of another
// handle, and the cap holds after the pass.
func TestRunPruneUnderLoad(t *testing.T) {
	ctx := t.Context()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	path := filepath.Join(t.TempDir(), "armature.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: s.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	turn := func(session string, n int) error {
		r, _, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: session, AgentID: "a"})
		if err != nil {
			return err
		}
		for range n {
			if err := r.Adapter(ctx, runtime.PhaseOutputDelta, map[string]any{"text": "some words of a reply"}); err != nil {
				return err
			}
		}
		return r.Complete(ctx, "done")
	}
	for i := range 600 {
		if err := turn(fmt.Sprint("s", i%7), 1+rng.IntN(5)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := s.Runs().Prune(ctx, runtime.PruneRequest{}) // counts only
	if err != nil || first.Runs != 0 {
		t.Fatalf("Prune with no bound = %+v, %v", first, err)
	}
	capBytes := first.Bytes / 3
	var wg sync.WaitGroup
	var turnErr error
	wg.Go(func() {
		for i := range 300 {
			if err := turn(fmt.Sprint("s", i%7), 1+rng.IntN(5)); err != nil {
				turnErr = err
				return
			}
		}
	})
	res, err := s.Runs().Prune(ctx, runtime.PruneRequest{MaxBytes: capBytes})
	wg.Wait()
	if err != nil || turnErr != nil {
		t.Fatalf("Prune: %v; turns: %v", err, turnErr)
	}
	if res.Runs < 300 || res.Bytes > capBytes+int64(300*4096) {
		t.Fatalf("Prune = %+v with cap %d", res, capBytes)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	kept, err := s.Runs().Prune(ctx, runtime.PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	fresh, err := other.Runs().Prune(ctx, runtime.PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if kept.Bytes != fresh.Bytes {
		t.Fatalf("size kept from the writes %d, counted afresh %d", kept.Bytes, fresh.Bytes)
	}
}
