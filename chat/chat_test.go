package chat_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

func TestNewValidatesConfig(t *testing.T) {
	store := session.NewMemoryStore(session.MemoryConfig{})
	noMessages, err := graph.NewBuilder(graph.MustSchema(graph.NewField[int]("n"))).
		AddNode("a", func(context.Context, graph.State) (graph.Update, error) { return nil, nil }).
		SetEntry("a").AddEdge("a", graph.End).Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
	if err != nil {
		t.Fatal(err)
	}
	wrongReducer, err := graph.NewBuilder(graph.MustSchema(graph.NewField[[]llm.Message](chat.MessagesField))).
		AddNode("a", func(context.Context, graph.State) (graph.Update, error) { return nil, nil }).
		SetEntry("a").AddEdge("a", graph.End).Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]chat.Config{
		"no graph":      {},
		"no messages":   {Graph: noMessages},
		"wrong reducer": {Graph: wrongReducer},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := chat.New(cfg); !errors.Is(err, chat.ErrInvalidConfig) {
				t.Fatalf("New: %v, want ErrInvalidConfig", err)
			}
		})
	}
	if !strings.HasPrefix(chat.ErrInvalidConfig.Error(), "chat: ") {
		t.Errorf("ErrInvalidConfig = %q lacks the package prefix", chat.ErrInvalidConfig)
	}
}

func TestSendCompletes(t *testing.T) {
	ctx := context.Background()
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, echo)})
	out, err := c.Send(ctx, "s1", llm.UserText("hello"))
	if err != nil {
		t.Fatal(err)
	}
	done, ok := out.(*chat.Completed)
	if !ok {
		t.Fatalf("Send returned %T", out)
	}
	if diff := cmp.Diff([]string{"assistant: re: hello"}, texts(done.Replies)); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	if done.Path != harness.PathNewSession || done.SessionID != "s1" || done.InvocationID == "" {
		t.Errorf("turn = %+v", done.Turn)
	}
	out, err = c.Send(ctx, "s1", llm.UserText("again"))
	if err != nil {
		t.Fatal(err)
	}
	if out.Info().Path != harness.PathExistingSession {
		t.Errorf("second turn path = %q, want %q", out.Info().Path, harness.PathExistingSession)
	}
	want := []string{"user: hello", "assistant: re: hello", "user: again", "assistant: re: again"}
	if diff := cmp.Diff(want, texts(chat.Messages.Get(out.(*chat.Completed).FinalState))); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

// checkPairs checks that history is a sequence of (user X, assistant
// "re: X") pairs holding every sent text exactly once, and that each
// sender's texts ("<sender>-<seq>") appear in seq order.
func checkPairs(t *testing.T, hist []llm.Message, senders, perSender int) {
	t.Helper()
	if len(hist) != 2*senders*perSender {
		t.Fatalf("history has %d messages, want %d", len(hist), 2*senders*perSender)
	}
	seen := map[string]bool{}
	last := make([]int, senders)
	for i := range last {
		last[i] = -1
	}
	for i := 0; i < len(hist); i += 2 {
		u, a := hist[i], hist[i+1]
		if u.Role != llm.RoleUser || a.Role != llm.RoleAssistant || a.Text() != "re: "+u.Text() {
			t.Fatalf("messages %d,%d = %q, %q: not a user message followed by its reply", i, i+1, texts(hist[i:i+1]), texts(hist[i+1:i+2]))
		}
		if seen[u.Text()] {
			t.Fatalf("%q stored twice", u.Text())
		}
		seen[u.Text()] = true
		var g, n int
		if _, err := fmt.Sscanf(u.Text(), "g%d-%d", &g, &n); err != nil {
			t.Fatalf("unexpected text %q", u.Text())
		}
		if n <= last[g] {
			t.Fatalf("sender %d: message %d stored after %d", g, n, last[g])
		}
		last[g] = n
	}
}

