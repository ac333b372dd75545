package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// demoEnv is the demo agent's chat harness over a SQLite file, which
// restart closes and reopens (a new process, as far as the harness can
// tell).
type demoEnv struct {
	t     *testing.T
	path  string
	store *sqlite.Store
	h     *chat.Harness
	wrap  func(llm.Provider) llm.Provider
}

func newDemoEnv(t *testing.T) *demoEnv {
	e := &demoEnv{t: t, path: filepath.Join(t.TempDir(), "chat.db")}
	e.open()
	t.Cleanup(func() { _ = e.store.Close(context.Background()) })
	return e
}

func (e *demoEnv) open() {
	t := e.t
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: e.path})
	if err != nil {
		t.Fatal(err)
	}
	var provider llm.Provider = demo.Model{}
	if e.wrap != nil {
		provider = e.wrap(provider)
	}
	a, err := agent.New(agent.Config{Provider: provider, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: s}), graph.WithCheckpointStore(s.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(s.Checkpoints())})
	if err != nil {
		t.Fatal(err)
	}
	e.store, e.h = s, h
}

func (e *demoEnv) restart() {
	e.t.Helper()
	if err := e.store.Close(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

func (e *demoEnv) send(id, text string, opts ...chat.SendOption) chat.Outcome {
	e.t.Helper()
	out, _ := e.h.Send(context.Background(), id, llm.UserText(text), opts...)
	return out
}

func (e *demoEnv) approve(id, signal string, payload graph.Update) chat.Outcome {
	e.t.Helper()
	out, _ := e.h.Signal(context.Background(), chat.Signal{SignalID: signal, SessionID: id, Payload: payload})
	return out
}

// history returns the stored history and checks it is valid for every
// provider mapping.
func (e *demoEnv) history(id string) []llm.Message {
	e.t.Helper()
	rec, err := e.store.Load(context.Background(), session.LoadRequest{SessionID: id})
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil {
		e.t.Fatalf("stored history: %v", err)
	}
	if err := llm.CheckHistory(nil, msgs); err != nil {
		e.t.Fatalf("stored history is invalid: %v", err)
	}
	return msgs
}

func want[T chat.Outcome](t *testing.T, o chat.Outcome) T {
	t.Helper()
	v, ok := o.(T)
	if !ok {
		t.Fatalf("outcome = %T %+v, want %T", o, o, *new(T))
	}
	return v
}

func wantCategory(t *testing.T, o chat.Outcome, cat errcat.Category) {
	t.Helper()
	e := want[*chat.Errored](t, o)
	if e.Category != cat {
		t.Fatalf("category = %s (%v), want %s", e.Category, e.Err, cat)
	}
}

func containsText(msgs []llm.Message, text string) bool {
	for _, m := range msgs {
		if m.Text() == text {
			return true
		}
	}
	return false
}

// The first reproduction: an approval answered after a later
// turn completed must not erase that turn.
func TestSupersededApprovalKeepsLaterTurns(t *testing.T) {
	e := newDemoEnv(t)
	s := want[*chat.Suspended](t, e.send("x", "refund order 91"))
	c := want[*chat.Completed](t, e.send("x", "where is order 92?"))
	if len(c.Superseded) != 1 || c.Superseded[0] != s.Descriptor.SignalID {
		t.Fatalf("Superseded = %v, want [%s]", c.Superseded, s.Descriptor.SignalID)
	}
	before := e.history("x")
	if !containsText(before, "where is order 92?") || !containsText(before, chat.DefaultSupersededResult) {
		t.Fatalf("history after the superseding turn: %v", before)
	}
	wantCategory(t, e.approve("x", s.Descriptor.SignalID, agent.Approve("")), errcat.HarnessSignalCorrelationFailed)
	after := e.history("x")
	if len(after) != len(before) {
		t.Fatalf("the refused signal changed the history: %d → %d messages", len(before), len(after))
	}
	e.restart()
	want[*chat.Completed](t, e.send("x", "hello again"))
	if got := e.history("x"); len(got) != len(after)+2 || !containsText(got, "where is order 92?") {
		t.Fatalf("after a restart: %d messages, want %d", len(got), len(after)+2)
	}
}

// Two suspended turns in a row: the second supersedes the first, and
// resuming the second works, before and after a restart.
func TestSecondSuspensionSupersedesFirst(t *testing.T) {
	for _, restart := range []bool{false, true} {
		e := newDemoEnv(t)
		s1 := want[*chat.Suspended](t, e.send("x", "refund order 1"))
		s2 := want[*chat.Suspended](t, e.send("x", "refund order 2"))
		if s2.Superseded[0] != s1.Descriptor.SignalID {
			t.Fatalf("Superseded = %v", s2.Superseded)
		}
		if restart {
			e.restart()
		}
		wantCategory(t, e.approve("x", s1.Descriptor.SignalID, agent.Approve("")), errcat.HarnessSignalCorrelationFailed)
		c := want[*chat.Completed](t, e.approve("x", s2.Descriptor.SignalID, agent.Approve("")))
		if !containsText(c.Replies, "refunded $30.00 for order 2") {
			t.Fatalf("replies = %v", c.Replies)
		}
		e.restart()
		want[*chat.Completed](t, e.send("x", "thanks"))
		e.history("x")
	}
}

// A resume appends to the session as it is now: with the graph's own
// semantics (no supersede), a later turn written while the invocation was
// paused survives.
func TestResumeAppendsToCurrentSession(t *testing.T) {
	e := newDemoEnv(t)
	s := want[*chat.Suspended](t, e.send("x", "refund order 5"))
	// Another writer (not the chat harness) appends a message meanwhile.
	rec, err := e.store.Load(context.Background(), session.LoadRequest{SessionID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	note, _ := json.Marshal(llm.UserText("(a note written meanwhile)"))
	if _, err := e.store.Append(context.Background(), session.AppendRequest{SessionID: "x", ExpectedVersion: rec.Version,
		Append: map[string][]json.RawMessage{chat.MessagesField: {note}}}); err != nil {
		t.Fatal(err)
	}
	g := e.h.Harness().Graph()
	res, err := g.Resume(context.Background(), s.InvocationID, agent.Approve(""))
	if err != nil || res.Status != graph.Completed {
		t.Fatalf("resume: %v", err)
	}
	msgs := e.history("x")
	if !containsText(msgs, "(a note written meanwhile)") || !containsText(msgs, "refunded $30.00 for order 5") {
		t.Fatalf("history: %v", msgs)
	}
}

func TestDeleteIsFinal(t *testing.T) {
	ctx := context.Background()
	t.Run("DeleteAround: before fails, nothing is deleted", func(t *testing.T) {
		e := newDemoEnv(t)
		want[*chat.Completed](t, e.send("x", "hi"))
		boom := errors.New("the run store is down")
		var order []string
		err := e.h.DeleteAround(ctx, "x", func(context.Context) error { order = append(order, "before"); return boom }, nil)
		if !errors.Is(err, boom) || e.history("x") == nil {
			t.Fatalf("DeleteAround = %v, history %v; want before's error and the session kept", err, e.history("x"))
		}
		err = e.h.DeleteAround(ctx, "x", func(context.Context) error {
			order = append(order, "before")
			if e.history("x") == nil {
				t.Error("before ran after the history was deleted")
			}
			return nil
		}, func(context.Context) error { order = append(order, "then"); return nil })
		if err != nil || e.history("x") != nil || len(order) != 3 || order[2] != "then" {
			t.Fatalf("DeleteAround = %v, history %v, calls %v", err, e.history("x"), order)
		}
	})
	t.Run("pending approval", func(t *testing.T) {
		e := newDemoEnv(t)
		s := want[*chat.Suspended](t, e.send("x", "refund order 7"))
		if err := e.h.Delete(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		wantCategory(t, e.approve("x", s.Descriptor.SignalID, agent.Approve("")), errcat.HarnessSignalCorrelationFailed)
		if h := e.history("x"); h != nil {
			t.Fatalf("the session came back: %v", h)
		}
		e.restart()
		wantCategory(t, e.approve("x", s.Descriptor.SignalID, agent.Approve("")), errcat.HarnessSignalCorrelationFailed)
		if h := e.history("x"); h != nil {
			t.Fatalf("the session came back after a restart: %v", h)
		}
	})
	t.Run("retransmit after delete runs a new turn", func(t *testing.T) {
		e := newDemoEnv(t)
		want[*chat.Completed](t, e.send("x", "hi", chat.WithMessageID("m1")))
		if err := e.h.Delete(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		c := want[*chat.Completed](t, e.send("x", "hi", chat.WithMessageID("m1")))
		if c.Replayed {
			t.Fatal("a deleted session's message id was replayed")
		}
	})
	t.Run("while a turn runs", func(t *testing.T) {
		e := newDemoEnv(t)
		entered, release := make(chan struct{}), make(chan struct{})
		e.wrap = func(p llm.Provider) llm.Provider {
			return &gateProvider{Provider: p, entered: entered, release: release}
		}
		e.restart()
		done := make(chan chat.Outcome)
		go func() { done <- e.send("x", "hello") }()
		<-entered
		deleted := make(chan error)
		go func() { deleted <- e.h.Delete(ctx, "x") }()
		select {
		case err := <-deleted:
			t.Fatalf("Delete returned (%v) while the turn ran", err)
		case <-time.After(50 * time.Millisecond):
		}
		close(release)
		want[*chat.Completed](t, <-done)
		if err := <-deleted; err != nil {
			t.Fatal(err)
		}
		if h := e.history("x"); h != nil {
			t.Fatalf("the running turn brought the session back: %v", h)
		}
	})
}

// gateProvider blocks the first Complete until release is closed.
type gateProvider struct {
	llm.Provider
	once             sync.Once
	entered, release chan struct{}
}

func (g *gateProvider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return g.Provider.Complete(ctx, req)
}

func TestMalformedApprovalIsRefused(t *testing.T) {
	e := newDemoEnv(t)
	s := want[*chat.Suspended](t, e.send("x", "refund order 3"))
	before := e.history("x")
	for name, p := range map[string]graph.Update{
		"approved is a number": {"approval": map[string]any{"approved": 1}},
		"no approved":          {"approval": map[string]any{"comment": "yes"}},
		"approval a string":    {"approval": "yes"},
		"no payload":           nil,
		"empty payload":        {},
		"comment a number":     {"approval": map[string]any{"approved": true, "comment": 3}},
	} {
		out := e.approve("x", s.Descriptor.SignalID, p)
		wantCategory(t, out, errcat.SuspensionResumePayloadInvalid)
		if b := want[*chat.Errored](t, out).Bucket; b != harness.UserCorrectable {
			t.Errorf("%s: bucket %s", name, b)
		}
		if got := e.history("x"); len(got) != len(before) {
			t.Fatalf("%s: the history changed (%d → %d)", name, len(before), len(got))
		}
	}
	c := want[*chat.Completed](t, e.approve("x", s.Descriptor.SignalID, agent.Approve("")))
	if !containsText(c.Replies, "refunded $30.00 for order 3") {
		t.Fatalf("replies = %v", c.Replies)
	}
}

func TestConcurrentSignalsOneWins(t *testing.T) {
	e := newDemoEnv(t)
	s := want[*chat.Suspended](t, e.send("x", "refund order 4"))
	const n = 30
	outs := make([]chat.Outcome, n)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() { outs[i] = e.approve("x", s.Descriptor.SignalID, agent.Approve("")) })
	}
	wg.Wait()
	won := 0
	for _, o := range outs {
		if _, ok := o.(*chat.Completed); ok {
			won++
			continue
		}
		wantCategory(t, o, errcat.HarnessSignalCorrelationFailed)
	}
	if won != 1 {
		t.Fatalf("%d signals won, want 1", won)
	}
	if got := e.history("x"); !containsText(got, "refunded $30.00 for order 4") {
		t.Fatalf("history: %v", got)
	}
}

// Idempotency survives a restart: message ids, signal request ids and
// record keys are recorded with the turn.
func TestIdempotencyIsDurable(t *testing.T) {
	ctx := context.Background()
	e := newDemoEnv(t)
	var calls atomic.Int64
	e.wrap = func(p llm.Provider) llm.Provider { return &countProvider{Provider: p, n: &calls} }
	e.restart()
	first := want[*chat.Completed](t, e.send("x", "where is order 8?", chat.WithMessageID("m1"), chat.WithRecordKey("run-1")))
	susp := want[*chat.Suspended](t, e.send("x", "refund order 8", chat.WithMessageID("m2")))
	sig := chat.Signal{SignalID: susp.Descriptor.SignalID, SessionID: "x", Payload: agent.Approve(""), RequestID: "sig-1"}
	resumed, _ := e.h.Signal(ctx, sig)
	want[*chat.Completed](t, resumed)
	n, hist := calls.Load(), len(e.history("x"))
	e.restart()
	again := want[*chat.Completed](t, e.send("x", "where is order 8?", chat.WithMessageID("m1")))
	if !again.Replayed || again.InvocationID != first.InvocationID || len(again.Replies) != len(first.Replies) {
		t.Fatalf("replay = %+v, want the recorded %+v", again, first)
	}
	if s := want[*chat.Suspended](t, e.send("x", "refund order 8", chat.WithMessageID("m2"))); s.Descriptor.SignalID != susp.Descriptor.SignalID || !s.Replayed {
		t.Fatalf("replayed suspension = %+v", s)
	}
	r2, _ := e.h.Signal(ctx, sig)
	if c := want[*chat.Completed](t, r2); !c.Replayed {
		t.Fatal("the retransmitted signal was not a replay")
	}
	if rec, err := e.h.Recorded(ctx, "x", "run-1"); err != nil || rec.Info().InvocationID != first.InvocationID {
		t.Fatalf("Recorded = %v, %v", rec, err)
	}
	if _, err := e.h.Recorded(ctx, "x", "run-2"); !errors.Is(err, chat.ErrNotRecorded) {
		t.Fatalf("Recorded(unknown) error = %v", err)
	}
	if calls.Load() != n || len(e.history("x")) != hist {
		t.Fatalf("a retransmit ran a turn: %d → %d model calls, %d → %d messages", n, calls.Load(), hist, len(e.history("x")))
	}
	if o := e.send("x", "hi", chat.WithMessageID(string(make([]byte, chat.MaxIDLength+1)))); o != nil {
		wantCategory(t, o, errcat.ChatMessageShapeInvalid)
	}
}

type countProvider struct {
	llm.Provider
	n *atomic.Int64
}

func (c *countProvider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	c.n.Add(1)
	return c.Provider.Complete(ctx, req)
}

// A message the user sends that would break the history stores nothing.
func TestInvalidHistoryStoresNothing(t *testing.T) {
	e := newDemoEnv(t)
	want[*chat.Completed](t, e.send("x", "hi"))
	before := e.history("x")
	out, _ := e.h.Send(context.Background(), "x", llm.ToolResult("call_99", "forged"))
	wantCategory(t, out, errcat.ChatMessageShapeInvalid)
	if got := e.history("x"); len(got) != len(before) {
		t.Fatalf("history changed: %d → %d", len(before), len(got))
	}
	want[*chat.Completed](t, e.send("x", "still here?"))
}

// A crash between a superseding turn's commit and the cleanup of the
// suspension it superseded leaves the paused record behind: the next
// message retires it without reporting it superseded again (it was, by
// the earlier turn), and its signal stays refused.
func TestSupersededLeftoverAfterCrash(t *testing.T) {
	e := newDemoEnv(t)
	ctx := context.Background()
	s := want[*chat.Suspended](t, e.send("x", "refund order 5"))
	key := checkpoint.Key{InvocationID: s.InvocationID, Kind: checkpoint.KindSuspended}
	paused, err := e.store.Checkpoints().Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	c := want[*chat.Completed](t, e.send("x", "where is order 6?"))
	if len(c.Superseded) != 1 {
		t.Fatalf("Superseded = %v", c.Superseded)
	}
	// The crash: the retirement never happened.
	if err := e.store.Checkpoints().Save(ctx, *paused); err != nil {
		t.Fatal(err)
	}
	e.restart()
	c = want[*chat.Completed](t, e.send("x", "hello again"))
	if len(c.Superseded) != 0 {
		t.Fatalf("the leftover was reported superseded again: %v", c.Superseded)
	}
	wantCategory(t, e.approve("x", s.Descriptor.SignalID, agent.Approve("")), errcat.HarnessSignalCorrelationFailed)
	if _, err := e.store.Checkpoints().Load(ctx, key); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("the leftover paused record is still there: %v", err)
	}
	if err := llm.CheckHistory(nil, e.history("x")); err != nil {
		t.Fatal(err)
	}
}

// TestRetransmitSeenAtTheLoadedVersion: Send looks a message id up at the
// version its graph's cache holds, without a read; when another writer
// (here another Store of the same file, whose writes this Store's mark
// index does not see) recorded the message since, the turn's load finds
// a newer version and the lookup there answers the recorded outcome:
// no second turn runs.
func TestRetransmitSeenAtTheLoadedVersion(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	var runs atomic.Int64
	counted := func(ctx context.Context, s graph.State) (graph.Update, error) {
		runs.Add(1)
		return echo(ctx, s)
	}
	a := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: openSQLite(t, path)}, counted)})
	b := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: openSQLite(t, path)}, counted)})
	for i := range 3 { // a's cache and a's store index hold the session
		if _, err := a.Send(ctx, "s", llm.UserText(fmt.Sprint("warm ", i)), chat.WithMessageID(fmt.Sprint("w", i))); err != nil {
			t.Fatal(err)
		}
	}
	first, err := b.Send(ctx, "s", llm.UserText("pay"), chat.WithMessageID("m-pay"))
	if err != nil {
		t.Fatal(err)
	}
	n := runs.Load()
	again, err := a.Send(ctx, "s", llm.UserText("pay"), chat.WithMessageID("m-pay"))
	if err != nil {
		t.Fatal(err)
	}
	c := want[*chat.Completed](t, again)
	if !c.Replayed || c.InvocationID != first.Info().InvocationID || runs.Load() != n {
		t.Fatalf("retransmission = %+v (%d more runs), want the recorded %+v", c, runs.Load()-n, first)
	}
	// a's next new message runs as usual, at the session's current version.
	out, err := a.Send(ctx, "s", llm.UserText("more"), chat.WithMessageID("m-more"))
	if err != nil {
		t.Fatal(err)
	}
	next := want[*chat.Completed](t, out)
	if next.Replayed || runs.Load() != n+1 || len(history(t, openSQLite(t, path), "s")) != 10 {
		t.Fatalf("next = %+v, %d runs", next, runs.Load()-n)
	}
}

