package graph_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
)

// Emit in an invocation whose asynchronous delivery a drain timeout
// abandoned: the Synchronous observer still receives the payload, yet
// Emit reports false ("the caller then handles the payload itself"), so
// a caller following the contract handles it twice.
func TestEmitTrueOnceSyncObserversHadIt(t *testing.T) {
	x := graph.NewField[int]("x")
	inA, goOn := make(chan struct{}), make(chan struct{})
	var emitted atomic.Value
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			close(inA)
			<-goOn
			return nil, nil
		}).
		AddNode("b", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			emitted.Store(graph.Emit(ctx, "payload"))
			return nil, nil
		}).AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	var syncGot atomic.Int32
	if _, err := g.AddObserver(func(_ context.Context, ev graph.Event) error {
		if e, ok := ev.(*graph.EmittedEvent); ok && e.Payload == "payload" {
			syncGot.Add(1)
		}
		return nil
	}, graph.InvocationEvents(), graph.Synchronous()); err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	defer close(stall)
	if _, err := g.AddObserver(func(ctx context.Context, _ graph.Event) error {
		select {
		case <-stall:
		case <-ctx.Done():
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := g.Invoke(context.Background(), nil); done <- err }()
	<-inA
	if sum, err := g.Drain(context.Background(), graph.DrainTimeout(50*time.Millisecond)); err != nil || !sum.TimeoutReached {
		t.Fatalf("drain %v %v", sum, err)
	}
	time.Sleep(50 * time.Millisecond)
	close(goOn)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := emitted.Load().(bool); !got && syncGot.Load() == 1 {
		t.Fatalf("Emit returned false, but the Synchronous observer received the payload (%d time)", syncGot.Load())
	}
}
