package chat_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// A turn that waits for its session longer than its lock wait fails
// with invocation_cancelled (retryable, cause ErrSessionBusy), runs
// nothing and leaves its message out of the session; the turn that held
// the session is untouched, and a retry once it ended goes through. The
// bound comes from Config.LockWait or WithLockWait; WithLockWait(-1)
// lifts it; the in-process lock and a cross-process Locker are both
// bounded.
func TestSendLockWait(t *testing.T) {
	cases := []struct {
		name    string
		cfg     time.Duration // Config.LockWait
		opt     time.Duration // WithLockWait, when not zero
		locker  bool
		timeout bool // the waiting turn must time out
	}{
		{name: "config", cfg: 50 * time.Millisecond, timeout: true},
		{name: "option", opt: 50 * time.Millisecond, timeout: true},
		{name: "option over config", cfg: time.Hour, opt: 50 * time.Millisecond, timeout: true},
		{name: "cross-process locker", cfg: 50 * time.Millisecond, locker: true, timeout: true},
		{name: "no bound", cfg: 50 * time.Millisecond, opt: -1},
		{name: "none configured"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := session.NewMemoryStore(session.MemoryConfig{})
			entered, release := make(chan struct{}, 1), make(chan struct{})
			g := newGraph(t, graphOpts{store: store}, func(ctx context.Context, s graph.State) (graph.Update, error) {
				msgs := chat.Messages.Get(s)
				if msgs[len(msgs)-1].Text() == "slow" {
					entered <- struct{}{}
					<-release
				}
				return echo(ctx, s)
			})
			cfg := chat.Config{Graph: g, LockWait: tc.cfg}
			if tc.locker {
				cfg.Locker = newFakeLocker(t)
			}
			c := newChat(t, cfg)
			ctx := context.Background()
			first := make(chan chat.Outcome, 1)
			go func() {
				out, _ := c.Send(ctx, "s", llm.UserText("slow"))
				first <- out
			}()
			<-entered
			var opts []chat.SendOption
			if tc.opt != 0 {
				opts = append(opts, chat.WithLockWait(tc.opt))
			}
			second := make(chan chat.Outcome, 1)
			var secondErr error
			go func() {
				out, err := c.Send(ctx, "s", llm.UserText("queued"), opts...)
				secondErr = err
				second <- out
			}()
			if !tc.timeout {
				select {
				case out := <-second:
					t.Fatalf("the waiting turn ended while the session was held: %+v", out)
				case <-time.After(200 * time.Millisecond):
				}
				close(release)
				if out := <-second; !isCompleted(out) {
					t.Fatalf("waiting turn: %+v", out)
				}
				<-first
				if got := texts(history(t, store, "s")); len(got) != 4 {
					t.Fatalf("history %q", got)
				}
				return
			}
			var out chat.Outcome
			select {
			case out = <-second:
			case <-time.After(10 * time.Second):
				close(release)
				t.Fatal("the waiting turn is still waiting, 10 s past its lock wait")
			}
			e, ok := out.(*chat.Errored)
			if !ok {
				close(release)
				t.Fatalf("waiting turn: %+v, want errored", out)
			}
			if !errors.Is(secondErr, chat.ErrSessionBusy) || errcat.Of(secondErr) != errcat.InvocationCancelled {
				t.Errorf("error %v (category %q), want invocation_cancelled caused by ErrSessionBusy", secondErr, errcat.Of(secondErr))
			}
			if e.Bucket != harness.RetryableTransient {
				t.Errorf("bucket %q, want %q", e.Bucket, harness.RetryableTransient)
			}
			close(release)
			if out := <-first; !isCompleted(out) {
				t.Fatalf("the holding turn: %+v", out)
			}
			if got := texts(history(t, store, "s")); len(got) != 2 || got[0] != "user: slow" {
				t.Fatalf("history %q: the timed-out turn's message must not be in it", got)
			}
			if out, err := c.Send(ctx, "s", llm.UserText("queued"), opts...); err != nil || !isCompleted(out) {
				t.Fatalf("retry: %+v, %v", out, err)
			}
		})
	}
}

