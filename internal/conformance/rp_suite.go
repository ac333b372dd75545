package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/llm/retrieval/cohere"
	"github.com/armature-go/armature/llm/retrieval/jina"
	rpopenai "github.com/armature-go/armature/llm/retrieval/openai"
	"github.com/armature-go/armature/llm/retrieval/tei"
)

// retrievalSuite runs the retrieval-provider fixtures (rp_*.go). Each
// case is a one-node graph whose node calls a real wire mapping
// (llm/retrieval/...) once — embed or rerank — over an HTTP transport
// that replays the case's mock_embedding / mock_rerank entries in order
// and records every request (URL, headers, body). The response record
// lands in the node's state field; a failure raises out of the node.
type retrievalSuite struct{}

var (
	rpCaseKeys = []string{"name", "description", "state", "entry", "nodes", "edges", "initial_state", "expected", "expected_error",
		"mapping", "mock_embedding", "mock_rerank", "expected_wire_request", "expected_wire_request_absent_keys",
		"expected_wire_request_count", "expected_wire_headers", "expected_wire_url", "typed_observers",
		"tei_embedding_provider", "tei_rerank_provider", "jina_embedding_provider", "jina_rerank_provider",
		"openai_embedding_provider", "cohere_embedding_provider", "cohere_rerank_provider"}
	rpProviderKeys = []string{"base_url", "model", "api_key", "chunk_size", "input_type_prompt_map", "query_prefix", "document_prefix"}
	rpEmbedKeys    = []string{"input", "config", "stores_response_in", "model"}
	rpRerankKeys   = []string{"query", "documents", "top_k", "config", "stores_response_in", "model"}
	rpExpectedKeys = []string{"final_state", "invariants", "observers"}
)

// rpHarnessBase is the origin of the harness-internal mock shape (no
// mapping:); the transport answers every host.
const rpHarnessBase = "http://mock.invalid"

// rpCall is one case's call and everything observed about it.
type rpCall struct {
	mapping  string
	node     string
	field    string
	embed    bool
	input    []string // embed input, or rerank documents
	query    string
	topK     int
	ecfg     retrieval.EmbeddingConfig
	rcfg     retrieval.RerankConfig
	prov     *Value // the construction block, nil for the harness shape
	model    string
	eresp    *retrieval.EmbeddingResponse
	rresp    *retrieval.RerankResponse
	err      error
	wire     []rpWire
	mocks    []lpScripted // the scripted answers, in order
	rerun    []rpWire     // the wire of the last comparison rerun
	served   int
	eevents  []retrieval.EmbeddingEvent
	revents  []retrieval.RerankEvent
	newEmbed func(http.RoundTripper) (retrieval.EmbeddingProvider, error)
	newRank  func(http.RoundTripper) (retrieval.RerankProvider, error)
}

