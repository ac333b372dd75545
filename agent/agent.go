package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
)

// ApprovalField is the state field an approval signal's payload sets
// (see Approve, Deny). It is a wire identifier and must not change.
const ApprovalField = "approval"

// SignalPrefix starts the signal id of every approval request: the
// signal for tool call id X is SignalPrefix + X.
const SignalPrefix = "approval:"

// Metadata keys of an approval's suspension (graph.SignalDescriptor
// Metadata): the tool, its call id and arguments, and the tool's
// declared Risk.
const (
	MetadataTool      = "tool"
	MetadataCallID    = "call_id"
	MetadataArguments = "arguments"
	MetadataRiskTier  = "risk_tier"
)

// Node names of the agent graph.
const (
	NodeModel           = "model"
	NodeTools           = "tools"
	NodeRequestApproval = "request_approval"
	NodeAwaitApproval   = "await_approval"
)

// DefaultMaxSteps bounds the model calls of one turn.
const DefaultMaxSteps = 10

// ErrInvalidConfig is wrapped by configuration errors from New.
var ErrInvalidConfig = errors.New("agent: invalid config")

// ErrEmptyReply is matched (with [errors.Is]) by the error a turn fails
// with when the model answers with neither text nor tool calls, as
// providers do when a safety filter withholds the answer (OpenAI
// finish_reason "content_filter" with null content, Gemini finishReason
// "SAFETY" without parts, Anthropic an empty content array). The error's
// category is provider_invalid_response (a user-correctable failure,
// harness-chat §10.3) and its message, which the errored reply quotes,
// names the finish reason; the turn stores nothing, so the session stays
// usable.
var ErrEmptyReply = errors.New("agent: empty model reply")

// Config configures an Agent. Provider is required.
type Config struct {
	// Provider is the model.
	Provider llm.Provider
	// System is the system prompt sent before the conversation on every
	// model call (it is not stored in the history).
	System string
	// Tools are the tools the model may call; names must be unique.
	Tools []Tool
	// Model holds the sampling parameters of every call.
	Model llm.Config
	// Retry is the call-level retry policy of every model call (nil: no
	// retry).
	Retry *llm.RetryPolicy
	// MaxSteps bounds the model calls of one turn (the tool loop);
	// default DefaultMaxSteps. A turn that reaches it ends with an
	// assistant message saying so.
	MaxSteps int
}

// Agent is a prebuilt tool-calling chat agent: a chat graph whose model
// node calls the provider with the conversation and the tools, whose tool
// node runs the calls the model asks for and reports their results (or
// errors) back, looping until the model answers without calling a tool.
// Calls of tools that need approval suspend the turn with a pending
// message naming the call, and resume on approve or deny.
type Agent struct {
	cfg   Config
	tools map[string]Tool
	defs  []llm.Tool
}