func isCompleted(o chat.Outcome) bool {
	_, ok := o.(*chat.Completed)
	return ok
}

// A resume (an approval's decision) that waits for its session longer
// than Signal.LockWait takes no decision: invocation_cancelled, cause
// ErrSessionBusy, the gated node not run, the turn still suspended; the
// same signal, sent again once the session is free, resumes it.
func TestSignalLockWait(t *testing.T) {
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	var acts atomic.Int64
	c := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{store: store}, "approve", &acts)})
	if out, err := c.Send(ctx, "s", llm.UserText("delete it")); err != nil {
		t.Fatal(err)
	} else if _, ok := out.(*chat.Suspended); !ok {
		t.Fatalf("send: %#v", out)
	}
	// A stalled turn (another process's, say) holds the session.
	unlock, err := store.Lock(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	sig := chat.Signal{SignalID: "approve", SessionID: "s", Payload: Approved.Set(true), LockWait: 50 * time.Millisecond}
	out, err := c.Signal(ctx, sig)
	e, ok := out.(*chat.Errored)
	if !ok || !errors.Is(err, chat.ErrSessionBusy) || e.Category != errcat.InvocationCancelled || e.Bucket != harness.RetryableTransient {
		unlock()
		t.Fatalf("the waiting resume: %#v, %v", out, err)
	}
	if acts.Load() != 0 {
		t.Fatal("the gated node ran for a resume that never got the session")
	}
	unlock()
	if out, err := c.Signal(ctx, sig); err != nil || !isCompleted(out) || acts.Load() != 1 {
		t.Fatalf("the same signal again: %#v, %v (node ran %d times)", out, err, acts.Load())
	}
}

// slowLocker is a TryLocker whose blocking Lock takes a round trip of
// its own (a database's): a bounded wait must not count it when the
// session is free.
type slowLocker struct{ *fakeLocker }

func (l slowLocker) Lock(ctx context.Context, sessionID string) (func(), error) {
	time.Sleep(30 * time.Millisecond)
	return l.fakeLocker.Lock(ctx, sessionID)
}

