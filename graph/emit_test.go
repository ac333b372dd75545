package graph_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
)

// notified is an Emit payload counting its EmitDelivered calls.
type notified struct{ n atomic.Int32 }

func (p *notified) EmitDelivered() { p.n.Add(1) }

var _ graph.DeliveryNotifier = (*notified)(nil)

// Emit queues a payload for the invocation's observers while the
// invocation runs, and refuses it (false) once the invocation ended: a
// goroutine a node left running emits after Invoke returned, and the
// caller handles the payload itself rather than lose it in a queue no
// delivery takes. A DeliveryNotifier payload is told, once, when its
// event was delivered.
func TestEmitAfterInvocationEnd(t *testing.T) {
	for _, synchronous := range []bool{false, true} {
		name := "async"
		if synchronous {
			name = "synchronous"
		}
		t.Run(name, func(t *testing.T) {
			x := graph.NewField[int]("x")
			during, after := &notified{}, &notified{}
			var inNode, afterEnd bool
			var nodeCtx context.Context
			g, err := graph.NewBuilder(graph.MustSchema(x)).
				AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
					nodeCtx = ctx
					inNode = graph.Emit(ctx, during)
					return nil, nil
				}).AddEdge("a", graph.End).SetEntry("a").Compile()
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var got []any
			obs := func(_ context.Context, ev graph.Event) error {
				if e, ok := ev.(*graph.EmittedEvent); ok {
					mu.Lock()
					got = append(got, e.Payload)
					mu.Unlock()
				}
				return nil
			}
			opts := []graph.ObserverOption{graph.InvocationEvents()}
			if synchronous {
				opts = append(opts, graph.Synchronous())
			}
			if _, err := g.AddObserver(obs, opts...); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Invoke(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			afterEnd = graph.Emit(nodeCtx, after)
			if !inNode || afterEnd {
				t.Fatalf("Emit reported %t in the node, %t after the invocation ended; want true, false", inNode, afterEnd)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0] != during {
				t.Fatalf("observer received payloads %v", got)
			}
			if during.n.Load() != 1 || after.n.Load() != 0 {
				t.Fatalf("EmitDelivered called %d times for the delivered payload (want 1), %d for the refused one (want 0)", during.n.Load(), after.n.Load())
			}
		})
	}
}

// A payload whose delivery a drain timeout abandoned is told so, so that
// it is not lost without its emitter knowing.
func TestEmitDeliveryAbandoned(t *testing.T) {
	x := graph.NewField[int]("x")
	p := &notified{}
	release := make(chan struct{})
	defer close(release)
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			graph.Emit(ctx, p)
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	slow := func(ctx context.Context, ev graph.Event) error {
		if e, ok := ev.(*graph.NodeEvent); ok && e.Phase == graph.PhaseStarted {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}
	if _, err := g.AddObserver(slow, graph.InvocationEvents()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	sum, err := g.Drain(context.Background(), graph.DrainTimeout(50*time.Millisecond))
	if err != nil || !sum.TimeoutReached {
		t.Fatalf("drain %v %v", sum, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := p.n.Load(); n != 1 {
		t.Fatalf("EmitDelivered called %d times for the abandoned payload, want 1", n)
	}
}
