package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// A sole writer excludes every other Store of its file, in this process
// too, and waits for none to start: each Open that would break the
// promise fails with ErrLocked; once the holder closes, it succeeds.
func TestSoleWriterExcludesOtherStores(t *testing.T) {
	ctx := t.Context()
	quick := 50 * time.Millisecond
	for _, tc := range []struct {
		name          string
		first, second sqlite.Config
	}{
		{"sole, then owner", sqlite.Config{SoleWriter: true}, sqlite.Config{}},
		{"sole, then sole", sqlite.Config{SoleWriter: true}, sqlite.Config{SoleWriter: true}},
		{"owner, then sole", sqlite.Config{}, sqlite.Config{SoleWriter: true}},
		{"shared, then sole", sqlite.Config{Shared: true}, sqlite.Config{SoleWriter: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.db")
			tc.first.Path, tc.second.Path, tc.second.BusyTimeout = path, path, quick
			first, err := sqlite.Open(ctx, tc.first)
			if err != nil {
				t.Fatal(err)
			}
			if s, err := sqlite.Open(ctx, tc.second); !errors.Is(err, sqlite.ErrLocked) {
				if s != nil {
					_ = s.Close(ctx)
				}
				t.Fatalf("second Open: %v, want ErrLocked", err)
			}
			if err := first.Close(ctx); err != nil {
				t.Fatal(err)
			}
			second, err := sqlite.Open(ctx, tc.second)
			if err != nil {
				t.Fatalf("Open after the first closed: %v", err)
			}
			if err := second.Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Owners share the file with each other, as before.
	path := filepath.Join(t.TempDir(), "b.db")
	a, _ := openStore(t, sqlite.Config{Path: path})
	b, _ := openStore(t, sqlite.Config{Path: path, BusyTimeout: quick})
	if a == nil || b == nil {
		t.Fatal("two owners of one file")
	}
}

// A sole writer answers version checks from memory: random appends
// (some with a wrong expected version), saves, deletes and checkpoint
// writes of a few sessions, from several goroutines (seed printed), each
// followed by loads with the right, an old and a future version; every
// answer is checked against a model, and after the run the file read by
// a new Store agrees with it.
func TestSoleWriterVersions(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sole.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, SoleWriter: true})
	if err != nil {
		t.Fatal(err)
	}
	const workers, sessions, steps = 4, 3, 150
	versions := make([][]int64, workers) // per worker, per session: 0 when absent
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		versions[w] = make([]int64, sessions)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
			errs[w] = soleWorker(ctx, st, rng, w, versions[w])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	again, _ := openStore(t, sqlite.Config{Path: path})
	for w := range workers {
		for i, v := range versions[w] {
			id := fmt.Sprintf("w%d-s%d", w, i)
			rec, err := again.Load(ctx, session.LoadRequest{SessionID: id})
			switch {
			case v == 0 && !errors.Is(err, session.ErrNotFound):
				t.Errorf("%s: %v, want not found", id, err)
			case v > 0 && (err != nil || rec.Version != v):
				t.Errorf("%s: %v, %v; want version %d", id, rec, err, v)
			}
		}
	}
}

// soleWorker writes and checks its own sessions (one writer per session,
// as a session lock makes it); model holds their versions.
func soleWorker(ctx context.Context, st *sqlite.Store, rng *rand.Rand, w int, model []int64) error {
	ckpt := st.Checkpoints()
	for step := range 150 {
		i := rng.IntN(len(model))
		id := fmt.Sprintf("w%d-s%d", w, i)
		item := json.RawMessage(fmt.Sprintf(`"%d"`, step))
		switch op := rng.IntN(10); {
		case op < 6 && model[i] > 0:
			expected := model[i]
			wrong := rng.IntN(6) == 0
			if wrong {
				expected += 1 + int64(rng.IntN(2))
			}
			res, err := st.Append(ctx, session.AppendRequest{SessionID: id, ExpectedVersion: expected,
				Append: map[string][]json.RawMessage{"log": {item}}})
			switch {
			case wrong && !errors.Is(err, session.ErrWriteConflict):
				return fmt.Errorf("step %d: append to %s at a wrong version: %v", step, id, err)
			case wrong:
			case err != nil:
				return fmt.Errorf("step %d: append to %s: %w", step, id, err)
			default:
				model[i] = res.Version
			}
		case op == 6 && model[i] > 0:
			// A suspension's append and its record in one transaction;
			// sometimes the record is invalid and neither is written.
			data := json.RawMessage(`{}`)
			bad := rng.IntN(3) == 0
			if bad {
				data = json.RawMessage(`{`)
			}
			res, err := ckpt.WriteSuspended(ctx, checkpoint.SuspendWrite{
				Append: &session.AppendRequest{SessionID: id, ExpectedVersion: model[i],
					Append: map[string][]json.RawMessage{"log": {item}}},
				Record: checkpoint.Record{InvocationID: fmt.Sprintf("inv-%d-%d", w, step), Kind: checkpoint.KindSuspended,
					SessionID: id, Data: data}})
			switch {
			case bad && err == nil:
				return fmt.Errorf("step %d: an invalid record was written", step)
			case bad:
			case err != nil:
				return fmt.Errorf("step %d: write suspended %s: %w", step, id, err)
			default:
				model[i] = res.Version
			}
		case op < 9:
			req := session.SaveRequest{SessionID: id, State: map[string]json.RawMessage{"log": json.RawMessage(`["s"]`)}}
			if model[i] > 0 {
				req.ExpectedVersion = &model[i]
			}
			res, err := st.Save(ctx, req)
			if err != nil {
				return fmt.Errorf("step %d: save %s: %w", step, id, err)
			}
			model[i] = res.Version
		default:
			if err := st.Delete(ctx, id); err != nil {
				return fmt.Errorf("step %d: delete %s: %w", step, id, err)
			}
			model[i] = 0
		}
		// Every session of the worker, checked at its version and
		// around it.
		for j, v := range model {
			id := fmt.Sprintf("w%d-s%d", w, j)
			for _, probe := range []int64{v, v - 1, v + 1} {
				if probe <= 0 {
					continue
				}
				rec, err := st.Load(ctx, session.LoadRequest{SessionID: id, IfVersionNot: probe})
				switch {
				case v == 0 && !errors.Is(err, session.ErrNotFound):
					return fmt.Errorf("step %d: %s deleted, load if not %d: %v", step, id, probe, err)
				case v == 0:
				case probe == v && !errors.Is(err, session.ErrNotModified):
					return fmt.Errorf("step %d: %s at %d, load if not %d: %v, want not modified", step, id, v, probe, err)
				case probe != v && (err != nil || rec.Version != v):
					return fmt.Errorf("step %d: %s at %d, load if not %d: %v, %v", step, id, v, probe, rec, err)
				}
			}
		}
	}
	return nil
}
