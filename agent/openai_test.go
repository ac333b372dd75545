package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

// fakeOpenAI is an OpenAI-compatible Chat Completions server with a
// scripted model: after a tool result it answers with text; a user
// message about email calls send_email, anything else get_weather. With
// "stream": true it answers as server-sent events, the text split into
// word chunks.
func fakeOpenAI(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusNotFound)
			return
		}
		calls.Add(1)
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
			Tools []any `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Tools) != 2 {
			t.Errorf("request: %v, %d tools", err, len(req.Tools))
		}
		last := req.Messages[len(req.Messages)-1]
		var msg map[string]any
		finish := "tool_calls"
		switch {
		case last.Role == "tool":
			msg, finish = map[string]any{"role": "assistant", "content": "Done: " + fmt.Sprint(last.Content)}, "stop"
		case strings.Contains(fmt.Sprint(last.Content), "email"):
			msg = toolCallMsg("call_e1", "send_email", `{"to":"bob@example.com"}`)
		default:
			msg = toolCallMsg("call_w1", "get_weather", `{"city":"Paris"}`)
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
				"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
			})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		if text, ok := msg["content"].(string); ok {
			for _, word := range strings.SplitAfter(text, " ") {
				send(map[string]any{"content": word}, nil)
			}
		} else {
			tc := msg["tool_calls"].([]any)[0].(map[string]any)
			tc["index"] = 0
			send(map[string]any{"tool_calls": []any{tc}}, nil)
		}
		send(map[string]any{}, finish)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func toolCallMsg(id, name, args string) map[string]any {
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
		"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}
}

func openaiChat(t *testing.T, srv *httptest.Server, sent *atomic.Int32) *chat.Harness {
	t.Helper()
	p, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: "fake-model"})
	if err != nil {
		t.Fatal(err)
	}
	return newChat(t, p, sent)
}

// TestAgentOverOpenAIHTTP drives Send on a chat harness whose agent talks
// to an OpenAI-compatible server over HTTP: tool call, tool result, final
// answer; then the approval variant, approved and denied.
func TestAgentOverOpenAIHTTP(t *testing.T) {
	ctx := context.Background()
	srv, calls := fakeOpenAI(t)
	var sent atomic.Int32
	h := openaiChat(t, srv, &sent)

	out, err := h.Send(ctx, "s1", llm.UserText("Weather in Paris?"))
	if err != nil {
		t.Fatal(err)
	}
	c := out.(*chat.Completed)
	if roles(c.Replies) != "assistant,tool,assistant" || c.Replies[2].Text() != "Done: Sunny in Paris ()" || calls.Load() != 2 {
		t.Fatalf("replies %+v after %d calls", c.Replies, calls.Load())
	}

	for _, approve := range []bool{true, false} {
		id := fmt.Sprintf("approval-%v", approve)
		var resumed []chat.Outcome
		unsubscribe := h.Subscribe(id, func(o chat.Outcome) { resumed = append(resumed, o) })
		out, err := h.Send(ctx, id, llm.UserText("Send an email to Bob"))
		if err != nil {
			t.Fatal(err)
		}
		s := out.(*chat.Suspended)
		payload := agent.Deny("not today")
		if approve {
			payload = agent.Approve("")
		}
		if _, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: id, Payload: payload}); err != nil {
			t.Fatal(err)
		}
		unsubscribe()
		if len(resumed) != 1 {
			t.Fatalf("%d listener callbacks", len(resumed))
		}
		final := resumed[0].(*chat.Completed).Replies
		want := "Done: The user denied this call. Reason: not today"
		if approve {
			want = "Done: sent to bob@example.com"
		}
		if got := final[len(final)-1].Text(); got != want {
			t.Errorf("approve=%v: final reply %q, want %q", approve, got, want)
		}
	}
	if sent.Load() != 1 {
		t.Fatalf("the email tool ran %d times, want once (approved only)", sent.Load())
	}
}

// TestAgentStreamsTokensOverOpenAI: SendStreaming yields the streaming
// provider's token chunks end to end, then the outcome.
func TestAgentStreamsTokensOverOpenAI(t *testing.T) {
	srv, _ := fakeOpenAI(t)
	var sent atomic.Int32
	h := openaiChat(t, srv, &sent)
	var texts []string
	var tools []chat.ToolStatus
	var final chat.Outcome
	for ch, err := range h.SendStreaming(context.Background(), "s1", llm.UserText("Weather?")) {
		switch ch.Kind {
		case chat.ChunkText:
			texts = append(texts, ch.Text)
		case chat.ChunkTool:
			tools = append(tools, ch.Tool.Status)
		case chat.ChunkOutcome:
			if err != nil {
				t.Fatal(err)
			}
			final = ch.Outcome
		}
	}
	if strings.Join(texts, "") != "Done: Sunny in Paris ()" || len(texts) < 3 {
		t.Fatalf("text chunks %q", texts)
	}
	if fmt.Sprint(tools) != "[requested running completed]" {
		t.Fatalf("tool progress %v", tools)
	}
	if c, ok := final.(*chat.Completed); !ok || len(c.Replies) != 3 {
		t.Fatalf("outcome %#v", final)
	}
}
