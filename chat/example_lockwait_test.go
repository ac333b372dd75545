package chat_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// WithLockWait bounds a turn's wait for a session another turn holds:
// here a stalled holder (another process's turn, say) that never lets
// go. The turn fails retryably before it runs anything, and the session
// never gets its message.
func ExampleWithLockWait() {
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	a, _ := demo.New()
	g, _ := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
	h, _ := chat.New(chat.Config{Graph: g})

	release, _ := store.Lock(ctx, "s1") // the stalled holder
	out, err := h.Send(ctx, "s1", llm.UserText("hello"), chat.WithLockWait(20*time.Millisecond))
	e := out.(*chat.Errored)
	fmt.Println(e.Category, e.Bucket, errors.Is(err, chat.ErrSessionBusy))
	release()

	out, _ = h.Send(ctx, "s1", llm.UserText("hello"))
	_, completed := out.(*chat.Completed)
	fmt.Println("retried:", completed)
	// Output:
	// invocation_cancelled retryable_transient true
	// retried: true
}
