package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
)

// turnCount counts, per session, the turns running at once (on every
// harness sharing it), and worst is the most seen.
type turnCount struct {
	mu      sync.Mutex
	running map[string]int
	worst   atomic.Int64
}

// capHarness is a chat harness on st with locker l and lock wait wait,
// counting its turns in c (nil: a count of its own); a turn whose
// message is "long" runs until release closes.
type capHarness struct {
	*chat.Harness
	*turnCount
}

// waitRunning waits until a turn of session id runs (its lock taken).
func (c *turnCount) waitRunning(t *testing.T, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		n := c.running[id]
		c.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no turn of %q runs after 10 s", id)
		}
	}
}

func newCapHarness(t *testing.T, st *postgres.Store, l *postgres.Locker, wait time.Duration, release <-chan struct{}, count ...*turnCount) *capHarness {
	t.Helper()
	schema, err := chat.NewSchema()
	if err != nil {
		t.Fatal(err)
	}
	c := &capHarness{turnCount: &turnCount{running: map[string]int{}}}
	if len(count) > 0 {
		c.turnCount = count[0]
	}
	g, err := graph.NewBuilder(schema).AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) {
		id := graph.SessionID(ctx)
		c.mu.Lock()
		c.running[id]++
		if n := int64(c.running[id]); n > c.worst.Load() {
			c.worst.Store(n)
		}
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.running[id]--
			c.mu.Unlock()
		}()
		msgs := chat.Messages.Get(s)
		if msgs[len(msgs)-1].Text() == "long" {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		time.Sleep(time.Millisecond)
		return chat.Messages.Add(llm.AssistantText("re: " + msgs[len(msgs)-1].Text())), nil
	}).SetEntry("reply").AddEdge("reply", graph.End).
		Compile(graph.WithSessions(graph.SessionConfig{Store: st, Optimistic: true}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Locker: l, LockWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	c.Harness = h
	return c
}

// A turn of a session nobody holds runs at once while every connection
// of the locker's MaxHeld holds a running turn's lock (any tenant's): it
// takes its lock on a connection of MaxWaiting's. It waited, before,
// for a held lock's connection without bound (past LockWait, past
// armature serve's queue): 31 s behind 64 long turns.
func TestFreeSessionIsNotStarvedByHeldLocks(t *testing.T) {
	a := open(t)
	ctx := t.Context()
	release := make(chan struct{})
	defer close(release)
	l := a.SessionLocker(postgres.LockerConfig{MaxHeld: 1})
	t.Cleanup(l.Close)
	h := newCapHarness(t, a, l, 500*time.Millisecond, release)

	// A long turn of session "busy" (a slow model call) holds the only
	// connection of MaxHeld.
	go func() { _, _ = h.Send(context.WithoutCancel(ctx), "busy", llm.UserText("long")) }()
	h.waitRunning(t, "busy")

	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := h.Send(sctx, "free", llm.UserText("hello"))
	if took := time.Since(start); err != nil || took > 2*time.Second {
		t.Fatalf("a turn of a free session took %v (LockWait 500ms): %v", took.Round(time.Millisecond), err)
	}
}

// When both of the locker's budgets are taken, a turn of a free session
// waits for a connection as it would for a held session: bounded by
// LockWait, and failing as a busy session's wait does (ErrSessionBusy,
// invocation_cancelled, nothing ran). The waits that gave up leave the
// budgets whole.
func TestLockConnectionWaitIsBoundedBySessionWait(t *testing.T) {
	a := open(t)
	ctx := t.Context()
	l := a.SessionLocker(postgres.LockerConfig{MaxHeld: 1, MaxWaiting: 1})
	t.Cleanup(l.Close)
	h := newCapHarness(t, a, l, 300*time.Millisecond, nil)

	// Bounded here so that a locker that waits fails rather than hangs.
	bctx, cancelB := context.WithTimeout(ctx, 3*time.Second)
	defer cancelB()
	r1, ok, err := l.TryLock(bctx, "h1") // MaxHeld's connection
	if err != nil || !ok {
		t.Fatalf("TryLock: %v %v", ok, err)
	}
	r2, err := l.Lock(bctx, "h2") // MaxWaiting's
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, ok, err := l.TryLock(bctx, "h3"); ok || err != nil || time.Since(start) > time.Second {
		t.Fatalf("TryLock with no connection left: %v %v after %v, want not taken, at once", ok, err, time.Since(start))
	}

	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := range 3 {
		start := time.Now()
		out, err := h.Send(sctx, fmt.Sprint("free", i), llm.UserText("hello"))
		took := time.Since(start)
		e, ok := out.(*chat.Errored)
		if !errors.Is(err, chat.ErrSessionBusy) || !ok || e.Category != errcat.InvocationCancelled {
			t.Fatalf("a turn waiting for a lock connection: %+v, %v; want ErrSessionBusy, invocation_cancelled", out, err)
		}
		if took < 250*time.Millisecond || took > 3*time.Second {
			t.Fatalf("a turn waiting for a lock connection failed after %v, want about LockWait (300ms)", took)
		}
	}
	// A direct Lock's wait for a connection ends with its context too.
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if _, err := l.Lock(short, "h3"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with no connection left, past its deadline: %v", err)
	}

	// The same failure as a wait for a session another replica holds.
	b := replica(t, a)
	lb := b.SessionLocker(postgres.LockerConfig{})
	t.Cleanup(lb.Close)
	hb := newCapHarness(t, b, lb, 300*time.Millisecond, nil)
	out, err := hb.Send(sctx, "h1", llm.UserText("hello"))
	if e, ok := out.(*chat.Errored); !errors.Is(err, chat.ErrSessionBusy) || !ok || e.Category != errcat.InvocationCancelled {
		t.Fatalf("a turn of a session another replica holds: %+v, %v", out, err)
	}

	r1()
	r2()
	// Every token is back: one try and one wait hold at once, no more.
	ra, ok, err := l.TryLock(ctx, "x1")
	if err != nil || !ok {
		t.Fatalf("TryLock after the waits gave up: %v %v", ok, err)
	}
	defer ra()
	if _, ok, err := l.TryLock(ctx, "x2"); ok || err != nil {
		t.Fatalf("a second TryLock with MaxHeld 1: %v %v", ok, err)
	}
	rb, err := l.Lock(ctx, "x2")
	if err != nil {
		t.Fatal(err)
	}
	rb()
	if _, err := h.Send(sctx, "free0", llm.UserText("again")); err != nil {
		t.Fatalf("a turn once a connection is free: %v", err)
	}
	if n := postgres.LockConns(l); n > 2 {
		t.Fatalf("%d lock connections open, want at most MaxHeld + MaxWaiting (2)", n)
	}
}

// Turns waiting for sessions another replica holds keep at most
// MaxWaiting connections (the rest try again now and then): turns of
// free sessions still run at once beside them, and the waiting turns
// run, one at a time per session, once the other replica lets go.
func TestWaitsForHeldSessionsDoNotStarveFreeSessions(t *testing.T) {
	a := open(t)
	b := replica(t, a)
	ctx := t.Context()
	la := a.SessionLocker(postgres.LockerConfig{MaxHeld: 2, MaxWaiting: 1})
	t.Cleanup(la.Close)
	lb := b.SessionLocker(postgres.LockerConfig{})
	t.Cleanup(lb.Close)
	ha := newCapHarness(t, a, la, 0, nil) // waits without bound

	const hot = 4
	var releases []func()
	for i := range hot {
		r, err := lb.Lock(ctx, fmt.Sprint("hot", i))
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	var ran atomic.Int64
	errs := make(chan error, 2*hot)
	for i := range hot {
		for range 2 {
			go func() {
				_, err := ha.Send(ctx, fmt.Sprint("hot", i), llm.UserText("hi"))
				if err == nil {
					ran.Add(1)
				}
				errs <- err
			}()
		}
	}
	time.Sleep(300 * time.Millisecond) // every hot turn waiting

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			start := time.Now()
			if _, err := ha.Send(sctx, fmt.Sprint("free", i), llm.UserText("hello")); err != nil || time.Since(start) > 2*time.Second {
				t.Errorf("a free session's turn beside waits for held sessions: %v after %v", err, time.Since(start).Round(time.Millisecond))
			}
		})
	}
	wg.Wait()
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d turns ran of sessions the other replica holds", n)
	}
	if n := postgres.LockConns(la); n > 3 {
		t.Fatalf("%d lock connections open, want at most MaxHeld + MaxWaiting (3)", n)
	}

	for _, r := range releases {
		r()
	}
	for range 2 * hot {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d turns ran 10 s after the other replica let their sessions go", ran.Load(), 2*hot)
		}
	}
	if w := ha.worst.Load(); w != 1 {
		t.Fatalf("%d turns of one session ran at once", w)
	}
}

