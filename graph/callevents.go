package graph

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/uuid"
	"github.com/armature-go/armature/llm"
)

// CallSource is the identity and scoping every typed call event carries
// (graph-engine §6): the invocation, the calling node and its lineage,
// and the per-call id the engine mints.
type CallSource struct {
	InvocationID  string
	CorrelationID string
	// NodeName is the calling node (for a call made by a fan-out
	// instance's or branch's own code, the dispatch node).
	NodeName string
	// Namespace is the calling node's namespace.
	Namespace []string
	// AttemptIndex is the node-level retry attempt.
	AttemptIndex int
	// FanOutIndex and BranchName are the innermost enclosing fan-out
	// instance and branch; the chains the full lineage (as on a
	// [NodeEvent]).
	FanOutIndex      *int
	BranchName       *string
	FanOutIndexChain []*int
	BranchNameChain  []*string
	// CallID is minted per call (per tool execution), never empty.
	CallID string
	// Wrapper reports a call made outside the node body (from middleware
	// or a fan-out instance's or branch's own code), where the node's
	// span is not open: observers parent it under the nearest enclosing
	// wrapper (observability §5.5 lineage-resolved parent).
	Wrapper bool
	// Metadata is the caller-supplied invocation metadata in scope at
	// the call (observability §3.4), for the call's spans.
	Metadata Metadata
}

// EventInvocationID returns the invocation id.
func (s *CallSource) EventInvocationID() string { return s.InvocationID }

func (s *CallSource) callSource() *CallSource { return s }

// CallSourceOf returns the call identity of a typed call event (an LLM
// completion, failure or token event, a tool event, or an embedding or
// rerank event), or false for any other event.
func CallSourceOf(ev Event) (*CallSource, bool) {
	if c, ok := ev.(interface{ callSource() *CallSource }); ok {
		return c.callSource(), true
	}
	return nil, false
}

// LLMRequest is the request side of a typed LLM event.
type LLMRequest struct {
	// Provider is the provider system identifier (gen_ai.system); Model
	// the model the request was made against.
	Provider string
	Model    string
	// InputMessages are the messages of the call, inline images redacted
	// ([llm.RedactImages]). Payload: observers gate their rendering.
	InputMessages []llm.Message
	// Params are the §5.5.2 request parameters the caller set, keyed by
	// their GenAI names without the gen_ai.request. prefix (temperature,
	// max_tokens, top_p, seed, frequency_penalty, presence_penalty,
	// stop_sequences); absent when unset.
	Params map[string]any
	// Extras are the request's config extras (payload).
	Extras map[string]any
	// Stream reports a streamed call.
	Stream bool
	// ActivePrompt, TokenBudget and ActivePromptGroup are the
	// prompt-context binding at the call ([llm.ActivePromptOf]): the
	// active prompt's identity and token budget, and the active prompt
	// group; each nil when none is bound. Observers evaluate the budget
	// against the response's usage ([llm.TokenBudget.Evaluate];
	// observability §5.5.15) on a completion and on a
	// structured_output_invalid failure.
	ActivePrompt      *llm.PromptIdentity
	TokenBudget       *llm.TokenBudget
	ActivePromptGroup *llm.PromptGroupIdentity
}

// LLMResponse is the response side of a typed LLM event.
type LLMResponse struct {
	// ResponseID and ResponseModel are the provider's response id and
	// model; "" when it returned none.
	ResponseID    string
	ResponseModel string
	// Usage is the response's token accounting.
	Usage llm.Usage
	// FinishReason is the normalized finish reason.
	FinishReason llm.FinishReason
	// OutputContent is the assistant's text content (payload); nil when
	// empty.
	OutputContent *string
	// OutputToolCalls are the assistant's tool calls (payload); nil when
	// none.
	OutputToolCalls []llm.ToolCall
}

// LLMCompletionEvent is delivered when an LLM call made through
// [llm.Complete] from a node returns a response (graph-engine §6
// LlmCompletionEvent). It has no phase and is not filtered by [Phases].
type LLMCompletionEvent struct {
	CallSource
	LLMRequest
	LLMResponse
	// Attempts are the call's wire attempts (several under call-level
	// retry), for per-attempt spans.
	Attempts []llm.AttemptRecord
	// Start and End bound the call; LatencyMS is their distance.
	Start, End time.Time
	LatencyMS  float64
}