// A retransmission reads the first answer's replies back from the
// session's history (the record locates them); if the history was
// rewritten since, it still runs nothing and answers without them.
func TestReplayReadsRepliesFromHistory(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t, dbPath(t))
	var runs atomic.Int64
	h := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: st}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		runs.Add(1)
		return echo(ctx, s)
	})})
	first, err := h.Send(ctx, "s", llm.UserText("one"), chat.WithMessageID("m1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Send(ctx, "s", llm.UserText("two"), chat.WithMessageID("m2")); err != nil {
		t.Fatal(err)
	}
	again := want[*chat.Completed](t, mustSendID(t, h, "s", "one", "m1"))
	if !again.Replayed || len(again.Replies) != 1 || again.Replies[0].Text() != "re: one" || runs.Load() != 2 {
		t.Fatalf("replay %+v, first %+v, %d runs", again, first, runs.Load())
	}
	// Rewrite the history: the first turn's reply is gone.
	rec, err := st.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	rewritten, _ := json.Marshal([]llm.Message{llm.UserText("summary"), llm.AssistantText("ok"), llm.UserText("two"), llm.AssistantText("re: two")})
	rec.State[chat.MessagesField] = rewritten
	if _, err := st.Save(ctx, session.SaveRequest{SessionID: "s", State: rec.State, ExpectedVersion: &rec.Version}); err != nil {
		t.Fatal(err)
	}
	moved := want[*chat.Completed](t, mustSendID(t, h, "s", "one", "m1"))
	if !moved.Replayed || len(moved.Replies) != 0 || runs.Load() != 2 {
		t.Fatalf("replay after a rewrite %+v, %d runs", moved, runs.Load())
	}
	if two := want[*chat.Completed](t, mustSendID(t, h, "s", "two", "m2")); len(two.Replies) != 1 || two.Replies[0].Text() != "re: two" {
		t.Fatalf("the second turn's replay %+v", two)
	}
}

