package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/jina"
	rpopenai "github.com/armature-go/armature/llm/retrieval/openai"
	"github.com/armature-go/armature/prompt"
)

// The embedding and rerank part of the observability suite (fixtures
// 074-083, 089, 099-109, 139-143, 154): nodes that embed (calls_embed)
// or rerank (calls_rerank) through retrieval.Embed / retrieval.Rerank,
// so the engine reports the calls as typed events, against the scripted
// mock_embedding / mock_rerank answers (the directive vocabulary of
// retrieval-provider fixture 001). Embeddings go through the real
// OpenAI-compatible /v1/embeddings mapping (gen_ai.system "openai");
// reranks through the harness-internal rerank shape of the
// retrieval-provider fixtures 006-012 ({id, model, results,
// meta.billed_units.{search_units, input_tokens}}), which no §8 mapping
// speaks, answered by obsHarnessReranker as provider "cohere" (the
// fixtures' gen_ai.system).

var (
	callsEmbedKeys  = vocab("input input_from_rendered_prompt stores_response_in config model")
	callsRerankKeys = vocab("query query_from_rendered_prompt documents top_k config stores_response_in model")
)

// Default bound models when neither the directive nor the scripted
// answers name one (the fixtures' failure cases, 075 / 100).
const (
	obsEmbedModel  = "text-embedding-test"
	obsRerankModel = "rerank-test"
	// obsRerankSystem is the harness reranker's gen_ai.system.
	obsRerankSystem = "cohere"
)

// retrievalCaseKey reads the case keys of this part and of the prompt
// part (obs_prompt.go).
func (ol *obsLLM) retrievalCaseKey(f *Field) error {
	v := f.Value
	switch f.Key {
	case "mock_embedding", "mock_rerank":
		if v.Kind != KindList {
			return schemaErrorf(v.Pos, "%s must be a list", f.Key)
		}
		for _, it := range v.Items {
			s, raise, err := parseRetrievalMock(it, f.Key+"[]")
			if err != nil {
				return err
			}
			if f.Key == "mock_embedding" {
				ol.embedMocks, ol.embedRaises = append(ol.embedMocks, s), append(ol.embedRaises, raise)
			} else {
				ol.rerankMocks, ol.rerankRaises = append(ol.rerankMocks, s), append(ol.rerankRaises, raise)
			}
		}
	case "prompt_backend":
		return ol.parsePromptBackend(v)
	case "render_variables":
		return ol.parseRenderVariables(v)
	}
	return nil
}

// obsRaise is a scripted failure's literal exception (a mock entry's
// raises: {error_type, message}, conformance-adapter §5.15): the call
// fails in its status's §7 category with these as the provider error's
// code and message.
type obsRaise struct{ typ, msg string }

// parseRetrievalMock reads one mock_embedding / mock_rerank entry.
func parseRetrievalMock(it *Value, what string) (lpScripted, *obsRaise, error) {
	if it.Kind != KindMap {
		return lpScripted{}, nil, schemaErrorf(it.Pos, "%s must be a mapping", what)
	}
	rv, ok := it.Get("raises")
	if !ok {
		s, err := lpParseScripted(it, []string{"status", "body", "headers"}, what)
		return s, nil, err
	}
	if err := hcStrictKeys(rv, what+".raises", "error_type", "message"); err != nil {
		return lpScripted{}, nil, err
	}
	raise := &obsRaise{}
	for _, k := range []struct {
		key string
		dst *string
	}{{"error_type", &raise.typ}, {"message", &raise.msg}} {
		x, ok := rv.Get(k.key)
		if !ok || x.Kind != KindString {
			return lpScripted{}, nil, schemaErrorf(rv.Pos, "%s.raises.%s must be a string", what, k.key)
		}
		*k.dst = x.Str
	}
	rest := &Value{Kind: KindMap, Pos: it.Pos}
	for _, f := range it.Fields {
		if f.Key != "raises" {
			rest.Fields = append(rest.Fields, f)
		}
	}
	s, err := lpParseScripted(rest, []string{"status", "body", "headers"}, what)
	if err != nil {
		return lpScripted{}, nil, err
	}
	if s.status/100 == 2 {
		return lpScripted{}, nil, schemaErrorf(rv.Pos, "%s.raises needs a failing status", what)
	}
	return s, raise, nil
}

