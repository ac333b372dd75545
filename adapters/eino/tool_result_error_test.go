package eino_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
)

// TestToolResultError: a tool call that failed, or that the
// user denied, is reported as a failed result (Event.Error set), as the
// native agent and the ADK-Go adapter report it (agent.tool.result's
// "error"), so that the web page shows it as failed or denied rather
// than as a result the tool returned ("done").
func TestToolResultError(t *testing.T) {
	ctx := context.Background()
	tools := demo.Tools()
	tools[0] = agent.MustTool("lookup_order", "Look an order up by number",
		func(ctx context.Context, a struct {
			Order string `json:"order"`
		}) (string, error) {
			return "", errors.New("the order database is down")
		})
	e, err := eino.NewEngine(ctx, eino.Config{Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	results := func(evs *[]eino.Event) func(eino.Event) {
		return func(ev eino.Event) {
			if ev.Kind == eino.EventToolResult {
				*evs = append(*evs, ev)
			}
		}
	}
	var failed []eino.Event
	if _, err := e.Send(ctx, "turn-1", []*schema.Message{schema.UserMessage("where is order 7?")}, results(&failed)); err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].Error == "" {
		t.Errorf("a failed tool call's result events = %+v, want one with Error set", failed)
	}

	var denied []eino.Event
	res, err := e.Send(ctx, "turn-2", []*schema.Message{schema.UserMessage("please refund order 7")}, results(&denied))
	if err != nil || res.Pending == nil {
		t.Fatalf("refund: %+v, %v", res, err)
	}
	if _, err := e.Resume(ctx, *res.Pending, eino.Decision{Approved: false, Comment: "no"}, results(&denied)); err != nil {
		t.Fatal(err)
	}
	if len(denied) != 1 || denied[0].Error == "" {
		t.Errorf("a denied tool call's result events = %+v, want one with Error set", denied)
	}
}
