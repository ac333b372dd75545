package chat_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
)

// With the history loaded by its tail, retransmitted messages replay
// their own replies after a restart (the recorded indices are absolute),
// whether the replies are in the loaded tail or before it, and the
// stored history stays whole.
func TestSendTailReplay(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	store := openSQLite(t, path)
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store, tail: 3}, echo)})
	var firsts []chat.Outcome
	var want []string
	for i := range 12 {
		out, err := c.Send(ctx, "s", llm.UserText(fmt.Sprint("q", i)), chat.WithMessageID(fmt.Sprint("m", i)))
		if err != nil {
			t.Fatal(err)
		}
		firsts = append(firsts, out)
		want = append(want, fmt.Sprint("user: q", i), fmt.Sprint("assistant: re: q", i))
		if got := texts(history(t, store, "s")); !reflect.DeepEqual(got, want) {
			t.Fatalf("turn %d: stored %v, want %v", i, got, want)
		}
	}
	// A restart: a new harness and graph over the same store.
	c2 := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store, tail: 3}, echo)})
	for _, i := range []int{11, 10, 3, 0} {
		again, err := c2.Send(ctx, "s", llm.UserText(fmt.Sprint("q", i)), chat.WithMessageID(fmt.Sprint("m", i)))
		if err != nil {
			t.Fatal(err)
		}
		if !again.Info().Replayed || !reflect.DeepEqual(again.(*chat.Completed).Replies, firsts[i].(*chat.Completed).Replies) {
			t.Errorf("m%d: replayed %v %v, want %v", i, again.Info().Replayed, texts(again.(*chat.Completed).Replies), texts(firsts[i].(*chat.Completed).Replies))
		}
	}
	if got := texts(history(t, store, "s")); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the replays: stored %v, want %v", got, want)
	}
}

// An approval turn of a tail-loaded session suspends and resumes, after
// a restart, over the whole history.
func TestSignalTailResume(t *testing.T) {
	ctx := context.Background()
	store := openSQLite(t, dbPath(t))
	var want []string
	plain := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, echo)})
	for i := range 8 {
		if _, err := plain.Send(ctx, "s", llm.UserText(fmt.Sprint("q", i))); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprint("user: q", i), fmt.Sprint("assistant: re: q", i))
	}
	c := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{store: store, records: store.Checkpoints(), tail: 2}, "approve", nil),
		Coordinator: harness.NewStoreCoordinator(store.Checkpoints())})
	out, err := c.Send(ctx, "s", llm.UserText("delete it"))
	if err != nil {
		t.Fatal(err)
	}
	sus, ok := out.(*chat.Suspended)
	if !ok || !reflect.DeepEqual(texts(sus.PendingMessages), []string{"assistant: approve?"}) {
		t.Fatalf("Send = %T %v", out, out)
	}
	want = append(want, "user: delete it", "assistant: approve?")
	if got := texts(history(t, store, "s")); !reflect.DeepEqual(got, want) {
		t.Fatalf("suspended: stored %v, want %v", got, want)
	}
	c2 := newChat(t, chat.Config{Graph: approvalGraph(t, graphOpts{store: store, records: store.Checkpoints(), tail: 2}, "approve", nil),
		Coordinator: harness.NewStoreCoordinator(store.Checkpoints())})
	res, err := c2.Signal(ctx, chat.Signal{SignalID: "approve", SessionID: "s", Payload: Approved.Set(true)})
	if err != nil {
		t.Fatal(err)
	}
	done, ok := res.(*chat.Completed)
	if !ok || !reflect.DeepEqual(texts(done.Replies), []string{"assistant: done: approved"}) {
		t.Fatalf("Signal = %T %v", res, res)
	}
	want = append(want, "assistant: done: approved")
	if got := texts(history(t, store, "s")); !reflect.DeepEqual(got, want) {
		t.Fatalf("resumed: stored %v, want %v", got, want)
	}
	// A later tail turn appends after it.
	if _, err := c2.Send(ctx, "s", llm.UserText("thanks")); err != nil {
		t.Fatal(err)
	}
	want = append(want, "user: thanks", "assistant: approve?")
	if got := texts(history(t, store, "s")); !reflect.DeepEqual(got, want) {
		t.Fatalf("after: stored %v, want %v", got, want)
	}
}
