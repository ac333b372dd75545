package interop

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/npmtest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/llm/openai"
	"github.com/armature-go/armature/session"
)

// fixtures are aimock's answers, matched on the last user message.
const fixtures = `{"fixtures": [
 {"match": {"userMessage": "hello"}, "response": {"content": "Hello from the mock."}},
 {"match": {"userMessage": "weather"}, "response": {"toolCalls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]}},
 {"match": {"userMessage": "limit"}, "response": {"error": {"message": "Rate limit exceeded.", "type": "rate_limit_error", "code": "rate_limit_exceeded"}, "status": 429}},
 {"match": {"userMessage": "both"}, "response": {"toolCalls": [{"name": "get_weather", "arguments": {"location": "Paris"}}, {"name": "get_weather", "arguments": {"location": "Rome"}}]}},
 {"match": {"userMessage": "nothing"}, "response": {"content": ""}},
 {"match": {"userMessage": "refund order 5", "hasToolResult": false}, "response": {"toolCalls": [{"name": "issue_refund", "arguments": {"order": "5"}}]}},
 {"match": {"userMessage": "refund order 5", "hasToolResult": true}, "response": {"content": "The refund is done."}},
 {"match": {"userMessage": "cut"}, "response": {"content": "This answer is long enough to arrive in several chunks, but the connection drops."}, "truncateAfterChunks": 2}
]}`

// startAimock runs the mock server with the suite's fixtures and
// returns its URL.
func startAimock(t *testing.T) string { return npmtest.StartAimock(t, fixtures) }

