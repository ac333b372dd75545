package server_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// ambiguousOnce is a signal coordinator whose first look-up of a signal
// in a session finds two paused invocations, as a session's turn does
// for a moment on stores that write the paused record of its own
// suspension apart from releasing the one it superseded.
type ambiguousOnce struct {
	harness.Coordinator
	armed atomic.Bool
}

func (c *ambiguousOnce) Resolve(ctx context.Context, ref harness.SignalRef) (harness.Subscription, error) {
	if ref.SessionID != "" && c.armed.Swap(false) {
		return harness.Subscription{}, fmt.Errorf("%w: signal %q", harness.ErrAmbiguousSignal, ref.SignalID)
	}
	return c.Coordinator.Resolve(ctx, ref)
}

// An approval whose look-up is ambiguous for a moment is looked up again
// once the session is free, as chat.Signal's is, and resumes the turn.
// Before, the server answered 404 (nothing awaits the signal), and the
// user was told the approval was gone while it still waited.
func TestSignalLookUpAmbiguousForAMoment(t *testing.T) {
	store := servertest.SQLite(t)
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	coord := &ambiguousOnce{Coordinator: harness.NewStoreCoordinator(store.Checkpoints())}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: coord, Locker: store.SessionLocker(sqlite.LockerConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.Serve(t, server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h, Model: demo.ModelName}}, Sessions: store})
	signalID := refundAwaitingApproval(t, ts.URL, "amb")
	coord.armed.Store(true)
	var out struct {
		Outcome string `json:"outcome"`
	}
	code := post(t, ts.URL+"/v1/sessions/amb/signals", `{"signal_id":"`+signalID+`","payload":{"approval":{"approved":true}}}`, &out)
	if code != 200 || out.Outcome != "completed" {
		t.Fatalf("the approval: %d %+v, want the turn resumed", code, out)
	}
}
