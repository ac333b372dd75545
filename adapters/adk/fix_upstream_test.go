package adk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// upstreamHarness is a chat harness over an adk agent on model m (the
// demo tools, issue_refund approval-gated), in memory.
func upstreamHarness(t *testing.T, cfg adk.Config) *chat.Harness {
	t.Helper()
	cfg.Tools = demo.Tools()
	e, err := adk.NewEngine(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return adaptertest.Harness(t, &adk.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: adk.Name, Tools: cfg.Tools},
		session.NewMemoryStore(session.MemoryConfig{}))
}

// TestFinishReason: a turn's finish reason is its last model call's, as
// a native agent's: an answer the upstream cut at its token limit
// (finish_reason length) makes the turn's finish reason length (what
// the OpenAI-compatible endpoints answer, finish_reason length and
// status incomplete, and the run record keeps), with usage reported or
// not (before, a model call whose upstream reported no usage, as many
// OpenAI-compatible servers do, was not reported at all: the turn said
// stop), blocking or streaming, after a tool call too; a whole answer's
// is stop. Every model call is counted, once.
func TestFinishReason(t *testing.T) {
	ctx := context.Background()
	const usage = `{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}`
	for _, tc := range []struct {
		name   string
		usage  string
		finish string
		text   string
		want   llm.FinishReason
		calls  int
	}{
		{name: "cut, no usage", finish: "length", text: "hi", want: llm.FinishLength, calls: 1},
		{name: "cut, usage", usage: usage, finish: "length", text: "hi", want: llm.FinishLength, calls: 1},
		{name: "cut after a tool call, no usage", finish: "length", text: "where is order 7?", want: llm.FinishLength, calls: 2},
		{name: "filtered, no usage", finish: "content_filter", text: "hi", want: llm.FinishContentFilter, calls: 1},
		{name: "whole, no usage", finish: "stop", text: "hi", want: llm.FinishStop, calls: 1},
		{name: "whole after a tool call, usage", usage: usage, finish: "stop", text: "where is order 7?", want: llm.FinishStop, calls: 2},
		{name: "cut after a tool call, usage", usage: usage, finish: "length", text: "where is order 7?", want: llm.FinishLength, calls: 2},
	} {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streaming=%v", tc.name, streaming), func(t *testing.T) {
				p := adaptertest.OpenAIUpstream(t, tc.usage, adaptertest.CutAnswer(tc.finish))
				h := upstreamHarness(t, adk.Config{LLM: adk.NewProviderModel("m", p), Streaming: new(streaming)})
				out, err := h.Send(ctx, "acme/s", llm.UserText(tc.text))
				c, ok := out.(*chat.Completed)
				if !ok {
					t.Fatalf("%#v %v", out, err)
				}
				if c.FinishReason != tc.want || c.ModelCalls != tc.calls {
					t.Errorf("finish reason %q after %d model calls, want %q after %d", c.FinishReason, c.ModelCalls, tc.want, tc.calls)
				}
				if got := c.Replies[len(c.Replies)-1].Text(); got != "The answer is cut sh" {
					t.Errorf("answer %q", got)
				}
				if tc.usage != "" && (c.Usage.TotalTokens == nil || *c.Usage.TotalTokens != 12*tc.calls ||
					c.Usage.PromptTokens == nil || *c.Usage.PromptTokens != 5*tc.calls) {
					t.Errorf("usage %+v", c.Usage)
				}
				if tc.usage == "" && c.Usage.TotalTokens != nil && *c.Usage.TotalTokens != 0 {
					t.Errorf("usage %+v reported by no call", c.Usage)
				}
			})
		}
	}
}

// TestFinishReasonGemini: the same through ADK-Go's own Gemini client
// (model: {provider: gemini}), whose answer cut at MAX_TOKENS, without
// usage metadata, makes the turn's finish reason length, streamed
// (ADK-Go's aggregated response counted once, not its chunks) or not.
func TestFinishReasonGemini(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		usage  string
		finish string
		want   llm.FinishReason
	}{
		{name: "cut, no usage", finish: "MAX_TOKENS", want: llm.FinishLength},
		{name: "cut, usage", usage: `,"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":7,"totalTokenCount":12}`, finish: "MAX_TOKENS", want: llm.FinishLength},
		{name: "whole, no usage", finish: "STOP", want: llm.FinishStop},
	} {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streaming=%v", tc.name, streaming), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body := `{"candidates":[{"content":{"role":"model","parts":[{"text":"The answer is cut sh"}]},"finishReason":"` + tc.finish + `"}]` + tc.usage + `}`
					if strings.Contains(r.URL.String(), "streamGenerateContent") {
						w.Header().Set("Content-Type", "text/event-stream")
						fmt.Fprintf(w, "data: %s\n\n", `{"candidates":[{"content":{"role":"model","parts":[{"text":"The answer "}]}}]}`)
						fmt.Fprintf(w, "data: %s\n\n", strings.Replace(body, "The answer is cut sh", "is cut sh", 1))
						return
					}
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, body)
				}))
				defer srv.Close()
				t.Setenv("TEST_GEMINI_KEY", "test-key")
				h := upstreamHarness(t, adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "gemini-test", BaseURL: srv.URL, APIKeyEnv: "TEST_GEMINI_KEY"},
					Streaming: new(streaming)})
				out, err := h.Send(ctx, "acme/s", llm.UserText("hi"))
				c, ok := out.(*chat.Completed)
				if !ok {
					t.Fatalf("%#v %v", out, err)
				}
				if c.FinishReason != tc.want || c.ModelCalls != 1 {
					t.Errorf("finish reason %q after %d model calls, want %q after 1", c.FinishReason, c.ModelCalls, tc.want)
				}
				if got := c.Replies[len(c.Replies)-1].Text(); got != "The answer is cut sh" {
					t.Errorf("answer %q", got)
				}
				if tc.usage != "" && (c.Usage.TotalTokens == nil || *c.Usage.TotalTokens != 12) {
					t.Errorf("usage %+v", c.Usage)
				}
			})
		}
	}
}