// New returns an agent for cfg.
func New(cfg Config) (*Agent, error) {
	if cfg.Provider == nil {
		return nil, fmt.Errorf("%w: Provider is required", ErrInvalidConfig)
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	a := &Agent{cfg: cfg, tools: make(map[string]Tool, len(cfg.Tools))}
	for _, t := range cfg.Tools {
		if t.Call == nil {
			return nil, fmt.Errorf("%w: tool %q has no Call", ErrInvalidConfig, t.Definition.Name)
		}
		if err := t.Definition.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		if _, dup := a.tools[t.Definition.Name]; dup {
			return nil, fmt.Errorf("%w: two tools are named %q", ErrInvalidConfig, t.Definition.Name)
		}
		risk, err := ParseRisk(string(t.Risk))
		if err != nil {
			return nil, fmt.Errorf("%w: tool %q: %v", ErrInvalidConfig, t.Definition.Name, err)
		}
		t.Risk = risk
		a.tools[t.Definition.Name] = t
		a.defs = append(a.defs, t.Definition)
	}
	return a, nil
}

// ApprovalPayloadSchema is the JSON Schema an approval signal's payload
// must satisfy (graph.SignalDescriptor.PayloadSchema): an "approval"
// object with a boolean "approved" and an optional string "comment"
// (what Approve and Deny build). Any other payload — a number for
// "approved", no "approval", no payload at all — is refused with
// suspension_resume_payload_invalid and the approval stays pending.
const ApprovalPayloadSchema = `{"type":"object","required":["approval"],"properties":{"approval":{"type":"object","required":["approved"],"properties":{"approved":{"type":"boolean"},"comment":{"type":"string"}}}}}`

// approval is the approval field: whatever the signal's payload carries
// (Approve / Deny build it), consumed by the tool node.
var approval = graph.NewDynamicField(ApprovalField, graph.TypeAny)

// Schema returns the agent's state schema: chat.Messages and the approval
// field.
func (a *Agent) Schema() (*graph.Schema, error) { return chat.NewSchema(approval) }

// Compile builds the agent's chat graph. Pass graph.WithSessions (chat
// graphs are sessioned) and, to resume approvals on any worker, a durable
// graph.WithCheckpointStore.
func (a *Agent) Compile(opts ...graph.CompileOption) (*graph.Graph, error) {
	schema, err := a.Schema()
	if err != nil {
		return nil, err
	}
	return graph.NewBuilder(schema).
		AddNode(NodeModel, a.model).
		AddConditionalEdge(NodeModel, routeAfterModel, NodeTools, graph.End).
		AddNode(NodeTools, a.runTools).
		AddConditionalEdge(NodeTools, a.routeAfterTools, NodeModel, NodeRequestApproval).
		AddNode(NodeRequestApproval, a.requestApproval).
		AddEdge(NodeRequestApproval, NodeAwaitApproval).
		AddNode(NodeAwaitApproval, a.awaitApproval).
		AddEdge(NodeAwaitApproval, NodeTools).
		SetEntry(NodeModel).
		Compile(opts...)
}

// Approve returns the signal payload approving the pending call, with an
// optional comment.
func Approve(comment string) graph.Update {
	return graph.Update{ApprovalField: map[string]any{"approved": true, "comment": comment}}
}

// Deny returns the signal payload refusing the pending call, with an
// optional reason the model is told.
func Deny(reason string) graph.Update {
	return graph.Update{ApprovalField: map[string]any{"approved": false, "comment": reason}}
}

// decision reads the approval field: (approved, comment, present).
func decision(s graph.State) (bool, string, bool) {
	v, _ := s.Get(ApprovalField)
	m, ok := v.(map[string]any)
	if !ok {
		return false, "", false
	}
	approved, _ := m["approved"].(bool)
	comment, _ := m["comment"].(string)
	return approved, comment, true
}

// model calls the provider with the conversation and appends its answer.
func (a *Agent) model(ctx context.Context, s graph.State) (graph.Update, error) {
	msgs := chat.Messages.Get(s)
	if steps := stepsThisTurn(msgs); steps >= a.cfg.MaxSteps {
		return chat.Messages.Add(llm.AssistantText(fmt.Sprintf(
			"I stopped after %d steps without finishing. Ask me to continue if you want me to keep going.", steps))), nil
	}
	req := &llm.Request{Messages: a.transcript(ctx, msgs), Tools: a.defs, Config: a.cfg.Model, Retry: a.cfg.Retry}
	if _, ok := a.cfg.Provider.(llm.Streamer); ok && chat.Streaming(ctx) {
		req.Stream = true
		req.OnChunk = func(c *llm.Chunk) {
			if c.Content != "" {
				chat.EmitText(ctx, c.Content)
			}
			if c.Reasoning != "" {
				chat.Emit(ctx, chat.Chunk{Kind: chat.ChunkThinking, Text: c.Reasoning})
			}
		}
	}
	resp, err := llm.Complete(ctx, a.cfg.Provider, req)
	if err != nil {
		return nil, err
	}
	chat.ReportModelCall(ctx, resp)
	m := resp.Message
	m.Role = llm.RoleAssistant
	if m.Text() == "" && len(m.ToolCalls) == 0 {
		return nil, emptyReply(resp.FinishReason)
	}
	for _, tc := range m.ToolCalls {
		chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolRequested, Arguments: tc.Arguments})
	}
	return chat.Messages.Add(m), nil
}