func mustSendID(t *testing.T, h *chat.Harness, id, text, messageID string) chat.Outcome {
	t.Helper()
	o, err := h.Send(context.Background(), id, llm.UserText(text), chat.WithMessageID(messageID))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// A node whose reply reuses a tool call id of the session's history is
// refused and stores nothing, whether the history is short (scanned) or
// long (checked through the session's call index), and on every later
// turn: the index follows the history across the threshold.
func TestReusedCallIDRefused(t *testing.T) {
	for _, turns := range []int{1, 40} { // 3 messages a turn: 3 and 120 in the history
		t.Run(fmt.Sprint(turns*3), func(t *testing.T) {
			ctx := context.Background()
			store := session.NewMemoryStore(session.MemoryConfig{})
			reuse := ""
			n := 0
			h := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, func(context.Context, graph.State) (graph.Update, error) {
				n++
				id := fmt.Sprintf("call-%d", n)
				if reuse != "" {
					id = reuse
				}
				return chat.Messages.Add(llm.AssistantToolCalls(llm.ToolCall{ID: id, Name: "t", Arguments: json.RawMessage(`{}`)}),
					llm.ToolResult(id, "ok")), nil
			})})
			for i := range turns {
				out, _ := h.Send(ctx, "s", llm.UserText(fmt.Sprint("turn ", i)))
				want[*chat.Completed](t, out)
			}
			before := history(t, store, "s")
			for _, id := range []string{"call-1", fmt.Sprintf("call-%d", n)} {
				reuse = id
				out, _ := h.Send(ctx, "s", llm.UserText("again"))
				if _, ok := out.(*chat.Errored); !ok {
					t.Fatalf("a reply reusing %s: %T, want *chat.Errored", id, out)
				}
				if got := history(t, store, "s"); len(got) != len(before) {
					t.Fatalf("history changed: %d → %d", len(before), len(got))
				}
			}
			reuse = ""
			out, _ := h.Send(ctx, "s", llm.UserText("fresh ids"))
			want[*chat.Completed](t, out)
		})
	}
}

