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
		for _, tools := range []*toolReport{nil, {}, {ran: true}, {ran: true, failed: []string{"c<1>", "x\u2028"}}} {
			end, ok := runEnding(c)
			if !ok {
				t.Fatal("runEnding refused a completed turn")
			}
			if tools != nil {
				tools.mergeInto(end.Output.(map[string]any))
			}
			want, err := json.Marshal(end.Output)
			if err != nil {
				t.Fatal(err)
			}
			got, err := completedJSON(c, tools)
			if err != nil || string(got) != string(want) {
				t.Errorf("completedJSON = %s, %v\nwant             %s", got, err, want)
			}
		}
	}
}

// TestToolReport: a turn whose tools answered reports the calls that
// failed (each once) in its run's output, an empty list when none did;
// one whose tools never answered reports nothing; an output's own
// "failed_tools" wins.
func TestToolReport(t *testing.T) {
	var r toolReport
	m := map[string]any{}
	r.mergeInto(m)
	if _, ok := m["failed_tools"]; ok {
		t.Fatalf("no tool answered, yet the output says %v", m)
	}
	r.answered("a", false)
	r.answered("b", true)
	r.answered("b", true)
	r.answered("c", false)
	r.mergeInto(m)
	if got, _ := json.Marshal(m); string(got) != `{"failed_tools":["b"]}` {
		t.Errorf("the output: %s", got)
	}
	own := map[string]any{"failed_tools": "mine"}
	r.mergeInto(own)
	if own["failed_tools"] != "mine" {
		t.Errorf("the output's own failed_tools was replaced: %v", own)
	}
	var none toolReport
	none.answered("a", false)
	m = map[string]any{}
	none.mergeInto(m)
	if got, _ := json.Marshal(m); string(got) != `{"failed_tools":[]}` {
		t.Errorf("tools that all succeeded: %s", got)
	}
}
