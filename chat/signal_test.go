package chat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

func TestSuspendSignalListener(t *testing.T) {
	ctx := context.Background()
	var acts atomic.Int64
	c := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{}, "approve", &acts)})
	var rec, other recorder
	unsubscribe := c.Subscribe("s1", rec.fn)
	defer c.Subscribe("s2", other.fn)()

	out, err := c.Send(ctx, "s1", llm.UserText("delete it"))
	if err != nil {
		t.Fatal(err)
	}
	sus, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("Send returned %T, want *chat.Suspended", out)
	}
	if diff := cmp.Diff([]string{"assistant: approve?"}, texts(sus.PendingMessages)); diff != "" {
		t.Errorf("pending messages (-want +got):\n%s", diff)
	}
	if sus.Descriptor.SignalID != "approve" || sus.Descriptor.Metadata["tool"] != "delete" {
		t.Errorf("descriptor %+v", sus.Descriptor)
	}
	if n := len(rec.got()); n != 0 {
		t.Fatalf("the listener fired %d times for the suspending turn", n)
	}

	res, err := c.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s1", Payload: Approved.Set(true)})
	if err != nil {
		t.Fatal(err)
	}
	done, ok := res.(*chat.Completed)
	if !ok {
		t.Fatalf("Signal returned %T", res)
	}
	if diff := cmp.Diff([]string{"assistant: done: approved"}, texts(done.Replies)); diff != "" {
		t.Errorf("resumed replies (-want +got):\n%s", diff)
	}
	if !done.Resumed || done.Path != harness.PathSignalResume || done.SessionID != "s1" || done.InvocationID != sus.InvocationID {
		t.Errorf("resumed turn %+v, suspended invocation %q", done.Turn, sus.InvocationID)
	}
	got := rec.got()
	if len(got) != 1 || got[0] != res {
		t.Fatalf("listener got %v, want exactly the resumed outcome", got)
	}
	if n := len(other.got()); n != 0 {
		t.Errorf("another session's listener fired %d times", n)
	}

	// A second signal for the spent id resumes nothing.
	again, err := c.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s1", Payload: Approved.Set(true)})
	e, ok := again.(*chat.Errored)
	if !ok || !errors.Is(err, errcat.HarnessSignalCorrelationFailed) || !errors.Is(err, harness.ErrNoSubscription) {
		t.Fatalf("second Signal returned %T, %v", again, err)
	}
	if e.Bucket != harness.UserCorrectable || e.Reply.Role != llm.RoleSystem {
		t.Errorf("second Signal outcome %+v", e)
	}
	if n := len(rec.got()); n != 1 || acts.Load() != 1 {
		t.Errorf("after a spent signal: %d callbacks, %d resumed runs; want 1, 1", n, acts.Load())
	}

	// Unsubscribed listeners stop; unsubscribing twice is harmless.
	unsubscribe()
	unsubscribe()
	if _, ok := mustSend(t, c, "s1", "again").(*chat.Suspended); !ok {
		t.Fatal("the second turn did not suspend")
	}
	if _, err := c.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s1", Payload: Approved.Set(false)}); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.got()); n != 1 {
		t.Errorf("an unsubscribed listener fired (%d callbacks)", n)
	}
}

func mustSend(t *testing.T, c *chat.Harness, sid, text string) chat.Outcome {
	t.Helper()
	out, err := c.Send(context.Background(), sid, llm.UserText(text))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSignalScopedBySession(t *testing.T) {
	ctx := context.Background()
	c := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{}, "approve", nil)})
	mustSend(t, c, "s1", "a")
	mustSend(t, c, "s2", "b")
	out, err := c.Signal(ctx, chat.Signal{SignalID: "approve", Payload: Approved.Set(true)})
	if !errors.Is(err, harness.ErrAmbiguousSignal) || !errors.Is(err, errcat.HarnessSignalCorrelationFailed) {
		t.Fatalf("unscoped Signal: %T %v, want an ambiguity error", out, err)
	}
	out, err = c.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s2", Payload: Approved.Set(true)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Info().SessionID != "s2" {
		t.Errorf("resumed session %q, want s2", out.Info().SessionID)
	}
	// Now only s1 awaits the id: the unscoped signal is unambiguous.
	out, err = c.Signal(ctx, chat.Signal{SignalID: "approve", Payload: Approved.Set(true)})
	if err != nil || out.Info().SessionID != "s1" {
		t.Fatalf("Signal: %v, session %q", err, out.Info().SessionID)
	}
}