// TestProvidersAgainstAimock drives each mapping through the suite's
// cases against aimock.
func TestProvidersAgainstAimock(t *testing.T) {
	base := startAimock(t)
	providers := []struct {
		name string
		p    llm.Provider
		err  error
	}{}
	add := func(name string, p llm.Provider, err error) {
		providers = append(providers, struct {
			name string
			p    llm.Provider
			err  error
		}{name, p, err})
	}
	o, err := openai.New(openai.Config{BaseURL: base + "/v1", APIKey: "mock-key-0123456789", Model: "gpt-test"})
	add("openai", o, err)
	a, err := anthropic.New(anthropic.Config{BaseURL: base, APIKey: "mock-key-0123456789", Model: "claude-test"})
	add("anthropic", a, err)
	g, err := gemini.New(gemini.Config{BaseURL: base, APIKey: "mock-key-0123456789", Model: "gemini-test"})
	add("gemini", g, err)
	weather := llm.Tool{Name: "get_weather", Description: "Weather for a place.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false}`)}
	request := func(text string, stream bool) *llm.Request {
		return &llm.Request{Messages: []llm.Message{llm.UserText(text)}, Tools: []llm.Tool{weather}, Stream: stream,
			Config: llm.Config{MaxTokens: new(256)}}
	}
	for _, pc := range providers {
		t.Run(pc.name, func(t *testing.T) {
			if pc.err != nil {
				t.Fatal(pc.err)
			}
			for _, stream := range []bool{false, true} {
				mode := map[bool]string{false: "atomic", true: "streamed"}[stream]
				// Text.
				req := request("hello", stream)
				var deltas strings.Builder
				req.OnChunk = func(c *llm.Chunk) { deltas.WriteString(c.Content) }
				resp, err := llm.Complete(t.Context(), pc.p, req)
				if err != nil {
					t.Fatalf("%s text: %v", mode, err)
				}
				if resp.Message.Text() != "Hello from the mock." || resp.FinishReason != llm.FinishStop {
					t.Errorf("%s text: %q %s", mode, resp.Message.Text(), resp.FinishReason)
				}
				if stream && deltas.String() != "Hello from the mock." {
					t.Errorf("streamed deltas %q", deltas.String())
				}
				if !resp.Usage.Reported() {
					t.Errorf("%s text: no usage reported", mode)
				}
				// A tool call, then its result sent back.
				resp, err = llm.Complete(t.Context(), pc.p, request("weather", stream))
				if err != nil {
					t.Fatalf("%s tool call: %v", mode, err)
				}
				calls := resp.Message.ToolCalls
				if len(calls) != 1 || calls[0].Name != "get_weather" || string(calls[0].Arguments) != `{"location":"Paris"}` ||
					calls[0].ID == "" || resp.FinishReason != llm.FinishToolCalls {
					t.Fatalf("%s tool call: %+v %s", mode, calls, resp.FinishReason)
				}
				follow := request("hello", stream)
				follow.Messages = []llm.Message{llm.UserText("weather"), resp.Message, llm.ToolResult(calls[0].ID, "18C and sunny"), llm.UserText("hello")}
				if resp, err = llm.Complete(t.Context(), pc.p, follow); err != nil || resp.Message.Text() != "Hello from the mock." {
					t.Errorf("%s after the tool result: %v %+v", mode, err, resp)
				}
				// Parallel tool calls.
				resp, err = llm.Complete(t.Context(), pc.p, request("both", stream))
				if err != nil || len(resp.Message.ToolCalls) != 2 || resp.Message.ToolCalls[0].ID == resp.Message.ToolCalls[1].ID ||
					string(resp.Message.ToolCalls[1].Arguments) != `{"location":"Rome"}` {
					t.Errorf("%s parallel tool calls: %v %+v", mode, err, resp)
				}
				// An empty reply: no text, no call, and no error from the
				// provider (the agent turns it into its documented
				// provider_invalid_response outcome).
				resp, err = llm.Complete(t.Context(), pc.p, request("nothing", stream))
				if err != nil || resp.Message.Text() != "" || len(resp.Message.ToolCalls) != 0 {
					t.Errorf("%s empty reply: %v %+v", mode, err, resp)
				}
				// A stream cut mid-way fails after the deltas that came.
				if stream {
					cut := request("cut", true)
					deltas.Reset()
					cut.OnChunk = func(c *llm.Chunk) { deltas.WriteString(c.Content) }
					if _, err := llm.Complete(t.Context(), pc.p, cut); !errors.Is(err, errcat.ProviderUnavailable) {
						t.Errorf("cut stream: %v (after %q), want provider_unavailable", err, deltas.String())
					}
				}
				// An upstream rate limit.
				_, err = llm.Complete(t.Context(), pc.p, request("limit", stream))
				if !errors.Is(err, errcat.ProviderRateLimit) {
					t.Errorf("%s rate limit: %v, want provider_rate_limit", mode, err)
				}
			}
		})
	}
}

// TestAgentAgainstAimock runs the agent on each mapping: an approval
// (the model asks for an approval-gated tool, the turn suspends, the
// approval resumes it, the tool runs, and the model's answer to the tool
// result completes the turn), then an empty model reply, which is the
// documented errored turn (provider_invalid_response) and stores
// nothing. The history stays valid throughout.
func TestAgentAgainstAimock(t *testing.T) {
	base := startAimock(t)
	ctx := t.Context()
	refund, err := agent.NewTool("issue_refund", "Refund an order.", func(ctx context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "refunded order " + in.Order, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, mk := range []struct {
		name string
		p    func() (llm.Provider, error)
	}{
		{"openai", func() (llm.Provider, error) {
			return openai.New(openai.Config{BaseURL: base + "/v1", APIKey: "mock-key-0123456789", Model: "gpt-test"})
		}},
		{"anthropic", func() (llm.Provider, error) {
			return anthropic.New(anthropic.Config{BaseURL: base, APIKey: "mock-key-0123456789", Model: "claude-test"})
		}},
		{"gemini", func() (llm.Provider, error) {
			return gemini.New(gemini.Config{BaseURL: base, APIKey: "mock-key-0123456789", Model: "gemini-test"})
		}},
	} {
		t.Run(mk.name, func(t *testing.T) {
			p, err := mk.p()
			if err != nil {
				t.Fatal(err)
			}
			a, err := agent.New(agent.Config{Provider: p, Tools: []agent.Tool{refund.WithApproval()}, Model: llm.Config{MaxTokens: new(256)}})
			if err != nil {
				t.Fatal(err)
			}
			store := session.NewMemoryStore(session.MemoryConfig{})
			g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
			if err != nil {
				t.Fatal(err)
			}
			h, err := chat.New(chat.Config{Graph: g})
			if err != nil {
				t.Fatal(err)
			}
			out, err := h.Send(ctx, "s", llm.UserText("refund order 5"))
			s, ok := out.(*chat.Suspended)
			if err != nil || !ok {
				t.Fatalf("send: %v %#v", err, out)
			}
			out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")})
			c, ok := out.(*chat.Completed)
			if err != nil || !ok {
				t.Fatalf("approve: %v %#v", err, out)
			}
			var texts []string
			for _, m := range c.Replies {
				texts = append(texts, m.Text())
			}
			joined := strings.Join(texts, " | ")
			if !strings.Contains(joined, "refunded order 5") || !strings.Contains(joined, "The refund is done.") {
				t.Fatalf("replies: %s", joined)
			}
			st, err := g.SessionState(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			hist := chat.Messages.Get(st)
			if err := llm.CheckHistory(nil, hist); err != nil {
				t.Fatal(err)
			}
			out, _ = h.Send(ctx, "s", llm.UserText("nothing"))
			if e, ok := out.(*chat.Errored); !ok || e.Category != errcat.ProviderInvalidResponse {
				t.Fatalf("empty reply: %#v, want an errored turn in provider_invalid_response", out)
			}
			st, err = g.SessionState(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			if n := len(chat.Messages.Get(st)); n != len(hist) {
				t.Fatalf("the empty reply's turn stored %d messages", n-len(hist))
			}
		})
	}
}
