package server

import (
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
)

// completedJSON writes what json.Marshal makes of runEnding's output, for
// turns with and without model calls, usage counters or replies.
func TestCompletedJSON(t *testing.T) {
	n := func(v int) *int { return &v }
	call := llm.ToolCall{ID: "c<1>", Name: "look&up", Arguments: json.RawMessage(`{"q": "a\u2028b"}`)}
	for _, c := range []*chat.Completed{
		{Replies: []llm.Message{}},
		{},
		{Turn: chat.Turn{ModelCalls: 2, FinishReason: llm.FinishStop}, Replies: []llm.Message{llm.AssistantText("a <b> & \"c\" é \xff")}},
		{Turn: chat.Turn{ModelCalls: 1, FinishReason: llm.FinishToolCalls, Usage: llm.Usage{PromptTokens: n(10), CompletionTokens: n(0),
			TotalTokens: n(10), CachedTokens: n(3), CacheCreationTokens: n(-1)}},
			Replies: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}}, llm.ToolResult("c<1>", "42"), llm.AssistantText("")}},
		{Turn: chat.Turn{ModelCalls: 1, Usage: llm.Usage{TotalTokens: n(7)}}, Replies: []llm.Message{}},
	} {
		end, ok := runEnding(c)
		if !ok {
			t.Fatal("runEnding refused a completed turn")
		}
		want, err := json.Marshal(end.Output)
		if err != nil {
			t.Fatal(err)
		}
		got, err := completedJSON(c)
		if err != nil || string(got) != string(want) {
			t.Errorf("completedJSON = %s, %v\nwant             %s", got, err, want)
		}
	}
}
