package eino_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// strictModel is an Eino model of the embedder's own (an eino-ext
// OpenAI client's place) that checks its input as OpenAI's Chat
// Completions API does: an assistant message with tool calls must be
// followed directly by a tool message for each call (otherwise the API
// answers 400 "An assistant message with 'tool_calls' must be followed
// by tool messages responding to each 'tool_call_id'"). It calls
// issue_refund when the user asks for a refund, and answers otherwise.
type strictModel struct {
	mu     sync.Mutex
	inputs [][]*schema.Message
}

func (m *strictModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.mu.Lock()
	m.inputs = append(m.inputs, in)
	call := 0
	for _, x := range m.inputs {
		for _, msg := range x {
			call += len(msg.ToolCalls)
		}
	}
	m.mu.Unlock()
	for i, msg := range in {
		if len(msg.ToolCalls) == 0 {
			continue
		}
		for j := range msg.ToolCalls {
			k := i + 1 + j
			if k >= len(in) || in[k].Role != schema.Tool {
				return nil, fmt.Errorf("400: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id' (message %d)", i)
			}
		}
	}
	last := in[len(in)-1]
	if last.Role == schema.User && strings.Contains(last.Content, "refund") {
		return schema.AssistantMessage("", []schema.ToolCall{{ID: fmt.Sprintf("r%d", call+1), Type: "function",
			Function: schema.FunctionCall{Name: "issue_refund", Arguments: `{"order":"7","amount":30}`}}}), nil
	}
	return schema.AssistantMessage("ok: "+last.Content, nil), nil
}

func (m *strictModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

func (m *strictModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

// TestAsidesLeftOutOfEinoHistory: the adapter leaves the runtime's asides
// out of the history it hands Eino, so the turn after an approval (given,
// denied, or superseded by a new message) completes on a model of the
// embedder's own (Config.Model, e.g. an eino-ext client). After an
// approval the session's history holds the runtime's approval request
// ("I need your approval to call …"), an aside inside the tool-call group
// (llm.AsideFilter). The workspace model's bridge and the ADK-Go adapter
// drop it too; handed to Eino as is, it would put an assistant text
// between the tool calls and their results, which OpenAI's API refuses
// with a 400, failing every later turn of the session.
func TestAsidesLeftOutOfEinoHistory(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"approved", "denied", "superseded"} {
		t.Run(how, func(t *testing.T) {
			m := &strictModel{}
			e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Model: m, Store: eino.NewMemoryStore()})
			if err != nil {
				t.Fatal(err)
			}
			h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
				session.NewMemoryStore(session.MemoryConfig{}))
			out, err := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("want a suspension, got %#v %v", out, err)
			}
			switch how {
			case "approved", "denied":
				p := agent.Approve("")
				if how == "denied" {
					p = agent.Deny("no")
				}
				out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: p})
				if _, ok := out.(*chat.Completed); !ok {
					t.Fatalf("resume: %#v %v", out, err)
				}
			case "superseded":
				out, err = h.Send(ctx, "acme/s", llm.UserText("never mind"))
				if _, ok := out.(*chat.Completed); !ok {
					t.Errorf("the turn superseding the approval: %#v %v, want it completed", out, err)
				}
			}
			out, err = h.Send(ctx, "acme/s", llm.UserText("hello again"))
			if _, ok := out.(*chat.Completed); !ok {
				if e, ok := out.(*chat.Errored); ok {
					t.Errorf("the turn after the approval failed (%s %v), want it completed", e.Category, e.Err)
				} else {
					t.Errorf("the turn after the approval: %#v %v, want it completed", out, err)
				}
			}
		})
	}
}
