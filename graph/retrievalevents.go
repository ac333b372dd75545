package graph

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
)

// EmbeddingRequest is the request side of a typed embedding event.
type EmbeddingRequest struct {
	// Provider is the provider's system identifier (gen_ai.system); Model
	// the bound model the request was made against.
	Provider string
	Model    string
	// InputStrings are the call's input strings (payload: observers gate
	// their rendering); InputCount is their number.
	InputStrings []string
	InputCount   int
	// Params are the declared config fields the caller set, keyed by
	// their spec names (dimensions, input_type); empty when none is set
	// (absence is meaningful).
	Params map[string]any
	// Extras are the config's extras pass-through (payload); empty when
	// none.
	Extras map[string]any
	// ActivePrompt and ActivePromptGroup are the prompt-context binding
	// at the call ([llm.ActivePromptOf]); nil when none is bound.
	ActivePrompt      *llm.PromptIdentity
	ActivePromptGroup *llm.PromptGroupIdentity
}

// EmbeddingEvent is delivered when an embedding call made through
// [retrieval.Embed] from a node returns a response (graph-engine §6
// EmbeddingEvent). It has no phase and is not filtered by [Phases].
type EmbeddingEvent struct {
	CallSource
	EmbeddingRequest
	// ResponseModel and ResponseID are the provider's; "" when it
	// returned none.
	ResponseModel string
	ResponseID    string
	// Usage is the provider's usage record; nil when it reported none.
	Usage *retrieval.EmbeddingUsage
	// Dimensions is the returned vectors' length; 0 when the response
	// surfaces no determinate dimensionality.
	Dimensions int
	// OutputVectors are the returned vectors (payload).
	OutputVectors [][]float64
	// Start and End bound the call; LatencyMS is their distance.
	Start, End time.Time
	LatencyMS  float64
}

// EmbeddingFailedEvent is delivered when an embedding call made through
// [retrieval.Embed] from a node fails (graph-engine §6
// EmbeddingFailedEvent). A call delivers exactly one of EmbeddingEvent
// and EmbeddingFailedEvent.
type EmbeddingFailedEvent struct {
	CallSource
	EmbeddingRequest
	// Err is the call's error; ErrorCategory its §7 category ("" for an
	// error outside them, such as the caller's cancellation), ErrorType
	// the provider's error code ("" when it gave none; the Go error type
	// for an error that is not an *llm.ProviderError), ErrorMessage its
	// message.
	Err           error
	ErrorCategory errcat.Category
	ErrorType     string
	ErrorMessage  string
	Start, End    time.Time
	LatencyMS     float64
}

// RerankCall is the request side of a typed rerank event.
type RerankCall struct {
	// Provider is the provider's system identifier (gen_ai.system); Model
	// the bound model the request was made against.
	Provider string
	Model    string
	// Query and Documents are the call's (payload); DocumentCount is the
	// number of documents.
	Query         string
	Documents     []string
	DocumentCount int
	// TopK is the caller's top-k; nil when it asked for all results.
	TopK *int
	// Params are the declared config fields the caller set, keyed by
	// their spec names (return_documents); empty when none is set.
	Params map[string]any
	// Extras are the config's extras pass-through (payload).
	Extras map[string]any
	// ActivePrompt and ActivePromptGroup are the prompt-context binding
	// at the call; nil when none is bound.
	ActivePrompt      *llm.PromptIdentity
	ActivePromptGroup *llm.PromptGroupIdentity
}

// RerankEvent is delivered when a rerank call made through
// [retrieval.Rerank] from a node returns a response (graph-engine §6
// RerankEvent).
type RerankEvent struct {
	CallSource
	RerankCall
	// ResponseModel and ResponseID are the provider's; "" when it
	// returned none.
	ResponseModel string
	ResponseID    string
	// Usage is the provider's usage record; nil when it reported none.
	Usage *retrieval.RerankUsage
	// ResultCount is the number of results; OutputResults the results
	// (payload: document echoes included).
	ResultCount   int
	OutputResults []retrieval.ScoredDocument
	Start, End    time.Time
	LatencyMS     float64
}

// RerankFailedEvent is delivered when a rerank call made through
// [retrieval.Rerank] from a node fails (graph-engine §6
// RerankFailedEvent). The error fields are EmbeddingFailedEvent's.
type RerankFailedEvent struct {
	CallSource
	RerankCall
	Err           error
	ErrorCategory errcat.Category
	ErrorType     string
	ErrorMessage  string
	Start, End    time.Time
	LatencyMS     float64
}

