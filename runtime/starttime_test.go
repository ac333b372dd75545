package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// TestRunStartStampedNoLaterThanFirstEvent checks that a run's event
// times never go backwards, including for runs whose first event is not
// their acceptance: a direct tool call's runtime.tool.direct.started, or
// a cancelled suspension's resolution run, which ends at once. emitRaw
// and end take the event's time, so runtime.request.started must be
// stamped no later than that event, or readers ordering a run by time
// see it start after its first step.
func TestRunStartStampedNoLaterThanFirstEvent(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Millisecond)
		return clock
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runtime.NewMemoryStore(runtime.MemoryConfig{}), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(name string, end func(*runtime.Turn, context.Context) error) {
		t.Helper()
		turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "t", SessionID: "s-" + name, AgentID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if err := end(turn, tctx); err != nil {
			t.Fatal(err)
		}
		if err := turn.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err := rec.Store().Events(ctx, runtime.EventsRequest{Tenant: "t", RunID: turn.ID()})
		if err != nil || len(evs) < 2 {
			t.Fatalf("%s: got events %v, error %v; want at least 2 events", name, evs, err)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].Time.Before(evs[i-1].Time) {
				t.Errorf("%s: got event %d (%s at %s) stamped before event %d (%s at %s); want event times never to go backwards", name,
					evs[i].Seq, evs[i].Type, evs[i].Time.Format(time.StampMilli), evs[i-1].Seq, evs[i-1].Type, evs[i-1].Time.Format(time.StampMilli))
			}
		}
	}
	check("emit", func(turn *runtime.Turn, tctx context.Context) error {
		if err := turn.Emit(tctx, runtime.EventToolDirectStarted, map[string]any{"toolId": "x"}); err != nil {
			return err
		}
		return turn.Complete(tctx, "ok")
	})
	check("end", func(turn *runtime.Turn, tctx context.Context) error {
		return turn.Cancelled(tctx, "cancelled while awaiting approval")
	})
}