// nextRaise consumes the transport's next answer when it is a scripted
// literal failure, returning the error the call raises.
func nextRaise(rt *rpTransport, raises []*obsRaise, system, op string) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.next >= len(raises) || raises[rt.next] == nil {
		return nil
	}
	s, raise := rt.mocks[rt.next], raises[rt.next]
	rt.next++
	return &llm.ProviderError{Cat: statusCategory(s.status), Provider: system, Op: op, StatusCode: s.status,
		Code: raise.typ, Message: raise.msg}
}

// obsEmbedder is the embedding mapping of the case, failing with the
// scripted literal failures (raises) instead of sending.
type obsEmbedder struct {
	retrieval.EmbeddingProvider
	rt     *rpTransport
	raises []*obsRaise
}

func (e *obsEmbedder) System() string { return "openai" }

func (e *obsEmbedder) Embed(ctx context.Context, input []string, cfg retrieval.EmbeddingConfig) (*retrieval.EmbeddingResponse, error) {
	if err := retrieval.ValidateEmbed("openai", input, cfg); err != nil {
		return nil, err
	}
	if err := nextRaise(e.rt, e.raises, "openai", "embed"); err != nil {
		return nil, err
	}
	return e.EmbeddingProvider.Embed(ctx, input, cfg)
}

// callDirKeys returns the keys of a call directive and whether an
// unknown one is an unknown directive (the retrieval directives) rather
// than a feature not implemented (calls_llm and the others).
func callDirKeys(key string) (keySet, bool) {
	switch key {
	case "calls_tool":
		return callsToolKeys, false
	case "calls_llm_from_wrapper":
		return callsWrapperKeys, false
	case "calls_embed":
		return callsEmbedKeys, true
	case "calls_rerank":
		return callsRerankKeys, true
	case "also_emits_via_global_tracer":
		return callsGlobalKeys, true
	}
	return callsLLMKeys, false
}

// attachAll registers the harness's own observer of the typed call
// events.
func (r *obsLLMRun) attachAll(x *geExec) error {
	obs := func(_ context.Context, ev graph.Event) error {
		if _, ok := graph.CallSourceOf(ev); ok {
			r.mu.Lock()
			r.all = append(r.all, ev)
			r.mu.Unlock()
		}
		return nil
	}
	if _, err := x.outer.AddObserver(obs); err != nil {
		return fmt.Errorf("registering the call-event recorder: %w", err)
	}
	return nil
}

// embedModel is the model a calls_embed without model: is bound to.
// Fixture mismatch absorption: the suite never declares the bound model.
// The scripted answers' model when they report one; else the metric
// fixtures (089, 143, 154) expect "test-embed-model" and the others
// (075) "text-embedding-test".
func (ol *obsLLM) embedModel() string {
	def := obsEmbedModel
	if ol.hasMetrics {
		def = "test-embed-model"
	}
	return rpHarnessModel(ol.embedMocks, def)
}

// retrievalProviders builds the case's mock embedding and rerank
// transports (one each: answers are served in call order across nodes).
func (r *obsLLMRun) retrievalProviders() {
	r.embedRT = &rpTransport{mocks: r.ol.embedMocks}
	r.rerankRT = &rpTransport{mocks: r.ol.rerankMocks}
}

// bindPrompt renders the directive's prompt (when its node has one) and
// binds the prompt-context; res is nil without one.
func (r *obsLLMRun) bindPrompt(ctx context.Context, d *obsCallDir) (context.Context, *prompt.Result, error) {
	if d.render == nil {
		return ctx, nil, nil
	}
	ctx, res, err := r.ol.prompts.bind(ctx, d.render)
	if err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	r.renders = append(r.renders, res)
	r.mu.Unlock()
	return ctx, res, nil
}

