package adaptertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// CheckRandomRuns is CheckRandomTurns through the RuntimeClient: random
// plain turns, turns whose model call or session write fails, refunds,
// approvals and denials (some whose resumed model call fails), turns
// cancelled through RuntimeLifecycle.Cancel while their model call runs,
// and restarts of the server and adapter (cfg.Restart; cfg.Durable as
// for CheckRandomTurns), each submitted with server.Submit. After each,
// the turn's run record must end in the status its outcome says
// (completed, suspended, failed, cancelled), and after the last, no run
// of the session may be left started. The seed is logged
// (ARMATURE_TEST_SEED replays it).
func CheckRandomRuns(t *testing.T, cfg RandomConfig) {
	t.Helper()
	seed, rng, steps := cfg.start(t, 1)
	ctx := context.Background()
	m, ag := rollbackAgent(cfg.Backend, cfg.Section)
	sessions := &FlakySessions{Store: session.NewMemoryStore(session.MemoryConfig{})}
	records := checkpoint.NewMemoryStore(nil)
	runs := runtime.NewMemoryStore(runtime.MemoryConfig{})
	var (
		srv  *server.Server
		stop = func() {}
	)
	build := func() {
		stop()
		a, err := cfg.Factory(ctx, adapter.FactoryRequest{Agent: ag})
		if err != nil {
			t.Fatal(err)
		}
		served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: ag, Sessions: sessions, Records: records})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runs})
		if err != nil {
			t.Fatal(err)
		}
		if srv, err = server.New(server.Config{Agents: []*server.Agent{served}, Sessions: sessions, Runs: rec}); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.RecoverRuns(ctx); err != nil {
			t.Fatal(err)
		}
		s := srv
		stop = func() {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_ = s.Stop(sctx)
			_ = rec.Close(sctx)
			if c, ok := a.(interface{ Close() error }); ok {
				_ = c.Close()
			}
		}
	}
	build()
	defer func() { stop() }()
	const tenant, id = server.DefaultTenant, "runs"
	// settled waits for the run's record to leave started.
	settled := func(step int, op, runID string) runtime.Status {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			run, err := srv.Run(ctx, tenant, runID)
			if err == nil && run.Status != runtime.StatusStarted {
				return run.Status
			}
			if time.Now().After(deadline) {
				t.Fatalf("seed %d, step %d (%s): run %s never settled (%v, %v)", seed, step, op, runID, run, err)
			}
		}
	}
	want := func(step int, op string, resp *adapter.Response, err error, status runtime.Status) {
		t.Helper()
		if err != nil || resp == nil || resp.RunID == "" {
			t.Fatalf("seed %d, step %d (%s): %+v, %v", seed, step, op, resp, err)
		}
		if got := settled(step, op, resp.RunID); got != status {
			t.Fatalf("seed %d, step %d (%s): outcome %#v, run status %s, want %s", seed, step, op, resp.Outcome, got, status)
		}
	}
	var pending string
	for step := range steps {
		n := rng.IntN(10)
		switch {
		case n == 0 && cfg.Restart:
			build()
			if !cfg.Durable {
				pending = ""
			}
			t.Logf("step %d: restart", step)
		case n <= 2 && pending != "":
			approve, fail := rng.IntN(3) > 0, rng.IntN(3) == 0
			op := fmt.Sprintf("approve=%v, model fails=%v", approve, fail)
			if fail {
				m.failNext(1)
			}
			payload := map[string]any{"approval": map[string]any{"approved": approve}}
			resp, err := srv.Submit(ctx, adapter.SubmitRequest{Tenant: tenant, SessionID: id, Signal: &adapter.Signal{SignalID: pending, Payload: payload}})
			m.failNext(0)
			pending = ""
			t.Logf("step %d: %s", step, op)
			status := runtime.StatusCompleted
			if fail {
				status = runtime.StatusFailed
			}
			want(step, op, resp, err, status)
		case n == 3:
			text := fmt.Sprintf("refund %d", step)
			resp, err := srv.Submit(ctx, adapter.SubmitRequest{Tenant: tenant, SessionID: id, Message: llm.UserText(text)})
			t.Logf("step %d: %s", step, text)
			want(step, text, resp, err, runtime.StatusSuspended)
			s, ok := resp.Outcome.(*chat.Suspended)
			if !ok {
				t.Fatalf("seed %d, step %d (%s): %#v", seed, step, text, resp.Outcome)
			}
			pending = s.Descriptor.SignalID
		case n == 4:
			text := fmt.Sprintf("slow %d %s", step, SlowWord)
			type result struct {
				resp *adapter.Response
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := srv.Submit(ctx, adapter.SubmitRequest{Tenant: tenant, SessionID: id, Message: llm.UserText(text)})
				done <- result{resp, err}
			}()
			var runID string
			for deadline := time.Now().Add(10 * time.Second); runID == ""; time.Sleep(time.Millisecond) {
				if sent := m.last(); len(sent) > 0 && sent[len(sent)-1].Text() == text {
					list, err := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: tenant, SessionID: id})
					if err == nil && len(list.Runs) > 0 && list.Runs[0].Status == runtime.StatusStarted {
						runID = list.Runs[0].ID
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("seed %d, step %d: the turn to cancel never started", seed, step)
				}
			}
			if ok, err := srv.Cancel(ctx, tenant, runID); !ok || err != nil {
				t.Fatalf("seed %d, step %d: cancel %s: %v, %v", seed, step, runID, ok, err)
			}
			r := <-done
			t.Logf("step %d: cancelled", step)
			want(step, "cancelled", r.resp, r.err, runtime.StatusCancelled)
		default:
			text := fmt.Sprintf("message %d", step)
			op, status := "plain", runtime.StatusCompleted
			switch rng.IntN(4) {
			case 0:
				op, status = "model fails", runtime.StatusFailed
				m.failNext(1)
			case 1:
				op, status = "session write fails", runtime.StatusFailed
				sessions.FailNext(1)
			}
			resp, err := srv.Submit(ctx, adapter.SubmitRequest{Tenant: tenant, SessionID: id, Message: llm.UserText(text)})
			m.failNext(0)
			sessions.FailNext(0)
			t.Logf("step %d: %s", step, op)
			want(step, op, resp, err, status)
			if op == "plain" {
				pending = ""
			}
		}
	}
	list, err := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: tenant, SessionID: id, PageSize: runtime.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range list.Runs {
		if run.Status == runtime.StatusStarted {
			t.Fatalf("seed %d: run %s is left started", seed, run.ID)
		}
	}
}
