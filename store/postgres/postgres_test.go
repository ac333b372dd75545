package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/armature-go/armature/internal/syncbuf"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/checkpoint/checkpointtest"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/runtime/runtimetest"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/session/sessiontest"
	"github.com/armature-go/armature/store/postgres"
)

// open opens a store in a fresh schema of the test database, dropped at
// the end of the test (pgtest: skipped locally without a database,
// failed in CI).
func open(t testing.TB, mutate ...func(*postgres.Config)) *postgres.Store {
	t.Helper()
	schema, _ := pgtest.Schema(t)
	cfg := postgres.Config{URL: pgtest.URL(), Schema: schema}
	for _, m := range mutate {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

func dbURL() string { return pgtest.URL() }

func TestSessionStoreSuite(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store { return open(t) })
}

// Replicas starting together migrate once; a second Open of a migrated
// schema applies nothing.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	st := open(t)
	ctx := t.Context()
	schema := st.Schema()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := postgres.Open(ctx, postgres.Config{URL: dbURL(), Schema: schema})
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{"n": json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
}

// Bad configuration and an unreachable database are clear, categorized
// errors that never print the password.
func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  postgres.Config
		want error
		cat  errcat.Category
	}{
		{"no URL", postgres.Config{}, postgres.ErrInvalidConfig, ""},
		{"bad schema", postgres.Config{URL: dbURL(), Schema: "Robert'); DROP"}, postgres.ErrInvalidConfig, ""},
		{"unreachable", postgres.Config{URL: "postgres://app:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=1"}, nil, errcat.SessionLoadFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			st, err := postgres.Open(ctx, tc.cfg)
			if err == nil {
				st.Close()
				t.Fatal("Open succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if tc.cat != "" && errcat.Of(err) != tc.cat {
				t.Errorf("category %q, want %q (%v)", errcat.Of(err), tc.cat, err)
			}
			if msg := err.Error(); contains(msg, "s3cret") {
				t.Errorf("the error prints the password: %s", msg)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A chat harness on the store: turns append to the history through the
// graph's delta writes, and a retransmitted message id answers the
// recorded outcome (marks in the write's transaction).
func TestChatTurns(t *testing.T) {
	st := open(t)
	ctx := t.Context()
	var runs atomic.Int64
	h := echoChat(t, st, func() { runs.Add(1) })
	for i := range 5 {
		if _, err := h.Send(ctx, "s", llm.UserText(fmt.Sprint("m", i)), chat.WithMessageID(fmt.Sprint("id", i))); err != nil {
			t.Fatal(err)
		}
	}
	again, err := h.Send(ctx, "s", llm.UserText("m2"), chat.WithMessageID("id2"))
	if err != nil || !again.Info().Replayed || runs.Load() != 5 {
		t.Fatalf("retransmission: %+v, %v, %d runs", again, err, runs.Load())
	}
	rec, err := st.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil || len(msgs) != 10 || msgs[9].Text() != "re: m4" {
		t.Fatalf("history %v (%v)", msgs, err)
	}
}

func TestCheckpointStoreSuite(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Store { return open(t).Checkpoints() })
}

// A turn suspends on one replica and is resumed by a signal on another:
// the paused record and the session write commit together, the resume
// deletes the record with its session write, a second signal resumes
// nothing, and deleting the session deletes its paused records.
func TestSuspendOnOneReplicaResumeOnAnother(t *testing.T) {
	a := open(t)
	b := replica(t, a)
	ctx := t.Context()
	approved := graph.NewField[bool]("approved")
	replica := func(st *postgres.Store) *chat.Harness {
		schema, err := chat.NewSchema(approved)
		if err != nil {
			t.Fatal(err)
		}
		g, err := graph.NewBuilder(schema).
			AddNode("ask", func(ctx context.Context, s graph.State) (graph.Update, error) {
				return chat.Messages.Add(llm.AssistantText("approve?")), nil
			}).
			AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "approval:1"})
			}).
			AddNode("act", func(ctx context.Context, s graph.State) (graph.Update, error) {
				return chat.Messages.Add(llm.AssistantText(fmt.Sprint("done: ", approved.Get(s)))), nil
			}).
			SetEntry("ask").AddEdge("ask", "gate").AddEdge("gate", "act").AddEdge("act", graph.End).
			Compile(graph.WithSessions(graph.SessionConfig{Store: st}), graph.WithCheckpointStore(st.Checkpoints()))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.Checkpoints())})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ha, hb := replica(a), replica(b)
	out, err := ha.Send(ctx, "s", llm.UserText("delete everything"))
	if err != nil {
		t.Fatal(err)
	}
	susp, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("outcome %T", out)
	}
	recs, err := b.Checkpoints().List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SessionID: "s"})
	if err != nil || len(recs.Records) != 1 || recs.Records[0].SignalID != "approval:1" {
		t.Fatalf("paused records %+v, %v", recs, err)
	}
	res, err := hb.Signal(ctx, chat.Signal{SignalID: susp.Descriptor.SignalID, SessionID: "s", Payload: graph.Update{"approved": true}})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := res.(*chat.Completed); !ok || c.Replies[len(c.Replies)-1].Text() != "done: true" {
		t.Fatalf("resumed %+v", res)
	}
	if again, _ := ha.Signal(ctx, chat.Signal{SignalID: susp.Descriptor.SignalID, SessionID: "s", Payload: graph.Update{"approved": true}}); errcat.Of(again.(*chat.Errored).Err) != errcat.HarnessSignalCorrelationFailed {
		t.Fatalf("second signal %+v", again)
	}
	rec, err := a.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil || len(msgs) != 3 {
		t.Fatalf("history %v %v", msgs, err)
	}
	if recs, _ := a.Checkpoints().List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SessionID: "s"}); len(recs.Records) != 0 {
		t.Fatalf("the resume left %+v", recs.Records)
	}
	// Suspend again, then delete: the paused record goes with the session.
	if _, err := hb.Send(ctx, "s", llm.UserText("and again")); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if recs, _ := b.Checkpoints().List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SessionID: "s"}); len(recs.Records) != 0 {
		t.Fatalf("the delete left %+v", recs.Records)
	}
}