var _ retrieval.CallObserver = (*callHook)(nil)

// ObserveEmbed implements retrieval.CallObserver.
func (h *callHook) ObserveEmbed(ctx context.Context, ev *retrieval.EmbeddingEvent) {
	s := (*scope)(h)
	ap := llm.ActivePromptOf(ctx)
	req := EmbeddingRequest{Provider: ev.Provider, Model: ev.Model, InputStrings: slices.Clone(ev.Input),
		InputCount: len(ev.Input), Params: ev.RequestParams, Extras: map[string]any{},
		ActivePrompt: ap.Prompt.Snapshot(), ActivePromptGroup: groupSnapshot(ap.Group)}
	if req.Params == nil {
		req.Params = map[string]any{}
	}
	if x := ev.Extras; len(x) > 0 {
		req.Extras = maps.Clone(x)
	}
	end := ev.Start.Add(ev.Duration)
	lat := float64(ev.Duration) / float64(time.Millisecond)
	src := s.source(ctx)
	if ev.Err == nil && ev.Response != nil {
		r := ev.Response
		out := &EmbeddingEvent{CallSource: src, EmbeddingRequest: req, ResponseModel: r.Model, ResponseID: r.ResponseID,
			Dimensions: r.Dimensions, OutputVectors: r.Vectors, Start: ev.Start, End: end, LatencyMS: lat}
		if r.Usage != nil {
			u := *r.Usage
			out.Usage = &u
		}
		s.emitCall(out)
		return
	}
	fe := &EmbeddingFailedEvent{CallSource: src, EmbeddingRequest: req, Start: ev.Start, End: end, LatencyMS: lat}
	fe.ErrorCategory, fe.ErrorType, fe.ErrorMessage, fe.Err = failure(ev.Err)
	s.emitCall(fe)
}

// ObserveRerank implements retrieval.CallObserver.
func (h *callHook) ObserveRerank(ctx context.Context, ev *retrieval.RerankEvent) {
	s := (*scope)(h)
	ap := llm.ActivePromptOf(ctx)
	call := RerankCall{Provider: ev.Provider, Model: ev.Model, Query: ev.Request.Query,
		Documents: slices.Clone(ev.Request.Documents), DocumentCount: len(ev.Request.Documents),
		Params: map[string]any{}, Extras: map[string]any{},
		ActivePrompt: ap.Prompt.Snapshot(), ActivePromptGroup: groupSnapshot(ap.Group)}
	if k := ev.Request.TopK; k > 0 {
		call.TopK = &k
	}
	if ev.Request.Config.ReturnDocuments {
		call.Params["return_documents"] = true
	}
	if x := ev.Request.Config.Extras; len(x) > 0 {
		call.Extras = maps.Clone(x)
	}
	end := ev.Start.Add(ev.Duration)
	lat := float64(ev.Duration) / float64(time.Millisecond)
	src := s.source(ctx)
	if ev.Err == nil && ev.Response != nil {
		r := ev.Response
		out := &RerankEvent{CallSource: src, RerankCall: call, ResponseModel: r.Model, ResponseID: r.ResponseID,
			ResultCount: len(r.Results), OutputResults: slices.Clone(r.Results), Start: ev.Start, End: end, LatencyMS: lat}
		if r.Usage != nil {
			u := *r.Usage
			out.Usage = &u
		}
		s.emitCall(out)
		return
	}
	fe := &RerankFailedEvent{CallSource: src, RerankCall: call, Start: ev.Start, End: end, LatencyMS: lat}
	fe.ErrorCategory, fe.ErrorType, fe.ErrorMessage, fe.Err = failure(ev.Err)
	s.emitCall(fe)
}

func groupSnapshot(g *llm.PromptGroupIdentity) *llm.PromptGroupIdentity {
	if g == nil {
		return nil
	}
	c := *g
	return &c
}

// failure returns the error fields of a failed retrieval call: the
// provider's error code as the type (none for a ProviderError without
// one), else the Go error type.
func failure(err error) (errcat.Category, string, string, error) {
	if err == nil {
		// A provider returning neither a response nor an error breaks
		// the contract: report it as an invalid response.
		err = &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Message: "the provider returned no response"}
	}
	var pe *llm.ProviderError
	if errors.As(err, &pe) {
		return errcat.Of(err), pe.Code, pe.Message, err
	}
	return errcat.Of(err), fmt.Sprintf("%T", err), err.Error(), err
}