// renderStep is the step of a node that renders a prompt and calls
// nothing.
func (r *obsLLMRun) renderStep(d *obsCallDir) (*geStep, error) {
	return &geStep{kind: stepCustom, pos: d.v.Pos, custom: func(ctx context.Context, _ graph.State, _ graph.Update) error {
		_, _, err := r.bindPrompt(ctx, d)
		return err
	}}, nil
}

// fromRendered reads a *_from_rendered_prompt flag, which needs the node
// to render a prompt.
func fromRendered(v *Value, key string, d *obsCallDir) (bool, error) {
	f, ok := v.Get(key)
	if !ok {
		return false, nil
	}
	if f.Kind != KindBool {
		return false, schemaErrorf(f.Pos, "%s must be a bool", key)
	}
	if f.Bool && d.render == nil {
		return false, schemaErrorf(f.Pos, "%s needs the node to render a prompt", key)
	}
	return f.Bool, nil
}

func obsStrList(v *Value, what string) ([]string, error) {
	if v.Kind != KindList {
		return nil, schemaErrorf(v.Pos, "%s must be a list of strings", what)
	}
	out := make([]string, 0, len(v.Items))
	for _, it := range v.Items {
		if it.Kind != KindString {
			return nil, schemaErrorf(it.Pos, "%s must be a list of strings", what)
		}
		out = append(out, it.Str)
	}
	return out, nil
}

// embedStep builds the step of a calls_embed directive.
func (r *obsLLMRun) embedStep(d *obsCallDir) (*geStep, error) {
	v := d.v
	call := &rpCall{embed: true}
	var input []string
	if in, ok := v.Get("input"); ok {
		var err error
		if input, err = obsStrList(in, "calls_embed.input"); err != nil {
			return nil, err
		}
	}
	rendered, err := fromRendered(v, "input_from_rendered_prompt", d)
	if err != nil {
		return nil, err
	}
	if rendered == (input != nil) {
		return nil, schemaErrorf(v.Pos, "calls_embed needs exactly one of input and input_from_rendered_prompt")
	}
	if c, ok := v.Get("config"); ok {
		if err := rpConfig(c, call); err != nil {
			return nil, err
		}
	}
	store, model, err := storeAndModel(v, "calls_embed", r.ol.embedModel())
	if err != nil {
		return nil, err
	}
	emb, err := rpopenai.New(rpopenai.Config{BaseURL: rpHarnessBase, Model: model, APIKey: "sk-conformance-key",
		HTTPClient: &http.Client{Transport: r.embedRT}})
	if err != nil {
		return nil, err
	}
	p := &obsEmbedder{EmbeddingProvider: emb, rt: r.embedRT, raises: r.ol.embedRaises}
	return &geStep{kind: stepCustom, pos: v.Pos, custom: func(ctx context.Context, _ graph.State, upd graph.Update) error {
		ctx, res, err := r.bindPrompt(ctx, d)
		if err != nil {
			return err
		}
		in := input
		if rendered {
			in = []string{renderedText(res)}
		}
		resp, err := retrieval.Embed(ctx, p, in, call.ecfg)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.eresps = append(r.eresps, resp)
		r.mu.Unlock()
		if store != "" {
			upd[store] = embedRecord(resp)
		}
		return nil
	}}, nil
}

