package chat_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/store/sqlite"
)

// fakeLocker is an in-memory chat.Locker shared by several harnesses,
// standing in for a cross-process backend. It fails the test when two
// holders of one session overlap.
type fakeLocker struct {
	t     testing.TB
	mu    sync.Mutex
	held  map[string]chan struct{} // closed on release
	locks int
	err   error // returned by Lock when set
}

var _ chat.TryLocker = (*fakeLocker)(nil)

func newFakeLocker(t testing.TB) *fakeLocker {
	return &fakeLocker{t: t, held: map[string]chan struct{}{}}
}

func (l *fakeLocker) Lock(ctx context.Context, sessionID string) (func(), error) {
	for {
		l.mu.Lock()
		if l.err != nil {
			l.mu.Unlock()
			return nil, l.err
		}
		ch, busy := l.held[sessionID]
		if !busy {
			return l.take(sessionID), nil
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TryLock takes the session when nobody holds it (chat.TryLocker).
func (l *fakeLocker) TryLock(ctx context.Context, sessionID string) (func(), bool, error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return nil, false, l.err
	}
	if _, busy := l.held[sessionID]; busy {
		l.mu.Unlock()
		return nil, false, nil
	}
	return l.take(sessionID), true, nil
}

// take marks the free session held and unlocks l.mu (held by the
// caller), returning the release.
func (l *fakeLocker) take(sessionID string) func() {
	ch := make(chan struct{})
	l.held[sessionID] = ch
	l.locks++
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.held[sessionID] != ch {
				l.t.Errorf("release of %q by a holder that does not hold it", sessionID)
			}
			delete(l.held, sessionID)
			close(ch)
		})
	}
}

// Two harnesses, each with its own Store on one SQLite file, serialize a
// session's turns through a cross-process Locker: nothing is lost,
// duplicated or interleaved. "sqlite" gives each harness its own Store's
// SessionLocker, as two processes would have; "fake" shares one
// in-memory Locker that also checks that holders never overlap.
func TestSendConcurrentTwoHarnessesSharedLocker(t *testing.T) {
	const senders, perSender = 10, 10
	for _, kind := range []string{"fake", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			path := dbPath(t)
			st1, st2 := openSQLite(t, path), openSQLite(t, path)
			fake := newFakeLocker(t)
			lockers := []chat.Locker{fake, fake}
			if kind == "sqlite" {
				lockers = []chat.Locker{st1.SessionLocker(sqlite.LockerConfig{MaxPoll: 5 * time.Millisecond}), st2.SessionLocker(sqlite.LockerConfig{MaxPoll: 5 * time.Millisecond})}
			}
			hs := []*chat.Harness{
				newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: st1, records: st1.Checkpoints()}, echo), Locker: lockers[0]}),
				newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: st2, records: st2.Checkpoints()}, echo), Locker: lockers[1]}),
			}
			sendMany(t, hs, "s1", senders, perSender)
			checkPairs(t, history(t, st1, "s1"), senders, perSender)
			if kind == "fake" && fake.locks != senders*perSender {
				t.Errorf("the locker was taken %d times, want %d", fake.locks, senders*perSender)
			}
		})
	}
}

func TestLockerFailure(t *testing.T) {
	ctx := context.Background()
	t.Run("error", func(t *testing.T) {
		locker := newFakeLocker(t)
		locker.err = errors.New("lock service down")
		store := &countingStore{Store: newMemStore()}
		c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, echo), Locker: locker})
		out, err := c.Send(ctx, "s1", llm.UserText("hi"))
		e, ok := out.(*chat.Errored)
		if !ok || e.Category != errcat.SessionLoadFailed || e.Bucket != harness.SessionTerminating || !errors.Is(err, locker.err) {
			t.Fatalf("Send returned %T %v", out, err)
		}
		if n := store.calls(); n != 0 {
			t.Errorf("the store was called %d times", n)
		}
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		locker := newFakeLocker(t)
		release, err := locker.Lock(ctx, "s1") // another process holds the session
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, echo), Locker: locker})
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		out, err := c.Send(wctx, "s1", llm.UserText("hi"))
		if e, ok := out.(*chat.Errored); !ok || e.Category != errcat.InvocationCancelled || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send returned %T %v", out, err)
		}
		// The in-process lock was released with the failed cross-process
		// one: another session id is unaffected and this one works once
		// the other process lets go.
		release()
		if _, err := c.Send(ctx, "s1", llm.UserText("hi")); err != nil {
			t.Fatal(err)
		}
	})
}
