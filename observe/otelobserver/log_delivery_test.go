package otelobserver_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// A record logged with a node's context after its invocation ended (a
// goroutine the node left running: a background write, a stream reader,
// an async tool) is handled at once by Observer.LogHandler: graph.Emit
// refuses it once the invocation ended, rather than queue it where no
// delivery will take it.
func TestLogAfterInvocationEndIsHandled(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var recs []map[string]string
	logger := slog.New(h.obs.LogHandler(recHandler{mu: &mu, recs: &recs}))
	logged, ended := make(chan struct{}), make(chan struct{})
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			go func() {
				<-ended // the invocation has ended and its events are delivered
				logger.ErrorContext(ctx, "background job failed")
				close(logged)
			}()
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	_ = h.spans(t, g)
	close(ended)
	<-logged
	time.Sleep(100 * time.Millisecond)
	if _, err := g.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != 1 {
		t.Fatalf("an ERROR record logged after the invocation ended reached the handler %d times, want 1 (records %v)", len(recs), recs)
	}
}

// A node's record with an observer that takes invocation events but is
// not this OTel observer (a Langfuse observer, a run recorder): Emit
// queues the record, no OTel observer handles it, and it is handed to
// the wrapped handler (without span ids) once its delivery is over.
func TestLogHandledWhenOnlyAnotherInvocationObserver(t *testing.T) {
	h := newHarness(t) // h.obs is NOT attached to g
	var mu sync.Mutex
	var recs []map[string]string
	logger := slog.New(h.obs.LogHandler(recHandler{mu: &mu, recs: &recs}))
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			logger.WarnContext(ctx, "in a")
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	other := func(context.Context, graph.Event) error { return nil }
	if _, err := g.AddObserver(other, graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != 1 {
		t.Fatalf("a node's WARN record reached the handler %d times, want 1", len(recs))
	}
	_ = otelobserver.LogTraceID
}