// Two replicas whose lockers are smaller than the sessions they run at
// once (so most waits try again rather than queue) still never run two
// turns of one session together, and store every message.
func TestLockerSerializesReplicasPastItsConnections(t *testing.T) {
	a := open(t)
	b := replica(t, a)
	ctx := t.Context()
	cfg := postgres.LockerConfig{MaxHeld: 1, MaxWaiting: 1}
	la, lb := a.SessionLocker(cfg), b.SessionLocker(cfg)
	t.Cleanup(la.Close)
	t.Cleanup(lb.Close)
	count := &turnCount{running: map[string]int{}}
	ha, hb := newCapHarness(t, a, la, 0, nil, count), newCapHarness(t, b, lb, 0, nil, count)

	const sessions, each = 3, 4
	errs := make(chan error, 2*sessions*each)
	for s := range sessions {
		for i := range each {
			for _, h := range []*capHarness{ha, hb} {
				go func() {
					_, err := h.Send(ctx, fmt.Sprint("s", s), llm.UserText(fmt.Sprint("m", i)))
					errs <- err
				}()
			}
		}
	}
	for range 2 * sessions * each {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for s := range sessions {
		rec, err := a.Load(ctx, session.LoadRequest{SessionID: fmt.Sprint("s", s)})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []llm.Message
		if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil || len(msgs) != 4*each {
			t.Fatalf("session s%d: %d messages stored, want %d (%v)", s, len(msgs), 4*each, err)
		}
		for i := 0; i+1 < len(msgs); i += 2 {
			if msgs[i].Role != llm.RoleUser || msgs[i+1].Text() != "re: "+msgs[i].Text() {
				t.Fatalf("session s%d: turns interleaved at message %d: %q, %q", s, i, msgs[i].Text(), msgs[i+1].Text())
			}
		}
	}
	if w := count.worst.Load(); w != 1 {
		t.Fatalf("%d turns of one session ran at once across the replicas", w)
	}
}
