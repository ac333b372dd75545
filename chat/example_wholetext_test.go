package chat_test

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// WithWholeText suits a consumer that records a turn's chunks rather than
// shows them live: the model is called without streaming, and each
// reply's text arrives in one chunk, where its streamed chunks would
// have been.
func ExampleWithWholeText() {
	ctx := context.Background()
	a, _ := demo.New()
	g, _ := a.Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	h, _ := chat.New(chat.Config{Graph: g})

	_, err := h.SendFunc(ctx, "s1", llm.UserText("where is order 7?"), func(c chat.Chunk) bool {
		switch c.Kind {
		case chat.ChunkText:
			fmt.Printf("text %q\n", c.Text)
		case chat.ChunkTool:
			fmt.Printf("tool %s %s\n", c.Tool.Name, c.Tool.Status)
		}
		return true
	}, chat.WithWholeText())
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// tool lookup_order requested
	// tool lookup_order running
	// tool lookup_order completed
	// text "Here is what I found: order 7: shipped, arriving Thursday"
}