// sendMany runs senders goroutines, each sending perSender messages in
// sequence to session sid, spread over the harnesses.
func sendMany(t *testing.T, hs []*chat.Harness, sid string, senders, perSender int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for g := range senders {
		wg.Go(func() {
			c := hs[g%len(hs)]
			for n := range perSender {
				text := fmt.Sprintf("g%d-%d", g, n)
				out, err := c.Send(context.Background(), sid, llm.UserText(text))
				if err != nil {
					errs <- fmt.Errorf("send %s: %w", text, err)
					return
				}
				done, ok := out.(*chat.Completed)
				if !ok || len(done.Replies) != 1 || done.Replies[0].Text() != "re: "+text {
					errs <- fmt.Errorf("send %s: outcome %#v", text, out)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSendConcurrentOneSession(t *testing.T) {
	const senders, perSender = 50, 20 // 1000 Sends
	store := session.NewMemoryStore(session.MemoryConfig{})
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, echo)})
	sendMany(t, []*chat.Harness{c}, "s1", senders, perSender)
	checkPairs(t, history(t, store, "s1"), senders, perSender)
}

func TestSendDifferentSessionsRunInParallel(t *testing.T) {
	entered := make(chan string, 2)
	release := make(chan struct{})
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		entered <- graph.SessionID(ctx)
		<-release
		return echo(ctx, s)
	})})
	var wg sync.WaitGroup
	for _, sid := range []string{"a", "b"} {
		wg.Go(func() {
			if _, err := c.Send(context.Background(), sid, llm.UserText("hi")); err != nil {
				t.Error(err)
			}
		})
	}
	got := map[string]bool{}
	for range 2 {
		select {
		case sid := <-entered:
			got[sid] = true
		case <-time.After(10 * time.Second):
			close(release)
			wg.Wait()
			t.Fatalf("only sessions %v entered the graph: different sessions are serialized", got)
		}
	}
	close(release)
	wg.Wait()
}

func TestSendCancelledWhileWaiting(t *testing.T) {
	var runs atomic.Int64
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	store := &countingStore{Store: session.NewMemoryStore(session.MemoryConfig{})}
	c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, func(ctx context.Context, s graph.State) (graph.Update, error) {
		if runs.Add(1) == 1 {
			entered <- struct{}{}
			<-release
		}
		return echo(ctx, s)
	})})
	first := make(chan error, 1)
	go func() {
		_, err := c.Send(context.Background(), "s1", llm.UserText("first"))
		first <- err
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	out, err := c.Send(ctx, "s1", llm.UserText("second"))
	e, ok := out.(*chat.Errored)
	if !ok {
		t.Fatalf("Send returned %T, want *chat.Errored", out)
	}
	if e.Category != errcat.InvocationCancelled || e.Bucket != harness.RetryableTransient || !errors.Is(err, errcat.InvocationCancelled) {
		t.Errorf("outcome category %s bucket %s err %v", e.Category, e.Bucket, err)
	}
	if e.InvocationID != "" {
		t.Errorf("a cancelled wait reports invocation %q", e.InvocationID)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the node ran %d times, want 1 (the cancelled Send must not run a turn)", n)
	}
	want := []string{"user: first", "assistant: re: first"}
	if diff := cmp.Diff(want, texts(history(t, store, "s1"))); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

func TestSendValidation(t *testing.T) {
	tests := []struct {
		name      string
		sessionID string
		msg       llm.Message
		cat       errcat.Category
		bucket    harness.Bucket
		mentions  string // the reply names the offending field
	}{
		{name: "empty session id", sessionID: "", msg: llm.UserText("hi"), cat: errcat.HarnessSessionIDUnresolved, bucket: harness.SessionTerminating},
		{name: "invalid session id", sessionID: "bad\x01id", msg: llm.UserText("hi"), cat: errcat.HarnessSessionIDUnresolved, bucket: harness.SessionTerminating},
		{name: "tool without tool_call_id", sessionID: "s1", msg: llm.Message{Role: llm.RoleTool, Content: llm.Text("72F")}, cat: errcat.ChatMessageShapeInvalid, bucket: harness.UserCorrectable, mentions: "tool_call_id"},
		{name: "empty user content", sessionID: "s1", msg: llm.UserText(""), cat: errcat.ChatMessageShapeInvalid, bucket: harness.UserCorrectable, mentions: "content"},
		{name: "image in assistant", sessionID: "s1", msg: llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(llm.ImageURL("https://example.com/a.png"))}, cat: errcat.ChatMessageShapeInvalid, bucket: harness.UserCorrectable, mentions: "content[0].type"},
		{name: "no role", sessionID: "s1", msg: llm.Message{Content: llm.Text("hi")}, cat: errcat.ChatMessageShapeInvalid, bucket: harness.UserCorrectable, mentions: "role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int64
			store := &countingStore{Store: session.NewMemoryStore(session.MemoryConfig{})}
			c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, func(ctx context.Context, s graph.State) (graph.Update, error) {
				runs.Add(1)
				return echo(ctx, s)
			})})
			out, err := c.Send(context.Background(), tt.sessionID, tt.msg)
			e, ok := out.(*chat.Errored)
			if !ok {
				t.Fatalf("Send returned %T, want *chat.Errored", out)
			}
			if err == nil || err != e.Err {
				t.Errorf("err = %v, want the outcome's error %v", err, e.Err)
			}
			if e.Category != tt.cat || e.Bucket != tt.bucket || !errors.Is(err, tt.cat) {
				t.Errorf("category %s bucket %s, want %s %s", e.Category, e.Bucket, tt.cat, tt.bucket)
			}
			if e.Reply.Role != llm.RoleSystem {
				t.Errorf("reply role %s, want system", e.Reply.Role)
			}
			if tt.mentions != "" && !strings.Contains(e.Reply.Text(), tt.mentions) {
				t.Errorf("reply %q does not mention %q", e.Reply.Text(), tt.mentions)
			}
			if tt.cat == errcat.ChatMessageShapeInvalid {
				var se *chat.ShapeError
				var ve *llm.ValidationError
				if !errors.As(err, &se) || !errors.As(err, &ve) || !errors.Is(err, llm.ErrInvalidMessage) {
					t.Errorf("err %v is not a *chat.ShapeError wrapping an *llm.ValidationError", err)
				}
				if !strings.HasPrefix(err.Error(), "chat: chat_message_shape_invalid: ") {
					t.Errorf("err = %q lacks the prefix", err)
				}
				// The reply quotes the field and reason, not the log
				// text's package prefixes.
				if strings.Contains(e.Reply.Text(), "llm: ") || strings.Contains(e.Reply.Text(), "chat: ") {
					t.Errorf("reply %q carries a package prefix", e.Reply.Text())
				}
			}
			if n := store.calls(); n != 0 {
				t.Errorf("the session store was called %d times", n)
			}
			if n := runs.Load(); n != 0 {
				t.Errorf("the node ran %d times", n)
			}
			if e.InvocationID != "" || e.Path != "" {
				t.Errorf("turn %+v: no invocation should have started", e.Turn)
			}
		})
	}
}

