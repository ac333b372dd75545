package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// waitQueued waits until n writes are queued for s's writer.
func waitQueued(t *testing.T, s *sqlite.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for sqlite.QueuedWrites(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", sqlite.QueuedWrites(s), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// saveLogSessions saves sessions s0 … s<n-1>, each with an empty "log"
// list, at version 1.
func saveLogSessions(t *testing.T, s *sqlite.Store, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Save(t.Context(), session.SaveRequest{SessionID: fmt.Sprintf("s%d", i),
			State: map[string]json.RawMessage{"log": json.RawMessage(`[]`)}}); err != nil {
			t.Fatal(err)
		}
	}
}

func appendReq(id string, expected int64, item string) session.AppendRequest {
	return session.AppendRequest{SessionID: id, ExpectedVersion: expected,
		Append: map[string][]json.RawMessage{"log": {json.RawMessage(fmt.Sprintf("%q", item))}}}
}

// TestGroupCommitConcurrentConflicts runs many writers on many sessions,
// several per session, each also sending writes at a stale version. The
// stale writes fail with ErrWriteConflict in batches where others
// commit; every committed write got the version it made, and a
// session's log lists its items in version order.
func TestGroupCommitConcurrentConflicts(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, sqlite.Config{})
	const sessions, perSession, turns = 24, 4, 10
	saveLogSessions(t, s, sessions)
	var (
		mu      sync.Mutex
		got     = map[string]map[int64]string{} // session -> version -> item it appended
		wg      sync.WaitGroup
		largest atomic.Int64
	)
	sqlite.SetBatchHook(s, func(n int) {
		if int64(n) > largest.Load() {
			largest.Store(int64(n)) // only the writer goroutine stores
		}
	})
	for i := range sessions {
		got[fmt.Sprintf("s%d", i)] = map[int64]string{}
	}
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		for w := range perSession {
			wg.Go(func() {
				for turn := range turns {
					item := fmt.Sprintf("%d-%d", w, turn)
					// A stale write: always conflicts, never applied.
					if _, err := s.Append(ctx, appendReq(id, 1<<40, "stale")); !errors.Is(err, session.ErrWriteConflict) {
						t.Errorf("stale append to %s = %v, want ErrWriteConflict", id, err)
					}
					for {
						r, err := s.Load(ctx, session.LoadRequest{SessionID: id})
						if err != nil {
							t.Error(err)
							return
						}
						res, err := s.Append(ctx, appendReq(id, r.Version, item))
						if errors.Is(err, session.ErrWriteConflict) {
							continue // a writer of the same session won
						}
						if err != nil {
							t.Errorf("append to %s: %v", id, err)
							return
						}
						if res.Version != r.Version+1 {
							t.Errorf("append to %s at version %d returned version %d", id, r.Version, res.Version)
						}
						mu.Lock()
						if prev, dup := got[id][res.Version]; dup {
							t.Errorf("%s: version %d returned twice (%s, %s)", id, res.Version, prev, item)
						}
						got[id][res.Version] = item
						mu.Unlock()
						break
					}
				}
			})
		}
	}
	wg.Wait()
	for id, byVersion := range got {
		r, err := s.Load(ctx, session.LoadRequest{SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		var log []string
		if err := json.Unmarshal(r.State["log"], &log); err != nil {
			t.Fatal(err)
		}
		want := make([]string, len(byVersion))
		for v, item := range byVersion {
			if v < 2 || int(v-2) >= len(want) {
				t.Fatalf("%s: returned version %d out of range", id, v)
			}
			want[v-2] = item
		}
		if diff := cmp.Diff(want, log); diff != "" {
			t.Errorf("%s log, in version order (-want +got):\n%s", id, diff)
		}
		if r.Version != perSession*turns+1 {
			t.Errorf("%s at version %d, want %d", id, r.Version, perSession*turns+1)
		}
	}
	if largest.Load() < 2 {
		t.Errorf("largest batch %d: concurrent writes were not committed together", largest.Load())
	}
}

// TestGroupCommitFailureIsolation queues writes that fail in different
// ways, some after they changed rows, together with writes that succeed,
// and commits them as one batch: each failure is its own caller's, its
// changes are rolled back, and its neighbours commit.
func TestGroupCommitFailureIsolation(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, sqlite.Config{})
	cp, runs := s.Checkpoints(), s.Runs()
	for _, id := range []string{"a", "b", "c", "notlist", "resume"} {
		if _, err := s.Save(ctx, session.SaveRequest{SessionID: id, State: map[string]json.RawMessage{
			"log": json.RawMessage(`[]`), "n": json.RawMessage(`3`)}}); err != nil {
			t.Fatal(err)
		}
	}
	paused := checkpoint.Record{InvocationID: "inv", Kind: checkpoint.KindSuspended, SessionID: "resume", Data: json.RawMessage(`{}`)}
	if err := cp.Save(ctx, paused); err != nil {
		t.Fatal(err)
	}
	if err := runs.StartRun(ctx, runtime.Run{ID: "run-1", SessionID: "a"}); err != nil {
		t.Fatal(err)
	}

	var sizes []int
	sqlite.SetBatchHook(s, func(n int) { sizes = append(sizes, n) })
	release := sqlite.HoldWriter(s)
	type outcome struct {
		name string
		err  error
		res  session.WriteResult
	}
	writes := []struct {
		name string
		do   func() (session.WriteResult, error)
		want error // nil: succeeds
	}{
		{"append a", func() (session.WriteResult, error) { return s.Append(ctx, appendReq("a", 1, "a1")) }, nil},
		{"stale append b", func() (session.WriteResult, error) { return s.Append(ctx, appendReq("b", 7, "x")) }, session.ErrWriteConflict},
		{"append b", func() (session.WriteResult, error) { return s.Append(ctx, appendReq("b", 1, "b1")) }, nil},
		// Bumps the version, then finds "n" is not a list: rolled back.
		{"append to a non-list", func() (session.WriteResult, error) {
			return s.Append(ctx, session.AppendRequest{SessionID: "notlist", ExpectedVersion: 1,
				Append: map[string][]json.RawMessage{"n": {json.RawMessage(`1`)}}})
		}, session.ErrInvalidRequest},
		// Deletes the paused record, then conflicts: rolled back, the
		// record stays.
		{"resume at a stale version", func() (session.WriteResult, error) {
			return cp.WriteResumed(ctx, checkpoint.ResumeWrite{Key: checkpoint.Key{InvocationID: "inv", Kind: checkpoint.KindSuspended},
				Append: &session.AppendRequest{SessionID: "resume", ExpectedVersion: 9}})
		}, session.ErrWriteConflict},
		{"resume without a paused record", func() (session.WriteResult, error) {
			return cp.WriteResumed(ctx, checkpoint.ResumeWrite{Key: checkpoint.Key{InvocationID: "gone", Kind: checkpoint.KindSuspended},
				Append: &session.AppendRequest{SessionID: "c", ExpectedVersion: 1}})
		}, checkpoint.ErrNotFound},
		// Writes the session half, then the record half is not reached
		// because the session half conflicts.
		{"suspend at a stale version", func() (session.WriteResult, error) {
			return cp.WriteSuspended(ctx, checkpoint.SuspendWrite{Append: &session.AppendRequest{SessionID: "c", ExpectedVersion: 5},
				Record: checkpoint.Record{InvocationID: "inv-c", Kind: checkpoint.KindSuspended, SessionID: "c", Data: json.RawMessage(`{}`)}})
		}, session.ErrWriteConflict},
		{"take a missing record", func() (session.WriteResult, error) {
			_, err := cp.Take(ctx, checkpoint.Key{InvocationID: "nope", Kind: checkpoint.KindCheckpoint})
			return session.WriteResult{}, err
		}, checkpoint.ErrNotFound},
		{"start an existing run", func() (session.WriteResult, error) {
			return session.WriteResult{}, runs.StartRun(ctx, runtime.Run{ID: "run-1", SessionID: "a"})
		}, runtime.ErrConflict},
		{"save c", func() (session.WriteResult, error) {
			v := int64(1)
			return s.Save(ctx, session.SaveRequest{SessionID: "c", ExpectedVersion: &v, State: map[string]json.RawMessage{"log": json.RawMessage(`["c1"]`)}})
		}, nil},
		{"append a again", func() (session.WriteResult, error) { return s.Append(ctx, appendReq("a", 2, "a2")) }, nil},
	}
	out := make([]outcome, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() {
			res, err := w.do()
			out[i] = outcome{w.name, err, res}
		})
		waitQueued(t, s, i+1) // keep the queue in this order
	}
	release()
	wg.Wait()
	sqlite.SetBatchHook(s, nil)
	if diff := cmp.Diff([]int{1, len(writes)}, sizes); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	for i, w := range writes {
		got := out[i]
		switch {
		case w.want == nil && got.err != nil:
			t.Errorf("%s: %v", w.name, got.err)
		case w.want != nil && !errors.Is(got.err, w.want):
			t.Errorf("%s = %v, want %v", w.name, got.err, w.want)
		}
	}
	if out[0].res.Version != 2 || out[2].res.Version != 2 || out[9].res.Version != 2 || out[10].res.Version != 3 {
		t.Errorf("versions: a %d, b %d, c %d, a again %d; want 2, 2, 2, 3",
			out[0].res.Version, out[2].res.Version, out[9].res.Version, out[10].res.Version)
	}
	want := map[string]struct {
		version int64
		log     string
	}{
		"a": {3, `["a1","a2"]`}, "b": {2, `["b1"]`}, "c": {2, `["c1"]`},
		"notlist": {1, `[]`}, "resume": {1, `[]`},
	}
	for id, w := range want {
		r, err := s.Load(ctx, session.LoadRequest{SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		if r.Version != w.version || string(r.State["log"]) != w.log {
			t.Errorf("%s: version %d, log %s; want %d, %s", id, r.Version, r.State["log"], w.version, w.log)
		}
	}
	if _, err := cp.Load(ctx, checkpoint.Key{InvocationID: "inv", Kind: checkpoint.KindSuspended}); err != nil {
		t.Errorf("the paused record of a rolled-back resume: %v", err)
	}
	if _, err := cp.Load(ctx, checkpoint.Key{InvocationID: "inv-c", Kind: checkpoint.KindSuspended}); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("a failed suspension left its paused record: %v", err)
	}
}

