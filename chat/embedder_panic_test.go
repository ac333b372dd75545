package chat_test

import (
	"context"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/store/sqlite"
	"path/filepath"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
)

// embRecover runs f as net/http runs a handler: a panic is recovered
// and the process goes on.
func embRecover(f func()) (panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	f()
	return false
}

// TestEmbedderPanickingHookReleasesSession: a hook of the embedder's
// (WithOnLocked / Signal.OnLocked, WithOnRelease / Signal.OnRelease)
// panics, and the embedder's server recovers the panic as net/http
// does. The session must not stay locked: the next message to it runs
// (here within 3 s). Send releases it; Signal must too.
func TestEmbedderPanickingHookReleasesSession(t *testing.T) {
	for _, hook := range []string{"send-onlocked", "send-onrelease", "signal-onlocked", "signal-onrelease"} {
		t.Run(hook, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.db")
			w := embOpen(t, path, (&embRefunds{ran: map[string]int{}}).tools())
			other := embOpen(t, path, (&embRefunds{ran: map[string]int{}}).tools()) // another process on the file
			ctx := context.Background()
			out, err := w.h.Send(ctx, "s", llm.UserText("please refund order 7"))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("send: %T %v", out, err)
			}
			boom := func() { panic("embedder hook failed") }
			panicked := embRecover(func() {
				switch hook {
				case "send-onlocked":
					_, _ = w.h.Send(ctx, "s", llm.UserText("hello"), chat.WithOnLocked(boom))
				case "send-onrelease":
					_, _ = w.h.Send(ctx, "s", llm.UserText("hello"), chat.WithOnRelease(boom))
				case "signal-onlocked":
					_, _ = w.h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve(""), OnLocked: boom})
				case "signal-onrelease":
					_, _ = w.h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve(""), OnRelease: boom})
				}
			})
			if !panicked {
				t.Fatal("the hook did not panic")
			}
			for name, x := range map[string]*embWorker{"this process": w, "another process": other} {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				start := time.Now()
				next, err := x.h.Send(cctx, "s", llm.UserText("is anyone there?"))
				cancel()
				if err != nil {
					t.Errorf("after a %s hook panicked, the session's next message (%s) waited %v and failed: %T %v", hook, name, time.Since(start).Round(time.Millisecond), next, err)
				}
			}
		})
	}
}

// TestEmbedderPanickingStreamConsumer: the consumer of SendStreaming /
// SignalStreaming (or SendFunc / SignalFunc's fn) panics on a chunk, and
// the embedder's server recovers it. The session must not stay locked.
func TestEmbedderPanickingStreamConsumer(t *testing.T) {
	for _, mode := range []string{"send-streaming", "signal-streaming", "send-func", "signal-func"} {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.db")
			w := embOpen(t, path, (&embRefunds{ran: map[string]int{}}).tools())
			ctx := context.Background()
			out, err := w.h.Send(ctx, "s", llm.UserText("please refund order 7"))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("send: %T %v", out, err)
			}
			sig := chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")}
			panicked := embRecover(func() {
				switch mode {
				case "send-streaming":
					for range w.h.SendStreaming(ctx, "s", llm.UserText("where is order 3?")) {
						panic("consumer failed")
					}
				case "signal-streaming":
					for range w.h.SignalStreaming(ctx, sig) {
						panic("consumer failed")
					}
				case "send-func":
					_, _ = w.h.SendFunc(ctx, "s", llm.UserText("where is order 3?"), func(chat.Chunk) bool { panic("consumer failed") })
				case "signal-func":
					_, _ = w.h.SignalFunc(ctx, sig, func(chat.Chunk) bool { panic("consumer failed") })
				}
			})
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			start := time.Now()
			next, err := w.h.Send(cctx, "s", llm.UserText("is anyone there?"))
			if err != nil {
				t.Fatalf("%s (consumer panicked: %v): the session's next message waited %v and failed: %T %v", mode, panicked, time.Since(start).Round(time.Millisecond), next, err)
			}
		})
	}
}

// TestEmbedderPanickingSignalHookFreesTheLease: with a short
// lease TTL (300 ms), a Signal whose hook panicked lets its lease go:
// another process on the file takes the session.
func TestEmbedderPanickingSignalHookFreesTheLease(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	open := func() *chat.Harness {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close(context.Background()) })
		a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: st}), graph.WithCheckpointStore(st.Checkpoints()))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.Checkpoints()),
			Locker: st.SessionLocker(sqlite.LockerConfig{TTL: 300 * time.Millisecond})})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b := open(), open()
	out, err := a.Send(ctx, "s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("send: %T %v", out, err)
	}
	embRecover(func() {
		_, _ = a.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve(""),
			OnRelease: func() { panic("embedder hook failed") }})
	})
	time.Sleep(2 * time.Second) // more than six TTLs
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if next, err := b.Send(cctx, "s", llm.UserText("is anyone there?"), chat.WithOnLocked(func() { t.Logf("locked after %v", time.Since(start)) })); err != nil {
		t.Fatalf("another process, %v after the panic (lease TTL 300ms), waited %v: %T %v", 2*time.Second, time.Since(start).Round(time.Millisecond), next, err)
	}
}
