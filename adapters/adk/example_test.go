package adk_test

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/internal/demo"
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
