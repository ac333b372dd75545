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
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/session"
)

// TestUnknownToolProgressOrder: the result of a call of an undeclared
// tool (Eino's UnknownToolsHandler) is reported before the next answer's
// text, as every other tool result is and as the native and ADK-Go
// backends report it, so a streamed OpenAI client gets the call's
// "failed" progress frame before the answer (and a Responses stream
// closes the mcp_call item before the answer's message item opens).
func TestUnknownToolProgressOrder(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		ctx := context.Background()
		m := llmtest.New(
			llmtest.CallTools(llm.ToolCall{ID: "call_1", Name: "nope_tool", Arguments: json.RawMessage(`{}`)}),
			llmtest.Reply("the answer"))
		cfg, _ := json.Marshal(map[string]any{"streaming": streaming})
		ag := &adapter.Agent{ID: "x", Backend: eino.Name, Provider: m, Tools: demo.Tools(), Config: cfg}
		a, err := eino.Factory(ctx, adapter.FactoryRequest{Agent: ag})
		if err != nil {
			t.Fatal(err)
		}
		h := adaptertest.Harness(t, a, ag, session.NewMemoryStore(session.MemoryConfig{}))
		var order []string
		for ch, err := range h.SendStreaming(ctx, "acme/s", llm.UserText("hi")) {
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case ch.Kind == chat.ChunkText && ch.Text != "":
				order = append(order, "text")
			case ch.Kind == chat.ChunkTool && ch.Tool != nil && ch.Tool.Status != chat.ToolRequested:
				order = append(order, "tool:"+string(ch.Tool.Status))
			}
		}
		got := strings.Join(order, ",")
		failed, text := strings.Index(got, "tool:failed"), strings.Index(got, "text")
		if failed < 0 || text < 0 || failed > text {
			t.Errorf("streaming %v: chunks %s; want the call's failed progress before the answer's text", streaming, got)
		}
	}
}
