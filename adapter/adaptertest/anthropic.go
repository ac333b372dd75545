package adaptertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
)

// The reasoning AnthropicThinkingUpstream signs its tool calls with: a
// thinking block (whose signature is not canonical base64, as another
// vendor's token may not be) and a redacted-thinking block.
const (
	AnthropicThinking          = "The user wants order 7 looked up."
	AnthropicThinkingSignature = "sig_thinking-1/not+canonical base64"
	AnthropicRedactedData      = "cmVkYWN0ZWQtcmVhc29uaW5n"
	answerSignature            = "c2lnLWFuc3dlcg=="
)

// AnthropicThinkingUpstream serves Anthropic's Messages API (atomic and
// streamed) as it answers a model with extended thinking enabled, for
// t's duration. A request whose conversation has no tool result yet is
// answered with the model's reasoning (a thinking block signed
// AnthropicThinkingSignature, then a redacted-thinking block of
// AnthropicRedactedData) and a tool_use block calling name with input (a
// JSON object). A request that carries a tool result is answered with a
// thinking block and the text answer, unless an assistant message in it
// that calls a tool does not start with that reasoning, exactly as
// given: that is refused with 400 invalid_request_error, as Anthropic
// refuses it ("Expected `thinking` or `redacted_thinking`, but found
// `tool_use`", or an invalid signature). It returns the server (its URL
// is a base URL) and a function returning the request bodies received so
// far.
func AnthropicThinkingUpstream(t testing.TB, name, input, answer string) (*httptest.Server, func() []string) {
	t.Helper()
	callBlocks := []map[string]any{
		{"type": "thinking", "thinking": AnthropicThinking, "signature": AnthropicThinkingSignature},
		{"type": "redacted_thinking", "data": AnthropicRedactedData},
		{"type": "tool_use", "id": "toolu_01", "name": name, "input": json.RawMessage(input)},
	}
	answerBlocks := []map[string]any{
		{"type": "thinking", "thinking": "The tool answered.", "signature": answerSignature},
		{"type": "text", "text": answer},
	}
	return RecordingServer(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			anthropicError(w, "invalid JSON: "+err.Error())
			return
		}
		answered := false
		for i, m := range req.Messages {
			var blocks []struct {
				Type      string `json:"type"`
				Thinking  string `json:"thinking"`
				Signature string `json:"signature"`
				Data      string `json:"data"`
			}
			_ = json.Unmarshal(m.Content, &blocks) // a string content has no blocks
			calls := false
			for _, bl := range blocks {
				answered = answered || bl.Type == "tool_result"
				calls = calls || bl.Type == "tool_use"
			}
			if m.Role != "assistant" || !calls {
				continue
			}
			switch {
			case len(blocks) < 3 || blocks[0].Type != "thinking":
				got := ""
				if len(blocks) > 0 {
					got = blocks[0].Type
				}
				anthropicError(w, fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceding the lastmost set of `tool_use` and `tool_result` blocks).", i, got))
				return
			case blocks[0].Thinking != AnthropicThinking || blocks[0].Signature != AnthropicThinkingSignature:
				anthropicError(w, fmt.Sprintf("messages.%d.content.0: Invalid `signature` in `thinking` block", i))
				return
			case blocks[1].Type != "redacted_thinking" || blocks[1].Data != AnthropicRedactedData:
				anthropicError(w, fmt.Sprintf("messages.%d.content.1: Invalid `data` in `redacted_thinking` block", i))
				return
			}
		}
		content, stop := callBlocks, "tool_use"
		if answered {
			content, stop = answerBlocks, "end_turn"
		}
		if req.Stream {
			streamAnthropic(w, content, stop)
			return
		}
		resp, _ := json.Marshal(map[string]any{"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
			"content": content, "stop_reason": stop, "usage": map[string]int{"input_tokens": 10, "output_tokens": 5}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resp)
	})
}