func TestSendErroredReplies(t *testing.T) {
	tests := []struct {
		name     string
		nodeErr  error
		loadErr  error
		saveErr  error
		cat      errcat.Category
		bucket   harness.Bucket
		contains string
		lacks    string // text the reply must not carry
	}{
		{name: "provider unavailable", nodeErr: errcat.New(errcat.ProviderUnavailable, "upstream 503"),
			cat: errcat.ProviderUnavailable, bucket: harness.RetryableTransient, contains: "try again"},
		{name: "provider invalid request", nodeErr: errcat.New(errcat.ProviderInvalidRequest, "context length exceeds maximum"),
			cat: errcat.ProviderInvalidRequest, bucket: harness.UserCorrectable, contains: "context length exceeds maximum"},
		{name: "provider invalid request wrapped", nodeErr: fmt.Errorf("calling the model: %w", errcat.New(errcat.ProviderInvalidRequest, "context length exceeds maximum")),
			cat: errcat.ProviderInvalidRequest, bucket: harness.UserCorrectable, contains: "context length exceeds maximum"},
		{name: "provider error", nodeErr: fmt.Errorf("agent: calling the model: %w", &llm.ProviderError{Cat: errcat.ProviderInvalidRequest, Provider: "openai", Op: "complete", StatusCode: 400, Message: "model 'gpt-x' not found"}),
			cat: errcat.ProviderInvalidRequest, bucket: harness.UserCorrectable, contains: "processed: model 'gpt-x' not found. Please", lacks: "llm:"},
		{name: "uncategorized node error", nodeErr: errors.New("boom"),
			cat: errcat.NodeException, bucket: harness.RetryableTransient, contains: "try again"},
		{name: "session load failure", loadErr: errors.New("disk on fire"),
			cat: errcat.SessionLoadFailed, bucket: harness.SessionTerminating, contains: "can't continue"},
		{name: "session save failure", saveErr: errors.New("disk full"),
			cat: errcat.SessionSaveFailed, bucket: harness.RetryableTransient, contains: "try again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int64
			store := &countingStore{Store: session.NewMemoryStore(session.MemoryConfig{}), loadErr: tt.loadErr, saveErr: tt.saveErr}
			c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, func(ctx context.Context, s graph.State) (graph.Update, error) {
				runs.Add(1)
				if tt.nodeErr != nil {
					return nil, tt.nodeErr
				}
				return echo(ctx, s)
			})})
			out, err := c.Send(context.Background(), "s1", llm.UserText("hi"))
			e, ok := out.(*chat.Errored)
			if !ok {
				t.Fatalf("Send returned %T, want *chat.Errored", out)
			}
			if err != e.Err {
				t.Errorf("err = %v, want the outcome's error", err)
			}
			if e.Category != tt.cat || e.Bucket != tt.bucket {
				t.Errorf("category %s bucket %s, want %s %s (err %v)", e.Category, e.Bucket, tt.cat, tt.bucket, err)
			}
			if e.Reply.Role != llm.RoleSystem || !strings.Contains(strings.ToLower(e.Reply.Text()), strings.ToLower(tt.contains)) {
				t.Errorf("reply %s %q does not contain %q", e.Reply.Role, e.Reply.Text(), tt.contains)
			}
			if tt.lacks != "" && strings.Contains(e.Reply.Text(), tt.lacks) {
				t.Errorf("reply %q carries %q", e.Reply.Text(), tt.lacks)
			}
			if tt.loadErr != nil && runs.Load() != 0 {
				t.Errorf("the node ran although the session failed to load")
			}
			if tt.saveErr == nil && tt.loadErr == nil {
				if h := history(t, store.Store, "s1"); len(h) != 0 {
					t.Errorf("an errored turn stored %q", texts(h))
				}
			}
		})
	}
}