func TestDeliverResumedOnSend(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name     string
		deliver  bool
		listener bool
		want     int // outcomes delivered to the next Send
	}{
		{name: "no listener", deliver: true, want: 1},
		{name: "listener", deliver: true, listener: true},
		{name: "disabled", deliver: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{}, "approve", nil), DeliverResumedOnSend: tt.deliver})
			var rec recorder
			if tt.listener {
				defer c.Subscribe("s1", rec.fn)()
			}
			mustSend(t, c, "s1", "a")
			resumed, err := c.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s1", Payload: Approved.Set(true)})
			if err != nil {
				t.Fatal(err)
			}
			next := mustSend(t, c, "s1", "b")
			if got := next.Info().Delivered; len(got) != tt.want || (tt.want == 1 && got[0] != resumed) {
				t.Errorf("next Send delivered %v, want %d outcome(s)", got, tt.want)
			}
			if tt.listener && len(rec.got()) != 1 {
				t.Errorf("listener got %d outcomes, want 1", len(rec.got()))
			}
			// Delivered once: the Send after that gets nothing.
			if _, err := c.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s1", Payload: Approved.Set(true)}); err != nil {
				t.Fatal(err)
			}
			c.Subscribe("s1", func(chat.Outcome) {})() // a listener that came and went changes nothing
			third := mustSend(t, c, "s1", "c")
			if got := third.Info().Delivered; len(got) != tt.want {
				t.Errorf("third Send delivered %d outcomes, want %d", len(got), tt.want)
			}
		})
	}
}

// A signal arriving at a second harness process (another Store on the
// same SQLite file) resumes the turn the first suspended.
func TestSignalOnAnotherHarness(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st1, st2 := openSQLite(t, path), openSQLite(t, path)
	var acts atomic.Int64
	c1 := newChat(t, chat.Config{
		Graph:       approvalGraph(t, graphOpts{store: st1, records: st1.Checkpoints()}, "approve", &acts),
		Coordinator: harness.NewStoreCoordinator(st1.Checkpoints()),
	})
	c2 := newChat(t, chat.Config{
		Graph:       approvalGraph(t, graphOpts{store: st2, records: st2.Checkpoints()}, "approve", &acts),
		Coordinator: harness.NewStoreCoordinator(st2.Checkpoints()),
	})
	var rec1, rec2 recorder
	defer c1.Subscribe("s1", rec1.fn)()
	defer c2.Subscribe("s1", rec2.fn)()

	sus, ok := mustSend(t, c1, "s1", "delete it").(*chat.Suspended)
	if !ok {
		t.Fatal("the turn did not suspend")
	}
	if diff := cmp.Diff([]string{"assistant: approve?"}, texts(sus.PendingMessages)); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}

	out, err := c2.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s1", Payload: Approved.Set(true)})
	if err != nil {
		t.Fatal(err)
	}
	done, ok := out.(*chat.Completed)
	if !ok {
		t.Fatalf("Signal returned %T", out)
	}
	if diff := cmp.Diff([]string{"assistant: done: approved"}, texts(done.Replies)); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	if got := rec2.got(); len(got) != 1 || got[0] != out {
		t.Errorf("the second harness's listener got %v, want the resumed outcome once", got)
	}
	if n := len(rec1.got()); n != 0 {
		t.Errorf("the first harness's listener fired %d times", n)
	}
	want := []string{"user: delete it", "assistant: approve?", "assistant: done: approved"}
	if diff := cmp.Diff(want, texts(history(t, st1, "s1"))); diff != "" {
		t.Errorf("stored history (-want +got):\n%s", diff)
	}

	for _, c := range []*chat.Harness{c1, c2} {
		again, err := c.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s1", Payload: Approved.Set(true)})
		if _, ok := again.(*chat.Errored); !ok || !(errors.Is(err, errcat.HarnessSignalCorrelationFailed) || errors.Is(err, errcat.SuspensionRecordInvalid)) {
			t.Errorf("a second Signal returned %T, %v", again, err)
		}
	}
	if n1, n2 := len(rec1.got()), len(rec2.got()); n1 != 0 || n2 != 1 || acts.Load() != 1 {
		t.Errorf("after the spent signals: callbacks %d and %d, resumed runs %d; want 0, 1, 1", n1, n2, acts.Load())
	}

	// The first harness continues the session with the resumed history.
	next := mustSend(t, c1, "s1", "and again")
	if next.Info().Path != harness.PathExistingSession {
		t.Errorf("path %q", next.Info().Path)
	}
}