// countedTools returns the demo tools, each counting its calls, and
// the count.
func countedTools() ([]agent.Tool, func() int32) {
	var n atomic.Int32
	tools := demo.Tools()
	for i, tl := range tools {
		call := tl.Call
		tools[i].Call = func(ctx context.Context, args json.RawMessage) (string, error) {
			n.Add(1)
			return call(ctx, args)
		}
	}
	return tools, n.Load
}

// TestEmptyCallID: a bridged model's answer (an OpenAI-compatible
// server's) calling a tool under an empty call id, or none, fails the
// turn in provider_invalid_response (adk.ErrInvalidToolCall), as a
// native agent's turn fails on it, blocking or streaming, for an
// approval-gated tool and an ungated one alike: no tool runs, no
// approval is asked. Before, a streamed answer's call took an id of
// ADK-Go's ("adk-…"), ran (or was suspended for its approval), and the
// next model call failed as provider_invalid_request: ADK-Go strips its
// own ids from the requests it builds, so the call and its result went
// to the model without an id.
func TestEmptyCallID(t *testing.T) {
	ctx := context.Background()
	call := func(tool, id string) func(string) (string, string) {
		return func(body string) (string, string) {
			if strings.Contains(body, `"role":"tool"`) {
				return `{"role":"assistant","content":"done"}`, "stop"
			}
			args := `{\"order\":\"7\",\"amount\":30}`
			if tool == "lookup_order" {
				args = `{\"order\":\"7\"}`
			}
			return `{"role":"assistant","content":null,"tool_calls":[{` + id + `"type":"function","function":{"name":"` + tool + `","arguments":"` + args + `"}}]}`, "tool_calls"
		}
	}
	for _, tc := range []struct {
		name, tool, id string
	}{
		{name: "gated, empty id", tool: "issue_refund", id: `"id":"",`},
		{name: "gated, no id", tool: "issue_refund"},
		{name: "ungated, empty id", tool: "lookup_order", id: `"id":"",`},
		{name: "ungated, no id", tool: "lookup_order"},
	} {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streaming=%v", tc.name, streaming), func(t *testing.T) {
				tools, ran := countedTools()
				e, err := adk.NewEngine(ctx, adk.Config{Tools: tools, LLM: adk.NewProviderModel("m", adaptertest.OpenAIUpstream(t, "", call(tc.tool, tc.id))), Streaming: new(streaming)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { e.Close() })
				h := adaptertest.Harness(t, &adk.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: adk.Name, Tools: tools},
					session.NewMemoryStore(session.MemoryConfig{}))
				out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
				o, ok := out.(*chat.Errored)
				if !ok || o.Category != errcat.ProviderInvalidResponse {
					t.Fatalf("want provider_invalid_response, got %#v", out)
				}
				// A blocking answer's is refused by the openai client
				// already; a streamed one's by the bridge.
				if streaming && !errors.Is(o.Err, adk.ErrInvalidToolCall) {
					t.Errorf("the failure does not wrap adk.ErrInvalidToolCall: %v", o.Err)
				}
				if n := ran(); n != 0 {
					t.Errorf("a tool ran %d times", n)
				}
			})
		}
	}
}

