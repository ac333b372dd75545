package chat_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
)

// emitting is a node that streams three text pieces and one tool
// progress chunk, then appends the joined text.
func emitting(ctx context.Context, s graph.State) (graph.Update, error) {
	for _, p := range []string{"He", "ll", "o"} {
		chat.EmitText(ctx, p)
	}
	chat.EmitTool(ctx, chat.ToolProgress{CallID: "c1", Name: "lookup", Status: chat.ToolCompleted, Result: "42"})
	return chat.Messages.Add(llm.AssistantText("Hello")), nil
}

func TestSendStreaming(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, emitting)})
	var got []chat.Chunk
	var final error
	for ch, err := range c.SendStreaming(ctx, "s1", llm.UserText("hi")) {
		got = append(got, ch)
		final = err
	}
	if final != nil {
		t.Fatal(final)
	}
	if len(got) != 5 {
		t.Fatalf("%d chunks, want 5: %+v", len(got), got)
	}
	want := []chat.Chunk{
		{Kind: chat.ChunkText, Node: "reply", Text: "He"},
		{Kind: chat.ChunkText, Node: "reply", Text: "ll"},
		{Kind: chat.ChunkText, Node: "reply", Text: "o"},
		{Kind: chat.ChunkTool, Node: "reply", Tool: &chat.ToolProgress{CallID: "c1", Name: "lookup", Status: chat.ToolCompleted, Result: "42"}},
	}
	if diff := cmp.Diff(want, got[:4]); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	last := got[4]
	if last.Kind != chat.ChunkOutcome {
		t.Fatalf("last chunk kind %q, want outcome", last.Kind)
	}
	done, ok := last.Outcome.(*chat.Completed)
	if !ok {
		t.Fatalf("outcome %T, want *chat.Completed", last.Outcome)
	}

	// Send on a fresh harness gives the same outcome.
	ref := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, emitting)})
	out, err := ref.Send(ctx, "s1", llm.UserText("hi"))
	if err != nil {
		t.Fatal(err)
	}
	sent := out.(*chat.Completed)
	if diff := cmp.Diff(texts(sent.Replies), texts(done.Replies)); diff != "" {
		t.Errorf("streamed replies differ from Send's (-send +stream):\n%s", diff)
	}
	if done.Path != sent.Path || done.SessionID != sent.SessionID {
		t.Errorf("streamed turn %+v, Send's %+v", done.Turn, sent.Turn)
	}
}

func TestSendStreamingErrored(t *testing.T) {
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, echo)})
	var last chat.Chunk
	var lastErr error
	for ch, err := range c.SendStreaming(context.Background(), "", llm.UserText("hi")) {
		last, lastErr = ch, err
	}
	e, ok := last.Outcome.(*chat.Errored)
	if last.Kind != chat.ChunkOutcome || !ok || lastErr != e.Err {
		t.Fatalf("last chunk %+v, err %v: want an errored outcome chunk carrying its error", last, lastErr)
	}
}

func TestSendStreamingEarlyStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var cancelled atomic.Bool
	store := newMemStore()
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		chat.EmitText(ctx, "first")
		select {
		case <-ctx.Done():
			cancelled.Store(true)
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return chat.Messages.Add(llm.AssistantText("late")), nil
		}
	})})
	start := time.Now()
	n := 0
	for ch := range c.SendStreaming(context.Background(), "s1", llm.UserText("hi")) {
		n++
		if ch.Text != "first" {
			t.Errorf("chunk %+v", ch)
		}
		break
	}
	if n != 1 {
		t.Fatalf("%d chunks", n)
	}
	if !cancelled.Load() {
		t.Error("stopping the iteration did not cancel the turn before returning")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stopping took %v", d)
	}
	if h := history(t, store, "s1"); len(h) != 0 {
		t.Errorf("the cancelled turn stored %q", texts(h))
	}
	// The session is free again.
	if _, err := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, echo)}).Send(context.Background(), "s1", llm.UserText("next")); err != nil {
		t.Fatal(err)
	}
}

func TestEmitOutsideStream(t *testing.T) {
	if chat.EmitText(context.Background(), "x") || chat.Streaming(context.Background()) {
		t.Error("Emit outside a turn reported a stream")
	}
	var emitted, streaming atomic.Bool
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		emitted.Store(chat.EmitText(ctx, "x"))
		streaming.Store(chat.Streaming(ctx))
		return echo(ctx, s)
	})})
	if _, err := c.Send(context.Background(), "s1", llm.UserText("hi")); err != nil {
		t.Fatal(err)
	}
	if emitted.Load() || streaming.Load() {
		t.Error("Emit in a plain Send's node reported a stream")
	}
	var inStream atomic.Bool
	c = newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		inStream.Store(chat.Streaming(ctx))
		return echo(ctx, s)
	})})
	for range c.SendStreaming(context.Background(), "s1", llm.UserText("hi")) {
	}
	if !inStream.Load() {
		t.Error("Streaming is false inside a streamed turn")
	}
}

