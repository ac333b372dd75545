package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// firstCallGated is a model whose first call waits for gate (after
// telling entered); every call answers "ok".
type firstCallGated struct {
	once    sync.Once
	gate    chan struct{}
	entered chan struct{}
}

func (m *firstCallGated) Ready(context.Context) error { return nil }

func (m *firstCallGated) Complete(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	first := false
	m.once.Do(func() { first = true })
	if first {
		m.entered <- struct{}{}
		select {
		case <-m.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop}, nil
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
			m := &firstCallGated{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
			release := sync.OnceFunc(func() { close(m.gate) })
			t.Cleanup(release)
			a, err := agent.New(agent.Config{Provider: m})
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
			t.Cleanup(func() { _ = srv.Stop(ctx); _ = rec.Close(ctx) })
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
			// The second run's start comes after the first run's
			// handoff and text; only the first run's end may follow it
			// (recorded after the first turn let the session go).
			var startAt, lastFirst int
			for i, o := range order {
				switch o {
				case "second " + runtime.EventRequestStarted:
					startAt = i
				case "first " + runtime.EventAdapterEvent:
					lastFirst = i
				}
			}
			if startAt < lastFirst {
				t.Errorf("the waiting turn's start is among the running turn's events:\n%v", order)
			}
		})
	}
}
