package otelobserver_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
)

// A Synchronous OTel observer beside an asynchronous one whose delivery
// a drain timeout abandoned while the invocation runs: a record node b
// logs afterwards is handled by the synchronous observer, and should
// reach the wrapped handler once.
func TestLogOnceAfterAbandonWithSyncObserver(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var recs []map[string]string
	logger := slog.New(h.obs.LogHandler(recHandler{mu: &mu, recs: &recs}))
	inA, goOn := make(chan struct{}), make(chan struct{})
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			close(inA)
			<-goOn
			return nil, nil
		}).
		AddNode("b", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			logger.InfoContext(ctx, "in b")
			return nil, nil
		}).
		AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddObserver(h.obs.Observe, graph.InvocationEvents(), graph.Synchronous()); err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	defer close(stall)
	slow := func(ctx context.Context, ev graph.Event) error {
		select {
		case <-stall:
		case <-ctx.Done():
		}
		return nil
	}
	if _, err := g.AddObserver(slow); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := g.Invoke(context.Background(), nil); done <- err }()
	<-inA
	if sum, err := g.Drain(context.Background(), graph.DrainTimeout(50*time.Millisecond)); err != nil || !sum.TimeoutReached {
		t.Fatalf("drain %v %v", sum, err)
	}
	time.Sleep(50 * time.Millisecond) // the delivery goroutine sees the cancel
	close(goOn)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != 1 {
		t.Fatalf("node b's one record reached the handler %d times: %v", len(recs), recs)
	}
}