// rpWire is one recorded request.
type rpWire struct {
	URL    string
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

// rpTransport replays scripted answers and records requests.
type rpTransport struct {
	mu     sync.Mutex
	mocks  []lpScripted
	next   int
	record []rpWire
}

func (t *rpTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
	}
	w := rpWire{URL: r.URL.String(), Header: r.Header.Clone(), Body: body}
	_ = json.Unmarshal(body, &w.JSON)
	t.mu.Lock()
	t.record = append(t.record, w)
	s := lpScripted{status: http.StatusTeapot, body: []byte(`{"error":{"message":"mock: no scripted response left"}}`)}
	if t.next < len(t.mocks) {
		s = t.mocks[t.next]
		t.next++
	}
	t.mu.Unlock()
	h := http.Header{"Content-Type": {"application/json"}}
	for k, v := range s.headers {
		h.Set(k, v)
	}
	return &http.Response{StatusCode: s.status, Status: http.StatusText(s.status), Header: h, Request: r,
		Body: io.NopCloser(bytes.NewReader(s.body)), ContentLength: int64(len(s.body)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

func (retrievalSuite) RunCase(ctx context.Context, c *Case) error {
	body := c.Body
	if err := hcStrictKeys(body, "case", rpCaseKeys...); err != nil {
		return err
	}
	call, err := rpParse(body)
	if err != nil {
		return err
	}
	if err := rpRun(ctx, call, call.ecfg, call.rcfg, true); err != nil {
		return err
	}
	if err := rpExpectWire(body, call); err != nil {
		return err
	}
	if err := rpExpectError(body, call); err != nil {
		return err
	}
	ev, _ := body.Get("expected")
	if ev == nil {
		return schemaErrorf(body.Pos, "expected: missing")
	}
	if err := hcStrictKeys(ev, "expected", rpExpectedKeys...); err != nil {
		return err
	}
	m := newMatcher()
	if fs, ok := ev.Get("final_state"); ok {
		if err := hcStrictKeys(fs, "expected.final_state", call.field); err != nil {
			return err
		}
		want, _ := fs.Get(call.field)
		if err := m.match("final_state."+call.field, want.Native(), call.record(), subsetDeep); err != nil {
			return err
		}
	}
	if obs, ok := ev.Get("observers"); ok {
		if err := rpExpectObservers(body, obs, call, m); err != nil {
			return err
		}
	}
	if inv, ok := ev.Get("invariants"); ok {
		for _, f := range inv.Fields {
			check, ok := rpInvariant(f.Key)
			if !ok {
				return &DirectiveUnknownError{Name: "invariant " + f.Key, Pos: f.Pos}
			}
			if f.Value.Kind != KindBool || !f.Value.Bool {
				return schemaErrorf(f.Pos, "invariant %s: only true is known", f.Key)
			}
			if err := check(ctx, call); err != nil {
				return fmt.Errorf("invariant %s: %w", f.Key, err)
			}
		}
	}
	return nil
}

// rpParse reads the graph, the node's call, the mapping and the mocks.
func rpParse(body *Value) (*rpCall, error) {
	call := &rpCall{mapping: "harness"}
	if v, ok := body.Get("mapping"); ok {
		call.mapping = v.Str
	}
	if st, ok := body.Get("state"); !ok || hcStrictKeys(st, "state", "fields") != nil {
		return nil, schemaErrorf(body.Pos, "state: must be a mapping with fields")
	}
	nodes, ok := body.Get("nodes")
	if !ok || nodes.Kind != KindMap || len(nodes.Fields) != 1 {
		return nil, schemaErrorf(body.Pos, "nodes: one calls_embed or calls_rerank node is supported")
	}
	nf := nodes.Fields[0]
	call.node = nf.Key
	if e, ok := body.Get("entry"); !ok || e.Str != call.node {
		return nil, schemaErrorf(body.Pos, "entry: must be the node %s", call.node)
	}
	edges, _ := body.Get("edges")
	if edges == nil || len(edges.Items) != 1 {
		return nil, schemaErrorf(body.Pos, "edges: one edge to END is supported")
	}
	if from, _ := edges.Items[0].Get("from"); from == nil || from.Str != call.node {
		return nil, schemaErrorf(edges.Pos, "edges: the edge must leave %s", call.node)
	}
	if to, _ := edges.Items[0].Get("to"); to == nil || to.Str != "END" {
		return nil, schemaErrorf(edges.Pos, "edges: the edge must go to END")
	}
	if err := hcStrictKeys(nf.Value, "node "+call.node, "calls_embed", "calls_rerank"); err != nil {
		return nil, err
	}
	var cv *Value
	var mockKey string
	if v, ok := nf.Value.Get("calls_embed"); ok {
		call.embed, cv, mockKey = true, v, "mock_embedding"
		if err := hcStrictKeys(v, "calls_embed", rpEmbedKeys...); err != nil {
			return nil, err
		}
		in, _ := v.Get("input")
		call.input = rpStrings(in)
	} else if v, ok := nf.Value.Get("calls_rerank"); ok {
		cv, mockKey = v, "mock_rerank"
		if err := hcStrictKeys(v, "calls_rerank", rpRerankKeys...); err != nil {
			return nil, err
		}
		q, _ := v.Get("query")
		d, _ := v.Get("documents")
		if q == nil || d == nil {
			return nil, schemaErrorf(v.Pos, "calls_rerank: query and documents are required")
		}
		call.query, call.input = q.Str, rpStrings(d)
		if k, ok := v.Get("top_k"); ok {
			call.topK = int(k.Int)
		}
	} else {
		return nil, schemaErrorf(nf.Pos, "node %s: calls_embed or calls_rerank is required", call.node)
	}
	sf, ok := cv.Get("stores_response_in")
	if !ok {
		return nil, schemaErrorf(cv.Pos, "stores_response_in: missing")
	}
	call.field = sf.Str
	if cfg, ok := cv.Get("config"); ok {
		if err := rpConfig(cfg, call); err != nil {
			return nil, err
		}
	}
	if mv, ok := body.Get(mockKey); ok {
		for _, it := range mv.Items {
			s, err := lpParseScripted(it, []string{"status", "body", "headers"}, mockKey+"[]")
			if err != nil {
				return nil, err
			}
			call.mocks = append(call.mocks, s)
		}
	}
	modelOverride := ""
	if m, ok := cv.Get("model"); ok {
		modelOverride = m.Str
	}
	return call, rpFactory(body, call, modelOverride)
}

func rpStrings(v *Value) []string {
	if v == nil {
		return nil
	}
	out := make([]string, 0, len(v.Items))
	for _, it := range v.Items {
		out = append(out, it.Str)
	}
	return out
}

func rpConfig(v *Value, call *rpCall) error {
	keys := []string{"extras", "return_documents"}
	if call.embed {
		keys = []string{"extras", "input_type", "dimensions"}
	}
	if err := hcStrictKeys(v, "config", keys...); err != nil {
		return err
	}
	var extras map[string]any
	if e, ok := v.Get("extras"); ok {
		extras, _ = e.Native().(map[string]any)
	}
	if call.embed {
		call.ecfg.Extras = extras
		if it, ok := v.Get("input_type"); ok {
			call.ecfg.InputType = retrieval.InputType(it.Str)
		}
		if d, ok := v.Get("dimensions"); ok {
			call.ecfg.Dimensions = int(d.Int)
		}
		return nil
	}
	call.rcfg.Extras = extras
	if rd, ok := v.Get("return_documents"); ok {
		call.rcfg.ReturnDocuments = rd.Bool
	}
	return nil
}

// rpFactory picks the mapping's constructor from the case's
// construction block.
func rpFactory(body *Value, call *rpCall, modelOverride string) error {
	kind := "rerank"
	if call.embed {
		kind = "embedding"
	}
	str := func(k string) string {
		if call.prov == nil {
			return ""
		}
		v, _ := call.prov.Get(k)
		if v == nil {
			return ""
		}
		return v.Str
	}
	num := func(k string) int {
		if call.prov == nil {
			return 0
		}
		v, _ := call.prov.Get(k)
		if v == nil {
			return 0
		}
		return int(v.Int)
	}
	if call.mapping != "harness" {
		pv, ok := body.Get(call.mapping + "_" + kind + "_provider")
		if !ok {
			return schemaErrorf(body.Pos, "%s_%s_provider: missing for mapping %s", call.mapping, kind, call.mapping)
		}
		if err := hcStrictKeys(pv, call.mapping+"_"+kind+"_provider", rpProviderKeys...); err != nil {
			return err
		}
		call.prov = pv
		call.model = str("model")
	}
	if modelOverride != "" {
		call.model = modelOverride
	}
	client := func(rt http.RoundTripper) *http.Client { return &http.Client{Transport: rt} }
	base, key, chunk := str("base_url"), str("api_key"), num("chunk_size")
	switch call.mapping + "/" + kind {
	case "harness/embedding":
		if call.model == "" {
			call.model = rpHarnessModel(call.mocks, "text-embedding-test")
		}
		call.newEmbed = func(rt http.RoundTripper) (retrieval.EmbeddingProvider, error) {
			return rpopenai.New(rpopenai.Config{BaseURL: rpHarnessBase, Model: call.model, HTTPClient: client(rt)})
		}
	case "harness/rerank":
		if call.model == "" {
			call.model = rpHarnessModel(call.mocks, "rerank-test")
		}
		call.newRank = func(rt http.RoundTripper) (retrieval.RerankProvider, error) {
			return &rpHarnessReranker{model: call.model, rt: rt.(*rpTransport)}, nil
		}
	case "tei/embedding":
		prompts := map[retrieval.InputType]string{}
		if pm, ok := call.prov.Get("input_type_prompt_map"); ok {
			for _, f := range pm.Fields {
				prompts[retrieval.InputType(f.Key)] = f.Value.Str
			}
		}
		call.newEmbed = func(rt http.RoundTripper) (retrieval.EmbeddingProvider, error) {
			return tei.NewEmbedder(tei.Config{BaseURL: base, Model: call.model, ChunkSize: chunk, PromptNames: prompts,
				QueryPrefix: str("query_prefix"), DocumentPrefix: str("document_prefix"), APIKey: key, HTTPClient: client(rt)})
		}
	case "tei/rerank":
		call.newRank = func(rt http.RoundTripper) (retrieval.RerankProvider, error) {
			return tei.NewReranker(tei.Config{BaseURL: base, Model: call.model, ChunkSize: chunk, APIKey: key, HTTPClient: client(rt)})
		}
	case "jina/embedding":
		call.newEmbed = func(rt http.RoundTripper) (retrieval.EmbeddingProvider, error) {
			return jina.NewEmbedder(jina.Config{BaseURL: base, Model: call.model, APIKey: key, HTTPClient: client(rt)})
		}
	case "jina/rerank":
		call.newRank = func(rt http.RoundTripper) (retrieval.RerankProvider, error) {
			return jina.NewReranker(jina.Config{BaseURL: base, Model: call.model, APIKey: key, HTTPClient: client(rt)})
		}
	case "openai/embedding":
		call.newEmbed = func(rt http.RoundTripper) (retrieval.EmbeddingProvider, error) {
			return rpopenai.New(rpopenai.Config{BaseURL: base, Model: call.model, APIKey: key, ChunkSize: chunk,
				QueryPrefix: str("query_prefix"), DocumentPrefix: str("document_prefix"), HTTPClient: client(rt)})
		}
	case "cohere/embedding":
		call.newEmbed = func(rt http.RoundTripper) (retrieval.EmbeddingProvider, error) {
			return cohere.NewEmbedder(cohere.Config{BaseURL: base, Model: call.model, APIKey: key, ChunkSize: chunk, HTTPClient: client(rt)})
		}
	case "cohere/rerank":
		call.newRank = func(rt http.RoundTripper) (retrieval.RerankProvider, error) {
			return cohere.NewReranker(cohere.Config{BaseURL: base, Model: call.model, APIKey: key, HTTPClient: client(rt)})
		}
	default:
		return notImplemented("retrieval-provider " + call.mapping + " " + kind + " mapping")
	}
	return nil
}

// rpHarnessModel is the model the harness-internal mock answers with.
func rpHarnessModel(mocks []lpScripted, def string) string {
	for _, m := range mocks {
		var w struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(m.body, &w) == nil && w.Model != "" {
			return w.Model
		}
	}
	return def
}

// rpRun performs the call against a fresh transport; record stores the
// outcome on call (otherwise only the wire is kept, for the byte-identity
// reruns).
func rpRun(ctx context.Context, call *rpCall, ecfg retrieval.EmbeddingConfig, rcfg retrieval.RerankConfig, record bool) error {
	rt := &rpTransport{mocks: call.mocks}
	if call.embed {
		p, err := call.newEmbed(rt)
		if err != nil {
			return fmt.Errorf("building the %s mapping: %w", call.mapping, err)
		}
		var events []retrieval.EmbeddingEvent
		p = retrieval.ObserveEmbeddings(p, func(_ context.Context, e retrieval.EmbeddingEvent) { events = append(events, e) })
		resp, err := p.Embed(ctx, call.input, ecfg)
		if record {
			call.eresp, call.err, call.eevents = resp, err, events
		}
	} else {
		p, err := call.newRank(rt)
		if err != nil {
			return fmt.Errorf("building the %s mapping: %w", call.mapping, err)
		}
		var events []retrieval.RerankEvent
		p = retrieval.ObserveReranks(p, func(_ context.Context, e retrieval.RerankEvent) { events = append(events, e) })
		resp, err := p.Rerank(ctx, retrieval.RerankRequest{Query: call.query, Documents: call.input, TopK: call.topK, Config: rcfg})
		if record {
			call.rresp, call.err, call.revents = resp, err, events
		}
	}
	if record {
		call.wire, call.served = rt.record, rt.next
	} else {
		call.rerun = rt.record
	}
	return nil
}

// record is the state-field value the node stored: the response as a
// record, with the derived keys fixtures assert (vectors_length,
// inner_vector_lengths_all_equal, results_length). A failed call stores
// nothing (null).
func (c *rpCall) record() any {
	if c.eresp != nil {
		r := c.eresp
		vecs := make([]any, len(r.Vectors))
		all := any(nil)
		for i, v := range r.Vectors {
			vecs[i] = anySlice(v)
			if i == 0 {
				all = len(v)
			} else if all != len(v) {
				all = false
			}
		}
		return map[string]any{"vectors": vecs, "vectors_length": len(r.Vectors), "dimensions": r.Dimensions,
			"inner_vector_lengths_all_equal": all, "model": r.Model, "response_id": nilIfEmpty(r.ResponseID),
			"usage": embedUsage(r.Usage), "raw": rpJSON(r.Raw)}
	}
	if c.rresp != nil {
		r := c.rresp
		res := make([]any, len(r.Results))
		for i, s := range r.Results {
			var doc any
			if s.Document != nil {
				doc = *s.Document
			}
			res[i] = map[string]any{"index": s.Index, "relevance_score": s.RelevanceScore, "document": doc}
		}
		return map[string]any{"results": res, "results_length": len(res), "model": r.Model,
			"response_id": nilIfEmpty(r.ResponseID), "usage": rerankUsage(r.Usage), "raw": rpJSON(r.Raw)}
	}
	return nil
}

func anySlice(v []float64) []any {
	out := make([]any, len(v))
	for i, f := range v {
		out[i] = f
	}
	return out
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func embedUsage(u *retrieval.EmbeddingUsage) any {
	if u == nil {
		return nil
	}
	return map[string]any{"input_tokens": u.InputTokens}
}

func rerankUsage(u *retrieval.RerankUsage) any {
	if u == nil {
		return nil
	}
	ptr := func(p *int) any {
		if p == nil {
			return nil
		}
		return *p
	}
	return map[string]any{"search_units": ptr(u.SearchUnits), "input_tokens": ptr(u.InputTokens)}
}

// rpJSON decodes JSON for comparison.
func rpJSON(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	return v
}

// rpExpectWire checks the wire directives.
func rpExpectWire(body *Value, call *rpCall) error {
	m := newMatcher()
	if v, ok := body.Get("expected_wire_request"); ok {
		wants := []*Value{v}
		if v.Kind == KindList {
			wants = v.Items
		}
		if len(call.wire) < len(wants) {
			return fmt.Errorf("expected_wire_request: want %d requests, got %d", len(wants), len(call.wire))
		}
		for i, w := range wants {
			if err := m.match(fmt.Sprintf("wire_request[%d]", i), w.Native(), rpJSON(call.wire[i].Body), exact); err != nil {
				return err
			}
		}
	}
	if v, ok := body.Get("expected_wire_request_absent_keys"); ok {
		for _, k := range v.Items {
			for i, w := range call.wire {
				if _, present := w.JSON[k.Str]; present {
					return fmt.Errorf("wire_request[%d]: key %q must be absent", i, k.Str)
				}
			}
		}
	}
	if v, ok := body.Get("expected_wire_request_count"); ok && int(v.Int) != len(call.wire) {
		return fmt.Errorf("expected_wire_request_count: want %d, got %d", v.Int, len(call.wire))
	}
	if v, ok := body.Get("expected_wire_headers"); ok {
		for i, w := range call.wire {
			for _, f := range v.Fields {
				if got := w.Header.Get(f.Key); got != f.Value.Str {
					return fmt.Errorf("wire_request[%d]: header %s = %q, want %q", i, f.Key, llm.Redact(got), llm.Redact(f.Value.Str))
				}
			}
		}
	}
	if v, ok := body.Get("expected_wire_url"); ok {
		if len(call.wire) == 0 || call.wire[0].URL != v.Str {
			return fmt.Errorf("expected_wire_url: want %s, got %v", v.Str, rpURLs(call.wire))
		}
	}
	return nil
}

func rpURLs(w []rpWire) []string {
	out := make([]string, len(w))
	for i, x := range w {
		out[i] = x.URL
	}
	return out
}

// rpExpectError checks expected_error against the call's outcome.
func rpExpectError(body *Value, call *rpCall) error {
	ee, ok := body.Get("expected_error")
	if !ok {
		if call.err != nil {
			return fmt.Errorf("%s raised unexpectedly: %w", call.node, call.err)
		}
		return nil
	}
	if err := hcStrictKeys(ee, "expected_error", "category", "raised_from"); err != nil {
		return err
	}
	if call.err == nil {
		return fmt.Errorf("expected_error: the call succeeded")
	}
	if c, ok := ee.Get("category"); ok {
		if got := errcat.Of(call.err); string(got) != c.Str {
			return fmt.Errorf("expected_error.category: want %s, got %s (%v)", c.Str, got, call.err)
		}
		var pe *llm.ProviderError
		if !errors.As(call.err, &pe) {
			return fmt.Errorf("expected_error: %v is not an *llm.ProviderError", call.err)
		}
	}
	if r, ok := ee.Get("raised_from"); ok && r.Str != call.node {
		return fmt.Errorf("expected_error.raised_from: want %s, got %s", r.Str, call.node)
	}
	return nil
}

// rpExpectObservers checks the typed-event collector.
func rpExpectObservers(body, obs *Value, call *rpCall, m *matcher) error {
	names := map[string]bool{}
	if to, ok := body.Get("typed_observers"); ok {
		for _, o := range to.Items {
			if err := hcStrictKeys(o, "typed_observers[]", "name", "kind"); err != nil {
				return err
			}
			k, _ := o.Get("kind")
			if k == nil || k.Str != "typed_event_collector" {
				return &DirectiveUnknownError{Name: "typed_observers kind", Pos: o.Pos}
			}
			n, _ := o.Get("name")
			names[n.Str] = true
		}
	}
	for _, f := range obs.Fields {
		if !names[f.Key] {
			return schemaErrorf(f.Pos, "observers.%s: no such typed observer", f.Key)
		}
		if err := hcStrictKeys(f.Value, "observers."+f.Key, "contains_event"); err != nil {
			return err
		}
		ce, _ := f.Value.Get("contains_event")
		if err := hcStrictKeys(ce, "contains_event", "event_type", "fields"); err != nil {
			return err
		}
		et, _ := ce.Get("event_type")
		fields, _ := ce.Get("fields")
		var last error = fmt.Errorf("observers.%s: no %s event", f.Key, et.Str)
		for _, ev := range call.events() {
			if ev["event_type"] != et.Str {
				continue
			}
			if last = m.match("observers."+f.Key, fields.Native(), ev, subsetTop); last == nil {
				break
			}
		}
		if last != nil {
			return last
		}
	}
	return nil
}

// events returns the typed events of the call as records (graph-engine
// §6 EmbeddingEvent / RerankEvent and their failed variants).
func (c *rpCall) events() []map[string]any {
	var out []map[string]any
	for _, e := range c.eevents {
		rec := map[string]any{"event_type": "EmbeddingEvent", "node_name": c.node, "request_params": e.RequestParams,
			"model": e.Model, "usage": nil, "response_id": nil}
		if e.Err != nil {
			rec["event_type"] = "EmbeddingFailedEvent"
		} else {
			rec["usage"], rec["response_id"] = embedUsage(e.Response.Usage), nilIfEmpty(e.Response.ResponseID)
		}
		out = append(out, rec)
	}
	for _, e := range c.revents {
		rec := map[string]any{"event_type": "RerankEvent", "node_name": c.node, "request_params": e.RequestParams,
			"model": e.Model, "usage": nil, "response_id": nil}
		if e.Err != nil {
			rec["event_type"] = "RerankFailedEvent"
		} else {
			rec["usage"], rec["response_id"] = rerankUsage(e.Response.Usage), nilIfEmpty(e.Response.ResponseID)
		}
		out = append(out, rec)
	}
	return out
}

// rpHarnessReranker answers the harness-internal rerank mock shape of
// fixtures 006-012 ({id, model, results: [{index, relevance_score,
// document?}], meta.billed_units.search_units}), which no §8 mapping
// speaks: it reads the scripted answers directly and decodes them with
// the Jina results decoder (the same results shape: validation, echo
// shapes, sorting), taking id and search units from the harness fields.
type rpHarnessReranker struct {
	model string
	rt    *rpTransport
}

func (h *rpHarnessReranker) Model() string               { return h.model }
func (h *rpHarnessReranker) Ready(context.Context) error { return nil }

func (h *rpHarnessReranker) Rerank(_ context.Context, req retrieval.RerankRequest) (*retrieval.RerankResponse, error) {
	if err := retrieval.ValidateRerank("harness", req); err != nil {
		return nil, err
	}
	h.rt.mu.Lock()
	if h.rt.next >= len(h.rt.mocks) {
		h.rt.mu.Unlock()
		return nil, &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "harness", Op: "rerank", Message: "no scripted response left"}
	}
	s := h.rt.mocks[h.rt.next]
	h.rt.next++
	h.rt.mu.Unlock()
	if s.status/100 != 2 {
		cat := errcat.ProviderInvalidRequest
		switch {
		case s.status == 404:
			cat = errcat.ProviderInvalidModel
		case s.status == 429:
			cat = errcat.ProviderRateLimit
		case s.status >= 500:
			cat = errcat.ProviderUnavailable
		}
		return nil, &llm.ProviderError{Cat: cat, Provider: "harness", Op: "rerank", StatusCode: s.status}
	}
	resp, err := jina.DecodeRerank(s.body, len(req.Documents), req.TopK, h.model)
	if err != nil {
		return nil, err
	}
	var w struct {
		ID   string `json:"id"`
		Meta struct {
			BilledUnits struct {
				SearchUnits json.RawMessage `json:"search_units"`
			} `json:"billed_units"`
		} `json:"meta"`
	}
	_ = json.Unmarshal(s.body, &w)
	resp.ResponseID = w.ID
	if su := llm.ParseCounter(w.Meta.BilledUnits.SearchUnits); su != nil {
		if resp.Usage == nil {
			resp.Usage = &retrieval.RerankUsage{}
		}
		resp.Usage.SearchUnits = su
	}
	return resp, nil
}

// rpLower normalizes a wire value for invariant names: lower case,
// non-alphanumerics as underscores.
func rpLower(v any) string {
	s := strings.ToLower(fmt.Sprint(v))
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
