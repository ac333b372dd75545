package otelobserver

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
)

// Embedding and rerank provider span attributes (observability §5.5.8,
// §5.5.13).
const (
	EmbeddingSpanName          = "openarmature.embedding.complete"
	AttrEmbeddingInputCount    = "openarmature.embedding.input_count"
	AttrEmbeddingDimensions    = "openarmature.embedding.dimensions"
	AttrEmbeddingInputType     = "openarmature.embedding.input_type"
	AttrEmbeddingInputStrings  = "openarmature.embedding.input.strings"
	AttrEmbeddingRequestExtras = "openarmature.embedding.request.extras"
	RerankSpanName             = "openarmature.rerank.complete"
	AttrRerankQueryLength      = "openarmature.rerank.query_length"
	AttrRerankDocumentCount    = "openarmature.rerank.document_count"
	AttrRerankTopK             = "openarmature.rerank.top_k"
	AttrRerankResultCount      = "openarmature.rerank.result_count"
	AttrRerankSearchUnits      = "openarmature.rerank.search_units"
	AttrRerankQuery            = "openarmature.rerank.query"
	AttrRerankDocuments        = "openarmature.rerank.documents"
	AttrRerankResults          = "openarmature.rerank.results"
	AttrRerankRequestExtras    = "openarmature.rerank.request.extras"
)

// Prompt identity and token-budget attributes of the LLM provider span
// (prompt-management §12, observability §5.5.7, §5.5.15).
const (
	AttrPromptName                 = "openarmature.prompt.name"
	AttrPromptVersion              = "openarmature.prompt.version"
	AttrPromptLabel                = "openarmature.prompt.label"
	AttrPromptTemplateHash         = "openarmature.prompt.template_hash"
	AttrPromptRenderedHash         = "openarmature.prompt.rendered_hash"
	AttrPromptGroupName            = "openarmature.prompt.group_name"
	AttrPromptBudgetInputMaxTokens = "openarmature.prompt.token_budget.input_max_tokens"
	AttrPromptBudgetTotalMaxTokens = "openarmature.prompt.token_budget.total_max_tokens"
	AttrLLMTokenBudgetExceeded     = "openarmature.llm.token_budget.exceeded"
)

// embedding renders the span and metrics of one typed embedding event
// (success: resp set; failure: err set).
func (o *Observer) embedding(src *graph.CallSource, req *graph.EmbeddingRequest, ok *graph.EmbeddingEvent, start, end time.Time, err error) {
	if o.metrics != nil {
		var tokens *int
		if ok != nil && ok.Usage != nil {
			tokens = &ok.Usage.InputTokens
		}
		o.metrics.recordCall(OperationEmbeddings, req.Model, req.Provider, end.Sub(start), err, tokens)
	}
	st := o.inv(src.InvocationID)
	if st == nil {
		return
	}
	buf := o.attrBuf()
	attrs := append(buf.kv, attribute.Int(AttrEmbeddingInputCount, req.InputCount))
	if it, _ := req.Params["input_type"].(string); it != "" {
		attrs = append(attrs, attribute.String(AttrEmbeddingInputType, it))
	}
	if !o.disableGenAI {
		if req.Provider != "" {
			attrs = append(attrs, attribute.String(AttrGenAISystem, req.Provider))
		}
		attrs = append(attrs, attribute.String(AttrGenAIRequestModel, req.Model))
	}
	if ok != nil {
		if ok.Dimensions > 0 {
			attrs = append(attrs, attribute.Int(AttrEmbeddingDimensions, ok.Dimensions))
		}
		if !o.disableGenAI {
			attrs = responseIdentity(attrs, ok.ResponseModel, ok.ResponseID)
			if ok.Usage != nil {
				attrs = append(attrs, attribute.Int(AttrGenAIInputTokens, ok.Usage.InputTokens))
			}
		}
	}
	if o.payload {
		strs := req.InputStrings
		if strs == nil {
			strs = []string{}
		}
		attrs = o.payloadAttr(attrs, AttrEmbeddingInputStrings, canonicalJSON(strs))
		if len(req.Extras) > 0 {
			attrs = o.payloadAttr(attrs, AttrEmbeddingRequestExtras, canonicalJSON(req.Extras))
		}
	}
	o.providerSpan(st, buf, src, EmbeddingSpanName, attrs, start, end, err)
}

// rerank renders the span and metrics of one typed rerank event.
func (o *Observer) rerank(src *graph.CallSource, call *graph.RerankCall, ok *graph.RerankEvent, start, end time.Time, err error) {
	var usage *retrieval.RerankUsage
	if ok != nil {
		usage = ok.Usage
	}
	if o.metrics != nil {
		var tokens *int
		if usage != nil {
			tokens = usage.InputTokens
		}
		o.metrics.recordCall(OperationRerank, call.Model, call.Provider, end.Sub(start), err, tokens)
	}
	st := o.inv(src.InvocationID)
	if st == nil {
		return
	}
	buf := o.attrBuf()
	attrs := append(buf.kv, attribute.Int(AttrRerankQueryLength, len(call.Query)),
		attribute.Int(AttrRerankDocumentCount, call.DocumentCount))
	if call.TopK != nil {
		attrs = append(attrs, attribute.Int(AttrRerankTopK, *call.TopK))
	}
	if !o.disableGenAI {
		if call.Provider != "" {
			attrs = append(attrs, attribute.String(AttrGenAISystem, call.Provider))
		}
		attrs = append(attrs, attribute.String(AttrGenAIRequestModel, call.Model))
	}
	if ok != nil {
		attrs = append(attrs, attribute.Int(AttrRerankResultCount, ok.ResultCount))
		if usage != nil && usage.SearchUnits != nil {
			attrs = append(attrs, attribute.Int(AttrRerankSearchUnits, *usage.SearchUnits))
		}
		if !o.disableGenAI {
			attrs = responseIdentity(attrs, ok.ResponseModel, ok.ResponseID)
			if usage != nil && usage.InputTokens != nil {
				attrs = append(attrs, attribute.Int(AttrGenAIInputTokens, *usage.InputTokens))
			}
		}
	}
	if o.payload {
		docs := call.Documents
		if docs == nil {
			docs = []string{}
		}
		attrs = o.payloadAttr(attrs, AttrRerankQuery, call.Query)
		attrs = o.payloadAttr(attrs, AttrRerankDocuments, canonicalJSON(docs))
		if ok != nil {
			attrs = o.payloadAttr(attrs, AttrRerankResults, resultsJSON(ok.OutputResults))
		}
		if len(call.Extras) > 0 {
			attrs = o.payloadAttr(attrs, AttrRerankRequestExtras, canonicalJSON(call.Extras))
		}
	}
	o.providerSpan(st, buf, src, RerankSpanName, attrs, start, end, err)
}