// rerankStep builds the step of a calls_rerank directive.
func (r *obsLLMRun) rerankStep(d *obsCallDir) (*geStep, error) {
	v := d.v
	call := &rpCall{}
	req := retrieval.RerankRequest{}
	q, hasQuery := v.Get("query")
	if hasQuery {
		if q.Kind != KindString {
			return nil, schemaErrorf(q.Pos, "calls_rerank.query must be a string")
		}
		req.Query = q.Str
	}
	rendered, err := fromRendered(v, "query_from_rendered_prompt", d)
	if err != nil {
		return nil, err
	}
	if rendered == hasQuery {
		return nil, schemaErrorf(v.Pos, "calls_rerank needs exactly one of query and query_from_rendered_prompt")
	}
	docs, ok := v.Get("documents")
	if !ok {
		return nil, schemaErrorf(v.Pos, "calls_rerank needs documents")
	}
	if req.Documents, err = obsStrList(docs, "calls_rerank.documents"); err != nil {
		return nil, err
	}
	if k, ok := v.Get("top_k"); ok {
		if k.Kind != KindInt || k.Int < 1 {
			return nil, schemaErrorf(k.Pos, "calls_rerank.top_k must be a positive integer")
		}
		req.TopK = int(k.Int)
	}
	if c, ok := v.Get("config"); ok {
		if err := rpConfig(c, call); err != nil {
			return nil, err
		}
	}
	req.Config = call.rcfg
	store, model, err := storeAndModel(v, "calls_rerank", rpHarnessModel(r.ol.rerankMocks, obsRerankModel))
	if err != nil {
		return nil, err
	}
	p := &obsHarnessReranker{model: model, rt: r.rerankRT, raises: r.ol.rerankRaises, seen: func(q retrieval.RerankRequest) {
		r.mu.Lock()
		r.rreqs = append(r.rreqs, q)
		r.mu.Unlock()
	}}
	return &geStep{kind: stepCustom, pos: v.Pos, custom: func(ctx context.Context, _ graph.State, upd graph.Update) error {
		ctx, res, err := r.bindPrompt(ctx, d)
		if err != nil {
			return err
		}
		rq := req
		if rendered {
			rq.Query = renderedText(res)
		}
		resp, err := retrieval.Rerank(ctx, p, rq)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.rresps = append(r.rresps, resp)
		r.mu.Unlock()
		if store != "" {
			upd[store] = rerankRecord(resp)
		}
		return nil
	}}, nil
}

func storeAndModel(v *Value, what, def string) (store, model string, _ error) {
	model = def
	if s, ok := v.Get("stores_response_in"); ok {
		if s.Kind != KindString {
			return "", "", schemaErrorf(s.Pos, "%s.stores_response_in must be a field name", what)
		}
		store = s.Str
	}
	if m, ok := v.Get("model"); ok {
		if m.Kind != KindString || m.Str == "" {
			return "", "", schemaErrorf(m.Pos, "%s.model must be a model name", what)
		}
		model = m.Str
	}
	return store, model, nil
}

// embedRecord is the state record of an embedding response.
func embedRecord(r *retrieval.EmbeddingResponse) map[string]any {
	vecs := make([]any, len(r.Vectors))
	for i, v := range r.Vectors {
		row := make([]any, len(v))
		for j, x := range v {
			row[j] = x
		}
		vecs[i] = row
	}
	return map[string]any{"vectors": vecs, "model": r.Model, "dimensions": int64(r.Dimensions),
		"usage": embedUsage(r.Usage), "response_id": nilIfEmpty(r.ResponseID)}
}

// rerankRecord is the state record of a rerank response.
func rerankRecord(r *retrieval.RerankResponse) map[string]any {
	return map[string]any{"results": resultsView(r.Results), "model": r.Model, "usage": rerankUsage(r.Usage),
		"response_id": nilIfEmpty(r.ResponseID)}
}

func resultsView(rs []retrieval.ScoredDocument) []any {
	out := make([]any, len(rs))
	for i, x := range rs {
		m := map[string]any{"index": int64(x.Index), "relevance_score": x.RelevanceScore, "document": nil}
		if x.Document != nil {
			m["document"] = *x.Document
		}
		out[i] = m
	}
	return out
}

// obsHarnessReranker answers the harness-internal rerank mock shape
// ({id, model, results: [{index, relevance_score, document?}],
// meta.billed_units: {search_units?, input_tokens?}}): it decodes the
// results with the Jina results decoder (the same shape: validation,
// echo shapes, sorting), the model it echoes, and the id and billed
// units from the harness fields. A non-2xx answer is the status's §7
// category.
type obsHarnessReranker struct {
	model  string
	rt     *rpTransport
	raises []*obsRaise
	// seen records each request the reranker receives.
	seen func(retrieval.RerankRequest)
}

