package graph_test

import (
	"context"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
)

func TestEventTimestamps(t *testing.T) {
	base := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
	var ticks int
	clock := func() time.Time { ticks++; return base.Add(time.Duration(ticks) * time.Second) }
	n := graph.NewField[int]("n")
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, n)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) { return n.Set(1), nil }).
		AddEdge("a", graph.End).SetEntry("a"), graph.WithClock(clock))
	var times []time.Time
	if _, err := g.Invoke(t.Context(), nil, graph.WithObserver(func(ctx context.Context, ev graph.Event) error {
		times = append(times, ev.(*graph.NodeEvent).Time)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	drain(t, g)
	if len(times) != 2 || !times[0].Equal(base.Add(time.Second)) || !times[1].Equal(base.Add(2*time.Second)) {
		t.Errorf("event times = %v; want the injected clock's readings at emission", times)
	}
}