// With a TryLocker, a lock wait counts only a wait for another holder:
// a free session is taken whatever the bound (1 ms here, under the
// blocking Lock's 30 ms round trip), and a session another process holds
// (a second harness on the same Locker) ends the wait at the bound.
func TestLockWaitAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	shared := slowLocker{newFakeLocker(t)}
	entered, release := make(chan struct{}, 1), make(chan struct{})
	node := func(ctx context.Context, s graph.State) (graph.Update, error) {
		msgs := chat.Messages.Get(s)
		if msgs[len(msgs)-1].Text() == "slow" {
			entered <- struct{}{}
			<-release
		}
		return echo(ctx, s)
	}
	// Two harnesses, each with a session store of its own, as two
	// processes would have, sharing the cross-process Locker.
	a := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, node), Locker: shared, LockWait: time.Millisecond})
	b := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: session.NewMemoryStore(session.MemoryConfig{})}, node), Locker: shared, LockWait: time.Millisecond})
	for i := range 5 {
		if out, err := a.Send(ctx, "free", llm.UserText("hi")); err != nil || !isCompleted(out) {
			t.Fatalf("turn %d on a free session: %#v, %v", i, out, err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = a.Send(ctx, "held", llm.UserText("slow"))
	}()
	<-entered
	out, err := b.Send(ctx, "held", llm.UserText("other process"), chat.WithLockWait(50*time.Millisecond))
	close(release)
	<-done
	if _, ok := out.(*chat.Errored); !ok || !errors.Is(err, chat.ErrSessionBusy) {
		t.Fatalf("a turn waiting for another process's turn: %#v, %v", out, err)
	}
}

// Random senders on a few sessions, each turn holding its session for a
// random while and each waiting with a random bound (or none): every
// turn either completes or fails busy having run nothing, and each
// session's history is exactly its completed turns, each message once
// and followed by its own reply.
func TestLockWaitRandomized(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	store := session.NewMemoryStore(session.MemoryConfig{})
	g := newGraph(t, graphOpts{store: store}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		msgs := chat.Messages.Get(s)
		var ms int
		_, _ = fmt.Sscanf(msgs[len(msgs)-1].Text(), "%d", &ms)
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return echo(ctx, s)
	})
	c := newChat(t, chat.Config{Graph: g})
	type plan struct {
		session string
		text    string
		wait    time.Duration
	}
	const senders, each = 8, 6
	plans := make([][]plan, senders)
	for i := range plans {
		for j := range each {
			p := plan{session: fmt.Sprintf("s%d", rng.IntN(3)), text: fmt.Sprintf("%d ms, sender %d, message %d", rng.IntN(6), i, j)}
			if rng.IntN(3) > 0 {
				p.wait = time.Duration(1+rng.IntN(8)) * time.Millisecond
			}
			plans[i] = append(plans[i], p)
		}
	}
	var (
		mu        sync.Mutex
		completed = map[string]map[string]bool{}
		busy      int
		wg        sync.WaitGroup
	)
	for i := range senders {
		wg.Go(func() {
			for _, p := range plans[i] {
				var opts []chat.SendOption
				if p.wait > 0 {
					opts = append(opts, chat.WithLockWait(p.wait))
				}
				out, err := c.Send(context.Background(), p.session, llm.UserText(p.text), opts...)
				mu.Lock()
				switch {
				case isCompleted(out):
					if completed[p.session] == nil {
						completed[p.session] = map[string]bool{}
					}
					completed[p.session][p.text] = true
				case errors.Is(err, chat.ErrSessionBusy) && p.wait > 0:
					busy++
				default:
					t.Errorf("%q: %#v, %v", p.text, out, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d busy of %d", busy, senders*each)
	for s, want := range completed {
		got := history(t, store, s)
		if len(got) != 2*len(want) {
			t.Fatalf("session %s: %d messages for %d completed turns", s, len(got), len(want))
		}
		seen := map[string]bool{}
		for k := 0; k < len(got); k += 2 {
			q, a := got[k].Text(), got[k+1].Text()
			if !want[q] || seen[q] || a != "re: "+q {
				t.Fatalf("session %s, message %d: %q then %q", s, k, q, a)
			}
			seen[q] = true
		}
	}
}

// A Delete waits for its session at most as long as a turn would
// (Config.LockWait, WithLockWait): past it, it fails with
// invocation_cancelled caused by ErrSessionBusy and deletes nothing.
// Unbounded, it waits for the holding turn and then deletes.
func TestDeleteLockWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     time.Duration
		opt     time.Duration
		timeout bool
	}{
		{name: "config", cfg: 50 * time.Millisecond, timeout: true},
		{name: "option", opt: 50 * time.Millisecond, timeout: true},
		{name: "option over config", cfg: time.Hour, opt: 50 * time.Millisecond, timeout: true},
		{name: "no bound", cfg: 50 * time.Millisecond, opt: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := session.NewMemoryStore(session.MemoryConfig{})
			entered, release := make(chan struct{}, 1), make(chan struct{})
			g := newGraph(t, graphOpts{store: store}, func(ctx context.Context, s graph.State) (graph.Update, error) {
				entered <- struct{}{}
				<-release
				return echo(ctx, s)
			})
			c := newChat(t, chat.Config{Graph: g, LockWait: tc.cfg})
			ctx := context.Background()
			first := make(chan chat.Outcome, 1)
			go func() {
				out, _ := c.Send(ctx, "s", llm.UserText("slow"))
				first <- out
			}()
			<-entered
			var opts []chat.SendOption
			if tc.opt != 0 {
				opts = append(opts, chat.WithLockWait(tc.opt))
			}
			deleted := make(chan error, 1)
			go func() { deleted <- c.Delete(ctx, "s", opts...) }()
			if !tc.timeout {
				select {
				case err := <-deleted:
					t.Fatalf("the delete ended while the session was held: %v", err)
				case <-time.After(200 * time.Millisecond):
				}
				close(release)
				if err := <-deleted; err != nil {
					t.Fatal(err)
				}
				<-first
				if _, err := store.Load(ctx, session.LoadRequest{SessionID: "s"}); !errors.Is(err, session.ErrNotFound) {
					t.Fatalf("the session after the delete: %v", err)
				}
				return
			}
			var err error
			select {
			case err = <-deleted:
			case <-time.After(10 * time.Second):
				close(release)
				t.Fatal("the delete is still waiting, 10 s past its lock wait")
			}
			close(release)
			<-first
			if !errors.Is(err, chat.ErrSessionBusy) || errcat.Of(err) != errcat.InvocationCancelled {
				t.Fatalf("delete: %v (category %q), want invocation_cancelled caused by ErrSessionBusy", err, errcat.Of(err))
			}
			if got := texts(history(t, store, "s")); len(got) != 2 {
				t.Fatalf("history %q: the refused delete deleted something", got)
			}
		})
	}
}

// WithOnRelease and Signal.OnRelease are called once the turn is done
// with its session, while it still holds the lock (a Delete or another
// turn of the session cannot have taken it yet), after its write is
// committed; and not at all for a turn that never took the lock.
func TestOnRelease(t *testing.T) {
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	var acts atomic.Int64
	c := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{store: store}, "approve", &acts)})
	var calls int
	check := func(what string) func() {
		return func() {
			calls++
			// The lock is held: another holder cannot take it now.
			if unlock, ok := store.TryLock("s"); ok {
				unlock()
				t.Errorf("%s: the session was free in its release hook", what)
			}
			if n := len(history(t, store, "s")); n == 0 {
				t.Errorf("%s: the turn's write was not committed in its release hook", what)
			}
		}
	}
	if out, err := c.Send(ctx, "s", llm.UserText("delete it"), chat.WithOnRelease(check("send"))); err != nil {
		t.Fatal(err)
	} else if _, ok := out.(*chat.Suspended); !ok {
		t.Fatalf("send: %#v", out)
	}
	if calls != 1 {
		t.Fatalf("the send's release hook ran %d times", calls)
	}
	// A resume that cannot get the session runs no hook.
	unlock, err := store.Lock(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	sig := chat.Signal{SignalID: "approve", SessionID: "s", Payload: Approved.Set(true), LockWait: 20 * time.Millisecond, OnRelease: check("signal")}
	if _, err := c.Signal(ctx, sig); !errors.Is(err, chat.ErrSessionBusy) {
		t.Fatalf("the waiting resume: %v", err)
	}
	if _, err := c.Send(ctx, "s", llm.UserText("hi"), chat.WithLockWait(20*time.Millisecond), chat.WithOnRelease(check("busy send"))); !errors.Is(err, chat.ErrSessionBusy) {
		t.Fatalf("the waiting send: %v", err)
	}
	unlock()
	if calls != 1 {
		t.Fatalf("a turn that never took the session ran its release hook (%d calls)", calls)
	}
	if out, err := c.Signal(ctx, sig); err != nil || !isCompleted(out) {
		t.Fatalf("the resume: %#v, %v", out, err)
	}
	if calls != 2 {
		t.Fatalf("the resume's release hook ran %d times in all", calls-1)
	}
}

// One id for one request: a message sent with WithRefusedBySignal(id)
// and a signal sent with RequestID id and RefusedByMessage of the
// message's id, at the same instant, never both run: whichever takes
// the session first runs, and the other is refused (ErrMessageIDReused),
// checked under the session's lock; sent again, each answers as it did.
func TestRefusedByOtherKind(t *testing.T) {
	ctx := context.Background()
	for _, marks := range []bool{true, false} {
		for round := range 20 {
			var store session.Store = session.NewMemoryStore(session.MemoryConfig{})
			if !marks {
				store = &countingStore{Store: store}
			}
			var acts atomic.Int64
			c := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{store: store}, "approve", &acts)})
			id := fmt.Sprintf("s%d", round)
			if out, err := c.Send(ctx, id, llm.UserText("delete it")); err != nil {
				t.Fatal(err)
			} else if _, ok := out.(*chat.Suspended); !ok {
				t.Fatalf("send: %#v", out)
			}
			send := func() error {
				_, err := c.Send(ctx, id, llm.UserText("something else"), chat.WithMessageID("key"), chat.WithRefusedBySignal("key-signal"))
				return err
			}
			signal := func() error {
				_, err := c.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: id, Payload: Approved.Set(true),
					RequestID: "key-signal", RefusedByMessage: "key"})
				return err
			}
			var errs [2]error
			var wg sync.WaitGroup
			wg.Go(func() { errs[0] = send() })
			wg.Go(func() { errs[1] = signal() })
			wg.Wait()
			refused := 0
			for _, err := range errs {
				if errors.Is(err, chat.ErrMessageIDReused) {
					refused++
				}
			}
			if refused != 1 {
				t.Fatalf("marks=%v round %d: message %v, signal %v: want exactly one refused", marks, round, errs[0], errs[1])
			}
			// Again, one by one: each answers as it did (replayed, or
			// refused again).
			if err := send(); errors.Is(err, chat.ErrMessageIDReused) != errors.Is(errs[0], chat.ErrMessageIDReused) {
				t.Errorf("marks=%v round %d: the message again: %v, first %v", marks, round, err, errs[0])
			}
			if err := signal(); errors.Is(err, chat.ErrMessageIDReused) != errors.Is(errs[1], chat.ErrMessageIDReused) {
				t.Errorf("marks=%v round %d: the signal again: %v, first %v", marks, round, err, errs[1])
			}
		}
	}
}

