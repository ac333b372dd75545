package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// A turn accepted while its run's start record is still queued gets its
// runtime.request.started merged into that record only when no other
// record of the session was queued after it: here the turn that held the
// session before it queued its events and end meanwhile, so the start
// goes after them (before, it was merged and stored among them).
func TestStartOrderMergedStartOvertakesEarlierTurn(t *testing.T) {
	ctx := context.Background()
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, Linger: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	a := begin(t, rec)
	if err := a.Accept(ctx); err != nil { // A holds the session
		t.Fatal(err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b := begin(t, rec) // B waits for the session; its start is queued
	_ = a.Emit(ctx, "agent.handoff", nil)
	_ = a.Complete(ctx, nil)              // A ends, then lets the session go
	if err := b.Accept(ctx); err != nil { // B holds the session
		t.Fatal(err)
	}
	_ = b.Complete(ctx, nil)
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := store.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range evs {
		who := "A"
		if e.RunID == b.ID() {
			who = "B"
		}
		order = append(order, who+" "+e.Type)
	}
	t.Logf("session events: %q", order)
	if len(order) != 5 || order[0] != "A runtime.request.started" || order[1] != "A agent.handoff" || order[2] != "A runtime.request.completed" {
		t.Fatalf("B's start is not after A's events: %q", order)
	}
}

// The server's order of things: a turn lets its session go before the
// server records its last events and end, and the next turn is accepted
// meanwhile. The next turn's start is not handed over at once: it goes
// with that turn's later records, after the first turn's (before, it was
// stored ahead of the first turn's buffered events).
func TestStartOrderStartBeforeEarlierTurnsBufferedEvents(t *testing.T) {
	ctx := context.Background()
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	a := begin(t, rec)
	_ = a.Flush(ctx) // startDurable
	_ = a.Accept(ctx)
	b := begin(t, rec)
	_ = b.Flush(ctx) // startDurable: B's start is written while it waits
	_ = a.Emit(ctx, "agent.handoff", nil)
	_ = a.Emit(ctx, "agent.output.delta", nil)
	// A's Send returns: its session is unlocked; B's OnLocked runs.
	_ = b.Accept(ctx)
	_ = b.Flush(ctx)
	// Only now does sendStream record A's end.
	_ = a.Complete(ctx, nil)
	_ = b.Complete(ctx, nil)
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := store.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range evs {
		who := "A"
		if e.RunID == b.ID() {
			who = "B"
		}
		order = append(order, who+" "+e.Type)
	}
	t.Logf("session events: %q", order)
	if order[1] != "A agent.handoff" {
		t.Fatalf("B's start is before A's handoff: %q", order)
	}
}