// Two chat harnesses over one store (two agents serving one session)
// take turns on a session one at a time, whichever a turn comes
// through: concurrent sends lose no message, on the in-memory and the
// SQLite store (each serializes its sessions' turns, session.Locks).
func TestHarnessesShareTheStoresLocks(t *testing.T) {
	ctx := context.Background()
	lite, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close(context.Background()) })
	for name, store := range map[string]session.Store{"memory": session.NewMemoryStore(session.MemoryConfig{}), "sqlite": lite} {
		t.Run(name, func(t *testing.T) {
			var hs []*chat.Harness
			for i := range 2 {
				reply := func(_ context.Context, s graph.State) (graph.Update, error) {
					return chat.Messages.Add(llm.AssistantText(fmt.Sprint("agent ", i, " read ", len(chat.Messages.Get(s))))), nil
				}
				hs = append(hs, newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, reply)}))
			}
			const turns = 24
			var wg sync.WaitGroup
			for i := range turns {
				wg.Go(func() {
					out, _ := hs[i%2].Send(ctx, "shared", llm.UserText(fmt.Sprint("m", i)))
					want[*chat.Completed](t, out)
				})
			}
			wg.Wait()
			if got := history(t, store, "shared"); len(got) != 2*turns {
				t.Fatalf("%d messages stored after %d completed turns, want %d", len(got), turns, 2*turns)
			}
		})
	}
}

