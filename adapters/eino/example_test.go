package eino_test

import (
	"context"
	"fmt"

	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/internal/demo"
)

// An Eino agent on the scripted model with the demo tools: a turn whose
// approval-gated tool interrupts, resumed from the checkpoint store with
// an approving decision.
func ExampleEngine() {
	ctx := context.Background()
	e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools()})
	if err != nil {
		panic(err)
	}
	print := func(ev eino.Event) {
		switch ev.Kind {
		case eino.EventToolStart:
			fmt.Println("tool start:", ev.Tool, ev.Args)
		case eino.EventToolResult:
			fmt.Println("tool result:", ev.Output)
		}
	}
	res, _ := e.Send(ctx, "turn-1", []*schema.Message{schema.UserMessage("please refund order 7")}, print)
	fmt.Println("pending:", res.Pending.Request.Tool)
	res, _ = e.Resume(ctx, *res.Pending, eino.Decision{Approved: true}, print)
	fmt.Println("answer:", res.Text)
	// Output:
	// tool start: issue_refund {"order":"7","amount":30}
	// pending: issue_refund
	// tool result: refunded $30.00 for order 7
	// answer: Here is what I found: refunded $30.00 for order 7
}