// Two harnesses racing to deliver the same signal commit the resumed turn
// once. Without a shared Locker both may run the resumed node bodies (the
// engine's Take lets only one commit); with one, the bodies run once.
func TestConcurrentSignalsResumeOnce(t *testing.T) {
	for _, withLocker := range []bool{false, true} {
		t.Run(fmt.Sprintf("locker=%v", withLocker), func(t *testing.T) {
			ctx := context.Background()
			path := dbPath(t)
			st1, st2 := openSQLite(t, path), openSQLite(t, path)
			var acts atomic.Int64
			var l1, l2 chat.Locker
			if withLocker {
				l1, l2 = st1.SessionLocker(sqlite.LockerConfig{}), st2.SessionLocker(sqlite.LockerConfig{})
			}
			cs := []*chat.Harness{
				newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{store: st1, records: st1.Checkpoints()}, "approve", &acts), Coordinator: harness.NewStoreCoordinator(st1.Checkpoints()), Locker: l1}),
				newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{store: st2, records: st2.Checkpoints()}, "approve", &acts), Coordinator: harness.NewStoreCoordinator(st2.Checkpoints()), Locker: l2}),
			}
			var fired atomic.Int64
			for _, c := range cs {
				defer c.Subscribe("s1", func(chat.Outcome) { fired.Add(1) })()
			}
			for round := range 5 {
				mustSend(t, cs[0], "s1", "go")
				before := acts.Load()
				var wg sync.WaitGroup
				var completed atomic.Int64
				for i := range 4 {
					wg.Go(func() {
						out, _ := cs[i%2].Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s1", Payload: Approved.Set(true)})
						if _, ok := out.(*chat.Completed); ok {
							completed.Add(1)
						}
					})
				}
				wg.Wait()
				if completed.Load() != 1 || fired.Load() != int64(round+1) {
					t.Fatalf("round %d: %d completed signals, %d callbacks; want 1 and %d", round, completed.Load(), fired.Load(), round+1)
				}
				if runs := acts.Load() - before; runs < 1 || (withLocker && runs != 1) {
					t.Fatalf("round %d: the resumed body ran %d times", round, runs)
				}
			}
			var dones int
			for _, m := range history(t, st1, "s1") {
				if m.Text() == "done: approved" {
					dones++
				}
			}
			if dones != 5 {
				t.Errorf("%d resumed replies stored, want 5", dones)
			}
		})
	}
}

// A request id given again with another decision (another payload, or
// another signal id) is refused with ErrMessageIDReused
// (message_id_reused) and resumes nothing, on a store that records
// marks and on one that does not (the harness's own idempotency
// cache); the same decision is replayed. ReplaySignal looks it up
// without resolving anything.
func TestSignalRequestIDAnotherDecision(t *testing.T) {
	for _, marks := range []bool{true, false} {
		t.Run(fmt.Sprintf("marks=%v", marks), func(t *testing.T) {
			ctx := context.Background()
			var store session.Store = session.NewMemoryStore(session.MemoryConfig{})
			if !marks {
				store = noMarks{store}
			}
			var acts atomic.Int64
			c := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{store: store}, "approve", &acts)})
			if out, err := c.Send(ctx, "s", llm.UserText("delete it")); err != nil {
				t.Fatal(err)
			} else if _, ok := out.(*chat.Suspended); !ok {
				t.Fatalf("send: %#v", out)
			}
			deny := chat.Signal{SignalID: "approve", SessionID: "s", Payload: Approved.Set(false), RequestID: "r1"}
			if out, err := c.Signal(ctx, deny); err != nil || !isCompleted(out) {
				t.Fatalf("the denial: %#v, %v", out, err)
			}
			approve := deny
			approve.Payload = Approved.Set(true)
			other := deny
			other.SignalID = "another"
			for _, sig := range []chat.Signal{approve, other} {
				out, err := c.Signal(ctx, sig)
				if e, ok := out.(*chat.Errored); !ok || !errors.Is(err, chat.ErrMessageIDReused) || e.Category != errcat.MessageIDReused {
					t.Fatalf("%+v with the denial's request id: %#v, %v", sig, out, err)
				}
				if _, err := c.ReplaySignal(ctx, sig); !errors.Is(err, chat.ErrMessageIDReused) {
					t.Fatalf("ReplaySignal(%+v): %v", sig, err)
				}
			}
			if out, err := c.Signal(ctx, deny); err != nil || !out.Info().Replayed {
				t.Fatalf("the denial again: %#v, %v", out, err)
			}
			if out, err := c.ReplaySignal(ctx, deny); err != nil || !out.Info().Replayed {
				t.Fatalf("ReplaySignal of the denial: %#v, %v", out, err)
			}
			if _, err := c.ReplaySignal(ctx, chat.Signal{SessionID: "s", RequestID: "r2"}); !errors.Is(err, chat.ErrNotRecorded) {
				t.Fatalf("ReplaySignal of an unknown request id: %v", err)
			}
			if acts.Load() != 1 {
				t.Fatalf("the gated node ran %d times, want once (the denial)", acts.Load())
			}
		})
	}
}

// noMarks hides a store's session.Marker: the harness keeps recorded
// outcomes in its own idempotency cache.
type noMarks struct{ session.Store }