// emptyReply is the failure of a model call that returned no text and no
// tool calls (only, perhaps, reasoning): storing the message would break
// the history (llm-provider §3), so the turn fails instead, in
// provider_invalid_response, with a message naming the finish reason.
func emptyReply(finish llm.FinishReason) error {
	msg := "the model returned an empty reply"
	if finish != "" {
		msg += " (finish reason: " + string(finish) + ")"
	}
	return errcat.Wrap(errcat.ProviderInvalidResponse, msg, ErrEmptyReply)
}

// instructionsKey carries WithInstructions' system prompt.
type instructionsKey struct{}

// WithInstructions returns ctx carrying a system prompt that replaces the
// agent's (Config.System) in the model calls of the turn run under ctx
// ("" sends none): per-request instructions, as the OpenAI Responses
// API's instructions field gives them. They are not stored in the
// session: the next turn has the agent's own prompt again, and so has a
// turn resumed later from a suspension (the resume runs under the
// resuming request's context).
func WithInstructions(ctx context.Context, system string) context.Context {
	return context.WithValue(ctx, instructionsKey{}, system)
}

// transcript is what the model sees: the system prompt, then the history
// without the approval requests the agent appended inside tool-call
// groups (providers require a call's results to follow it directly).
func (a *Agent) transcript(ctx context.Context, msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, 0, len(msgs)+1)
	system := a.cfg.System
	if s, ok := ctx.Value(instructionsKey{}).(string); ok {
		system = s
	}
	if system != "" {
		out = append(out, llm.SystemText(system))
	}
	open := 0 // tool calls of the current group still without a result
	for _, m := range msgs {
		switch {
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0:
			open = len(m.ToolCalls)
		case m.Role == llm.RoleTool && open > 0:
			open--
		case m.Role == llm.RoleAssistant && open > 0:
			continue // an approval request inside the group
		}
		out = append(out, m)
	}
	return out
}

// stepsThisTurn counts the model answers since the last user message.
func stepsThisTurn(msgs []llm.Message) int {
	n := 0
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role != llm.RoleUser; i-- {
		if msgs[i].Role == llm.RoleAssistant && (len(msgs[i].ToolCalls) > 0 || !isApprovalRequest(msgs, i)) {
			n++
		}
	}
	return n
}

// isApprovalRequest reports whether msgs[i], an assistant message without
// tool calls, sits inside an open tool-call group.
func isApprovalRequest(msgs []llm.Message, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch m := msgs[j]; {
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0:
			results := 0
			for k := j + 1; k < i; k++ {
				if msgs[k].Role == llm.RoleTool {
					results++
				}
			}
			return results < len(m.ToolCalls)
		case m.Role == llm.RoleUser:
			return false
		}
	}
	return false
}

func routeAfterModel(ctx context.Context, s graph.State) (string, error) {
	msgs := chat.Messages.Get(s)
	if last := msgs[len(msgs)-1]; last.Role == llm.RoleAssistant && len(last.ToolCalls) > 0 {
		return NodeTools, nil
	}
	return graph.End, nil
}

// pending returns the open tool calls of the last tool-call group: the
// calls without a result yet, in order.
func pending(msgs []llm.Message) []llm.ToolCall {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != llm.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		done := map[string]bool{}
		for _, r := range msgs[i+1:] {
			if r.Role == llm.RoleTool {
				done[r.ToolCallID] = true
			}
		}
		var open []llm.ToolCall
		for _, tc := range m.ToolCalls {
			if !done[tc.ID] {
				open = append(open, tc)
			}
		}
		return open
	}
	return nil
}