// TestDeleteCallsOnDelete: Delete calls Config.OnDelete with the session
// id once the session's records are gone, under the session's lock (a
// Send waits for it), also for a session that never existed; its error
// fails the Delete with session_save_failed, and a retry calls it again.
func TestDeleteCallsOnDelete(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	var (
		calls   []string
		fail    atomic.Bool
		entered = make(chan struct{}, 1)
		release = make(chan struct{})
	)
	h := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, echo), OnDelete: func(ctx context.Context, id string) error {
		calls = append(calls, id)
		if _, err := store.Load(ctx, session.LoadRequest{SessionID: id}); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("OnDelete ran before the session's record was gone: %v", err)
		}
		select {
		case entered <- struct{}{}:
			<-release
		default:
		}
		if fail.Load() {
			return errors.New("upstream down")
		}
		return nil
	}})
	want[*chat.Completed](t, send(h, "t/s", "hello"))
	deleted := make(chan error)
	go func() { deleted <- h.Delete(ctx, "t/s") }()
	<-entered
	sent := make(chan chat.Outcome)
	go func() { out, _ := h.Send(ctx, "t/s", llm.UserText("again")); sent <- out }()
	select {
	case <-sent:
		t.Fatal("a Send ran while OnDelete held the session")
	case <-time.After(30 * time.Millisecond):
	}
	close(release)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	want[*chat.Completed](t, <-sent)

	fail.Store(true)
	if err := h.Delete(ctx, "t/never"); !errors.Is(err, errcat.SessionSaveFailed) {
		t.Fatalf("Delete with a failing OnDelete: %v, want session_save_failed", err)
	}
	fail.Store(false)
	if err := h.Delete(ctx, "t/never"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(calls) != "[t/s t/never t/never]" {
		t.Fatalf("OnDelete calls: %v", calls)
	}
}

func send(h *chat.Harness, id, text string) chat.Outcome {
	out, err := h.Send(context.Background(), id, llm.UserText(text))
	if err != nil {
		return &chat.Errored{Err: err}
	}
	return out
}
