package adk

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
)

// TestNotedPosition: on the in-memory session service a turn's cursor
// is taken from the events the turn appended rather than read back from
// the session; it is the session's Position all the same, for a first
// turn, a tool turn, a turn that asks for a confirmation, its resume, a
// turn after a seeded history, and a turn that rolls back one the
// runtime did not commit.
func TestNotedPosition(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(ctx, Config{Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	a := &Adapter{Engine: e}
	ag := &adapter.Agent{ID: "a", Backend: Name, Tools: demo.Tools()}
	drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	check := func(name string, req *adapter.Request) *adapter.Result {
		t.Helper()
		res, err := a.Run(ctx, req, drop)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pos, err := e.Position(ctx, defaultUser, req.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		if want := (cursor{Position: pos, User: lastUserSum(req)}).json(); string(res.Cursor) != string(want) {
			t.Fatalf("%s: cursor %s, the session's position %s", name, res.Cursor, want)
		}
		return res
	}
	first := check("first turn", &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello")})
	var history []llm.Message
	history = append(history, llm.UserText("hello"))
	history = append(history, first.Output.Messages...)
	tool := check("tool turn", &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("where is order 7?"), History: history, Cursor: first.Cursor})
	history = append(history, llm.UserText("where is order 7?"))
	history = append(history, tool.Output.Messages...)
	ask := check("confirmation", &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("refund order 5"), History: history, Cursor: tool.Cursor})
	if ask.Suspension == nil {
		t.Fatalf("the refund did not ask: %+v", ask)
	}
	history = append(history, llm.UserText("refund order 5"))
	history = append(history, ask.Suspension.Messages...)
	resumed := check("resume", &adapter.Request{Agent: ag, SessionID: "s", History: history, Cursor: ask.Cursor,
		Resume: &adapter.Resume{SignalID: "sig", Approved: true, ToolCall: ask.Suspension.ToolCall, State: json.RawMessage(ask.Suspension.State)}})
	// A turn the runtime did not commit (run on the cursor before it):
	// the next turn rolls it back first.
	check("uncommitted", &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello again"), History: history, Cursor: resumed.Cursor})
	check("after a rollback", &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello at last"), History: history, Cursor: resumed.Cursor})
	// A session ADK-Go never saw, with a history to seed.
	check("seeded", &adapter.Request{Agent: ag, SessionID: "seeded", Input: llm.UserText("where is order 9?"), History: history})
}
