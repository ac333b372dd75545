package eino_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/session"
)

// TestThoughtSignatureSurvivesBridge: the model bridge carries a tool
// call's reasoning-continuity token (llm.ToolCall.Signature, Gemini's
// thoughtSignature) both ways between Armature and Eino, so the model
// call that follows a tool call sends the functionCall back with its
// thoughtSignature and the turn completes, as a native agent's does.
// Gemini 3 models refuse a functionCall sent back without it (400
// INVALID_ARGUMENT, "Function call is missing a thought_signature"), so
// without it every tool turn of an Eino agent on such a model would fail.
func TestThoughtSignatureSurvivesBridge(t *testing.T) {
	ctx := context.Background()
	for _, streaming := range []bool{false, true} {
		name := "blocking"
		if streaming {
			name = "streaming"
		}
		t.Run(name, func(t *testing.T) {
			ts, bodies := adaptertest.Gemini3Upstream(t, `{"id":"fc1","name":"lookup_order","args":{"order":"7"}}`, "c2lnbmF0dXJlLTE=", "Order 7 has shipped.")
			p, err := gemini.New(gemini.Config{BaseURL: ts.URL, APIKey: "k", Model: "gemini-3-pro-preview"})
			if err != nil {
				t.Fatal(err)
			}
			// The upstream takes the call sent back with its signature,
			// as Armature's Gemini client sends it (a native agent's
			// history keeps it).
			call := llm.ToolCall{ID: "fc1", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`), Signature: "c2lnbmF0dXJlLTE="}
			if _, err := p.Complete(ctx, &llm.Request{Messages: []llm.Message{llm.UserText("where is order 7?"), llm.AssistantToolCalls(call),
				llm.ToolResult("fc1", "order 7: shipped")}}); err != nil {
				t.Fatalf("control: the call sent back with its signature is refused: %v", err)
			}
			tools := demo.Tools()
			e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Model: eino.NewProviderModel(p), Store: eino.NewMemoryStore(), Streaming: new(streaming)})
			if err != nil {
				t.Fatal(err)
			}
			h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: tools},
				session.NewMemoryStore(session.MemoryConfig{}))
			out, err := h.Send(ctx, "acme/s", llm.UserText("where is order 7?"))
			if c, ok := out.(*chat.Completed); !ok {
				if e, ok := out.(*chat.Errored); ok {
					t.Errorf("the tool turn failed (%s %v), want it completed", e.Category, e.Err)
				} else {
					t.Errorf("the tool turn: %#v %v, want it completed", out, err)
				}
			} else if got := c.Replies[len(c.Replies)-1].Text(); got != "Order 7 has shipped." {
				t.Errorf("answer %q, want %q", got, "Order 7 has shipped.")
			}
			// bodies[0] is the control, [1] the turn's first model call,
			// [2] the one after the tool ran.
			if b := bodies(); len(b) == 3 && !strings.Contains(b[2], "c2lnbmF0dXJlLTE=") {
				t.Errorf("the model call after the tool ran sends the call back without its thoughtSignature, want it kept: %s", b[2])
			}
		})
	}
}
