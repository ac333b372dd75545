package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/callindex"
	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
	"github.com/armature-go/armature/session"
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
	// NodeCompact summarizes what the window is about to leave out (only
	// with Config.Compaction).
	NodeCompact = "compact"
)

// DefaultMaxSteps bounds the model calls of one turn.
const DefaultMaxSteps = 10

// DefaultToolTimeout bounds one tool call (Config.ToolTimeout).
const DefaultToolTimeout = 2 * time.Minute

// DefaultMaxToolResultBytes bounds the text of one tool result
// (Config.MaxToolResultBytes): 256 KiB, about 64,000 tokens.
const DefaultMaxToolResultBytes = 256 << 10

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

// ErrInvalidToolCall is matched (with [errors.Is]) by the error a turn
// fails with when the model's answer calls a tool without an id or a
// name, or with arguments that are not valid JSON (category
// provider_invalid_response), a tool gated by approval included.
var ErrInvalidToolCall = errors.New("agent: a tool call of the model's answer is malformed")

// Config configures an Agent. Provider is required.
type Config struct {
	// Provider is the model.
	Provider llm.Provider
	// System is the system prompt sent before the conversation on every
	// model call (it is not stored in the history).
	System string
	// SystemPrompt, instead of System, names a managed prompt rendered
	// as the system prompt (see ManagedPrompt).
	SystemPrompt *ManagedPrompt
	// Tools are the tools the model may call; names must be unique.
	Tools []Tool
	// Model holds the sampling parameters of every call. A managed
	// SystemPrompt's sampling applies over it, field by field (see
	// ManagedPrompt).
	Model llm.Config
	// Retry is the call-level retry policy of every model call (nil: no
	// retry).
	Retry *llm.RetryPolicy
	// MaxSteps bounds the model calls of one turn (the tool loop);
	// default DefaultMaxSteps. A turn that reaches it ends with an
	// assistant message saying so.
	MaxSteps int
	// Window bounds the part of the history each model call sends (by
	// messages, by estimated tokens, or both); the zero value sends the
	// whole history. See [Window] for the policy.
	Window Window
	// Compaction, when set, makes the agent summarize the messages the
	// Window is about to leave out into a summary message stored in the
	// history, which later calls send after the system prompt once the
	// window no longer holds it. It needs a Window bound.
	Compaction *Compaction
	// ToolTimeout bounds one tool call: past it the call's context ends
	// and the model is told the tool did not answer in time (its result
	// is an error), so a hung tool (an MCP server that never answers)
	// neither holds the session nor keeps the turn running. A tool must
	// return once its context ends. Default DefaultToolTimeout; negative
	// for no bound (the turn's own context still ends a call).
	ToolTimeout time.Duration
	// MaxToolResultBytes bounds the text of one tool result (or error)
	// that the model is sent and the history keeps: a longer one is cut
	// at a character boundary and ends with a note saying how long it
	// was. Default DefaultMaxToolResultBytes; negative for no bound.
	MaxToolResultBytes int
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
	// tokens estimates a message's input tokens (the provider's
	// llm.TokenEstimator, or llm.EstimateTokens); toolTokens is the
	// estimate of the tool definitions.
	tokens     func(*llm.Message) int
	toolTokens int
	// calib corrects the token estimates by the usage providers report.
	calib calibration
	// calls indexes the tool call ids of the sessions' histories.
	calls callindex.Cache
}

