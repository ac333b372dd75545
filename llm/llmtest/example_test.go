package llmtest_test

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

func Example() {
	p := llmtest.New(llmtest.Reply("Hello!"))
	resp, err := llm.Complete(context.Background(), p, &llm.Request{
		Messages: []llm.Message{llm.UserText("Hi")},
		Stream:   true,
		OnChunk:  func(c *llm.Chunk) { fmt.Printf("chunk %q\n", c.Content) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Message.Text(), len(p.Requests()))
	// Output:
	// chunk "Hello!"
	// chunk ""
	// Hello! 1
}