// TestGeminiCallWithoutID: ADK-Go's own Gemini client's calls carry no
// id (the Gemini API's way): ADK-Go gives each one of its own ("adk-…"),
// and it flows into the approval (its signal), the run's tool events
// and the history, and approving the call runs the tool once and the
// turn completes; the call of an ungated tool runs at once.
func TestGeminiCallWithoutID(t *testing.T) {
	ctx := context.Background()
	for _, tool := range []string{"issue_refund", "lookup_order"} {
		t.Run(tool, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				if strings.Contains(string(b), "functionResponse") {
					geminiAnswer(w, r, `{"candidates":[{"content":{"role":"model","parts":[{"text":"done"}]},"finishReason":"STOP"}]}`)
					return
				}
				args := `{"order":"7","amount":30}`
				if tool == "lookup_order" {
					args = `{"order":"7"}`
				}
				geminiAnswer(w, r, `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"`+tool+`","args":`+args+`}}]},"finishReason":"STOP"}]}`)
			}))
			defer srv.Close()
			t.Setenv("TEST_GEMINI_KEY", "test-key")
			tools, ran := countedTools()
			e, err := adk.NewEngine(ctx, adk.Config{Tools: tools,
				Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "gemini-test", BaseURL: srv.URL, APIKeyEnv: "TEST_GEMINI_KEY"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			h := adaptertest.Harness(t, &adk.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: adk.Name, Tools: tools},
				session.NewMemoryStore(session.MemoryConfig{}))
			out, err := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
			if tool == "issue_refund" {
				s, ok := out.(*chat.Suspended)
				if !ok {
					t.Fatalf("want a suspension, got %#v %v", out, err)
				}
				if !strings.HasPrefix(s.Descriptor.SignalID, "approval:adk-") || ran() != 0 {
					t.Fatalf("signal %q, %d tool runs", s.Descriptor.SignalID, ran())
				}
				out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
			}
			c, ok := out.(*chat.Completed)
			if !ok || c.Replies[len(c.Replies)-1].Text() != "done" || ran() != 1 {
				t.Fatalf("want the answer after one tool run, got %#v %v (%d runs)", out, err, ran())
			}
			// The history holds the call and its result under ADK-Go's id.
			var callID, resultID string
			for _, m := range chat.Messages.Get(c.FinalState) {
				if len(m.ToolCalls) > 0 {
					callID = m.ToolCalls[0].ID
				}
				if m.Role == llm.RoleTool {
					resultID = m.ToolCallID
				}
			}
			if !strings.HasPrefix(callID, "adk-") || resultID != callID {
				t.Fatalf("history: call %q, result %q", callID, resultID)
			}
		})
	}
}

// TestStepLimitNotACall: the answer max_llm_calls gives in place of the
// call past it (a BeforeModelCallback's, no model call) is not counted
// as a model call, as a native agent's at max_steps: the turn's model
// calls are the ones made, its finish reason the last one's.
func TestStepLimitNotACall(t *testing.T) {
	ctx := context.Background()
	var n atomic.Int32
	p := adaptertest.OpenAIUpstream(t, "", func(string) (string, string) {
		return fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"l%d","type":"function","function":{"name":"lookup_order","arguments":"{\"order\":\"7\"}"}}]}`, n.Add(1)), "tool_calls"
	})
	h := upstreamHarness(t, adk.Config{LLM: adk.NewProviderModel("m", p), MaxLLMCalls: 2})
	out, err := h.Send(ctx, "acme/s", llm.UserText("where is order 7?"))
	c, ok := out.(*chat.Completed)
	if !ok || c.Replies[len(c.Replies)-1].Text() != adk.StoppedText(2) {
		t.Fatalf("%#v %v", out, err)
	}
	if c.ModelCalls != 2 || c.FinishReason != llm.FinishToolCalls || n.Load() != 2 {
		t.Errorf("finish reason %q after %d model calls (%d made), want tool_calls after 2", c.FinishReason, c.ModelCalls, n.Load())
	}
}

// TestFinishReasonAfterApproval: the model call of a turn an approval
// resumed is reported in that turn, usage or not: cut, it makes the
// resumed turn's finish reason length.
func TestFinishReasonAfterApproval(t *testing.T) {
	ctx := context.Background()
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			p := adaptertest.OpenAIUpstream(t, "", func(body string) (string, string) {
				if strings.Contains(body, `"role":"tool"`) {
					return `{"role":"assistant","content":"Refunded, and then cut sh"}`, "length"
				}
				return `{"role":"assistant","content":null,"tool_calls":[{"id":"r1","type":"function","function":{"name":"issue_refund","arguments":"{\"order\":\"7\",\"amount\":30}"}}]}`, "tool_calls"
			})
			h := upstreamHarness(t, adk.Config{LLM: adk.NewProviderModel("m", p), Streaming: new(streaming)})
			out, err := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
			s, ok := out.(*chat.Suspended)
			if !ok || s.ModelCalls != 1 || s.FinishReason != llm.FinishToolCalls {
				t.Fatalf("want a suspension after one model call (tool_calls), got %#v %v", out, err)
			}
			out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
			c, ok := out.(*chat.Completed)
			if !ok || c.Replies[len(c.Replies)-1].Text() != "Refunded, and then cut sh" {
				t.Fatalf("%#v %v", out, err)
			}
			if c.FinishReason != llm.FinishLength || c.ModelCalls != 1 {
				t.Errorf("finish reason %q after %d model calls, want length after 1", c.FinishReason, c.ModelCalls)
			}
		})
	}
}

// geminiAnswer writes a fake Gemini API's answer body: as the one event
// of a stream when r is a streamed call (streamGenerateContent, the
// adapter's default), else as JSON.
func geminiAnswer(w http.ResponseWriter, r *http.Request, body string) {
	if strings.Contains(r.URL.String(), "streamGenerateContent") {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, body)
}