// LLMFailedEvent is delivered when an LLM call made through
// [llm.Complete] from a node fails in an llm-provider §7 category
// (graph-engine §6 LlmFailedEvent). Response is set only for
// structured_output_invalid, the one category with a response.
type LLMFailedEvent struct {
	CallSource
	LLMRequest
	// Response is the response that failed structured-output validation;
	// nil for every other category.
	Response *LLMResponse
	// Err is the call's error; ErrorCategory its category, ErrorType the
	// provider's error code ("" when it gave none; the Go error type for
	// an error that is not an *llm.ProviderError), ErrorMessage its
	// message.
	Err           error
	ErrorCategory errcat.Category
	ErrorType     string
	ErrorMessage  string
	Attempts      []llm.AttemptRecord
	Start, End    time.Time
	LatencyMS     float64
}

// LLMTokenEvent is one streamed delta of an LLM call made with Stream set
// (graph-engine §6 LlmTokenEvent), delivered before the call's terminal
// event and linked to it by CallID.
type LLMTokenEvent struct {
	CallSource
	Provider   string
	Model      string
	ChunkIndex int
	DeltaKind  llm.DeltaKind
	Delta      string
	Time       time.Time
}

// ToolCall describes a tool execution for [CallTool] and [StartTool].
type ToolCall struct {
	// Name is the tool name.
	Name string
	// ID is the llm.ToolCall id the execution satisfies; "" for a
	// standalone instrumented function.
	ID string
	// Arguments are the arguments the tool runs with (nil for none).
	Arguments any
}

// ToolCallEvent is delivered when an instrumented tool execution returns
// (graph-engine §6 ToolCallEvent).
type ToolCallEvent struct {
	CallSource
	ToolName   string
	ToolCallID string
	Arguments  any
	// Result is the tool's return value as it produced it (payload).
	Result     any
	Start, End time.Time
	LatencyMS  float64
}

// ToolCallFailedEvent is delivered when an instrumented tool execution
// fails (graph-engine §6 ToolCallFailedEvent). It has no error category.
type ToolCallFailedEvent struct {
	CallSource
	ToolName   string
	ToolCallID string
	Arguments  any
	Err        error
	// ErrorType is the error's ErrorType() when it has one, else its Go
	// type; ErrorMessage its message.
	ErrorType    string
	ErrorMessage string
	Start, End   time.Time
	LatencyMS    float64
}

// callHook is the llm.CallObserver of a scope whose invocation has
// observers of call events: the node context answers llm.CallObserverKey
// with it.
type callHook scope

var _ llm.CallObserver = (*callHook)(nil)

// source captures the scope's call identity.
func (s *scope) source(ctx context.Context) CallSource {
	ns, fi, bn, fc, bc := s.lineage()
	return CallSource{
		InvocationID: s.inv.id, CorrelationID: s.inv.corrID, NodeName: s.label(), Namespace: ns,
		AttemptIndex: AttemptIndex(ctx), FanOutIndex: fi, BranchName: bn,
		FanOutIndexChain: slices.Clone(fc), BranchNameChain: slices.Clone(bc),
		CallID: uuid.New(), Wrapper: s.d == nil || !s.d.inBody.Load(),
		Metadata: cellOf(ctx).load(),
	}
}

// emitCall queues a typed call event for the scope's observers.
func (s *scope) emitCall(ev Event) { s.emitCallEvent(ev, false) }

// emitCallEvent queues a call event; token marks an LLMTokenEvent, which
// observers registered WithoutTokenEvents skip.
func (s *scope) emitCallEvent(ev Event, token bool) {
	if w := s.inv.w; w != nil {
		w.emit(queued{ev: ev, token: token, call: true, graphs: s.fr.obs, invoked: s.inv.invObs})
	}
}