// TestGroupCommitCancelWhileQueued: a write whose context ends while it
// waits in the queue returns the context's error at once and is never
// applied; one whose context ends after the writer took it is applied
// and its caller waits for the commit.
func TestGroupCommitCancelWhileQueued(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, sqlite.Config{})
	for _, id := range []string{"q", "t"} {
		if _, err := s.Save(ctx, session.SaveRequest{SessionID: id, State: map[string]json.RawMessage{}}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("queued", func(t *testing.T) {
		release := sqlite.HoldWriter(s)
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := s.Append(cctx, appendReq("q", 1, "never"))
			errc <- err
		}()
		waitQueued(t, s, 1)
		cancel()
		// The writer is still held: the caller does not wait for it.
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("append canceled while queued = %v, want context.Canceled", err)
		}
		// A write queued behind the canceled one still commits.
		done := make(chan error, 1)
		go func() {
			_, err := s.Append(ctx, appendReq("t", 1, "t1"))
			done <- err
		}()
		waitQueued(t, s, 1)
		release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		r, err := s.Load(ctx, session.LoadRequest{SessionID: "q"})
		if err != nil || r.Version != 1 || r.State["log"] != nil {
			t.Errorf("session of the canceled write: %+v, %v; want it untouched", r, err)
		}
	})

	t.Run("taken", func(t *testing.T) {
		release := sqlite.HoldWriter(s)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type result struct {
			res session.WriteResult
			err error
		}
		resc := make(chan result, 1)
		go func() {
			res, err := s.Append(cctx, appendReq("q", 1, "applied"))
			resc <- result{res, err}
		}()
		waitQueued(t, s, 1)
		taken, proceed := make(chan struct{}), make(chan struct{})
		sqlite.SetBatchHook(s, func(int) {
			close(taken)
			<-proceed
		})
		defer sqlite.SetBatchHook(s, nil)
		go release()
		<-taken
		sqlite.SetBatchHook(s, nil)
		cancel()
		select {
		case r := <-resc:
			t.Fatalf("a taken write returned before its commit: %+v", r)
		case <-time.After(20 * time.Millisecond):
		}
		close(proceed)
		if r := <-resc; r.err != nil || r.res.Version != 2 {
			t.Fatalf("append canceled after it was taken = %+v, want version 2", r)
		}
	})
}