func (h *obsHarnessReranker) Model() string               { return h.model }
func (h *obsHarnessReranker) System() string              { return obsRerankSystem }
func (h *obsHarnessReranker) Ready(context.Context) error { return nil }

func (h *obsHarnessReranker) Rerank(_ context.Context, req retrieval.RerankRequest) (*retrieval.RerankResponse, error) {
	if h.seen != nil {
		h.seen(req)
	}
	if err := retrieval.ValidateRerank(obsRerankSystem, req); err != nil {
		return nil, err
	}
	if err := nextRaise(h.rt, h.raises, obsRerankSystem, "rerank"); err != nil {
		return nil, err
	}
	h.rt.mu.Lock()
	if h.rt.next >= len(h.rt.mocks) {
		h.rt.mu.Unlock()
		return nil, &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: obsRerankSystem, Op: "rerank", Message: "no scripted response left"}
	}
	s := h.rt.mocks[h.rt.next]
	h.rt.next++
	h.rt.mu.Unlock()
	if s.status/100 != 2 {
		var w struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(s.body, &w)
		return nil, &llm.ProviderError{Cat: statusCategory(s.status), Provider: obsRerankSystem, Op: "rerank",
			StatusCode: s.status, Message: w.Error.Message}
	}
	resp, err := jina.DecodeRerank(s.body, len(req.Documents), req.TopK, h.model)
	if err != nil {
		return nil, err
	}
	var w struct {
		ID    string `json:"id"`
		Model string `json:"model"`
		Meta  struct {
			BilledUnits struct {
				SearchUnits json.RawMessage `json:"search_units"`
				InputTokens json.RawMessage `json:"input_tokens"`
			} `json:"billed_units"`
		} `json:"meta"`
	}
	_ = json.Unmarshal(s.body, &w)
	resp.ResponseID = w.ID
	if w.Model != "" {
		resp.Model = w.Model
	}
	su, it := llm.ParseCounter(w.Meta.BilledUnits.SearchUnits), llm.ParseCounter(w.Meta.BilledUnits.InputTokens)
	resp.Usage = nil
	if su != nil || it != nil {
		resp.Usage = &retrieval.RerankUsage{SearchUnits: su, InputTokens: it}
	}
	return resp, nil
}

// statusCategory is the llm-provider §7 category of an HTTP failure.
func statusCategory(status int) errcat.Category {
	switch {
	case status == 401 || status == 403:
		return errcat.ProviderAuthentication
	case status == 404:
		return errcat.ProviderInvalidModel
	case status == 429:
		return errcat.ProviderRateLimit
	case status >= 500:
		return errcat.ProviderUnavailable
	}
	return errcat.ProviderInvalidRequest
}

// retrievalEventType is the spec name of a typed embedding or rerank
// event.
func retrievalEventType(ev graph.Event) (string, bool) {
	switch ev.(type) {
	case *graph.EmbeddingEvent:
		return "EmbeddingEvent", true
	case *graph.EmbeddingFailedEvent:
		return "EmbeddingFailedEvent", true
	case *graph.RerankEvent:
		return "RerankEvent", true
	case *graph.RerankFailedEvent:
		return "RerankFailedEvent", true
	}
	return "", false
}

