package llm

import (
	"context"
	"encoding/json"
	"time"
)

// CallObserverKey is the context key under which [Complete] looks up the
// [CallObserver] of the calls made under a context. A context
// implementation (such as the graph engine's node context) may answer it
// from its Value method directly; others use [WithCallObserver].
type CallObserverKey struct{}

// CallObserver observes the calls [Complete] makes: the hook behind the
// graph engine's typed LLM events (graph-engine §6 LlmCompletionEvent,
// LlmFailedEvent, LlmTokenEvent). [Complete] looks it up once per call;
// without one a call costs one context lookup more.
//
// BeginCall runs on the calling goroutine before anything is sent. The
// returned tracker receives the call's streamed deltas in order and then
// exactly one End, all on the calling goroutine; nil ignores the call.
type CallObserver interface {
	BeginCall(ctx context.Context, c *CallInfo) CallTracker
}

// CallTracker follows one [Complete] call (see [CallObserver]).
type CallTracker interface {
	// Token reports one streamed text delta (a chunk's content or
	// reasoning text; tool-call deltas are not reported).
	Token(kind DeltaKind, delta string)
	// End reports the call's outcome, before Complete returns.
	End(out *CallOutcome)
}

// WithCallObserver returns ctx carrying o for the [Complete] calls made
// under it.
func WithCallObserver(ctx context.Context, o CallObserver) context.Context {
	return context.WithValue(ctx, CallObserverKey{}, o)
}

// DeltaKind is the kind of a streamed delta (graph-engine §6
// LlmTokenEvent.delta_kind). The constants are wire identifiers from the
// OpenArmature specification; they must not change.
type DeltaKind string

// The delta kinds.
const (
	DeltaContent   DeltaKind = "content"
	DeltaReasoning DeltaKind = "reasoning"
)

// CallInfo describes a [Complete] call as it starts.
type CallInfo struct {
	// Provider is the provider system identifier (gen_ai.system): the
	// provider's System() when it has one, else "".
	Provider string
	// Model is the bound model: the provider's Model() when it has one.
	Model string
	// Request is the caller's request. Read only.
	Request *Request
	// Start is when the call started.
	Start time.Time
}

// CallOutcome is the end of a [Complete] call.
type CallOutcome struct {
	// Response is the returned response; nil on failure.
	Response *Response
	// Err is the returned error; nil on success.
	Err error
	// Attempts are the call's wire attempts, in order: one without a
	// retry policy (none when the call failed before sending, such as a
	// stream request to a provider without streaming).
	Attempts []AttemptRecord
	// End is when the call ended.
	End time.Time
}

// FailedResponse returns the response a structured_output_invalid
// failure received (the response side a failure event carries), or nil
// for success and every other failure.
func (o *CallOutcome) FailedResponse() *Response {
	if soe := asStructured(o.Err); soe != nil {
		return soe.Response
	}
	return nil
}

// AttemptRecord is one wire attempt of a call (the per-attempt LLM span
// of observability §5.5 under llm-provider §7.1 call-level retry).
type AttemptRecord struct {
	// Index is the 0-based attempt index; Reason why it was made ("" for
	// attempt 0).
	Index  int
	Reason RetryReason
	// Response is the attempt's response (also the one that failed
	// structured-output validation); nil when none was received.
	Response *Response
	// Err is the attempt's error, or nil.
	Err        error
	Start, End time.Time
}

// Systemer is the optional provider capability naming its system for
// observability (gen_ai.system, observability §5.5.3).
type Systemer interface {
	System() string
}

// Modeler is the optional provider capability naming its bound model.
type Modeler interface {
	Model() string
}

// ResponseIdentity returns the provider's response id and response
// model, read from the top level of the response's raw body ("id" and
// "model" for OpenAI-compatible and Anthropic bodies, "responseId" and
// "modelVersion" for Gemini). Absent or non-string values give "".
func (r *Response) ResponseIdentity() (id, model string) {
	if r == nil || len(r.Raw) == 0 {
		return "", ""
	}
	var top struct {
		ID           any `json:"id"`
		Model        any `json:"model"`
		ResponseID   any `json:"responseId"`
		ModelVersion any `json:"modelVersion"`
	}
	if json.Unmarshal(r.Raw, &top) != nil {
		return "", ""
	}
	pick := func(a, b any) string {
		if s, ok := a.(string); ok && s != "" {
			return s
		}
		s, _ := b.(string)
		return s
	}
	return pick(top.ID, top.ResponseID), pick(top.Model, top.ModelVersion)
}

// RedactImages returns msgs with every inline image source replaced by
// its redacted placeholder (observability §5.5.5: source type
// inline_redacted carrying the base64 data's byte count; the media type
// and detail stay). msgs itself is returned when it holds no inline
// image; otherwise the result shares nothing redacted with it.
func RedactImages(msgs []Message) []Message {
	var out []Message
	for i := range msgs {
		m := &msgs[i] // not a copy: a conversation can be long, and most messages have no blocks
		if !m.Content.IsBlocks() {
			continue
		}
		blocks := m.Content.Blocks()
		var nb []Block
		for j, b := range blocks {
			if b.Type != BlockImage || b.Source.Type != SourceInline {
				continue
			}
			if nb == nil {
				nb = append([]Block(nil), blocks...)
			}
			nb[j].Source = ImageSource{Type: SourceInlineRedacted, ByteCount: len(b.Source.Base64Data)}
		}
		if nb == nil {
			continue
		}
		if out == nil {
			out = append([]Message(nil), msgs...)
		}
		out[i].Content = Blocks(nb...)
	}
	if out == nil {
		return msgs
	}
	return out
}

// tracked runs one observed call.
func tracked(ctx context.Context, o CallObserver, p Provider, req *Request) (*Response, error) {
	info := &CallInfo{Request: req, Start: time.Now()}
	if s, ok := p.(Systemer); ok {
		info.Provider = s.System()
	}
	if m, ok := p.(Modeler); ok {
		info.Model = m.Model()
	}
	tr := o.BeginCall(ctx, info)
	if tr == nil {
		return complete(ctx, p, req, nil)
	}
	rec := &callRecorder{tr: tr}
	resp, err := complete(ctx, p, req, rec)
	tr.End(&CallOutcome{Response: resp, Err: err, Attempts: rec.attempts, End: time.Now()})
	return resp, err
}

// callRecorder collects an observed call's attempts and forwards its
// deltas.
type callRecorder struct {
	tr       CallTracker
	attempts []AttemptRecord
}

func (r *callRecorder) chunk(c *Chunk) {
	if c.Reasoning != "" {
		r.tr.Token(DeltaReasoning, c.Reasoning)
	}
	if c.Content != "" {
		r.tr.Token(DeltaContent, c.Content)
	}
}

func (r *callRecorder) attempt(a AttemptRecord) {
	if soe := asStructured(a.Err); soe != nil && a.Response == nil {
		a.Response = soe.Response
	}
	r.attempts = append(r.attempts, a)
}
