package eino_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestFinishReason: a turn's finish reason is its last model call's, as
// a native agent's: an answer the upstream cut at its token limit
// (finish_reason length) makes the turn's finish reason length (what
// the OpenAI-compatible endpoints answer, finish_reason length and
// status incomplete, and the run record keeps), with usage reported or
// not, blocking or streaming, after a tool call too; a whole answer's is
// stop. Every model call is counted.
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
	} {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streaming=%v", tc.name, streaming), func(t *testing.T) {
				p := adaptertest.OpenAIUpstream(t, tc.usage, adaptertest.CutAnswer(tc.finish))
				e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Model: eino.NewProviderModel(p), Streaming: new(streaming)})
				if err != nil {
					t.Fatal(err)
				}
				h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
					session.NewMemoryStore(session.MemoryConfig{}))
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
				if tc.usage != "" && (c.Usage.TotalTokens == nil || *c.Usage.TotalTokens != 12*tc.calls) {
					t.Errorf("usage %+v", c.Usage)
				}
			})
		}
	}
}

// emptyIDModel is an Eino model of the embedder's own (an eino-ext
// client's place) that calls issue_refund without a call id.
type emptyIDModel struct{}

func (m emptyIDModel) Generate(context.Context, []*schema.Message, ...model.Option) (*schema.Message, error) {
	return schema.AssistantMessage("", []schema.ToolCall{{Type: "function",
		Function: schema.FunctionCall{Name: "issue_refund", Arguments: `{"order":"7","amount":30}`}}}), nil
}

func (m emptyIDModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

func (m emptyIDModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

// TestEmptyCallID: a model answer calling an approval-gated tool (or
// any tool) under an empty call id fails the turn in
// provider_invalid_response, as a native agent's turn fails on it (and
// the model client on a blocking answer), not as an invalid adapter
// result (node_exception, retryable); no tool runs, and no Eino
// checkpoint is left in the store (the one Eino saved for an interrupt
// of an embedder's model's call is deleted with the failing turn).
func TestEmptyCallID(t *testing.T) {
	ctx := context.Background()
	refund := func(id string) func(string) (string, string) {
		return func(string) (string, string) {
			return `{"role":"assistant","content":null,"tool_calls":[{` + id + `"type":"function","function":{"name":"issue_refund","arguments":"{\"order\":\"7\",\"amount\":30}"}}]}`, "tool_calls"
		}
	}
	lookup := func(string) (string, string) {
		return `{"role":"assistant","content":null,"tool_calls":[{"id":"","type":"function","function":{"name":"lookup_order","arguments":"{\"order\":\"7\"}"}}]}`, "tool_calls"
	}
	for _, tc := range []struct {
		name      string
		model     func(t *testing.T) model.ToolCallingChatModel
		streaming bool
	}{
		{name: "upstream, empty id, streaming", streaming: true,
			model: func(t *testing.T) model.ToolCallingChatModel {
				return eino.NewProviderModel(adaptertest.OpenAIUpstream(t, "", refund(`"id":"",`)))
			}},
		{name: "upstream, no id, streaming", streaming: true,
			model: func(t *testing.T) model.ToolCallingChatModel {
				return eino.NewProviderModel(adaptertest.OpenAIUpstream(t, "", refund("")))
			}},
		{name: "upstream, empty id, blocking",
			model: func(t *testing.T) model.ToolCallingChatModel {
				return eino.NewProviderModel(adaptertest.OpenAIUpstream(t, "", refund(`"id":"",`)))
			}},
		{name: "upstream, ungated tool, empty id, streaming", streaming: true,
			model: func(t *testing.T) model.ToolCallingChatModel {
				return eino.NewProviderModel(adaptertest.OpenAIUpstream(t, "", lookup))
			}},
		{name: "own model, empty id",
			model: func(*testing.T) model.ToolCallingChatModel { return emptyIDModel{} }},
		{name: "own model, empty id, streaming", streaming: true,
			model: func(*testing.T) model.ToolCallingChatModel { return emptyIDModel{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fs, err := eino.NewFileStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			tools, ran := countedTools()
			e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Model: tc.model(t), Store: fs, Streaming: new(tc.streaming)})
			if err != nil {
				t.Fatal(err)
			}
			h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: tools},
				session.NewMemoryStore(session.MemoryConfig{}))
			out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
			o, ok := out.(*chat.Errored)
			if !ok || o.Category != errcat.ProviderInvalidResponse {
				t.Fatalf("want provider_invalid_response, got %#v", out)
			}
			if tc.name != "upstream, empty id, blocking" && !errors.Is(o.Err, eino.ErrInvalidToolCall) {
				t.Errorf("the failure does not wrap eino.ErrInvalidToolCall: %v", o.Err)
			}
			if n := ran(); n != 0 {
				t.Errorf("a tool ran %d times", n)
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "*.ckpt")); len(files) != 0 {
				t.Errorf("checkpoint files left after the failed turn: %q", files)
			}
		})
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
