package adk_test

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
)

// An ADK-Go agent on the scripted model with the demo tools: a tool
// turn, then a turn that waits for a confirmation, confirmed.
func ExampleEngine() {
	ctx := context.Background()
	e, err := adk.NewEngine(ctx, adk.Config{Tools: demo.Tools()})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	print := func(ev adk.Event) {
		switch ev.Kind {
		case adk.EventToolStart:
			fmt.Println("tool start:", ev.Tool, string(ev.Args))
		case adk.EventToolResult:
			fmt.Println("tool result:", ev.Output)
		}
	}
	res, _ := e.Send(ctx, "user", "s1", "where is order 7?", print)
	fmt.Println("answer:", res.Text)

	res, _ = e.Send(ctx, "user", "s1", "please refund order 7", print)
	fmt.Println("pending:", res.Pending[0].Tool)
	res, _ = e.Confirm(ctx, "user", "s1", print, adk.Decision{ConfirmationID: res.Pending[0].ConfirmationID, Confirmed: true})
	fmt.Println("answer:", res.Text)
	// Output:
	// tool start: lookup_order {"order":"7"}
	// tool result: order 7: shipped, arriving Thursday
	// answer: Here is what I found: order 7: shipped, arriving Thursday
	// tool start: issue_refund {"amount":30,"order":"7"}
	// pending: issue_refund
	// tool result: refunded $30.00 for order 7
	// answer: Here is what I found: refunded $30.00 for order 7
}

// A turn the runtime did not commit is rolled back: the position after
// the first turn is the cursor the runtime keeps; a second turn runs
// (and, say, its session write fails), and rewinding to the cursor
// removes its events (the user's message and the answer). A session
// ADK-Go never saw is seeded with the runtime's history.
func ExampleEngine_Rewind() {
	ctx := context.Background()
	e, err := adk.NewEngine(ctx, adk.Config{})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	_, _ = e.Send(ctx, "user", "s1", "hello", func(adk.Event) {})
	cursor, _ := e.Position(ctx, "user", "s1")
	_, _ = e.Send(ctx, "user", "s1", "a turn that is not committed", func(adk.Event) {})
	removed, _ := e.Rewind(ctx, "user", "s1", cursor)
	fmt.Println("events removed:", removed)
	now, _ := e.Position(ctx, "user", "s1")
	fmt.Println("back at the cursor:", now == cursor)

	seeded, _ := e.Seed(ctx, "user", "s2", []llm.Message{llm.UserText("my name is Ann"), llm.AssistantText("Hello, Ann.")})
	fmt.Println("events seeded:", seeded)
	// Output:
	// events removed: 2
	// back at the cursor: true
	// events seeded: 2
}
