package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// sqliteServer serves an agent on model p over a SQLite store in a temp
// dir, recording its runs there through a Recorder of its own.
func sqliteServer(t *testing.T, p llm.Provider) (*server.Server, *runtime.Recorder) {
	t.Helper()
	a, err := agent.New(agent.Config{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "x", Chat: servertest.Harness(t, store, a)}}, Sessions: store, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()); _ = rec.Close(context.Background()) })
	return srv, rec
}

// TestWaitingTurnStartsOnceItHoldsTheSession: a turn that waits for its
// session behind another turn records its runtime.request.started once
// it holds the session (PROTOCOLS.md: "turn accepted (validated,
// session lock held)"), so in the session's events it follows the
// running turn's handoff and text rather than showing among them;
// every run's events still begin with its start. Before, the waiting
// turn's start was recorded when its run began, before the wait. Both
// ways a turn's records are written are checked: with somebody
// watching the session (each event written at once) and without (the
// records batched by the flusher).
func TestWaitingTurnStartsOnceItHoldsTheSession(t *testing.T) {
	for _, watched := range []bool{false, true} {
		t.Run(fmt.Sprintf("watched=%v", watched), func(t *testing.T) {
			ctx := context.Background()
			m := &gatedModel{gate: make(chan struct{}), entered: make(chan struct{}, 2)}
			release := sync.OnceFunc(func() { close(m.gate) })
			t.Cleanup(release)
			srv, rec := sqliteServer(t, m)
			if watched {
				_, cancel := rec.Subscribe(ctx, server.DefaultTenant, "s")
				defer cancel()
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			submit := func(text string) {
				wg.Go(func() {
					if _, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText(text)}); err != nil {
						t.Error(err)
					}
				})
			}
			submit("first")
			<-m.entered // the first turn holds the session, in its model call
			submit("second")
			// The second turn's run begins, then waits for the session.
			deadline := time.Now().Add(10 * time.Second)
			for {
				resp, err := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "s"})
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Runs) == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("runs: %+v", resp.Runs)
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // the flusher's linger: a start recorded early would be written now
			release()
			wg.Wait()
			if err := rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			evs, err := srv.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, SessionID: "s", Limit: runtime.MaxEventsLimit})
			if err != nil {
				t.Fatal(err)
			}
			var order []string
			firstRun, seen := "", map[string]bool{}
			for _, e := range evs {
				if firstRun == "" {
					firstRun = e.RunID
				}
				who := "first"
				if e.RunID != firstRun {
					who = "second"
				}
				if !seen[e.RunID] && e.Type != runtime.EventRequestStarted {
					t.Errorf("run %s's first event is %s", who, e.Type)
				}
				seen[e.RunID] = true
				order = append(order, who+" "+e.Type)
			}
			// The second run's start comes after all of the first
			// run's events, its end included (recorded after the first
			// turn let the session go).
			var startAt, lastFirst int
			for i, o := range order {
				switch {
				case o == "second "+runtime.EventRequestStarted:
					startAt = i
				case strings.HasPrefix(o, "first "):
					lastFirst = i
				}
			}
			if startAt < lastFirst {
				t.Errorf("the waiting turn's start is among the running turn's events:\n%v", order)
			}
		})
	}
}

// gatedModel's calls wait for a token on gate (after telling entered).
type gatedModel struct {
	gate    chan struct{}
	entered chan struct{}
}

func (m *gatedModel) Ready(context.Context) error { return nil }

func (m *gatedModel) Complete(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	m.entered <- struct{}{}
	select {
	case <-m.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop}, nil
}

// TestStartOrderServerWaitingStartOrder is TestWaitingTurnStartsOnceItHoldsTheSession
// over the in-process session lock (memory sessions, memory runs), many
// times: the waiting turn is accepted (under the lock the first turn just
// released) while the first turn's last events and end, which sendStream
// records after the chat harness let the session go, are still to come;
// they are stored before the waiting turn's start all the same (the
// runtime's Settle and follow).
func TestStartOrderServerWaitingStartOrder(t *testing.T) {
	ctx := context.Background()
	m := &gatedModel{gate: make(chan struct{}), entered: make(chan struct{}, 2)}
	a, err := agent.New(agent.Config{Provider: m})
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: sessions}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	runs := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runs})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "x", Chat: h}}, Sessions: sessions, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(ctx); _ = rec.Close(ctx) })
	bad := 0
	const n = 200
	for i := range n {
		sid := fmt.Sprintf("s%d", i)
		var wg sync.WaitGroup
		submit := func(text string) {
			wg.Go(func() {
				if _, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: sid, Message: llm.UserText(text)}); err != nil {
					t.Error(err)
				}
			})
		}
		submit("first")
		<-m.entered
		submit("second")
		for {
			resp, err := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: sid})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Runs) == 2 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(3 * time.Millisecond)
		m.gate <- struct{}{}
		<-m.entered
		m.gate <- struct{}{}
		wg.Wait()
		evs, err := srv.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, SessionID: sid, Limit: runtime.MaxEventsLimit})
		if err != nil {
			t.Fatal(err)
		}
		first := evs[0].RunID
		var order []string
		seenSecondStart := false
		for _, e := range evs {
			if e.RunID != first && e.Type == runtime.EventRequestStarted {
				seenSecondStart = true
			}
			if e.RunID == first && seenSecondStart {
				bad++
				if bad == 1 {
					for _, e := range evs {
						who := "first"
						if e.RunID != first {
							who = "second"
						}
						order = append(order, who+" "+e.Type)
					}
					t.Logf("session %s: %q", sid, order)
				}
				break
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d waiting turns' starts were stored before the first turn's events", bad, n)
	}
}