// New returns an agent for cfg.
func New(cfg Config) (*Agent, error) {
	if cfg.Provider == nil {
		return nil, fmt.Errorf("%w: Provider is required", ErrInvalidConfig)
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.ToolTimeout == 0 {
		cfg.ToolTimeout = DefaultToolTimeout
	}
	if cfg.MaxToolResultBytes == 0 {
		cfg.MaxToolResultBytes = DefaultMaxToolResultBytes
	}
	if err := cfg.SystemPrompt.validate(cfg.System); err != nil {
		return nil, err
	}
	if cfg.Window.MaxMessages < 0 || cfg.Window.MaxTokens < 0 {
		return nil, fmt.Errorf("%w: Window bounds must not be negative", ErrInvalidConfig)
	}
	if cfg.Compaction != nil && cfg.Window.IsZero() {
		return nil, fmt.Errorf("%w: Compaction needs a Window bound", ErrInvalidConfig)
	}
	a := &Agent{cfg: cfg, tools: make(map[string]Tool, len(cfg.Tools)), tokens: llm.EstimateTokens}
	if e, ok := cfg.Provider.(llm.TokenEstimator); ok {
		a.tokens = e.EstimateTokens
	}
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
		d := &t.Definition
		a.toolTokens += llm.DefaultTokenRates().EstimateText(len(d.Name) + len(d.Description) + len(d.Parameters))
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

// Schema returns the agent's state schema: chat.Messages, the approval
// field and, with Config.Compaction, the compaction summary
// ([SummaryField]).
func (a *Agent) Schema() (*graph.Schema, error) {
	if a.cfg.Compaction != nil {
		return chat.NewSchema(approval, summaryField)
	}
	return chat.NewSchema(approval)
}

// Compile builds the agent's chat graph. Pass graph.WithSessions (chat
// graphs are sessioned) and, to resume approvals on any worker, a durable
// graph.WithCheckpointStore. The graph's DeleteSession (a chat harness's
// Delete), and that of a graph running it as a subgraph, drops what the
// agent keeps in memory of the deleted session (graph.WithSessionForget).
func (a *Agent) Compile(opts ...graph.CompileOption) (*graph.Graph, error) {
	schema, err := a.Schema()
	if err != nil {
		return nil, err
	}
	// A deleted session's tool-call index goes with it (the graph's
	// DeleteSession, which every chat harness delete calls).
	opts = append(opts[:len(opts):len(opts)], graph.WithSessionForget(a.calls.Forget))
	if n := a.cfg.Window.TailMax(); n > 0 {
		// The window sends a bounded suffix of the history: a cold
		// session loads only the tail it can need.
		opts = append(opts, graph.WithSessionTail(session.ListTail{Field: chat.MessagesField, Max: n}))
	}
	b := graph.NewBuilder(schema).AddNode(NodeModel, a.model)
	if a.cfg.Compaction != nil {
		b = b.AddConditionalEdge(NodeModel, routeAfterModel(NodeCompact), NodeTools, NodeCompact).
			AddNode(NodeCompact, a.compact).
			AddEdge(NodeCompact, graph.End)
	} else {
		b = b.AddConditionalEdge(NodeModel, routeAfterModel(graph.End), NodeTools, graph.End)
	}
	return b.
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
// optional comment. The call runs as the model asked; the comment is
// kept with the decision (a server records it in the run's
// runtime.approval.resolved event) and is not sent to the model, unlike
// a denial's reason (see [DeniedResult]).
func Approve(comment string) graph.Update {
	return graph.Update{ApprovalField: map[string]any{"approved": true, "comment": comment}}
}

// DeniedResult is the tool result answering a call a human denied, with
// the reason given (if any), as the model reads it: "The user denied
// this call." and " Reason: " and the reason. Every backend answers a
// denial so.
func DeniedResult(reason string) string {
	if reason == "" {
		return "The user denied this call."
	}
	return "The user denied this call. Reason: " + reason
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
	s, off, err := a.loaded(ctx, s)
	if err != nil {
		return nil, err
	}
	msgs := chat.Messages.Get(s)
	if steps := stepsThisTurn(msgs); steps >= a.cfg.MaxSteps {
		return chat.Messages.Add(llm.AssistantText(fmt.Sprintf(
			"I stopped after %d steps without finishing. Ask me to continue if you want me to keep going.", steps))), nil
	}
	system, managed, err := a.systemPrompt(ctx)
	if err != nil {
		return nil, err
	}
	at, sum := -1, (*llm.Message)(nil)
	if a.cfg.Compaction != nil {
		at, sum = latestSummary(s, msgs, off)
	}
	sent, estimate := a.windowOf(a.cfg.Window, msgs, system, sum, off > 0)
	if start := len(msgs) - len(sent); sum != nil && start > at {
		// The summary is not in the window: it follows the system
		// prompt, and the window keeps every message after it (the
		// summary covers only those before).
		system = joinSystem(system, sum.Text())
		if start > at+1 {
			sent, estimate = msgs[at+1:], 0
		}
	}
	// A managed system prompt's sampling applies over the agent's, and
	// the call runs with the prompt active (its identity, link and token
	// budget on the call's events and spans).
	callCfg, callCtx := callConfig(ctx, a.cfg.Model, managed)
	req := &llm.Request{System: system, Messages: sent, Tools: a.defs, Config: callCfg, Retry: a.cfg.Retry}
	liveText := chat.StreamingText(ctx)
	if _, ok := a.cfg.Provider.(llm.Streamer); ok && liveText {
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
	resp, err := llm.Complete(callCtx, a.cfg.Provider, req)
	if err != nil {
		return nil, err
	}
	m := resp.Message
	m.Role = llm.RoleAssistant
	text := m.Text()
	if !req.Stream && text != "" && !liveText && chat.Streaming(ctx) {
		// The turn asked for whole text (chat.WithWholeText): the reply's
		// text where its streamed chunks would have been.
		chat.EmitText(ctx, text)
	}
	chat.ReportModelCall(ctx, resp)
	if p := resp.Usage.PromptTokens; p != nil && estimate > 0 {
		a.calib.observe(*p, estimate)
	}
	if text == "" && len(m.ToolCalls) == 0 {
		return nil, emptyReply(resp.FinishReason)
	}
	for i, tc := range m.ToolCalls {
		if tc.ID == "" || tc.Name == "" {
			// The model's answer is at fault, not the turn's input:
			// provider_invalid_response, as the adapters' model bridges
			// fail it (adapter.CheckToolCalls), not the history check's
			// provider_invalid_request once it is stored.
			return nil, errcat.Wrap(errcat.ProviderInvalidResponse,
				fmt.Sprintf("tool_calls[%d] of the model's answer lacks an id or function name", i), ErrInvalidToolCall)
		}
		if len(tc.Arguments) > 0 && !jsonvalid.Valid(tc.Arguments) {
			// The same, before a gated call's paused state is encoded
			// (which would fail as a persistence failure): the built-in
			// mappings check arguments, a custom provider may not.
			return nil, errcat.Wrap(errcat.ProviderInvalidResponse,
				fmt.Sprintf("tool_calls[%d] of the model's answer has arguments that are not valid JSON", i), ErrInvalidToolCall)
		}
	}
	if len(m.ToolCalls) > 0 {
		if id := graph.SessionID(ctx); id != "" && off == 0 && len(msgs) >= indexedHistory {
			// The session's whole history: its call ids are indexed
			// once, not scanned on every call (a short one is scanned,
			// for less than keeping its index costs).
			a.calls.With(id, func(x *llm.CallIndex) {
				x.Sync(msgs)
				m.ToolCalls = callindex.Unique(msgs, off, m.ToolCalls, x.HasCall)
			})
		} else {
			m.ToolCalls = callindex.Unique(msgs, off, m.ToolCalls, nil)
		}
	}
	for _, tc := range m.ToolCalls {
		chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolRequested, Arguments: tc.Arguments})
	}
	return chat.Messages.Add(m), nil
}

// indexedHistory is the history length from which a reply's call ids
// are made unique through the session's call index (callindex) rather
// than a scan of the history.
const indexedHistory = 64

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

// Instructions returns the per-request system prompt WithInstructions
// attached to ctx, and whether there is one ("" with true: the turn
// sends no system prompt). Backends other than the native agent (the
// adapter graph, adapter.Request.Instructions) read it to give their
// model calls the same prompt.
func Instructions(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(instructionsKey{}).(string)
	return s, ok
}

// system is the system prompt of the model calls of the turn run under
// ctx: WithInstructions', or the agent's (its managed prompt rendered
// now, or its text). The history goes to the
// provider as it is (llm.Request.System carries the prompt, and the wire
// mappings leave out the approval requests standing inside tool-call
// groups, llm.AsideFilter): a model call neither copies nor scans it.
func (a *Agent) system(ctx context.Context) (string, error) {
	s, _, err := a.systemPrompt(ctx)
	return s, err
}

// systemPrompt is system with the render result of the agent's managed
// prompt when the prompt is that (nil otherwise: per-request
// instructions or Config.System).
func (a *Agent) systemPrompt(ctx context.Context) (string, *prompt.Result, error) {
	if s, ok := Instructions(ctx); ok {
		return s, nil, nil
	}
	if a.cfg.SystemPrompt != nil {
		return a.cfg.SystemPrompt.render(ctx)
	}
	return a.cfg.System, nil, nil
}

// loaded returns the node's state s and how many messages its history
// leaves out (graph.SessionListOffset: the session was loaded by its
// tail, see Window.TailMax), or the state with the whole history (and 0)
// when the tail does not suffice: the agent has no window bounded by
// messages, the window's walk reaches the tail's first message before
// its bound (no turn boundary in the tail, or more approval requests
// than the tail's slack), or the latest compaction summary precedes it.
func (a *Agent) loaded(ctx context.Context, s graph.State) (graph.State, int, error) {
	off := graph.SessionListOffset(ctx, chat.MessagesField)
	if off == 0 {
		return s, 0, nil
	}
	need := a.cfg.Window.MaxMessages <= 0
	if !need {
		// The tail decides the window when a walk bounded by messages
		// alone stops inside it: a token bound only stops the walk
		// earlier, and what the turn adds only moves the window later.
		start, _, stopped := Window{MaxMessages: a.cfg.Window.MaxMessages}.scan(chat.Messages.Get(s), 0, nil, true)
		need = start < 0 || !stopped
	}
	if at := summaryField.Get(s).Message; !need && a.cfg.Compaction != nil && at > 0 && at < off {
		need = true
	}
	if !need {
		return s, off, nil
	}
	whole, err := graph.SessionWholeState(ctx, s)
	if err != nil {
		return graph.State{}, 0, err
	}
	return whole, 0, nil
}

// windowOf returns the part of msgs a model call sends under window w,
// and its estimated tokens (0 when no token bound is set). sum, when set,
// is the compaction summary, which counts as sent. partial tells that
// msgs is a tail of the history (Agent.loaded), whose first message is
// no turn boundary unless it is a user message; a tail without one is
// sent from its first user message outside every tool-call group, or
// whole when it has none (loaded reads such a history whole).
func (a *Agent) windowOf(w Window, msgs []llm.Message, system string, sum *llm.Message, partial bool) ([]llm.Message, int) {
	if w.IsZero() {
		return msgs, 0
	}
	fixed := 0
	if w.MaxTokens > 0 {
		sys := llm.SystemText(system)
		fixed = a.toolTokens
		if system != "" {
			fixed += a.tokens(&sys)
		}
		if sum != nil {
			fixed += a.tokens(sum)
		}
		// The bound in estimated tokens: the estimates run r times short
		// of what the provider counts.
		w.MaxTokens = max(1, int(float64(w.MaxTokens)/a.calib.ratio()))
	}
	start, cost := w.start(msgs, fixed, a.tokens, partial)
	if start < 0 {
		start = 0
	}
	if w.MaxTokens == 0 {
		cost = 0
	}
	return msgs[start:], cost
}

// joinSystem is the system prompt followed by the compaction summary.
func joinSystem(system, summary string) string {
	if system == "" {
		return summary
	}
	return system + "\n\n" + summary
}

// stepsThisTurn counts the model answers since the last user message
// (approval requests are not answers): a walk back to the turn's user
// message and forward again, proportional to the turn, not the history.
func stepsThisTurn(msgs []llm.Message) int {
	start := len(msgs)
	for start > 0 && msgs[start-1].Role != llm.RoleUser {
		start--
	}
	// The turn's first message is the user's (or, in a history without
	// one, the conversation's first), so no tool-call group is open
	// before it.
	n := 0
	var asides llm.AsideFilter
	for i := start; i < len(msgs); i++ {
		if !asides.Aside(&msgs[i]) && msgs[i].Role == llm.RoleAssistant {
			n++
		}
	}
	return n
}

// routeAfterModel goes to the tool node when the model called tools, and
// to done otherwise.
func routeAfterModel(done string) func(context.Context, graph.State) (string, error) {
	return func(ctx context.Context, s graph.State) (string, error) {
		msgs := chat.Messages.Get(s)
		if last := msgs[len(msgs)-1]; last.Role == llm.RoleAssistant && len(last.ToolCalls) > 0 {
			return NodeTools, nil
		}
		return done, nil
	}
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
	spent := false // a human's decision took effect
	if decided {
		upd[ApprovalField] = nil
	}
	for _, tc := range pending(chat.Messages.Get(s)) {
		t, known := a.tools[tc.Name]
		switch {
		case !known:
			text := fmt.Sprintf("there is no tool named %q", tc.Name)
			chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolFailed, Result: text})
			results = append(results, llm.ToolResult(tc.ID, "error: "+text))
			continue
		case t.NeedsApproval && !decided:
			if len(results) > 0 {
				upd[chat.MessagesField] = results
			}
			return upd, nil // routeAfterTools asks for approval
		case t.NeedsApproval && !approved:
			decided, spent = false, true
			text := DeniedResult(comment)
			chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolFailed, Result: text})
			results = append(results, llm.ToolResult(tc.ID, text))
			continue
		case t.NeedsApproval:
			decided, spent = false, true // the decision covers this one call
		}
		results = append(results, llm.ToolResult(tc.ID, a.call(ctx, t, tc)))
	}
	upd[chat.MessagesField] = results
	if spent {
		// A human's decision took effect (the approved call ran, or the
		// denied one was answered): it is saved now, so that a turn
		// failing or cancelled after it (the next model call) neither
		// leaves a history saying the approved call never ran nor lets
		// the decision be given again (the same approval, or the other
		// answer to a denial). The save at the turn's end overwrites it.
		// Should it fail (outside a session, or the store failing), the
		// turn goes on: the save at its end reports the store's failure.
		// It is saved even when the turn was cancelled while the call
		// ran: the call did run (the node still holds the session).
		_ = graph.SaveSession(context.WithoutCancel(ctx), upd)
	}
	return upd, nil
}