// TestRequestAlias: a resume recorded under a request alias refuses a
// message sent later refused by it (WithRefusedBySignal), and another
// resume under the same alias (another request given the same id),
// under the session's lock; the resume's own retransmission (its
// RequestID) still answers its recorded outcome.
func TestRequestAlias(t *testing.T) {
	ctx := context.Background()
	for _, marks := range []bool{true, false} {
		var store session.Store = session.NewMemoryStore(session.MemoryConfig{})
		if !marks {
			store = &countingStore{Store: store}
		}
		var acts atomic.Int64
		c := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{store: store}, "approve", &acts)})
		suspend := func() {
			t.Helper()
			if out, err := c.Send(ctx, "s", llm.UserText("delete it")); err != nil {
				t.Fatal(err)
			} else if _, ok := out.(*chat.Suspended); !ok {
				t.Fatalf("send: %#v", out)
			}
		}
		resume := func(token string) (chat.Outcome, error) {
			return c.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s", Payload: Approved.Set(true), RequestID: token, RequestAlias: "alias"})
		}
		suspend()
		if out, err := resume("token-1"); err != nil {
			t.Fatalf("marks=%v: the resume: %#v %v", marks, out, err)
		}
		if out, err := resume("token-1"); err != nil || !out.Info().Replayed {
			t.Errorf("marks=%v: the retransmission: %#v %v", marks, out, err)
		}
		if _, err := c.Send(ctx, "s", llm.UserText("something else"), chat.WithMessageID("m"), chat.WithRefusedBySignal("alias")); !errors.Is(err, chat.ErrMessageIDReused) {
			t.Errorf("marks=%v: the message refused by the alias: %v", marks, err)
		}
		suspend()
		before := acts.Load()
		if _, err := resume("token-2"); !errors.Is(err, chat.ErrMessageIDReused) {
			t.Errorf("marks=%v: another resume under the alias: %v", marks, err)
		}
		if acts.Load() != before {
			t.Errorf("marks=%v: the refused resume ran the action", marks)
		}
	}
}