// retrievalEventView is the fixture field map of an embedding or rerank
// event (nil for any other event).
func retrievalEventView(ev graph.Event) map[string]any {
	switch e := ev.(type) {
	case *graph.EmbeddingEvent:
		out := sourceView(&e.CallSource)
		embedRequestView(out, &e.EmbeddingRequest)
		out["response_id"], out["response_model"] = nilIfEmpty(e.ResponseID), nilIfEmpty(e.ResponseModel)
		out["usage"], out["latency_ms"] = embedUsage(e.Usage), e.LatencyMS
		out["dimensions"] = nil
		if e.Dimensions > 0 {
			out["dimensions"] = int64(e.Dimensions)
		}
		vecs := make([]any, len(e.OutputVectors))
		for i, v := range e.OutputVectors {
			row := make([]any, len(v))
			for j, x := range v {
				row[j] = x
			}
			vecs[i] = row
		}
		out["output_vectors"] = vecs
		return out
	case *graph.EmbeddingFailedEvent:
		out := sourceView(&e.CallSource)
		embedRequestView(out, &e.EmbeddingRequest)
		failureView(out, e.ErrorCategory, e.ErrorType, e.ErrorMessage, e.LatencyMS)
		return out
	case *graph.RerankEvent:
		out := sourceView(&e.CallSource)
		rerankRequestView(out, &e.RerankCall)
		out["response_id"], out["response_model"] = nilIfEmpty(e.ResponseID), nilIfEmpty(e.ResponseModel)
		out["usage"], out["latency_ms"] = rerankUsage(e.Usage), e.LatencyMS
		out["result_count"], out["output_results"] = int64(e.ResultCount), resultsView(e.OutputResults)
		return out
	case *graph.RerankFailedEvent:
		out := sourceView(&e.CallSource)
		rerankRequestView(out, &e.RerankCall)
		failureView(out, e.ErrorCategory, e.ErrorType, e.ErrorMessage, e.LatencyMS)
		return out
	}
	return nil
}

func embedRequestView(out map[string]any, q *graph.EmbeddingRequest) {
	out["provider"], out["model"] = q.Provider, q.Model
	strs := make([]any, len(q.InputStrings))
	for i, s := range q.InputStrings {
		strs[i] = s
	}
	out["input_strings"], out["input_count"] = strs, int64(q.InputCount)
	out["request_params"] = normalize(normJSON(q.Params))
	out["request_extras"] = normalize(normJSON(q.Extras))
	promptView(out, q.ActivePrompt, q.ActivePromptGroup)
}

func rerankRequestView(out map[string]any, q *graph.RerankCall) {
	out["provider"], out["model"], out["query"] = q.Provider, q.Model, q.Query
	docs := make([]any, len(q.Documents))
	for i, s := range q.Documents {
		docs[i] = s
	}
	out["documents"], out["document_count"] = docs, int64(q.DocumentCount)
	out["top_k"] = nil
	if q.TopK != nil {
		out["top_k"] = int64(*q.TopK)
	}
	out["request_params"] = normalize(normJSON(q.Params))
	out["request_extras"] = normalize(normJSON(q.Extras))
	promptView(out, q.ActivePrompt, q.ActivePromptGroup)
}

func failureView(out map[string]any, cat errcat.Category, typ, msg string, lat float64) {
	out["error_category"], out["error_type"], out["error_message"] = string(cat), nilIfEmpty(typ), msg
	out["latency_ms"] = lat
}

// retrievalTerminal are the typed embedding and rerank events.
var retrievalTerminal = []string{"EmbeddingEvent", "EmbeddingFailedEvent", "RerankEvent", "RerankFailedEvent"}

// checkEmbedResponse compares an embedding event with the response
// received.
func checkEmbedResponse(v map[string]any, r *retrieval.EmbeddingResponse) (bool, string) {
	ok := v["response_id"] == nilIfEmpty(r.ResponseID) && v["response_model"] == nilIfEmpty(r.Model) &&
		formatValue(v["usage"]) == formatValue(normalize(embedUsage(r.Usage))) &&
		v["dimensions"] == int64(r.Dimensions) && v["input_count"] == int64(len(r.Vectors))
	return ok, fmt.Sprintf("event %v does not match the embedding response", v)
}

// checkRerankResponse compares a rerank event with the response
// received.
func checkRerankResponse(v map[string]any, r *retrieval.RerankResponse) (bool, string) {
	ok := v["response_id"] == nilIfEmpty(r.ResponseID) && v["response_model"] == nilIfEmpty(r.Model) &&
		formatValue(v["usage"]) == formatValue(normalize(rerankUsage(r.Usage))) &&
		v["result_count"] == int64(len(r.Results))
	return ok, fmt.Sprintf("event %v does not match the rerank response", v)
}