// call runs one tool, turning any failure into a result the model reads.
// The execution is a graph tool-call instrumentation scope, so the
// invocation's observers see a ToolCallEvent or ToolCallFailedEvent.
func (a *Agent) call(ctx context.Context, t Tool, tc llm.ToolCall) (result string) {
	chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolRunning, Arguments: tc.Arguments})
	scope := graph.StartTool(ctx, graph.ToolCall{Name: tc.Name, ID: tc.ID, Arguments: tc.Arguments})
	defer func() {
		if p := recover(); p != nil {
			result = fmt.Sprintf("error: the tool failed: %v", p)
			scope.Fail(fmt.Errorf("agent: tool %s panicked: %v", tc.Name, p))
			chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolFailed, Result: result})
		}
	}()
	out, err := boundedCall(WithToolCall(ctx, tc.ID, tc.Name), t.Call, tc.Arguments, a.cfg.ToolTimeout, a.cfg.MaxToolResultBytes)
	if err != nil {
		scope.Fail(err)
		result = "error: " + err.Error()
		chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolFailed, Result: result})
		return result
	}
	scope.Complete(out)
	chat.EmitTool(ctx, chat.ToolProgress{CallID: tc.ID, Name: tc.Name, Status: chat.ToolCompleted, Result: out})
	return out
}