// observesCalls reports whether the scope's invocation has observers
// of its typed call events (see WithoutCallEvents).
func (s *scope) observesCalls() bool {
	return s.inv != nil && s.inv.w != nil && s.fr != nil && (wantsCallEvents(s.fr.obs) || wantsCallEvents(s.inv.invObs))
}

// BeginCall implements llm.CallObserver.
func (h *callHook) BeginCall(ctx context.Context, c *llm.CallInfo) llm.CallTracker {
	s := (*scope)(h)
	req := LLMRequest{Provider: c.Provider, Model: c.Model, Stream: c.Request.Stream,
		// Not copied: a conversation can be long, and a caller does
		// not modify a request's messages after the call
		// (llm.Request); clipped, an observer's append cannot write
		// into the caller's list.
		InputMessages: llm.RedactImages(slices.Clip(c.Request.Messages)),
		Params:        RequestParams(c.Request.Config), Extras: maps.Clone(c.Request.Config.Extras)}
	if req.Extras == nil {
		req.Extras = map[string]any{}
	}
	ap := llm.ActivePromptOf(ctx)
	req.ActivePrompt, req.ActivePromptGroup = ap.Prompt.Snapshot(), groupSnapshot(ap.Group)
	if ap.Prompt != nil && ap.TokenBudget != nil {
		tb := *ap.TokenBudget
		req.TokenBudget = &tb
	}
	return &llmTracker{s: s, src: s.source(ctx), req: req, start: c.Start,
		tokens: wantsTokenEvents(s.fr.obs) || wantsTokenEvents(s.inv.invObs)}
}

// RequestParams returns the §5.5.2 request parameters set in c, keyed by
// their GenAI names without the gen_ai.request. prefix; empty when none
// is set.
func RequestParams(c llm.Config) map[string]any {
	p := map[string]any{}
	if c.Temperature != nil {
		p["temperature"] = *c.Temperature
	}
	if c.MaxTokens != nil {
		p["max_tokens"] = *c.MaxTokens
	}
	if c.TopP != nil {
		p["top_p"] = *c.TopP
	}
	if c.Seed != nil {
		p["seed"] = *c.Seed
	}
	if c.FrequencyPenalty != nil {
		p["frequency_penalty"] = *c.FrequencyPenalty
	}
	if c.PresencePenalty != nil {
		p["presence_penalty"] = *c.PresencePenalty
	}
	if c.StopSequences != nil {
		p["stop_sequences"] = slices.Clone(c.StopSequences)
	}
	return p
}

type llmTracker struct {
	s      *scope
	src    CallSource
	req    LLMRequest
	start  time.Time
	chunks int
	// tokens: an observer of the call receives LLMTokenEvents.
	tokens bool
}

func (t *llmTracker) Token(kind llm.DeltaKind, delta string) {
	if t.tokens {
		t.s.emitCallEvent(&LLMTokenEvent{CallSource: t.src, Provider: t.req.Provider, Model: t.req.Model,
			ChunkIndex: t.chunks, DeltaKind: kind, Delta: delta, Time: time.Now()}, true)
	}
	t.chunks++
}

func (t *llmTracker) End(out *llm.CallOutcome) {
	lat := float64(out.End.Sub(t.start)) / float64(time.Millisecond)
	if out.Err == nil {
		t.s.emitCall(&LLMCompletionEvent{CallSource: t.src, LLMRequest: t.req, LLMResponse: ResponseSide(out.Response),
			Attempts: out.Attempts, Start: t.start, End: out.End, LatencyMS: lat})
		return
	}
	ev := &LLMFailedEvent{CallSource: t.src, LLMRequest: t.req, Err: out.Err, ErrorCategory: errcat.Of(out.Err),
		ErrorMessage: out.Err.Error(), Attempts: out.Attempts, Start: t.start, End: out.End, LatencyMS: lat}
	var pe *llm.ProviderError
	isProvider := errors.As(out.Err, &pe)
	if isProvider {
		// The provider's error code, or none: a ProviderError is the
		// category itself, not an implementation-side type.
		ev.ErrorType, ev.ErrorMessage = pe.Code, pe.Message
	}
	var soe *llm.StructuredOutputError
	if errors.As(out.Err, &soe) {
		ev.ErrorType, ev.ErrorMessage = "StructuredOutputError", soe.ErrorMessage
	}
	if r := out.FailedResponse(); r != nil {
		rs := ResponseSide(r)
		rs.OutputToolCalls = nil
		ev.Response = &rs
	}
	if ev.ErrorType == "" && !isProvider {
		ev.ErrorType = fmt.Sprintf("%T", out.Err)
	}
	t.s.emitCall(ev)
}

