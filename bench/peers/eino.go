package peers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// EinoModel is the scripted model for Eino (see the package doc).
type EinoModel struct {
	tools []*schema.ToolInfo
}

var _ model.ToolCallingChatModel = (*EinoModel)(nil)

// Generate implements model.BaseChatModel. The tools are those bound with
// WithTools or, as Eino's agent layer passes them, the model.WithTools
// option.
func (m *EinoModel) Generate(_ context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	tools := m.tools
	if len(opts) > 0 {
		tools = model.GetCommonOptions(&model.Options{Tools: tools}, opts...).Tools
	}
	if len(tools) > 0 && (len(input) == 0 || input[len(input)-1].Role != schema.Tool) {
		return &schema.Message{Role: schema.Assistant, ToolCalls: []schema.ToolCall{{
			ID: ToolCallID, Type: "function",
			Function: schema.FunctionCall{Name: tools[0].Name, Arguments: `{"city":"` + ToolCity + `"}`},
		}}}, nil
	}
	return schema.AssistantMessage(Reply, nil), nil
}

// Stream implements model.BaseChatModel: the whole answer as one chunk.
func (m *EinoModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

// WithTools implements model.ToolCallingChatModel.
func (m *EinoModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return &EinoModel{tools: tools}, nil
}

// EmailArgs are the arguments of the W4 approval-gated tool.
type EmailArgs struct {
	City string `json:"city"`
}

// errNotApproved is returned by the W4 tool resumed without approval.
var errNotApproved = errors.New("peers: email not approved")

// NewEinoAgent builds Eino's ReAct agent (a compose graph: chat model node,
// tools node, branch) on the scripted model, offering the W3 tool when tool
// is set.
func NewEinoAgent(ctx context.Context, withTool bool) (*react.Agent, error) {
	cfg := &react.AgentConfig{ToolCallingModel: &EinoModel{}, MaxStep: 12}
	if withTool {
		t, err := einoWeatherTool()
		if err != nil {
			return nil, err
		}
		cfg.ToolsConfig.Tools = []tool.BaseTool{t}
	}
	return react.NewAgent(ctx, cfg)
}

func einoWeatherTool() (tool.InvokableTool, error) {
	return utils.InferTool(ToolName, "Looks up the weather forecast for a city.",
		func(_ context.Context, args WeatherArgs) (WeatherResult, error) {
			return WeatherResult{Forecast: ToolResult}, nil
		})
}

// einoApprovalTool interrupts until resumed with [ApprovalPayload].
func einoApprovalTool() (tool.InvokableTool, error) {
	return utils.InferTool(ApprovalToolName, "Sends the forecast by email, once a person approves.",
		func(ctx context.Context, args EmailArgs) (string, error) {
			resumed, hasData, payload := tool.GetResumeContext[string](ctx)
			if !resumed {
				return "", tool.Interrupt(ctx, "approve sending the email?")
			}
			if !hasData || payload != ApprovalPayload {
				return "", errNotApproved
			}
			return "email sent", nil
		})
}

// EinoApproval is the W4 setup on Eino: the ReAct agent whose one tool is
// approval-gated (it interrupts until resumed with [ApprovalPayload]),
// nested in a root graph compiled with an in-memory checkpoint store.
type EinoApproval struct {
	run compose.Runnable[[]*schema.Message, *schema.Message]
}

// NewEinoApproval builds the W4 graph.
func NewEinoApproval(ctx context.Context) (*EinoApproval, error) {
	t, err := einoApprovalTool()
	if err != nil {
		return nil, err
	}
	ag, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: &EinoModel{}, MaxStep: 12,
		ToolsConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{t}}})
	if err != nil {
		return nil, err
	}
	sub, opts := ag.ExportGraph()
	root := compose.NewGraph[[]*schema.Message, *schema.Message]()
	if err := root.AddGraphNode("agent", sub, opts...); err != nil {
		return nil, err
	}
	if err := root.AddEdge(compose.START, "agent"); err != nil {
		return nil, err
	}
	if err := root.AddEdge("agent", compose.END); err != nil {
		return nil, err
	}
	run, err := root.Compile(ctx, compose.WithCheckPointStore(NewCheckPointStore()), compose.WithGraphName("approval"))
	if err != nil {
		return nil, err
	}
	return &EinoApproval{run: run}, nil
}

// Cycle runs one approval cycle under checkpoint id (which must be new):
// the invocation that interrupts at the tool, then the resume with the
// approval payload, which runs the tool and the model's answer. It returns
// the final answer.
func (e *EinoApproval) Cycle(ctx context.Context, id string) (*schema.Message, error) {
	input := []*schema.Message{schema.UserMessage(UserText)}
	_, err := e.run.Invoke(ctx, input, compose.WithCheckPointID(id))
	info, ok := compose.ExtractInterruptInfo(err)
	if !ok || len(info.InterruptContexts) != 1 {
		return nil, fmt.Errorf("peers: want one interrupt, got %v", err)
	}
	ctx = compose.ResumeWithData(ctx, info.InterruptContexts[0].ID, ApprovalPayload)
	return e.run.Invoke(ctx, input, compose.WithCheckPointID(id))
}