// queueSaves issues n Saves of sessions d00, d01, ... while s's writer
// is held, and returns once they are all queued. Their errors are in
// errs once wait returned.
func queueSaves(t *testing.T, s *sqlite.Store, n int) (errs []error, wait func()) {
	t.Helper()
	errs = make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Save(t.Context(), session.SaveRequest{SessionID: fmt.Sprintf("d%02d", i), State: map[string]json.RawMessage{}})
		})
	}
	waitQueued(t, s, n)
	return errs, wg.Wait
}

// TestCloseDrainsQueue: Close commits the writes queued before it, and
// their callers get their results; they survive a reopen.
func TestCloseDrainsQueue(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "drain.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	const writes = 20
	release := sqlite.HoldWriter(s)
	errs, wait := queueSaves(t, s, writes)
	closed := make(chan error, 1)
	go func() { closed <- s.Close(ctx) }()
	// Writes issued once Close began are refused.
	for deadline := time.Now().Add(10 * time.Second); !sqlite.WriterClosing(s); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Close did not begin")
		}
	}
	if err := s.Delete(ctx, "other"); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Delete while Close drains the queue = %v, want session.ErrClosed", err)
	}
	release()
	wait()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("queued save %d: %v", i, err)
		}
	}
	s, err = sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	resp, err := s.List(ctx, session.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sum := range resp.Sessions {
		ids = append(ids, sum.SessionID)
	}
	want := make([]string, writes)
	for i := range want {
		want[i] = fmt.Sprintf("d%02d", i)
	}
	slices.Sort(ids)
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("sessions after Close and reopen (-want +got):\n%s", diff)
	}
}

// TestCloseAbandonsQueueWhenContextEnds: if Close's context ends before
// the queue drained, each queued write is either committed or refused
// with session.ErrClosed, and Close returns.
func TestCloseAbandonsQueueWhenContextEnds(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	release := sqlite.HoldWriter(s)
	errs, wait := queueSaves(t, s, 5)
	cctx, cancel := context.WithCancel(ctx)
	closed := make(chan error, 1)
	go func() { closed <- s.Close(cctx) }()
	cancel()
	time.Sleep(20 * time.Millisecond)
	release()
	wait()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil && !errors.Is(err, session.ErrClosed) {
			t.Errorf("queued save %d = %v, want success or session.ErrClosed", i, err)
		}
	}
}