// responseSide returns the response fields of a typed LLM event.
func ResponseSide(r *llm.Response) LLMResponse {
	if r == nil {
		return LLMResponse{}
	}
	out := LLMResponse{Usage: r.Usage, FinishReason: r.FinishReason}
	out.ResponseID, out.ResponseModel = r.ResponseIdentity()
	if txt := r.Message.Text(); txt != "" {
		out.OutputContent = &txt
	}
	if len(r.Message.ToolCalls) > 0 {
		out.OutputToolCalls = slices.Clone(r.Message.ToolCalls)
	}
	return out
}

// ToolScope is one instrumented tool execution started with [StartTool]
// (the start/complete form of the graph-engine §6 tool-call
// instrumentation scope, for a tool whose outcome arrives later). Exactly
// one of Complete and Fail reports the outcome; later calls do nothing.
// The event carries the identity captured at StartTool. An outcome
// reported after the invocation's observer delivery ended (the
// invocation finished and drained) is not delivered.
type ToolScope struct {
	s     *scope
	src   CallSource
	call  ToolCall
	start time.Time
	done  bool
}

// StartTool opens the instrumentation scope of one tool execution run by
// the caller in a node. Outside an invocation with observers it returns
// a scope whose Complete and Fail only return.
func StartTool(ctx context.Context, call ToolCall) *ToolScope {
	ts := &ToolScope{call: call, start: time.Now()}
	if s := scopeFrom(ctx); s != nil && s.observesCalls() {
		ts.s, ts.src = s, s.source(ctx)
	}
	return ts
}

// Complete reports the tool's result (a ToolCallEvent).
func (t *ToolScope) Complete(result any) {
	if t == nil || t.done {
		return
	}
	t.done = true
	if t.s == nil {
		return
	}
	end := time.Now()
	t.s.emitCall(&ToolCallEvent{CallSource: t.src, ToolName: t.call.Name, ToolCallID: t.call.ID,
		Arguments: t.call.Arguments, Result: result, Start: t.start, End: end,
		LatencyMS: float64(end.Sub(t.start)) / float64(time.Millisecond)})
}

// Fail reports the tool's failure (a ToolCallFailedEvent).
func (t *ToolScope) Fail(err error) {
	if t == nil || t.done {
		return
	}
	t.done = true
	if t.s == nil {
		return
	}
	end := time.Now()
	ev := &ToolCallFailedEvent{CallSource: t.src, ToolName: t.call.Name, ToolCallID: t.call.ID,
		Arguments: t.call.Arguments, Err: err, ErrorType: ErrorType(err), Start: t.start, End: end,
		LatencyMS: float64(end.Sub(t.start)) / float64(time.Millisecond)}
	if err != nil {
		ev.ErrorMessage = err.Error()
	}
	t.s.emitCall(ev)
}

// CallTool runs fn as one instrumented tool execution (the inline form of
// the graph-engine §6 tool-call instrumentation scope): it reports fn's
// result or error to the invocation's observers and returns them
// unchanged. It never retries, selects or feeds back a tool.
func CallTool[R any](ctx context.Context, call ToolCall, fn func(ctx context.Context) (R, error)) (R, error) {
	ts := StartTool(ctx, call)
	r, err := fn(ctx)
	if err != nil {
		ts.Fail(err)
	} else {
		ts.Complete(r)
	}
	return r, err
}

// ErrorType returns the error_type a tool failure reports: the first
// ErrorType() string in err's chain (a tool-defined code), else err's Go
// type; "" for nil.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	var t interface{ ErrorType() string }
	if errors.As(err, &t) {
		return t.ErrorType()
	}
	return fmt.Sprintf("%T", err)
}
