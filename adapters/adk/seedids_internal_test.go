package adk

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
)

// TestSeedRepeatedCallIDs: a history sent whole (seeded) in which two
// turns' calls share an id (call_0) reaches the model with each call
// answered by its own result. Before, ADK-Go answered both with the
// later one's ("order 8: LOST" for order 3).
func TestSeedRepeatedCallIDs(t *testing.T) {
	ctx := context.Background()
	m := adaptertest.NewModel()
	e, err := NewEngine(ctx, Config{Tools: demo.Tools(), LLM: NewProviderModel("m", m)})
	if err != nil {
		t.Fatal(err)
	}
	call := func(order string) llm.ToolCall {
		return llm.ToolCall{ID: "call_0", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"` + order + `"}`)}
	}
	history := []llm.Message{
		llm.UserText("where is order 3?"), llm.AssistantToolCalls(call("3")), llm.ToolResult("call_0", "order 3: shipped"), llm.AssistantText("Shipped."),
		llm.UserText("and order 8?"), llm.AssistantToolCalls(call("8")), llm.ToolResult("call_0", "order 8: LOST"), llm.AssistantText("Lost."),
	}
	if n, err := e.Seed(ctx, "u", "s", history); err != nil || n != len(history) {
		t.Fatalf("seed: %d, %v", n, err)
	}
	if history[5].ToolCalls[0].ID != "call_0" {
		t.Fatalf("the history handed to Seed was changed: %v", history[5])
	}
	if _, err := e.SendMessage(ctx, "u", "s", llm.UserText("thanks"), func(Event) {}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // the order each call asks for → the result it was answered with
	sent := m.LastTranscript()
	for i, msg := range sent {
		for _, tc := range msg.ToolCalls {
			for _, r := range sent[i+1:] {
				if r.Role == llm.RoleTool && r.ToolCallID == tc.ID {
					got[string(tc.Arguments)] = r.Text()
					break
				}
			}
		}
	}
	if got[`{"order":"3"}`] != "order 3: shipped" || got[`{"order":"8"}`] != "order 8: LOST" {
		t.Fatalf("the model was told %q", got)
	}
	if err := llm.CheckHistory(nil, sent); err != nil {
		t.Fatalf("the model was sent an invalid conversation: %v", err)
	}
}

// noArgs is a model that calls lookup_order without arguments ({}) on a
// user message and answers a tool result with text, recording what it
// was sent.
type noArgs struct {
	mu   sync.Mutex
	sent [][]llm.Message
}

func (m *noArgs) Ready(context.Context) error { return nil }

func (m *noArgs) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	msgs := req.Transcript()
	m.mu.Lock()
	m.sent = append(m.sent, msgs)
	m.mu.Unlock()
	if msgs[len(msgs)-1].Role == llm.RoleTool {
		return &llm.Response{Message: llm.AssistantText("done"), FinishReason: llm.FinishStop}, nil
	}
	tc := llm.ToolCall{ID: "c" + string(rune('0'+len(m.sent))), Name: "lookup_order", Arguments: json.RawMessage(`{}`)}
	return &llm.Response{Message: llm.AssistantToolCalls(tc), FinishReason: llm.FinishToolCalls}, nil
}

// TestEmptyArguments: a call without arguments ({}) is sent back to the
// model as {} in the same turn and the next, on a session database too
// (where ADK-Go stores no arguments for it). Before, it was sent there
// as null, which servers reading a call's arguments as an object
// refuse.
func TestEmptyArguments(t *testing.T) {
	ctx := context.Background()
	m := &noArgs{}
	e, err := NewEngine(ctx, Config{Tools: demo.Tools(), LLM: NewProviderModel("m", m),
		Session: SessionConfig{Driver: SessionSQLite, Path: filepath.Join(t.TempDir(), "adk.db")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"look it up", "again"} {
		if _, err := e.SendMessage(ctx, "u", "s", llm.UserText(text), func(Event) {}); err != nil {
			t.Fatal(err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	calls := 0
	for _, sent := range m.sent {
		for _, msg := range sent {
			for _, tc := range msg.ToolCalls {
				calls++
				if string(tc.Arguments) != "{}" {
					t.Fatalf("a call without arguments was sent back as %s", tc.Arguments)
				}
			}
		}
	}
	if calls < 3 {
		t.Fatalf("the model was sent %d calls back, want 3", calls)
	}
}