// Two replicas, each with its Locker, send turns to one session at once:
// no two turns of the session ever run together, none conflicts, every
// message is stored; a wait cut short by its context gives up cleanly;
// a replica whose connection dies frees its sessions.
func TestLockerSerializesReplicas(t *testing.T) {
	a := open(t)
	b := replica(t, a)
	ctx := t.Context()
	var inFlight, worst atomic.Int64
	replica := func(st *postgres.Store) (*chat.Harness, *postgres.Locker) {
		schema, err := chat.NewSchema()
		if err != nil {
			t.Fatal(err)
		}
		g, err := graph.NewBuilder(schema).AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for w := worst.Load(); n > w && !worst.CompareAndSwap(w, n); w = worst.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			msgs := chat.Messages.Get(s)
			return chat.Messages.Add(llm.AssistantText("re: " + msgs[len(msgs)-1].Text())), nil
		}).SetEntry("reply").AddEdge("reply", graph.End).
			Compile(graph.WithSessions(graph.SessionConfig{Store: st, Optimistic: true}))
		if err != nil {
			t.Fatal(err)
		}
		l := st.SessionLocker(postgres.LockerConfig{})
		t.Cleanup(l.Close)
		h, err := chat.New(chat.Config{Graph: g, Locker: l})
		if err != nil {
			t.Fatal(err)
		}
		return h, l
	}
	ha, la := replica(a)
	hb, _ := replica(b)
	const each = 10
	errs := make(chan error, 2*each)
	for i := range each {
		for _, h := range []*chat.Harness{ha, hb} {
			go func() {
				_, err := h.Send(ctx, "s", llm.UserText(fmt.Sprint("m", i)))
				errs <- err
			}()
		}
	}
	for range 2 * each {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if worst.Load() != 1 {
		t.Errorf("%d turns of one session ran at once", worst.Load())
	}
	rec, err := a.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil || len(msgs) != 4*each {
		t.Fatalf("%d messages stored, want %d (%v)", len(msgs), 4*each, err)
	}

	// a holds the session; b's wait ends with its context.
	release, err := la.Lock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	lb := b.SessionLocker(postgres.LockerConfig{})
	t.Cleanup(lb.Close)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := lb.Lock(short, "held"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its deadline: %v", err)
	}
	// TryLock takes a session nobody holds at once, and no other.
	if _, ok, err := lb.TryLock(ctx, "held"); ok || err != nil {
		t.Fatalf("TryLock of a held session: %v, %v", ok, err)
	}
	release()
	release() // idempotent
	// The backend of b's wait that timed out may still be queued for the
	// lock, and take it as a releases it, until the server has processed
	// the closing of its connection: it drops the lock as it ends.
	var rt func()
	for deadline := time.Now().Add(5 * time.Second); ; {
		r, ok, err := lb.TryLock(ctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			rt = r
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("TryLock of a free session: false")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok, err := la.TryLock(ctx, "held"); ok || err != nil {
		t.Fatalf("TryLock of a session another replica took with TryLock: %v, %v", ok, err)
	}
	rt()
	rt() // idempotent
	r2, err := lb.Lock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	r2()

	// A replica that dies (its locker's connections close) frees the
	// sessions it held.
	lc := a.SessionLocker(postgres.LockerConfig{})
	if _, err := lc.Lock(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	lc.Close()
	got, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	r3, err := lb.Lock(got, "orphan")
	if err != nil {
		t.Fatalf("the dead replica's lock was not freed: %v", err)
	}
	r3()
}

func TestRunStoreSuite(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) runtime.Store { return open(t).Runs() })
}

// Event ids follow commit order across concurrent writers: a reader that
// resumes after the last id it saw (an SSE Last-Event-ID) while writers
// append misses nothing.
func TestEventIDsFollowCommitOrder(t *testing.T) {
	runs := open(t).Runs()
	ctx := t.Context()
	const writers, each = 6, 40
	for w := range writers {
		if err := runs.StartRun(ctx, runtime.Run{ID: fmt.Sprint("r", w), SessionID: "s", AgentID: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				if _, err := runs.Append(ctx, runtime.AppendRequest{RunID: fmt.Sprint("r", w),
					Events: []runtime.Event{{Type: "x.test", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	seen, after, finished := 0, int64(0), 0
	for finished < writers || seen < writers*each {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished++
		default:
		}
		evs, err := runs.Events(ctx, runtime.EventsRequest{SessionID: "s", AfterID: after, Limit: runtime.MaxEventsLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.ID <= after {
				t.Fatalf("event %d after %d", e.ID, after)
			}
			after = e.ID
		}
		seen += len(evs)
		if finished == writers && len(evs) == 0 && seen < writers*each {
			t.Fatalf("the reader saw %d of %d events: some committed behind its position", seen, writers*each)
		}
	}
}

// Listen hears of events any run store on the database stored: first a
// call with nothing in particular (read everything: notices may have been
// missed before listening), then the tenant and session of each commit.
func TestListenHearsStoredEvents(t *testing.T) {
	st := open(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	heard := make(chan string, 16)
	done := make(chan error, 1)
	go func() { done <- st.Listen(ctx, func(tenant, sessionID string) { heard <- tenant + "/" + sessionID }) }()
	next := func() string {
		select {
		case h := <-heard:
			return h
		case <-time.After(10 * time.Second):
			t.Fatal("no notice")
			return ""
		}
	}
	if h := next(); h != "/" {
		t.Fatalf("first notice %q, want the resync", h)
	}
	runs := replica(t, st).Runs()
	if err := runs.StartRun(ctx, runtime.Run{Tenant: "acme", ID: "r1", SessionID: "s1", AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: "r1", Events: []runtime.Event{{Type: "x.test"}}}); err != nil {
		t.Fatal(err)
	}
	if h := next(); h != "acme/s1" {
		t.Fatalf("notice %q", h)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Listen returned %v", err)
	}
}

// unfinished lists the ids of st's UnfinishedRuns (of gone replicas
// only, with abandoned).
func unfinished(t *testing.T, st *postgres.Store, abandoned bool) string {
	t.Helper()
	runs, err := st.Runs().UnfinishedRuns(t.Context(), runtime.UnfinishedRequest{StartedBefore: time.Now().Add(time.Minute), Abandoned: abandoned})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return fmt.Sprint(out)
}

// A replica's runs left started are listed for reconciliation only once
// the replica is gone (its Store closed, or its connection dropped), never
// while it may still be running them.
func TestUnfinishedRunsOfLiveReplicasAreNotListed(t *testing.T) {
	b := open(t)
	ctx := t.Context()
	a, err := postgres.Open(ctx, postgres.Config{URL: dbURL(), Schema: b.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Runs().StartRun(ctx, runtime.Run{ID: "ra", SessionID: "s", AgentID: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Runs().StartRun(ctx, runtime.Run{ID: "rb", SessionID: "s", AgentID: "x"}); err != nil {
		t.Fatal(err)
	}
	ids := func(st *postgres.Store, abandoned ...bool) string {
		t.Helper()
		return unfinished(t, st, len(abandoned) > 0)
	}
	if got := ids(b); got != "[rb]" {
		t.Fatalf("with a alive, b lists %s", got)
	}
	if got := ids(a); got != "[ra]" {
		t.Fatalf("a lists %s", got)
	}
	// While serving, a replica reconciles only the runs of gone ones.
	if got := ids(b, true); got != "[]" {
		t.Fatalf("with a alive, b lists as abandoned %s", got)
	}
	a.Close()
	// The server drops a's lock when its session ends, a moment after
	// the connection closes.
	deadline := time.Now().Add(10 * time.Second)
	for got := ids(b); got != "[ra rb]"; got = ids(b) {
		if time.Now().After(deadline) {
			t.Fatalf("with a gone, b lists %s", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := ids(b, true); got != "[ra]" {
		t.Fatalf("with a gone, b lists as abandoned %s", got)
	}
}

// A replica whose lock's connection is lost (its backend terminated: a
// network blip, a pooler, an idle-connection killer) takes its lock
// again at once: the other replicas do not count the runs it is running
// as a gone replica's, and it is not ready until it holds the lock. (The
// lock was lost for good: every run of the replica still running was
// ended run_interrupted at the others' next reconcile pass.)
func TestReplicaLockTakenAgainAfterConnectionLoss(t *testing.T) {
	b := open(t)
	ctx := t.Context()
	a, err := postgres.Open(ctx, postgres.Config{URL: dbURL(), Schema: b.Schema(), OwnerGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Runs().StartRun(ctx, runtime.Run{ID: "ra", SessionID: "s", AgentID: "x"}); err != nil {
		t.Fatal(err)
	}
	abandoned := func() string {
		t.Helper()
		return unfinished(t, b, true)
	}
	id := postgres.Replica(a)
	holder := func() (pid int32) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dbURL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		err = conn.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
			AND classid::bigint = $1 AND objid::bigint = $2`, uint32(id>>32), uint32(id)).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0
		} else if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	for round := range 3 {
		pid := holder()
		if pid == 0 {
			t.Fatalf("round %d: nobody holds a's lock", round)
		}
		conn, err := pgx.Connect(ctx, dbURL())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		if got := abandoned(); got != "[]" {
			t.Fatalf("round %d: with a's lock's connection lost, b lists as abandoned %s", round, got)
		}
		deadline := time.Now().Add(10 * time.Second)
		for a.Ping(ctx) != nil || holder() == 0 || holder() == pid {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: a did not take its lock again (ping: %v)", round, a.Ping(ctx))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Gone for good: listed once the grace has passed.
	a.Close()
	if err := a.Ping(ctx); err == nil {
		t.Fatal("a closed store is ready")
	}
	deadline := time.Now().Add(15 * time.Second)
	for got := abandoned(); got != "[ra]"; got = abandoned() {
		if time.Now().After(deadline) {
			t.Fatalf("with a gone, b lists as abandoned %s", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A turn suspended on replica a and resumed by a signal on replica b
// reaches the listeners subscribed on replica c exactly once (and b's
// own, locally), through the ResumeFeed.
func TestResumedTurnReachesListenersOnOtherReplicas(t *testing.T) {
	first := open(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stores := []*postgres.Store{first}
	for range 2 {
		stores = append(stores, replica(t, first))
	}
	approved := graph.NewField[bool]("approved")
	var hs []*chat.Harness
	for _, st := range stores {
		schema, err := chat.NewSchema(approved)
		if err != nil {
			t.Fatal(err)
		}
		g, err := graph.NewBuilder(schema).
			AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "approval:1"})
			}).
			AddNode("act", func(ctx context.Context, s graph.State) (graph.Update, error) {
				return chat.Messages.Add(llm.AssistantText(fmt.Sprint("done: ", approved.Get(s)))), nil
			}).
			SetEntry("gate").AddEdge("gate", "act").AddEdge("act", graph.End).
			Compile(graph.WithSessions(graph.SessionConfig{Store: st}), graph.WithCheckpointStore(st.Checkpoints()))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.Checkpoints()),
			Locker: st.SessionLocker(postgres.LockerConfig{}), Feed: st.ResumeFeed()})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = h.Follow(ctx) }()
		hs = append(hs, h)
	}
	ha, hb, hc := hs[0], hs[1], hs[2]
	type got struct {
		where string
		out   chat.Outcome
	}
	delivered := make(chan got, 8)
	for name, h := range map[string]*chat.Harness{"b": hb, "c": hc} {
		h.Subscribe("s", func(o chat.Outcome) { delivered <- got{name, o} })
	}
	time.Sleep(2 * time.Second) // the feeds are listening (Follow has no readiness signal)
	out, err := ha.Send(ctx, "s", llm.UserText("go"))
	if err != nil {
		t.Fatal(err)
	}
	susp := out.(*chat.Suspended)
	if _, err := hb.Signal(ctx, chat.Signal{SignalID: susp.Descriptor.SignalID, SessionID: "s", Payload: graph.Update{"approved": true}}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	timeout := time.After(10 * time.Second)
	for len(seen) < 2 {
		select {
		case g := <-delivered:
			seen[g.where]++
			c, ok := g.out.(*chat.Completed)
			if !ok || len(c.Replies) == 0 || c.Replies[len(c.Replies)-1].Text() != "done: true" {
				t.Fatalf("%s got %+v", g.where, g.out)
			}
		case <-timeout:
			t.Fatalf("deliveries %v", seen)
		}
	}
	select {
	case g := <-delivered:
		t.Fatalf("a second delivery on %s", g.where)
	case <-time.After(500 * time.Millisecond):
	}
	if seen["b"] != 1 || seen["c"] != 1 {
		t.Fatalf("deliveries %v", seen)
	}
}

// Prune deletes finished runs by age, then oldest first while the
// estimate is over the bound, never a started run, and their events with
// them.
func TestPrune(t *testing.T) {
	runs := open(t).Runs()
	ctx := t.Context()
	base := time.Now().Add(-time.Hour)
	for i := range 6 {
		id := fmt.Sprint("r", i)
		if err := runs.StartRun(ctx, runtime.Run{ID: id, SessionID: "s", AgentID: "a", StartedAt: base.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		req := runtime.AppendRequest{RunID: id, Events: []runtime.Event{{Type: "x.test", Data: json.RawMessage(`{"n":1}`)}}}
		if i < 5 { // r5 stays started
			req.Finish = &runtime.FinishRequest{Status: runtime.StatusCompleted, EndedAt: base.Add(time.Duration(i)*time.Minute + time.Second)}
		}
		if _, err := runs.Append(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	res, err := runs.Prune(ctx, runtime.PruneRequest{EndedBefore: base.Add(2 * time.Minute)})
	if err != nil || res.Runs != 2 || res.Events != 2 || res.Bytes <= 0 {
		t.Fatalf("by age: %+v, %v", res, err)
	}
	if _, err := runs.Run(ctx, "", "r1"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("r1 after the prune: %v", err)
	}
	res, err = runs.Prune(ctx, runtime.PruneRequest{MaxBytes: 1})
	if err != nil || res.Runs != 3 || res.Events != 3 {
		t.Fatalf("by size: %+v, %v", res, err)
	}
	if r, err := runs.Run(ctx, "", "r5"); err != nil || r.Status != runtime.StatusStarted {
		t.Fatalf("the started run: %+v, %v", r, err)
	}
	if _, err := runs.Prune(ctx, runtime.PruneRequest{MaxBytes: -1}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Fatalf("a negative bound: %v", err)
	}
}

// tcpProxy forwards connections to the database until cut closes them
// all (and refuses new ones until restore).
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	down   bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			if down {
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// proxiedStore opens a store in a fresh schema through a tcpProxy to
// the test database, so that the test can cut the database away.
func proxiedStore(t *testing.T) (*postgres.Store, *tcpProxy) {
	t.Helper()
	schema, _ := pgtest.Schema(t)
	u, err := neturl.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	st, err := postgres.Open(t.Context(), postgres.Config{URL: u.String(), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st, proxy
}

func (p *tcpProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// A connection lost in the middle of a turn fails the turn with a
// categorized, retryable error and corrupts nothing: once the database
// answers again, the session holds its earlier history and the retried
// turn completes.
func TestConnectionLostMidTurn(t *testing.T) {
	ctx := t.Context()
	st, proxy := proxiedStore(t)
	var cutNext atomic.Bool
	h := echoChat(t, st, func() {
		if cutNext.Swap(false) {
			proxy.cut() // the database goes away while the model "answers"
		}
	})
	if _, err := h.Send(ctx, "s", llm.UserText("one")); err != nil {
		t.Fatal(err)
	}
	cutNext.Store(true)
	out, err := h.Send(ctx, "s", llm.UserText("two"))
	e, ok := out.(*chat.Errored)
	if err == nil || !ok || e.Bucket != harness.RetryableTransient {
		t.Fatalf("the turn that lost its connection: %+v, %v", out, err)
	}
	proxy.restore()
	if _, err := h.Send(ctx, "s", llm.UserText("two")); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	rec, err := st.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Text())
	}
	if got := fmt.Sprint(texts); got != "[one re: one two re: two]" {
		t.Fatalf("history %s", got)
	}
}

// echoChat is a chat harness on st whose one node calls before, then
// answers "re: <the last message>".
func echoChat(t *testing.T, st *postgres.Store, before func(), mutate ...func(*chat.Config)) *chat.Harness {
	t.Helper()
	schema, err := chat.NewSchema()
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.NewBuilder(schema).AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) {
		before()
		msgs := chat.Messages.Get(s)
		return chat.Messages.Add(llm.AssistantText("re: " + msgs[len(msgs)-1].Text())), nil
	}).SetEntry("reply").AddEdge("reply", graph.End).Compile(graph.WithSessions(graph.SessionConfig{Store: st}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := chat.Config{Graph: g}
	for _, m := range mutate {
		m(&cfg)
	}
	h, err := chat.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// replica opens another Store on st's schema (another replica), closed
// at the end of the test.
func replica(t *testing.T, st *postgres.Store) *postgres.Store {
	t.Helper()
	r, err := postgres.Open(t.Context(), postgres.Config{URL: dbURL(), Schema: st.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// A ResumeFeed whose listening connection drops delivers, once it is
// back, the announcements made meanwhile (they are rows too), each once;
// not those made before it first listened, nor its own.
func TestResumeFeedRecoversMissedAnnouncements(t *testing.T) {
	a := open(t)
	b := replica(t, a)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	fa, fb := a.ResumeFeed(), b.ResumeFeed()
	admin, err := pgx.Connect(ctx, dbURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if err := fa.Announce(ctx, "s", "before"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	go func() { _ = fb.Listen(ctx, func(sessionID, key string) { got <- sessionID + "/" + key }) }()
	listener := func(not int) int { return listenerPID(t, admin, postgres.ResumedChannel(b), not) }
	expect := func(want string) {
		t.Helper()
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("delivered %q, want %q", g, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q was not delivered", want)
		}
	}
	pid := listener(0)
	if err := fa.Announce(ctx, "s", "k1"); err != nil {
		t.Fatal(err)
	}
	expect("s/k1")
	// Cut the feed's connection and announce while it is down (it
	// reconnects after a backoff of 100ms).
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	if err := fa.Announce(ctx, "s", "k2"); err != nil {
		t.Fatal(err)
	}
	expect("s/k2")
	listener(pid) // a new connection listens
	if err := fb.Announce(ctx, "s", "own"); err != nil {
		t.Fatal(err)
	}
	if err := fa.Announce(ctx, "s", "k3"); err != nil {
		t.Fatal(err)
	}
	expect("s/k3")
	select {
	case g := <-got:
		t.Fatalf("an extra delivery %q", g)
	case <-time.After(300 * time.Millisecond):
	}
}

// listenerPID waits for the backend listening on channel, other than
// not, and returns its pid.
func listenerPID(t *testing.T, admin *pgx.Conn, channel string, not int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pid int
		err := admin.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN ' || $1 AND pid <> $2`,
			channel, not).Scan(&pid)
		if err == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s: %v", channel, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A cancel request made while a replica's listening connection is down
// reaches it once it is back (requests are rows too), once; a request
// made before it first listened does not.
func TestCancelRequestsSurviveADroppedListener(t *testing.T) {
	a := open(t)
	b := replica(t, a)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	admin, err := pgx.Connect(ctx, dbURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if err := a.RequestCancel(ctx, "acme", "before"); err != nil {
		t.Fatal(err)
	}
	heard := make(chan string, 16)
	go func() { _ = b.ListenCancels(ctx, func(tenant, runID string) { heard <- tenant + "/" + runID }) }()
	expect := func(want string) {
		t.Helper()
		select {
		case h := <-heard:
			if h != want {
				t.Fatalf("heard %q, want %q", h, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q was not heard", want)
		}
	}
	pid := listenerPID(t, admin, postgres.CancelChannel(b), 0)
	if err := a.RequestCancel(ctx, "acme", "r1"); err != nil {
		t.Fatal(err)
	}
	expect("acme/r1")
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	if err := a.RequestCancel(ctx, "globex", "r2"); err != nil {
		t.Fatal(err)
	}
	expect("globex/r2")
	listenerPID(t, admin, postgres.CancelChannel(b), pid)
	if err := a.RequestCancel(ctx, "acme", "r3"); err != nil {
		t.Fatal(err)
	}
	expect("acme/r3")
	select {
	case h := <-heard:
		t.Fatalf("an extra delivery %q", h)
	case <-time.After(300 * time.Millisecond):
	}
	// A request too long for a notification is refused, not truncated.
	if err := a.RequestCancel(ctx, "acme", strings.Repeat("x", 8000)); err == nil {
		t.Fatal("an 8000-byte run id was accepted")
	}
}

// A cancel request made on one replica reaches the cancel listeners of
// every replica on the schema (server.CancelRelay), and none of another
// schema's.
func TestCancelRequestsReachEveryReplica(t *testing.T) {
	a := open(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := replica(t, a)
	other := open(t) // another deployment: another schema
	heard := make(chan string, 64)
	for name, st := range map[string]*postgres.Store{"a": a, "b": b, "other": other} {
		go func() {
			_ = st.ListenCancels(ctx, func(tenant, runID string) {
				// The loop below asks again every 50 ms until both
				// replicas heard it, and stops reading then: a send must
				// not block the listener (and the store's Close) after.
				select {
				case heard <- name + " " + tenant + "/" + runID:
				case <-ctx.Done():
				}
			})
		}()
	}
	// The listeners connect in the background: ask until both replicas
	// heard it.
	got := map[string]bool{}
	for deadline := time.Now().Add(10 * time.Second); !got["a acme/r1"] || !got["b acme/r1"]; {
		if time.Now().After(deadline) {
			t.Fatalf("heard %v, want replicas a and b", got)
		}
		if err := b.RequestCancel(ctx, "acme", "r1"); err != nil {
			t.Fatal(err)
		}
		select {
		case h := <-heard:
			got[h] = true
		case <-time.After(50 * time.Millisecond):
		}
	}
	for h := range got {
		if strings.HasPrefix(h, "other") {
			t.Fatalf("another schema's replica heard %q", h)
		}
	}
}

// A schema the connection string's search_path names is created when
// missing, as Config.Schema is: before, Open failed on an empty
// database ("no schema has been selected to create in").
func TestOpenCreatesTheSearchPathSchema(t *testing.T) {
	name, url := pgtest.Schema(t)
	admin, err := pgx.Connect(t.Context(), dbURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(t.Context(), `DROP SCHEMA `+name+` CASCADE`); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(t.Context(), postgres.Config{URL: url})
	if err != nil {
		t.Fatalf("open with search_path=%s, a schema that does not exist: %v", name, err)
	}
	defer st.Close()
	var n int
	if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'sessions'`, name).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the sessions table in %s: %d, %v", name, n, err)
	}
	// A quoted name keeps its case (and "$user" before it is skipped).
	quoted := "T_" + strings.ToUpper(name)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{quoted}.Sanitize()+` CASCADE`)
	})
	q, err := postgres.Open(t.Context(), postgres.Config{URL: strings.Replace(url, "search_path="+name, "search_path="+neturl.QueryEscape(`$user,"`+quoted+`"`), 1)})
	if err != nil {
		t.Fatalf("open with search_path=$user,%q: %v", quoted, err)
	}
	defer q.Close()
	if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'sessions'`, quoted).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the sessions table in %s: %d, %v", quoted, n, err)
	}
}

// TestFirstSchema: the schema Open creates for a search_path is the one
// PostgreSQL creates tables in: "$user" left out, a quoted name as
// written, an unquoted one folded to lower case.
func TestFirstSchema(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"tenant_a", "tenant_a"},
		{"tenant_a, public", "tenant_a"},
		{"Tenant_A", "tenant_a"},
		{`"Tenant A"`, "Tenant A"},
		{`"a""b"`, `a"b`},
		{"$user, tenant_b", "tenant_b"},
		{`"$user",public`, "public"},
		{"", ""},
		{"$user", ""},
		{"a-dash", ""},
		{`"unterminated`, ""},
		{`""`, ""},
	} {
		if got := postgres.FirstSchema(c.path); got != c.want {
			t.Errorf("search_path %q: %q, want %q", c.path, got, c.want)
		}
	}
}

// FuzzFirstSchema: any search_path reads without a panic as no schema or
// one PostgreSQL could name: a quoted entry's name, or an unquoted one
// folded to lower case.
func FuzzFirstSchema(f *testing.F) {
	for _, s := range []string{"tenant_a", `"Tenant A", public`, "$user,x", `"a""b"`, `""`, ",,", `"`, "Ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		got := postgres.FirstSchema(path)
		if got == "" {
			return
		}
		if !strings.Contains(path, `"`) && (got != strings.ToLower(got) || !strings.Contains(strings.ToLower(path), got)) {
			t.Fatalf("search_path %q: %q is not an entry of it folded to lower case", path, got)
		}
	})
}

// TestSessionLockKeyed: the session locks' hash is keyed by a secret of
// the schema, so a tenant cannot make a session id whose lock is another
// tenant's session's: two ids whose unkeyed FNV-1a hashes collide (what
// the lock used, found in under a second) hold locks of their own.
// Before, a turn on the crafted id held up every turn of the other.
func TestSessionLockKeyed(t *testing.T) {
	a := open(t)
	ctx := t.Context()
	b, err := postgres.Open(ctx, postgres.Config{URL: dbURL(), Schema: a.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	seen := map[uint32]string{}
	var x, y string
	for i := 0; y == ""; i++ {
		id := fmt.Sprintf("other/crafted-%d", i)
		h := fnv.New32a()
		h.Write([]byte(id))
		if prev, ok := seen[h.Sum32()]; ok {
			x, y = prev, id
		}
		seen[h.Sum32()] = id
	}
	la, lb := a.SessionLocker(postgres.LockerConfig{}), b.SessionLocker(postgres.LockerConfig{})
	t.Cleanup(la.Close)
	t.Cleanup(lb.Close)
	release, err := la.Lock(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if r, ok, err := lb.TryLock(ctx, y); err != nil || !ok {
		t.Fatalf("%q (its FNV-1a hash is %q's) shares its lock: %v %v", y, x, ok, err)
	} else {
		r()
	}
	// The same session's lock is one across replicas.
	if _, ok, err := lb.TryLock(ctx, x); err != nil || ok {
		t.Fatalf("the other replica took a held session: %v %v", ok, err)
	}
}

// blackhole is a TCP proxy to the database that can stop forwarding on
// the connections it holds without closing them (a partition, a dropped
// NAT entry): neither end learns the connection is gone. Connections
// made later are forwarded.
type blackhole struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	holes   []*atomic.Bool
	conns   []net.Conn // kept: a collected net.Conn closes its socket
	stopped atomic.Bool
}

func newBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target}
	t.Cleanup(func() {
		b.stopped.Store(true)
		ln.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			hole := &atomic.Bool{}
			b.mu.Lock()
			b.holes, b.conns = append(b.holes, hole), append(b.conns, c, up)
			b.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if err != nil || b.stopped.Load() {
						if !hole.Load() {
							dst.Close()
						}
						return
					}
					if !hole.Load() {
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
				}
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	return b
}

// cut stops forwarding on every connection made so far.
func (b *blackhole) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.holes {
		h.Store(true)
	}
}

// A replica whose lock connection is lost without the server learning
// it (the server's backend lives on, holding the lock) takes the lock
// again: it ends that backend itself. Before, it could never take it
// until the server's keepalives (hours by default) ended the backend,
// and stayed unready.
func TestReplicaLockSilentLoss(t *testing.T) {
	b := open(t)
	ctx := t.Context()
	pc, err := pgx.ParseConfig(dbURL())
	if err != nil {
		t.Fatal(err)
	}
	hole := newBlackhole(t, net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port))))
	pc.Host, pc.Port = "127.0.0.1", uint16(hole.ln.Addr().(*net.TCPAddr).Port)
	url := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pc.User, hole.ln.Addr(), pc.Database)
	logs := &syncbuf.Buffer{}
	a, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: b.Schema(), OwnerGrace: time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Runs().StartRun(ctx, runtime.Run{ID: "ra", SessionID: "s", AgentID: "x"}); err != nil {
		t.Fatal(err)
	}
	id := postgres.Replica(a)
	holder := func() (pid int32) {
		t.Helper()
		err := postgres.Pool(b).QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
			AND classid::bigint = $1 AND objid::bigint = $2`, uint32(uint64(id)>>32), uint32(id)).Scan(&pid)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return pid
	}
	stale := holder()
	hole.cut()
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := a.Ping(pctx)
		cancel()
		if now := holder(); err == nil && now != 0 && now != stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a did not take its lock again (held by %d, was %d): %v\n%s", holder(), stale, err, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := unfinished(t, b, true); got != "[]" {
		t.Fatalf("with a's lock taken again, b lists as abandoned %s", got)
	}
}