// anthropicError answers a request with Anthropic's 400
// invalid_request_error envelope.
func anthropicError(w http.ResponseWriter, msg string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": "invalid_request_error", "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

// streamAnthropic writes content as Anthropic's Messages event stream:
// each block started empty, then filled by its deltas (a thinking
// block's signature last, in a signature_delta, as Anthropic sends it).
func streamAnthropic(w http.ResponseWriter, content []map[string]any, stop string) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, data map[string]any) {
		b, _ := json.Marshal(data)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_01", "type": "message",
		"role": "assistant", "model": "claude-test", "content": []any{}, "stop_reason": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 1}}})
	for i, bl := range content {
		delta := func(d map[string]any) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		switch bl["type"] {
		case "thinking":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": ""}})
			delta(map[string]any{"type": "thinking_delta", "thinking": bl["thinking"]})
			delta(map[string]any{"type": "signature_delta", "signature": bl["signature"]})
		case "redacted_thinking":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": bl})
		case "tool_use":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": bl["id"], "name": bl["name"], "input": map[string]any{}}})
			delta(map[string]any{"type": "input_json_delta", "partial_json": string(bl["input"].(json.RawMessage))})
		case "text":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			delta(map[string]any{"type": "text_delta", "text": bl["text"]})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// ThinkingAgent is an agent of backend with the demo tools whose model is
// Armature's Anthropic client, extended thinking on, against url (an
// AnthropicThinkingUpstream's), streamed or not (the backend section's
// streaming key).
func ThinkingAgent(t testing.TB, backend, url string, streaming bool) *adapter.Agent {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{BaseURL: url, APIKey: "test-key", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	return &adapter.Agent{ID: "helper", Backend: backend, Model: "claude-test", Provider: p, Tools: demo.Tools(),
		Sampling: llm.Config{MaxTokens: new(4096), Extras: map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 2048}}},
		Config:   json.RawMessage(`{"streaming":` + strconv.FormatBool(streaming) + `}`)}
}

// WantReasoning fails t unless m starts with the reasoning
// AnthropicThinkingUpstream signs its calls with, exactly.
func WantReasoning(t testing.TB, m llm.Message) {
	t.Helper()
	b := m.Content.Blocks()
	if len(b) < 2 || b[0] != llm.ThinkingBlock(AnthropicThinking, AnthropicThinkingSignature) ||
		b[1] != llm.RedactedThinkingBlock(AnthropicRedactedData) {
		t.Fatalf("the call's message lost its reasoning: %#v", m)
	}
}

// ThinkingToolTurn runs a tool turn on h, whose agent's model is an
// AnthropicThinkingUpstream calling lookup_order and answering "Order 7
// ships Thursday." (requests is its second result) with ThinkingAgent's
// extras (each request must carry them), then a second turn
// on the same session: each must complete, which Anthropic's check of
// the reasoning sent back makes it do only if the reasoning went back
// exactly; the turn's replies must keep the call's reasoning and the
// answer's.
func ThinkingToolTurn(t testing.TB, h *chat.Harness, requests func() []string) {
	t.Helper()
	ctx := context.Background()
	out, err := h.Send(ctx, "s", llm.UserText("where is order 7?"))
	c, ok := out.(*chat.Completed)
	if err != nil || !ok {
		t.Fatalf("tool turn: %v %#v\nrequests:\n%s", err, out, strings.Join(requests(), "\n"))
	}
	if len(c.Replies) != 3 || c.Replies[2].Text() != "Order 7 ships Thursday." {
		t.Fatalf("replies %#v", c.Replies)
	}
	WantReasoning(t, c.Replies[0])
	if len(c.Replies[0].ToolCalls) != 1 || c.Replies[0].ToolCalls[0].Name != "lookup_order" {
		t.Fatalf("the call's message: %#v", c.Replies[0])
	}
	// The answer keeps its own reasoning, before its text.
	if b := c.Replies[2].Content.Blocks(); len(b) != 2 || b[0].Type != llm.BlockThinking || b[0].Signature != answerSignature {
		t.Fatalf("the answer lost its reasoning: %#v", c.Replies[2])
	}
	// Every request carried the agent's extras (ThinkingAgent's).
	for i, r := range requests() {
		if !strings.Contains(r, `"thinking":{"budget_tokens":2048,"type":"enabled"}`) {
			t.Fatalf("request %d lacks the agent's extras: %s", i, r)
		}
	}
	// The next turn sends the history back, the tool turn's reasoning
	// with it.
	if out, err := h.Send(ctx, "s", llm.UserText("thanks")); err != nil {
		t.Fatalf("next turn: %v %#v\nrequests:\n%s", err, out, strings.Join(requests(), "\n"))
	} else if _, ok := out.(*chat.Completed); !ok {
		t.Fatalf("next turn: %#v\nrequests:\n%s", out, strings.Join(requests(), "\n"))
	}
}