func TestRepliesCustomized(t *testing.T) {
	c := newChat(t, chat.Config{
		Graph:   newGraph(t, graphOpts{}, echo),
		Replies: chat.Replies{UserCorrectable: "fix: {diagnostic}"},
	})
	out, _ := c.Send(context.Background(), "s1", llm.Message{Role: llm.RoleTool, Content: llm.Text("x")})
	if got := out.(*chat.Errored).Reply.Text(); !strings.HasPrefix(got, "fix: ") || !strings.Contains(got, "tool_call_id") {
		t.Errorf("reply = %q", got)
	}
}

func TestSendIdempotent(t *testing.T) {
	ctx := context.Background()
	t.Run("retransmit", func(t *testing.T) {
		var runs atomic.Int64
		store := session.NewMemoryStore(session.MemoryConfig{})
		c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: store}, countRuns(&runs))})
		first, err := c.Send(ctx, "s1", llm.UserText("hi"), chat.WithMessageID("m1"))
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Send(ctx, "s1", llm.UserText("hi"), chat.WithMessageID("m1"))
		if err != nil {
			t.Fatal(err)
		}
		if again.Info().InvocationID != first.Info().InvocationID || !again.Info().Replayed ||
			!reflect.DeepEqual(again.(*chat.Completed).Replies, first.(*chat.Completed).Replies) {
			t.Errorf("the retransmit returned another outcome: %+v, want a replay of %+v", again, first)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("the node ran %d times, want 1", n)
		}
		if n := len(history(t, store, "s1")); n != 2 {
			t.Errorf("history has %d messages, want 2", n)
		}
	})
	t.Run("concurrent retransmit", func(t *testing.T) {
		var runs atomic.Int64
		c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, countRuns(&runs))})
		outs := make([]chat.Outcome, 8)
		var wg sync.WaitGroup
		for i := range outs {
			wg.Go(func() {
				outs[i], _ = c.Send(ctx, "s1", llm.UserText("hi"), chat.WithMessageID("m1"))
			})
		}
		wg.Wait()
		for i, o := range outs {
			if o.Info().InvocationID != outs[0].Info().InvocationID {
				t.Errorf("Send %d returned another outcome", i)
			}
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("the node ran %d times, want 1", n)
		}
	})
	t.Run("different sessions", func(t *testing.T) {
		var runs atomic.Int64
		c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, countRuns(&runs))})
		for _, sid := range []string{"s1", "s2"} {
			if _, err := c.Send(ctx, sid, llm.UserText("hi"), chat.WithMessageID("m1")); err != nil {
				t.Fatal(err)
			}
		}
		if n := runs.Load(); n != 2 {
			t.Errorf("the node ran %d times, want 2", n)
		}
	})
	// A store that records no marks: the harness remembers in memory.
	noMarks := func() session.Store { return struct{ session.Store }{session.NewMemoryStore(session.MemoryConfig{})} }
	t.Run("eviction", func(t *testing.T) {
		var runs atomic.Int64
		c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: noMarks()}, countRuns(&runs)), IdempotencyCapacity: 2})
		for _, id := range []string{"a", "b", "c", "c", "b", "a"} {
			if _, err := c.Send(ctx, "s1", llm.UserText(id), chat.WithMessageID(id)); err != nil {
				t.Fatal(err)
			}
		}
		// a, b, c run; c and b are remembered; a was evicted and runs again.
		if n := runs.Load(); n != 4 {
			t.Errorf("the node ran %d times, want 4", n)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		var runs atomic.Int64
		c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: noMarks()}, countRuns(&runs)), IdempotencyCapacity: -1})
		for range 2 {
			if _, err := c.Send(ctx, "s1", llm.UserText("hi"), chat.WithMessageID("m1")); err != nil {
				t.Fatal(err)
			}
		}
		if n := runs.Load(); n != 2 {
			t.Errorf("the node ran %d times, want 2", n)
		}
	})
	t.Run("errored outcome is not remembered", func(t *testing.T) {
		var runs atomic.Int64
		c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{}, func(context.Context, graph.State) (graph.Update, error) {
			runs.Add(1)
			return nil, errcat.New(errcat.ProviderUnavailable, "down")
		})})
		for range 2 {
			out, err := c.Send(ctx, "s1", llm.UserText("hi"), chat.WithMessageID("m1"))
			if _, ok := out.(*chat.Errored); !ok || err == nil {
				t.Fatalf("Send returned %T, %v", out, err)
			}
		}
		// The retryable failure left nothing behind: the retransmission
		// is a retry, not a replay of the error.
		if n := runs.Load(); n != 2 {
			t.Errorf("the node ran %d times, want 2", n)
		}
	})
}

