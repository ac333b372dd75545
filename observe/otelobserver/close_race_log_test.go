package otelobserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/armature-go/armature/graph"
)

type closeRaceCount struct {
	mu *sync.Mutex
	n  map[string]int
}

func (h closeRaceCount) Enabled(context.Context, slog.Level) bool { return true }
func (h closeRaceCount) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Message]++
	h.mu.Unlock()
	return nil
}
func (h closeRaceCount) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h closeRaceCount) WithGroup(string) slog.Handler      { return h }

// A goroutine a node left running logs while its invocation ends, with a
// Synchronous OTel observer beside an asynchronous one: each record
// should reach the handler once.
func TestLogRecordsOnceAcrossInvocationEnd(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	counts := closeRaceCount{mu: &mu, n: map[string]int{}}
	logger := slog.New(h.obs.LogHandler(counts))
	var wg sync.WaitGroup
	inv := 0
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			id := inv
			started := make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 300 {
					logger.InfoContext(ctx, fmt.Sprint(id, "/", i))
					if i == 5 {
						close(started)
					}
				}
			}()
			<-started
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddObserver(h.obs.Observe, graph.InvocationEvents(), graph.Synchronous()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddObserver(func(context.Context, graph.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for inv = 0; inv < 400; inv++ {
		if _, err := g.Invoke(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	_, _ = g.Drain(context.Background())
	mu.Lock()
	defer mu.Unlock()
	dup, lost := 0, 0
	for i := range 400 {
		for j := range 300 {
			switch c := counts.n[fmt.Sprint(i, "/", j)]; {
			case c > 1:
				dup++
			case c == 0:
				lost++
			}
		}
	}
	if dup > 0 || lost > 0 {
		t.Fatalf("of 120000 records, %d reached the handler more than once, %d never", dup, lost)
	}
}