// errToolTimeout is the cause of a tool call's context past
// Config.ToolTimeout.
var errToolTimeout = errors.New("agent: the tool call timed out")

// Bounded returns t with its calls bounded as the agent bounds its own
// (Config.ToolTimeout and Config.MaxToolResultBytes; zero for their
// defaults, negative for no bound): for a tool another framework runs,
// as the ADK-Go and Eino adapters' bridged tools. A call past the
// timeout fails saying so; a longer result, or error text, is cut with a
// note.
func (t Tool) Bounded(timeout time.Duration, maxBytes int) Tool {
	if timeout == 0 {
		timeout = DefaultToolTimeout
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxToolResultBytes
	}
	call := t.Call
	if call == nil {
		return t
	}
	t.Call = func(ctx context.Context, args json.RawMessage) (string, error) {
		return boundedCall(ctx, call, args, timeout, maxBytes)
	}
	return t
}

// boundedCall runs call under timeout (none when not positive) and cuts
// its result, or its error's text, to maxBytes (cutResult).
func boundedCall(ctx context.Context, call func(context.Context, json.RawMessage) (string, error), args json.RawMessage, timeout time.Duration, maxBytes int) (string, error) {
	cctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeoutCause(ctx, timeout, errToolTimeout)
		defer cancel()
	}
	out, err := call(cctx, args)
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(cctx), errToolTimeout) {
			return "", fmt.Errorf("the tool did not answer within %v and was stopped; what it did before is not known: %w", timeout, err)
		}
		if msg := err.Error(); len(msg) > maxBytes && maxBytes > 0 {
			return "", &cutError{msg: cutResult(msg, maxBytes), err: err}
		}
		return "", err
	}
	return cutResult(out, maxBytes), nil
}

// cutError is a tool error whose text was cut; it unwraps to the error.
type cutError struct {
	msg string
	err error
}

func (e *cutError) Error() string { return e.msg }
func (e *cutError) Unwrap() error { return e.err }

// cutResult bounds a tool's result text to limit bytes (none when limit
// is not positive): a longer one is cut at a character boundary, copied
// (so that the long text can be collected), and ends with a note.
func cutResult(s string, limit int) string {
	if limit <= 0 || len(s) <= limit {
		return s
	}
	cut := limit
	for back := 0; back < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); back++ {
		cut-- // not into the middle of a character (binary text is cut where it is)
	}
	return strings.Clone(s[:cut]) + fmt.Sprintf("\n[cut: the tool's result was %d bytes; the first %d are shown]", len(s), cut)
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
	if len(s) > maxCompactArgs {
		// Cut at a character's start: a cut inside one would show as
		// a replacement character.
		cut := maxCompactArgs
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// maxCompactArgs bounds the arguments compactArgs shows, in bytes.
const maxCompactArgs = 200