func countRuns(runs *atomic.Int64) graph.NodeFunc {
	return func(ctx context.Context, s graph.State) (graph.Update, error) {
		runs.Add(1)
		return echo(ctx, s)
	}
}

// TestMessageIDReused: a message id given again with another message is
// refused (message_id_reused, user-correctable) and runs nothing, on a
// store recording marks (SQLite), one that does not (in memory), and at
// the version the graph's cache holds or a cold read; the message it
// first named still replays. Before, the other message got the first
// one's answer as if it had been sent.
func TestMessageIDReused(t *testing.T) {
	ctx := context.Background()
	for name, store := range map[string]func(t *testing.T) session.Store{
		"memory": func(*testing.T) session.Store { return session.NewMemoryStore(session.MemoryConfig{}) },
		"sqlite": func(t *testing.T) session.Store { return openSQLite(t, dbPath(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			var runs atomic.Int64
			st := store(t)
			c := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: st}, countRuns(&runs))})
			if _, err := c.Send(ctx, "s1", llm.UserText("hi"), chat.WithMessageID("m1")); err != nil {
				t.Fatal(err)
			}
			out, err := c.Send(ctx, "s1", llm.UserText("something else"), chat.WithMessageID("m1"))
			e, ok := out.(*chat.Errored)
			if !ok || e.Category != errcat.MessageIDReused || e.Bucket != harness.UserCorrectable || !errors.Is(err, chat.ErrMessageIDReused) {
				t.Fatalf("another message under the same id: %#v, %v", out, err)
			}
			if _, err := c.ReplayMessage(ctx, "s1", "m1", llm.UserText("something else")); !errors.Is(err, chat.ErrMessageIDReused) {
				t.Fatalf("ReplayMessage of another message: %v", err)
			}
			if o, err := c.ReplayMessage(ctx, "s1", "m1", llm.UserText("hi")); err != nil || !o.Info().Replayed {
				t.Fatalf("ReplayMessage of the message: %#v, %v", o, err)
			}
			if again, err := c.Send(ctx, "s1", llm.UserText("hi"), chat.WithMessageID("m1")); err != nil || !again.Info().Replayed {
				t.Fatalf("the message sent again: %#v, %v", again, err)
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("the node ran %d times, want 1", n)
			}
			if n := len(history(t, st, "s1")); n != 2 {
				t.Fatalf("history has %d messages, want 2", n)
			}
		})
	}
}
