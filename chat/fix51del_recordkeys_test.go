package chat_test

import (
	"context"
	"slices"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
)

// RecordKeys lists the record keys of the turns a session committed
// (completed, suspended, resumed), the prefix stripped, and none once
// the session is deleted.
func TestRecordKeysListsCommittedTurns(t *testing.T) {
	ctx := context.Background()
	e := newDemoEnv(t)
	want[*chat.Completed](t, e.send("x", "where is order 8?", chat.WithRecordKey("run:a")))
	susp := want[*chat.Suspended](t, e.send("x", "refund order 8", chat.WithRecordKey("run:b")))
	resumed, _ := e.h.Signal(ctx, chat.Signal{SignalID: susp.Descriptor.SignalID, SessionID: "x", Payload: agent.Approve(""), RecordKey: "run:c"})
	want[*chat.Completed](t, resumed)
	want[*chat.Completed](t, e.send("y", "where is order 8?", chat.WithRecordKey("run:y")))
	want[*chat.Completed](t, e.send("x", "where is order 9?")) // no record key
	keys, err := e.h.RecordKeys(ctx, "x")
	// The most recent first: a delete needs the turns that ran last.
	if err != nil || !slices.Equal(keys, []string{"run:c", "run:b", "run:a"}) {
		t.Fatalf("RecordKeys = %q, %v; want run:c, run:b, run:a", keys, err)
	}
	if err := e.h.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if keys, err := e.h.RecordKeys(ctx, "x"); err != nil || len(keys) != 0 {
		t.Fatalf("RecordKeys after the delete = %q, %v; want none", keys, err)
	}
}

// A deleted session's tool-call index goes with it: kept, it held memory
// in proportion to the deleted history's calls until 1,024 other
// sessions pushed it out.
func TestDeleteForgetsCallIndex(t *testing.T) {
	ctx := context.Background()
	e := newDemoEnv(t)
	// A history of 64 messages and more is checked through the index.
	for range 17 {
		want[*chat.Completed](t, e.send("x", "where is order 8?"))
		want[*chat.Completed](t, e.send("y", "where is order 9?"))
	}
	if n := chat.CallIndexes(e.h); n != 2 {
		t.Fatalf("%d call indexes after two sessions' turns, want 2", n)
	}
	if err := e.h.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if n := chat.CallIndexes(e.h); n != 1 {
		t.Fatalf("%d call indexes after a delete, want 1", n)
	}
}
