package chat_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// SendFunc streams a turn to a function instead of an iterator: each
// chunk is handed over on the goroutine of the node that emitted it, as
// it is emitted, and the call returns the turn's outcome.
func ExampleHarness_SendFunc() {
	ctx := context.Background()
	a, _ := demo.New()
	g, _ := a.Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	h, _ := chat.New(chat.Config{Graph: g})

	var text strings.Builder
	out, err := h.SendFunc(ctx, "s1", llm.UserText("where is order 7?"), func(c chat.Chunk) bool {
		switch c.Kind {
		case chat.ChunkText:
			text.WriteString(c.Text)
		case chat.ChunkTool:
			fmt.Printf("tool %s %s (node %s, step %d)\n", c.Tool.Name, c.Tool.Status, c.Node, c.Step)
		}
		return true // false would stop the turn
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("streamed:", text.String())
	done := out.(*chat.Completed)
	fmt.Println("outcome:", done.Replies[len(done.Replies)-1].Text())
	// Output:
	// tool lookup_order requested (node model, step 0)
	// tool lookup_order running (node tools, step 1)
	// tool lookup_order completed (node tools, step 1)
	// streamed: Here is what I found: order 7: shipped, arriving Thursday
	// outcome: Here is what I found: order 7: shipped, arriving Thursday
}
