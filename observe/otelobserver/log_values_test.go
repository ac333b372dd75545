package otelobserver_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/armature-go/armature/graph"
)

// Observer.LogHandler hands a node's record to the wrapped handler later,
// on the observer delivery goroutine, with the attribute values resolved
// and copied when it was logged (as the OTel slog bridge converts them
// as Handle is called): a node that logs a map and then updates it has
// the record rendered with the logged contents, and the delivery never
// reads the map while the node writes it.
func TestLogRecordRenderedWithLoggedValues(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var recs []map[string]string
	logger := slog.New(h.obs.LogHandler(recHandler{mu: &mu, recs: &recs}))
	mutated := make(chan struct{})
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			attempt := map[string]int{"n": 1}
			logger.InfoContext(ctx, "retrying", "attempt", attempt)
			attempt["n"] = 2 // the node goes on with its own data
			close(mutated)
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	// An observer ahead of the OTel one that is slow on the node's start
	// (a tracer exporting, a recorder writing): the record is delivered
	// after the node moved on.
	slow := func(_ context.Context, ev graph.Event) error {
		if e, ok := ev.(*graph.NodeEvent); ok && e.Phase == graph.PhaseStarted {
			<-mutated
		}
		return nil
	}
	if _, err := g.AddObserver(slow); err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	_ = h.spans(t, g)
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != 1 {
		t.Fatalf("records %v", recs)
	}
	if got := recs[0]["attempt"]; got != `{"n":1}` {
		t.Fatalf("the record logged with attempt=map[n:1] was rendered as attempt=%s, want its JSON {\"n\":1}", got)
	}
}