// BenchmarkSendStreaming is a turn on an in-memory session whose node
// streams 20 text chunks, consumed by a loop that does nothing with
// them: the cost of handing chunks from the turn to its consumer.
func BenchmarkSendStreaming(b *testing.B) {
	g := newGraph(b, graphOpts{}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		for range 20 {
			chat.EmitText(ctx, "word ")
		}
		return echo(ctx, s)
	})
	h := newChat(b, chat.Config{Graph: g})
	msg := llm.UserText("hi")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		for c, err := range h.SendStreaming(b.Context(), "s"+strconv.Itoa(i%64), msg) {
			if c.Kind == chat.ChunkOutcome && err != nil {
				b.Fatal(err)
			}
		}
	}
}

// Emit names the node execution a chunk comes from: its node and its
// step in the invocation, as graph.CurrentNode reports them.
func TestEmitStep(t *testing.T) {
	var step atomic.Int64
	step.Store(-1)
	node := func(ctx context.Context, s graph.State) (graph.Update, error) {
		n, _ := graph.CurrentNode(ctx)
		step.Store(int64(n.Step))
		chat.EmitText(ctx, "hi")
		return chat.Messages.Add(llm.AssistantText("hi")), nil
	}
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, node)})
	for turn := range 2 {
		var got []chat.Chunk
		for ch := range c.SendStreaming(context.Background(), "s1", llm.UserText("hi")) {
			got = append(got, ch)
		}
		if len(got) != 2 || got[0].Node != "reply" || got[0].Step != int(step.Load()) {
			t.Fatalf("turn %d: chunks %+v, want one text chunk of node reply at step %d", turn, got, step.Load())
		}
	}
	name, s, ok := graph.CurrentStep(context.Background())
	if ok || name != "" || s != 0 {
		t.Errorf("CurrentStep outside a node = %q, %d, %t", name, s, ok)
	}
}

// SendFunc hands the chunks SendStreaming yields to its handler, in
// order, and returns the same outcome; a handler that returns false
// cancels the turn, and nothing reaches it once SendFunc returned.
func TestSendFunc(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, emitting)})
	var got []chat.Chunk
	out, err := c.SendFunc(ctx, "s1", llm.UserText("hi"), func(ch chat.Chunk) bool { got = append(got, ch); return true })
	if err != nil {
		t.Fatal(err)
	}
	var want []chat.Chunk
	for ch := range newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, emitting)}).SendStreaming(ctx, "s1", llm.UserText("hi")) {
		if ch.Kind != chat.ChunkOutcome {
			want = append(want, ch)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SendFunc's chunks differ from SendStreaming's (-stream +func):\n%s", diff)
	}
	if done, ok := out.(*chat.Completed); !ok || len(done.Replies) != 1 || done.Replies[0].Text() != "Hello" {
		t.Fatalf("outcome %+v", out)
	}

	// Stopping: the handler refuses the first chunk; the node sees its
	// context cancelled and its later chunks are refused without a call.
	var late atomic.Value
	store := newMemStore()
	stopping := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		chat.EmitText(ctx, "first")
		if ctx.Err() == nil {
			t.Error("refusing a chunk did not cancel the turn")
		}
		if chat.EmitText(ctx, "second") {
			t.Error("a chunk was taken after the handler refused one")
		}
		go func() { <-time.After(20 * time.Millisecond); late.Store(chat.EmitText(ctx, "late")) }()
		return nil, ctx.Err()
	})})
	calls := 0
	out, _ = stopping.SendFunc(ctx, "s2", llm.UserText("hi"), func(chat.Chunk) bool { calls++; return false })
	if calls != 1 {
		t.Errorf("handler called %d times, want 1", calls)
	}
	if _, ok := out.(*chat.Errored); !ok {
		t.Errorf("stopped turn's outcome %T, want *chat.Errored", out)
	}
	if h := history(t, store, "s2"); len(h) != 0 {
		t.Errorf("the cancelled turn stored %q", texts(h))
	}
	time.Sleep(50 * time.Millisecond)
	if v, _ := late.Load().(bool); v {
		t.Error("a chunk emitted after SendFunc returned was taken")
	}
}