// CheckPointStore is an in-memory compose.CheckPointStore; Eino ships the
// contract, and its own tests and examples use a map like this one.
type CheckPointStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

var _ compose.CheckPointStore = (*CheckPointStore)(nil)

// NewCheckPointStore returns an empty store.
func NewCheckPointStore() *CheckPointStore {
	return &CheckPointStore{m: make(map[string][]byte)}
}

// Get implements compose.CheckPointStore.
func (s *CheckPointStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[id]
	return b, ok, nil
}

// Set implements compose.CheckPointStore.
func (s *CheckPointStore) Set(_ context.Context, id string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = b
	return nil
}

// Size returns the bytes stored under id.
func (s *CheckPointStore) Size(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m[id])
}

// EinoRunner is Eino's agent layer, the counterpart of ADK-Go's runner: a
// ChatModelAgent (a ReAct loop over a compose graph) on the scripted model,
// run by adk.Runner with an in-memory checkpoint store.
type EinoRunner struct {
	runner *adk.Runner
}

// EinoTool selects the tool an [EinoRunner] offers the model.
type EinoTool int

// The tools an [EinoRunner] can offer.
const (
	EinoNoTool       EinoTool = iota // a chat turn (W1, W2)
	EinoWeatherTool                  // a tool turn (W3)
	EinoApprovalTool                 // an approval cycle (W4)
)

// NewEinoRunner builds the runner offering t.
func NewEinoRunner(ctx context.Context, t EinoTool) (*EinoRunner, error) {
	cfg := &adk.ChatModelAgentConfig{Name: "assistant", Description: "A helpful assistant.", Model: &EinoModel{}}
	var bt tool.BaseTool
	var err error
	switch t {
	case EinoWeatherTool:
		bt, err = einoWeatherTool()
	case EinoApprovalTool:
		bt, err = einoApprovalTool()
	}
	if err != nil {
		return nil, err
	}
	if bt != nil {
		cfg.ToolsConfig.Tools = []tool.BaseTool{bt}
	}
	ag, err := adk.NewChatModelAgent(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &EinoRunner{runner: adk.NewRunner(ctx, adk.RunnerConfig{Agent: ag, CheckPointStore: NewCheckPointStore()})}, nil
}

// Send runs one turn on messages (the history the application holds, then
// the user's message) and returns the messages the agent produced.
func (e *EinoRunner) Send(ctx context.Context, messages []*schema.Message, opts ...adk.AgentRunOption) ([]*schema.Message, *adk.InterruptInfo, error) {
	return drain(e.runner.Run(ctx, messages, opts...))
}

// Cycle runs one approval cycle under checkpoint id (which must be new):
// the run that interrupts at the tool, then the resume with the approval
// payload, which runs the tool and the model's answer. It returns the
// messages of both halves.
func (e *EinoRunner) Cycle(ctx context.Context, id string) ([]*schema.Message, error) {
	out, intr, err := e.Send(ctx, []*schema.Message{schema.UserMessage(UserText)}, adk.WithCheckPointID(id))
	if err != nil {
		return nil, err
	}
	if intr == nil || len(intr.InterruptContexts) == 0 {
		return nil, errors.New("peers: the approval run did not interrupt")
	}
	var target string
	for _, c := range intr.InterruptContexts {
		if c.IsRootCause {
			target = c.ID
		}
	}
	it, err := e.runner.ResumeWithParams(ctx, id, &adk.ResumeParams{Targets: map[string]any{target: ApprovalPayload}})
	if err != nil {
		return nil, err
	}
	more, intr, err := drain(it)
	if err == nil && intr != nil {
		err = errors.New("peers: the resumed run interrupted again")
	}
	return append(out, more...), err
}

func drain(it *adk.AsyncIterator[*adk.AgentEvent]) ([]*schema.Message, *adk.InterruptInfo, error) {
	var out []*schema.Message
	var intr *adk.InterruptInfo
	for {
		ev, ok := it.Next()
		if !ok {
			return out, intr, nil
		}
		if ev.Err != nil {
			return out, intr, ev.Err
		}
		if ev.Action != nil && ev.Action.Interrupted != nil {
			intr = ev.Action.Interrupted
		}
		if ev.Output != nil && ev.Output.MessageOutput != nil && ev.Output.MessageOutput.Message != nil {
			out = append(out, ev.Output.MessageOutput.Message)
		}
	}
}