// resultsJSON is the openarmature.rerank.results value: [{index,
// relevance_score, document?}].
func resultsJSON(rs []retrieval.ScoredDocument) string {
	type result struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevance_score"`
		Document       *string `json:"document,omitempty"`
	}
	out := make([]result, len(rs))
	for i, r := range rs {
		out[i] = result{Index: r.Index, RelevanceScore: r.RelevanceScore, Document: r.Document}
	}
	return canonicalJSON(out)
}

func responseIdentity(attrs []attribute.KeyValue, model, id string) []attribute.KeyValue {
	if model != "" {
		attrs = append(attrs, attribute.String(AttrGenAIResponseModel, model))
	}
	if id != "" {
		attrs = append(attrs, attribute.String(AttrGenAIResponseID, id))
	}
	return attrs
}

// providerSpan emits one finished provider span under the call's
// lineage-resolved parent; attrs is built from buf, released.
func (o *Observer) providerSpan(st *invState, buf *attrBuf, src *graph.CallSource, name string, attrs []attribute.KeyValue, start, end time.Time, err error) {
	parent := st.callParent(o, src, start)
	attrs = st.lineageAttrs(attrs, src.InvocationID, src.CorrelationID, src.FanOutIndexChain, src.BranchNameChain, src.Metadata)
	d := callSpan{name: name, kind: o.client, start: stamp(start), end: stamp(end), buf: buf, attrs: attrs, err: err}
	if err != nil {
		d.cat = string(errcat.Of(err))
	}
	st.endCall(o, parent, d)
}

// promptAttrs adds the active prompt's identity, its group and its
// declared token budget to an LLM span's attributes.
func promptAttrs(attrs []attribute.KeyValue, req *graph.LLMRequest) []attribute.KeyValue {
	if p := req.ActivePrompt; p != nil {
		for _, a := range []struct{ k, v string }{
			{AttrPromptName, p.Name}, {AttrPromptVersion, p.Version}, {AttrPromptLabel, p.Label},
			{AttrPromptTemplateHash, p.TemplateHash}, {AttrPromptRenderedHash, p.RenderedHash},
		} {
			if a.v != "" {
				attrs = append(attrs, attribute.String(a.k, a.v))
			}
		}
	}
	if g := req.ActivePromptGroup; g != nil && g.GroupName != "" {
		attrs = append(attrs, attribute.String(AttrPromptGroupName, g.GroupName))
	}
	if b := req.TokenBudget; b != nil {
		if b.InputMaxTokens != nil {
			attrs = append(attrs, attribute.Int(AttrPromptBudgetInputMaxTokens, *b.InputMaxTokens))
		}
		if b.TotalMaxTokens != nil {
			attrs = append(attrs, attribute.Int(AttrPromptBudgetTotalMaxTokens, *b.TotalMaxTokens))
		}
	}
	return attrs
}

// budgetChecks evaluates the call's token budget against the terminal
// response's usage (observability §5.5.15): nil without a budget or a
// response (only a completion and a structured_output_invalid failure
// carry usage).
func budgetChecks(req *graph.LLMRequest, resp *graph.LLMResponse) []llm.BudgetCheck {
	if req.TokenBudget == nil || resp == nil {
		return nil
	}
	return req.TokenBudget.Evaluate(resp.Usage)
}

// warnBudget logs the WARNING record of a call over its token budget
// (observability §5.5.15 / §7): one record per call, naming each bound
// crossed.
func (o *Observer) warnBudget(src *graph.CallSource, req *graph.LLMRequest, checks []llm.BudgetCheck) {
	if exceeded, _ := llm.BudgetExceeded(checks); !exceeded {
		return
	}
	attrs := []slog.Attr{slog.String(AttrInvocationID, src.InvocationID), slog.String(AttrCorrelationID, src.CorrelationID),
		slog.String(AttrNodeName, src.NodeName), slog.String(AttrLLMCallID, src.CallID), slog.String(AttrGenAIRequestModel, req.Model)}
	if p := req.ActivePrompt; p != nil {
		attrs = append(attrs, slog.String(AttrPromptName, p.Name), slog.String(AttrPromptVersion, p.Version))
	}
	for _, c := range checks {
		if c.Exceeded {
			attrs = append(attrs, slog.Group("openarmature.token_budget."+string(c.Kind),
				slog.Int("max_tokens", c.Max), slog.Int("actual_tokens", c.Actual)))
		}
	}
	o.logger.LogAttrs(context.Background(), slog.LevelWarn, "openarmature: LLM call exceeded its prompt's token budget", attrs...)
}