// runTools runs the open calls in order until one needs an approval that
// has not been given; a decision in the approval field applies to the
// first call awaiting one and is consumed.
func (a *Agent) runTools(ctx context.Context, s graph.State) (graph.Update, error) {
	approved, comment, decided := decision(s)
	var results []llm.Message
	upd := graph.Update{}
	if decided {
		upd[ApprovalField] = nil
	}
	for _, tc := range pending(chat.Messages.Get(s)) {
		t, known := a.tools[tc.Name]
		switch {
		case !known:
			results = append(results, llm.ToolResult(tc.ID, fmt.Sprintf("error: there is no tool named %q", tc.Name)))
			continue
		case t.NeedsApproval && !decided:
			if len(results) > 0 {
				upd[chat.MessagesField] = results
			}
			return upd, nil // routeAfterTools asks for approval
		case t.NeedsApproval && !approved:
			decided = false
			text := "The user denied this call."
			if comment != "" {
				text += " Reason: " + comment
			}
			chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolFailed, Result: text})
			results = append(results, llm.ToolResult(tc.ID, text))
			continue
		case t.NeedsApproval:
			decided = false // the decision covers this one call
		}
		results = append(results, llm.ToolResult(tc.ID, a.call(ctx, t, tc)))
	}
	upd[chat.MessagesField] = results
	return upd, nil
}

// call runs one tool, turning any failure into a result the model reads.
func (a *Agent) call(ctx context.Context, t Tool, tc llm.ToolCall) (result string) {
	chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolRunning, Arguments: tc.Arguments})
	defer func() {
		if p := recover(); p != nil {
			result = fmt.Sprintf("error: the tool failed: %v", p)
			chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolFailed, Result: result})
		}
	}()
	out, err := t.Call(ctx, tc.Arguments)
	if err != nil {
		result = "error: " + err.Error()
		chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolFailed, Result: result})
		return result
	}
	chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolCompleted, Result: out})
	return out
}

func (a *Agent) routeAfterTools(ctx context.Context, s graph.State) (string, error) {
	if len(pending(chat.Messages.Get(s))) > 0 {
		return NodeRequestApproval, nil
	}
	return NodeModel, nil
}

// requestApproval appends the pending message naming the call that waits
// for approval (harness-chat §8.1: the message, then the suspension).
func (a *Agent) requestApproval(ctx context.Context, s graph.State) (graph.Update, error) {
	tc := pending(chat.Messages.Get(s))[0]
	return chat.Messages.Add(llm.AssistantText(fmt.Sprintf(
		"I need your approval to call %s with %s.", tc.Name, compactArgs(tc.Arguments)))), nil
}

// awaitApproval suspends until the approval signal arrives.
func (a *Agent) awaitApproval(ctx context.Context, s graph.State) (graph.Update, error) {
	if _, _, decided := decision(s); decided {
		return nil, nil
	}
	tc := pending(chat.Messages.Get(s))[0]
	md := map[string]any{MetadataTool: tc.Name, MetadataCallID: tc.ID, MetadataRiskTier: string(a.riskOf(tc.Name))}
	var args any
	if json.Unmarshal(tc.Arguments, &args) == nil && args != nil {
		md[MetadataArguments] = args
	}
	return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: SignalPrefix + tc.ID, Metadata: md, PayloadSchema: json.RawMessage(ApprovalPayloadSchema)})
}

// riskOf is the declared risk of the named tool (RiskCaution for one the
// agent does not have).
func (a *Agent) riskOf(name string) Risk {
	if t, ok := a.tools[name]; ok && t.Risk != "" {
		return t.Risk
	}
	return RiskCaution
}

func compactArgs(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "no arguments"
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
