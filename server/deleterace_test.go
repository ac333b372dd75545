package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// slowAppends is a run store whose Append (the write of a watched
// turn's records, on the turn's own path) takes 100ms once slow is set.
type slowAppends struct {
	runtime.Store
	slow atomic.Bool
}

func (s *slowAppends) Append(ctx context.Context, req runtime.AppendRequest) ([]runtime.Event, error) {
	if s.slow.Load() {
		time.Sleep(100 * time.Millisecond)
	}
	return s.Store.Append(ctx, req)
}

func (s *slowAppends) WriteTurns(ctx context.Context, turns []runtime.TurnRecord) ([]runtime.Event, error) {
	return s.Store.(runtime.BatchWriter).WriteTurns(ctx, turns)
}

func (s *slowAppends) PurgeSession(ctx context.Context, req runtime.PurgeRequest) (runtime.PurgeResult, error) {
	return s.Store.(runtime.SessionPurger).PurgeSession(ctx, req)
}

// recordedServer serves agent a, on store, recording its runs in runs
// through a Recorder of its own, over HTTP too.
func recordedServer(t *testing.T, store *sqlite.Store, runs runtime.Store, a *agent.Agent) (*server.Server, *runtime.Recorder, *httptest.Server) {
	t.Helper()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runs})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "x", Chat: servertest.Harness(t, store, a)}}, Sessions: store, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); _ = srv.Stop(context.Background()); _ = rec.Close(context.Background()) })
	return srv, rec, hs
}

// TestDeleteRacingApprovalPurgesTheResume: a DELETE of the session that
// waits for a resumed turn (an approval) takes the session the moment
// the turn releases it, before the server has recorded the resumed
// run's end. The purge then waits for that end and deletes the run with
// the conversation, also when somebody watches the session (its end is
// then written on the turn's own path, after the turn is marked
// ended). Before, the resumed run (its tool call, the refund's
// result and the reply) was kept as a turn in flight and outlived the
// delete, listed under the session id and readable by run id.
func TestDeleteRacingApprovalPurgesTheResume(t *testing.T) {
	ctx := context.Background()
	for round := range 8 {
		m := &gatedResume{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
		release := sync.OnceFunc(func() { close(m.gate) })
		t.Cleanup(release)
		a, err := agent.New(agent.Config{Provider: m, Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		store := servertest.SQLite(t)
		runs := &slowAppends{Store: store.Runs()}
		srv, rec, hs := recordedServer(t, store, runs, a)
		first, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("refund order 7")})
		if err != nil {
			t.Fatal(err)
		}
		s, ok := first.Outcome.(*chat.Suspended)
		if !ok {
			t.Fatalf("round %d: the refund: %#v", round, first.Outcome)
		}
		if round%2 == 1 {
			// Somebody watches the session (a chat page): the turn's
			// records are written on its own path, its end too.
			_, stop := rec.Subscribe(ctx, server.DefaultTenant, "s")
			defer stop()
		}
		var wg sync.WaitGroup
		var resumed *adapter.Response
		wg.Go(func() {
			resumed, _ = srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Signal: &adapter.Signal{
				SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")}})
		})
		<-m.entered // the resume holds the session, in its model call
		deleted := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodDelete, hs.URL+"/v1/sessions/s", nil)
			resp, err := hs.Client().Do(req)
			if err != nil {
				deleted <- 0
				return
			}
			resp.Body.Close()
			deleted <- resp.StatusCode
		}()
		time.Sleep(20 * time.Millisecond) // the delete waits for the session
		runs.slow.Store(true)             // the end, written by the turn when watched, takes a while
		release()
		if code := <-deleted; code != http.StatusNoContent {
			t.Fatalf("round %d: DELETE answered %d", round, code)
		}
		wg.Wait()
		if _, ok := resumed.Outcome.(*chat.Completed); !ok {
			t.Fatalf("round %d: the resume: %#v", round, resumed.Outcome)
		}
		if err := rec.Close(ctx); err != nil { // every record written
			t.Fatal(err)
		}
		left, err := store.Runs().ListRuns(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range left.Runs {
			t.Errorf("round %d: run %s (%s, parent %q) outlived the delete of its session", round, r.ID, r.Status, r.ParentID)
		}
		if _, err := store.Runs().Run(ctx, server.DefaultTenant, resumed.RunID); err == nil {
			t.Errorf("round %d: the resumed run %s is still readable by id", round, resumed.RunID)
		}
	}
}

// TestDeleteRacingDecisionsRandomized races a DELETE of the session
// against an approval, a denial, or a message that supersedes the
// pending approval, at random offsets (the seed is printed). Whoever
// takes the session first, nothing of the deleted conversation
// outlives the delete: no run that names a parent (a resume, or the
// record of how the suspension ended) is left, and a run left is a
// message's that began a new conversation, which exists. Before, a
// resume that waited for the delete (and resumed nothing) and the
// record of a superseded suspension were left, naming a purged run; and
// a resume whose suspended run the delete purged between the signal's
// look-up and its start was left, naming no parent (about 1 run in 15).
func TestDeleteRacingDecisionsRandomized(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	ctx := context.Background()
	a := mustDemo(t)
	store := servertest.SQLite(t)
	srv, rec, hs := recordedServer(t, store, store.Runs(), a)
	for round := range 30 {
		sid := fmt.Sprintf("r%d", round)
		first, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: sid, Message: llm.UserText("please refund order 7")})
		if err != nil {
			t.Fatal(err)
		}
		s, ok := first.Outcome.(*chat.Suspended)
		if !ok {
			t.Fatalf("round %d: the refund: %#v", round, first.Outcome)
		}
		kind := round % 3
		sendAfter, delay := time.Duration(rng.IntN(3000))*time.Microsecond, time.Duration(rng.IntN(3000))*time.Microsecond
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(sendAfter)
			switch kind {
			case 0, 1:
				_, _ = srv.Submit(ctx, adapter.SubmitRequest{SessionID: sid, Signal: &adapter.Signal{
					SignalID: s.Descriptor.SignalID, Payload: map[bool]graph.Update{true: agent.Approve(""), false: agent.Deny("no")}[kind == 0]}})
			default:
				_, _ = srv.Submit(ctx, adapter.SubmitRequest{SessionID: sid, Message: llm.UserText("where is order 12?")})
			}
		})
		wg.Go(func() {
			time.Sleep(delay)
			req, _ := http.NewRequest(http.MethodDelete, hs.URL+"/v1/sessions/"+sid, nil)
			if resp, err := hs.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		})
		wg.Wait()
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		left, err := store.Runs().ListRuns(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: sid})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range left.Runs {
			if r.ParentID != "" || r.ID == first.RunID {
				t.Errorf("round %d (kind %d): run %s (%s, parent %q, %+v) of the deleted conversation outlived the delete", round, kind, r.ID, r.Status, r.ParentID, r.Error)
				continue
			}
			if r.Error != nil && r.Error.Category == "harness_signal_correlation_failed" {
				t.Errorf("round %d (kind %d): the refused resume's run %s outlived the delete: %+v", round, kind, r.ID, r)
				continue
			}
			// A message that waited for the delete: its new conversation.
			if _, err := store.Load(ctx, session.LoadRequest{SessionID: server.DefaultTenant + "/" + sid}); err != nil {
				t.Errorf("round %d (kind %d): run %s (%s) left, but its session: %v; %+v", round, kind, r.ID, r.Status, err, r)
			}
		}
	}
}
