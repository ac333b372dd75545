package graph_test

import (
	"context"
	"fmt"
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

func TestInvocationEventsAreOptIn(t *testing.T) {
	n := graph.NewField[int]("n")
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, n)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) { return n.Set(1), nil }).
		AddEdge("a", graph.End).SetEntry("a"))
	var plain, opted []string
	kind := func(ev graph.Event) string {
		switch e := ev.(type) {
		case *graph.NodeEvent:
			return "node:" + string(e.Phase)
		case *graph.InvocationEvent:
			return "invocation:" + string(e.Phase) + ":" + e.Status.String()
		}
		return "?"
	}
	if _, err := g.Invoke(t.Context(), nil,
		graph.WithObserver(func(ctx context.Context, ev graph.Event) error { plain = append(plain, kind(ev)); return nil }),
		graph.WithObserver(func(ctx context.Context, ev graph.Event) error { opted = append(opted, kind(ev)); return nil }, graph.InvocationEvents()),
	); err != nil {
		t.Fatal(err)
	}
	drain(t, g)
	if got := fmt.Sprint(plain); got != "[node:started node:completed]" {
		t.Errorf("plain observer saw %s", got)
	}
	if got := fmt.Sprint(opted); got != "[invocation:started:Status(0) node:started node:completed invocation:completed:completed]" {
		t.Errorf("opted-in observer saw %s", got)
	}
}
