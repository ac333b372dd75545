package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
	"github.com/armature-go/armature/llm/retrieval"
	"github.com/armature-go/armature/observe/otelobserver"
	"github.com/armature-go/armature/prompt"
)

// The LLM and tool part of the observability suite: nodes that call a
// model (calls_llm) through the real llm.Complete and an OpenAI-compatible
// provider pointed at a scripted mock server (mock_llm, mock_llm_stream),
// nodes that run a tool through graph.CallTool (calls_tool), the OTel
// observer's LLM flags, typed-event collectors (typed_observers) and the
// expectations over what they saw. splitObsLLM takes these directives out
// of a case before the graph-engine parser sees it; obsLLM then installs
// them into the built case and checks the expectations.

var (
	// obsLLMCaseKeys are the case keys handled here.
	obsLLMCaseKeys = vocab("mock_llm mock_llm_stream disable_llm_spans disable_provider_payload " +
		"disable_genai_semconv provider typed_observers enable_metrics " +
		"mock_embedding mock_rerank prompt_backend render_variables caller_global_otel_active")
	// obsLLMSpanKeys are the span_tree keys checked here.
	obsLLMSpanKeys = vocab("attributes_present attribute_parses_as_messages attribute_truncation " +
		"attribute_does_not_contain attribute_parses_as_object")
	// obsLLMNodeKeys are the node directives handled here.
	obsLLMNodeKeys = vocab("calls_llm calls_tool calls_llm_from_wrapper calls_embed calls_rerank also_emits_via_global_tracer")
	// obsStepKeys are the node directives that become engine steps (the
	// order a calls_* directive keeps among them).
	obsStepKeys = vocab("update update_pure update_from_field update_pure_from_state raises emits_log flaky " +
		"sleep_ms explicit_save_session suspend_with_descriptor conditional_suspend invoke_drain_events_for " +
		"flaky_by_index flaky_instance_only")
	callsLLMKeys     = vocab("messages stores_response_in model config stream response_schema tools retry response")
	callsGlobalKeys  = vocab("span_name")
	callsToolKeys    = vocab("tool_name tool_call_id arguments mock_tool stores_result_in")
	callsWrapperKeys = vocab("phase messages model config")
	llmConfigKeys    = vocab("temperature max_tokens top_p seed frequency_penalty presence_penalty stop_sequences extras")
)

// defaultModel is the model a calls_llm without model: is bound to.
// Fixture mismatch absorption: the suite never declares the bound model.
// The span fixtures (005, 019, 144) expect "test-model", also when the
// response reports a more specific version of it; the typed-event
// fixtures expect "gpt-test", which their responses report when they
// report a model at all (050, 069) and which streamed ones (111, 118)
// never name. So: the scripted responses' model, "test-model" for any
// version of it, else "gpt-test" in a typed-event or streamed case (117
// expects it of its span and its Langfuse generation) and "test-model"
// in the others (090).
func (ol *obsLLM) defaultModel() string {
	for _, s := range ol.mock {
		for _, b := range append([][]byte{s.body}, s.stream...) {
			var top struct {
				Model string `json:"model"`
			}
			if json.Unmarshal(b, &top) != nil || top.Model == "" {
				continue
			}
			if strings.HasPrefix(top.Model, "test-model") {
				return "test-model"
			}
			return top.Model
		}
	}
	if len(ol.collectors) == 0 && !ol.streamed {
		return "test-model"
	}
	return "gpt-test"
}

// obsCallDir is one calls_llm / calls_tool / calls_llm_from_wrapper
// directive of a node.
type obsCallDir struct {
	tool bool
	// kind is the directive (calls_llm, calls_embed, ...; "render" for a
	// node that only renders a prompt).
	kind string
	// render is the node's renders_prompt / renders_prompt_group, bound
	// around the call (obs_prompt.go); nil without one.
	render *obsRender
	// phase is the wrapper phase (pre or post) of calls_llm_from_wrapper:
	// the call is made by a middleware around the node, not its body.
	phase string
	// at is the number of engine steps before it in its node.
	at int
	v  *Value
	// global is the span name of also_emits_via_global_tracer (obs_global.go).
	global string
}

// obsLLM is the LLM part of one observability case.
type obsLLM struct {
	mock       []lpScripted
	cfg        otelobserver.Config
	collectors []string
	// filters are the collectors' event-type filters (filter_event_type).
	filters map[string]string
	// globalOTel, globalTree and noOAGlobal are the caller's global
	// tracer provider and its expectations (obs_global.go).
	globalOTel             bool
	globalTree, noOAGlobal *Value
	// withMeta are the collectors opting in to the caller metadata
	// snapshot (include_caller_metadata): in Go every typed call event
	// carries it (graph.CallSource.Metadata, an immutable mapping shared,
	// not copied, so it costs nothing), and an observer opts in by
	// reading it; a collector that does not reads null (052).
	withMeta map[string]bool
	calls    map[Pos][]*obsCallDir
	// expectations
	observers, llmAttrs, llmAttrsAbsent, noLLMSpan, nodeErr, respUsage *Value
	invariants                                                         []*Field
	// spanTree is the unstripped span_tree (with the keys checked here).
	spanTree *Value
	// expectedError is the case's expected_error, checked here against
	// the derived category (below).
	expectedError *Value
	// spanExtras: span_tree has keys checked here.
	spanExtras bool
	// lead counts the metadata steps at the start of each node (set from
	// obsMeta.lead); langfuse marks a case with a Langfuse observer.
	lead map[*geNode]int
	// streamed: the case scripts streamed responses, which never name a
	// model (111-118 expect gpt-test).
	streamed bool
	// hasMetrics: the case sets enable_metrics (a metric capture is
	// attached, also when metrics are off); metrics is expected.metrics.
	hasMetrics bool
	metrics    *Value
	// embedMocks and rerankMocks are the scripted retrieval answers;
	// prompts the prompt backend and render variables (obs_embed.go,
	// obs_prompt.go).
	embedMocks, rerankMocks   []lpScripted
	embedRaises, rerankRaises []*obsRaise
	prompts                   *obsPrompts
}

// nullableRecords rewrites state fields declared {type: record, default:
// null} as type any. Fixture mismatch absorption: observability 092 and
// 093 store a tool's mapping result in a record field defaulting to
// null, which the engine's dict type rejects at compile time; the field
// only receives the result.
func nullableRecords(state *Value) *Value {
	fields, ok := state.Get("fields")
	if state.Kind != KindMap || !ok || fields.Kind != KindMap {
		return state
	}
	nf := &Value{Kind: KindMap, Pos: fields.Pos}
	for _, f := range fields.Fields {
		t, _ := f.Value.Get("type")
		d, hasDefault := f.Value.Get("default")
		if t != nil && t.Str == "record" && hasDefault && d.IsNull() {
			f = &Field{Key: f.Key, Pos: f.Pos, Value: &Value{Kind: KindMap, Pos: f.Value.Pos, Fields: []*Field{
				{Key: "type", Pos: t.Pos, Value: &Value{Kind: KindString, Pos: t.Pos, Str: "any"}},
				{Key: "default", Pos: d.Pos, Value: d},
			}}}
		}
		nf.Fields = append(nf.Fields, f)
	}
	out := &Value{Kind: KindMap, Pos: state.Pos}
	for _, f := range state.Fields {
		if f.Key == "fields" {
			f = &Field{Key: f.Key, Pos: f.Pos, Value: nf}
		}
		out.Fields = append(out.Fields, f)
	}
	return out
}

// splitObsLLM returns c with the LLM directives taken out and the part
// they describe (nil when the case has none).
func splitObsLLM(c *Case) (*Case, *obsLLM, error) {
	body := c.Body
	if body.Kind != KindMap {
		return c, nil, nil
	}
	ol := &obsLLM{calls: map[Pos][]*obsCallDir{}}
	used := false
	out := &Value{Kind: KindMap, Pos: body.Pos}
	for _, f := range body.Fields {
		if _, ok := obsLLMCaseKeys[f.Key]; ok {
			used = true
			if err := ol.caseKey(f); err != nil {
				return nil, nil, err
			}
			continue
		}
		v := f.Value
		switch f.Key {
		case "nodes", "subgraph", "subgraphs":
			wrapped := &Value{Kind: KindMap, Pos: v.Pos, Fields: []*Field{{Key: f.Key, Pos: f.Pos, Value: v}}}
			nv, err := ol.stripCalls(wrapped)
			if err == nil {
				nv = nv.Fields[0].Value
			}
			if err != nil {
				return nil, nil, err
			}
			v = nv
		case "expected_error":
			ol.expectedError = v
		case "state":
			v = nullableRecords(v)
		case "expected":
			nv, err := ol.stripExpect(v)
			if err != nil {
				return nil, nil, err
			}
			v = nv
		}
		out.Fields = append(out.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: v})
	}
	if body == c.Body && !used && len(ol.calls) == 0 && ol.observers == nil && !ol.spanExtras && len(ol.invariants) == 0 &&
		ol.llmAttrs == nil && ol.llmAttrsAbsent == nil && ol.noLLMSpan == nil && ol.nodeErr == nil && ol.respUsage == nil &&
		ol.metrics == nil {
		return c, nil, nil
	}
	if ol.expectedError != nil {
		out.Fields = slices.DeleteFunc(out.Fields, func(f *Field) bool { return f.Key == "expected_error" })
	}
	nc := *c
	nc.Body = out
	return &nc, ol, nil
}

func (ol *obsLLM) caseKey(f *Field) error {
	v := f.Value
	switch f.Key {
	case "mock_embedding", "mock_rerank", "prompt_backend", "render_variables":
		return ol.retrievalCaseKey(f)
	case "mock_llm":
		if v.Kind != KindList {
			return schemaErrorf(v.Pos, "mock_llm must be a list")
		}
		for _, it := range v.Items {
			s, err := lpParseScripted(it, []string{"status", "body", "headers"}, "mock_llm[]")
			if err != nil {
				return err
			}
			ol.mock = append(ol.mock, s)
		}
	case "mock_llm_stream":
		ol.streamed = true
		if v.Kind != KindList {
			return schemaErrorf(v.Pos, "mock_llm_stream must be a list of chunk lists")
		}
		for _, call := range v.Items {
			s, err := streamScript(call)
			if err != nil {
				return err
			}
			ol.mock = append(ol.mock, s...)
		}
	case "enable_metrics":
		if v.Kind != KindBool {
			return schemaErrorf(v.Pos, "enable_metrics must be a bool")
		}
		ol.cfg.EnableMetrics = v.Bool
		ol.hasMetrics = true
	case "caller_global_otel_active":
		if v.Kind != KindBool {
			return schemaErrorf(v.Pos, "caller_global_otel_active must be a bool")
		}
		ol.globalOTel = v.Bool
	case "disable_llm_spans", "disable_provider_payload", "disable_genai_semconv":
		if v.Kind != KindBool {
			return schemaErrorf(v.Pos, "%s must be a bool", f.Key)
		}
		switch f.Key {
		case "disable_llm_spans":
			ol.cfg.DisableLLMSpans = v.Bool
		case "disable_provider_payload":
			ol.cfg.CaptureProviderPayload = !v.Bool
		default:
			ol.cfg.DisableGenAISemconv = v.Bool
		}
	case "provider":
		if err := hcStrictKeys(v, "provider", "type", "genai_system"); err != nil {
			return err
		}
		if t, ok := v.Get("type"); ok && t.Str != "openai_compatible" {
			return notImplemented(capObs + " provider type " + t.Str)
		}
		if s, ok := v.Get("genai_system"); ok {
			ol.cfg.GenAISystem = s.Str
		}
	case "typed_observers":
		if v.Kind != KindList {
			return schemaErrorf(v.Pos, "typed_observers must be a list")
		}
		for _, o := range v.Items {
			if err := hcStrictKeys(o, "typed_observers[]", "name", "kind", "filter_event_type", "retains_arrival_order", "include_caller_metadata"); err != nil {
				return err
			}
			if im, ok := o.Get("include_caller_metadata"); ok {
				if im.Kind != KindBool {
					return schemaErrorf(im.Pos, "include_caller_metadata must be a bool")
				}
				if n, _ := o.Get("name"); im.Bool && n != nil {
					if ol.withMeta == nil {
						ol.withMeta = map[string]bool{}
					}
					ol.withMeta[n.Str] = true
				}
			}
			if k, _ := o.Get("kind"); k == nil || k.Str != "typed_event_collector" {
				return notImplemented(capObs + " typed observer kind")
			}
			n, _ := o.Get("name")
			if n == nil || n.Str == "" {
				return schemaErrorf(o.Pos, "typed observer needs a name")
			}
			ol.collectors = append(ol.collectors, n.Str)
			if ft, ok := o.Get("filter_event_type"); ok {
				if ol.filters == nil {
					ol.filters = map[string]string{}
				}
				ol.filters[n.Str] = ft.Str
			}
		}
	}
	return nil
}

// streamScript turns one call's entry into scripted responses: a chunk
// list, or {wire_attempts: [chunk list, ...]} for the attempts of a
// call-level retry. A chunk list starting with a failure marker {error:
// {status}} is that HTTP failure; a marker after chunks ends the stream
// there, without its terminator (a stream failing mid-way).
func streamScript(call *Value) ([]lpScripted, error) {
	if call.Kind == KindMap {
		if err := hcStrictKeys(call, "mock_llm_stream[]", "wire_attempts"); err != nil {
			return nil, err
		}
		wa, _ := call.Get("wire_attempts")
		if wa == nil || wa.Kind != KindList {
			return nil, schemaErrorf(call.Pos, "wire_attempts must be a list of chunk lists")
		}
		var out []lpScripted
		for _, a := range wa.Items {
			s, err := streamScript(a)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	}
	if call.Kind != KindList {
		return nil, schemaErrorf(call.Pos, "mock_llm_stream entries must be chunk lists")
	}
	cur := lpScripted{status: 200, streamBody: true}
	for _, ch := range call.Items {
		if e, ok := ch.Get("error"); ok {
			st, _ := e.Get("status")
			if st == nil || st.Kind != KindInt {
				return nil, schemaErrorf(e.Pos, "stream failure marker needs status")
			}
			if len(cur.stream) > 0 {
				return []lpScripted{cur}, nil
			}
			return []lpScripted{{status: int(st.Int), body: []byte(`{"error":{"message":"mock failure"}}`)}}, nil
		}
		data, err := json.Marshal(ch.Native())
		if err != nil {
			return nil, schemaErrorf(ch.Pos, "mock_llm_stream chunk: %v", err)
		}
		cur.stream = append(cur.stream, data)
	}
	cur.stream = append(cur.stream, []byte("[DONE]"))
	return []lpScripted{cur}, nil
}

// stripCalls removes calls_llm and calls_tool from every node of a
// nodes, subgraph or subgraphs value (at any depth), recording them by
// the node's position.
func (ol *obsLLM) stripCalls(v *Value) (*Value, error) {
	switch v.Kind {
	case KindList:
		out := &Value{Kind: KindList, Pos: v.Pos}
		for _, it := range v.Items {
			nv, err := ol.stripCalls(it)
			if err != nil {
				return nil, err
			}
			out.Items = append(out.Items, nv)
		}
		return out, nil
	case KindMap:
	default:
		return v, nil
	}
	out := &Value{Kind: KindMap, Pos: v.Pos}
	for _, f := range v.Fields {
		val := f.Value
		if f.Key == "nodes" && val.Kind == KindMap {
			nodes := &Value{Kind: KindMap, Pos: val.Pos}
			for _, nf := range val.Fields {
				nn, err := ol.stripNode(nf)
				if err != nil {
					return nil, err
				}
				nodes.Fields = append(nodes.Fields, nn)
			}
			out.Fields = append(out.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: nodes})
			continue
		}
		nv, err := ol.stripCalls(val)
		if err != nil {
			return nil, err
		}
		out.Fields = append(out.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: nv})
	}
	return out, nil
}

func (ol *obsLLM) stripNode(nf *Field) (*Field, error) {
	n := nf.Value
	if n.Kind != KindMap {
		return nf, nil
	}
	out := &Value{Kind: KindMap, Pos: n.Pos}
	steps := 0
	var render *obsRender
	var dirs []*obsCallDir
	for _, d := range n.Fields {
		if d.Key == "renders_prompt" || d.Key == "renders_prompt_group" {
			if render != nil {
				return nil, schemaErrorf(d.Pos, "a node renders at most one prompt or prompt group")
			}
			r, err := parseRender(d)
			if err != nil {
				return nil, err
			}
			render = r
			continue
		}
		if _, ok := obsLLMNodeKeys[d.Key]; ok {
			keys, strict := callDirKeys(d.Key)
			if d.Value.Kind != KindMap {
				return nil, schemaErrorf(d.Value.Pos, "%s must be a mapping", d.Key)
			}
			for _, k := range d.Value.Fields {
				if _, ok := keys[k.Key]; !ok {
					if strict {
						return nil, &DirectiveUnknownError{Name: d.Key + "." + k.Key, Pos: k.Pos}
					}
					return nil, notImplemented(fmt.Sprintf("%s %s.%s", capObs, d.Key, k.Key))
				}
			}
			dir := &obsCallDir{tool: d.Key == "calls_tool", kind: d.Key, at: steps, v: d.Value}
			dirs = append(dirs, dir)
			if d.Key == "also_emits_via_global_tracer" {
				n, _ := d.Value.Get("span_name")
				if n == nil || n.Kind != KindString || n.Str == "" {
					return nil, schemaErrorf(d.Value.Pos, "also_emits_via_global_tracer.span_name must be a non-empty string")
				}
				dir.global = n.Str
			}
			if d.Key == "calls_llm_from_wrapper" {
				ph, _ := d.Value.Get("phase")
				if ph == nil || (ph.Str != "pre" && ph.Str != "post") {
					return nil, schemaErrorf(d.Value.Pos, "calls_llm_from_wrapper.phase must be pre or post")
				}
				dir.phase = ph.Str
			}
			ol.calls[nf.Pos] = append(ol.calls[nf.Pos], dir)
			continue
		}
		if _, ok := obsStepKeys[d.Key]; ok {
			steps++
		}
		nv, err := ol.stripCalls(d.Value)
		if err != nil {
			return nil, err
		}
		out.Fields = append(out.Fields, &Field{Key: d.Key, Pos: d.Pos, Value: nv})
	}
	if render != nil {
		if len(dirs) == 0 {
			dir := &obsCallDir{kind: "render", at: 0, v: n}
			dirs = append(dirs, dir)
			ol.calls[nf.Pos] = append(ol.calls[nf.Pos], dir)
		}
		for _, d := range dirs {
			d.render = render
		}
	}
	return &Field{Key: nf.Key, Pos: nf.Pos, Value: out}, nil
}

// stripExpect takes the expectations handled here out of expected.
func (ol *obsLLM) stripExpect(e *Value) (*Value, error) {
	if e.Kind != KindMap {
		return e, nil
	}
	out := &Value{Kind: KindMap, Pos: e.Pos}
	for _, f := range e.Fields {
		v := f.Value
		if f.Key == "span_tree_private" {
			f = &Field{Key: "span_tree", Pos: f.Pos, Value: v} // the private provider's (obs_global.go)
		}
		switch f.Key {
		case "span_tree_global":
			ol.globalTree = v
			continue
		case "no_openarmature_spans_on_global":
			if v.Kind != KindBool {
				return nil, schemaErrorf(v.Pos, "no_openarmature_spans_on_global must be a bool")
			}
			ol.noOAGlobal = v
			continue
		case "observers":
			ol.observers = v
			continue
		case "llm_span_attributes":
			ol.llmAttrs = v
			continue
		case "llm_span_attributes_absent":
			ol.llmAttrsAbsent = v
			continue
		case "no_llm_provider_span":
			ol.noLLMSpan = v
			continue
		case "node_completed_event_carries_error":
			ol.nodeErr = v
			continue
		case "response_usage":
			ol.respUsage = v
			continue
		case "metrics":
			ol.metrics = v
			continue
		case "invariants":
			if v.Kind == KindMap {
				rest := &Value{Kind: KindMap, Pos: v.Pos}
				for _, inv := range v.Fields {
					if _, ok := obsLLMInvariants[inv.Key]; ok {
						ol.invariants = append(ol.invariants, inv)
					} else {
						rest.Fields = append(rest.Fields, inv)
					}
				}
				if len(rest.Fields) == 0 {
					continue
				}
				v = rest
			}
		case "span_tree":
			ol.spanTree = v
			v = stripSpanKeys(v, &ol.spanExtras)
		}
		out.Fields = append(out.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: v})
	}
	return out, nil
}

// stripSpanKeys returns a span list without the keys checked here,
// setting *found when it removed any.
func stripSpanKeys(v *Value, found *bool) *Value {
	if v.Kind != KindList {
		return v
	}
	out := &Value{Kind: KindList, Pos: v.Pos}
	for _, s := range v.Items {
		if s.Kind != KindMap {
			out.Items = append(out.Items, s)
			continue
		}
		ns := &Value{Kind: KindMap, Pos: s.Pos}
		for _, f := range s.Fields {
			if _, ok := obsLLMSpanKeys[f.Key]; ok {
				*found = true
				continue
			}
			val := f.Value
			if f.Key == "children" {
				val = stripSpanKeys(val, found)
			}
			ns.Fields = append(ns.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: val})
		}
		out.Items = append(out.Items, ns)
	}
	return out
}

// --- running -----------------------------------------------------------------

// obsLLMRun is the LLM part of a running case: the mock server, the
// collectors and what the nodes saw.
type obsLLMRun struct {
	ol   *obsLLM
	mock *lpMock

	// canned are the mock servers of calls_llm.response directives.
	canned []*lpMock
	// metricReader captures the §11 measurements (nil without metrics).
	metricReader *sdkmetric.ManualReader
	// global is the caller's global tracer provider (obs_global.go).
	global *globalOTel

	mu        sync.Mutex
	events    map[string][]graph.Event
	responses []*llm.Response
	provs     map[string]llm.Provider

	// embedRT and rerankRT serve the scripted retrieval answers; eresps
	// and rresps are the responses the calls_embed / calls_rerank nodes
	// received, renders the prompts the nodes rendered.
	embedRT, rerankRT *rpTransport
	eresps            []*retrieval.EmbeddingResponse
	rresps            []*retrieval.RerankResponse
	rreqs             []retrieval.RerankRequest
	// all are the typed call events of the run, seen by an observer of
	// the harness's own (the invariants of cases without a collector).
	all     []graph.Event
	renders []*prompt.Result
}

// setup starts the mock server, configures the span_tree OTel observer
// and installs the call directives into the built case's nodes.
func (ol *obsLLM) setup(x *geExec) (*obsLLMRun, error) {
	if ol == nil {
		return nil, nil
	}
	r := &obsLLMRun{ol: ol, events: map[string][]graph.Event{}, provs: map[string]llm.Provider{}}
	r.mock = &lpMock{capabilities: map[string]any{}, responses: ol.mock}
	r.mock.srv = httptest.NewServer(http.HandlerFunc(r.mock.serve))
	r.retrievalProviders()
	if ol.globalOTel {
		r.global = installGlobalOTel()
	}
	if c, ok := x.otel.captures[implicitOTel]; ok {
		err := c.configure(func(cfg *otelobserver.Config) {
			tp := cfg.TracerProvider
			*cfg = ol.cfg
			cfg.TracerProvider = tp
			cfg.Logger = slog.New(slog.DiscardHandler)
			if ol.hasMetrics || ol.metrics != nil {
				r.metricReader, cfg.MeterProvider = newMetricCapture()
			}
		})
		if err != nil {
			return r, err
		}
	}
	installed := 0
	for _, g := range append([]*geGraph{x.gc.outer}, sortedGraphs(x.gc.subgraphs)...) {
		for _, n := range g.nodes {
			dirs := ol.calls[n.pos]
			inBody := 0
			for _, d := range dirs {
				if d.render != nil {
					if err := ol.prompts.check(d.render); err != nil {
						return r, err
					}
				}
				st, err := r.step(d)
				if err != nil {
					return r, err
				}
				installed++
				if d.phase != "" {
					n.mws = append(n.mws, &mwSpec{typ: "calls_llm_from_wrapper", pos: d.v.Pos, custom: wrapperCall(d.phase, st.custom)})
					continue
				}
				at := min(d.at+inBody+ol.lead[n], len(n.steps))
				n.steps = slices.Insert(n.steps, at, st)
				inBody++
			}
		}
	}
	want := 0
	for _, d := range ol.calls {
		want += len(d)
	}
	if installed != want {
		return r, notImplemented(capObs + " calls_* in a node the suite cannot locate")
	}
	return r, nil
}

func (r *obsLLMRun) close() {
	if r == nil {
		return
	}
	r.global.restore()
	for _, m := range append([]*lpMock{r.mock}, r.canned...) {
		if m != nil {
			m.close()
		}
	}
}

// maxCannedCalls bounds how often a calls_llm with a canned response may
// run (once per fan-out instance or branch).
const maxCannedCalls = 64

// cannedProvider returns a provider answering every call with the
// directive's response text (calls_llm.response, 038), from a mock of
// its own.
func (r *obsLLMRun) cannedProvider(model string, v *Value) (llm.Provider, error) {
	if v.Kind != KindString {
		return nil, schemaErrorf(v.Pos, "calls_llm.response must be a string")
	}
	body, _ := json.Marshal(map[string]any{"id": "canned", "object": "chat.completion", "model": model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": v.Str}, "finish_reason": "stop"}}})
	m := &lpMock{capabilities: map[string]any{}}
	for range maxCannedCalls {
		m.responses = append(m.responses, lpScripted{status: 200, body: body})
	}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	r.mu.Lock()
	r.canned = append(r.canned, m)
	r.mu.Unlock()
	return openai.New(openai.Config{BaseURL: m.url() + "/v1", APIKey: "sk-conformance-key", Model: model})
}

// attach registers the typed-event collectors on the outermost graph.
func (r *obsLLMRun) attach(x *geExec) error {
	if r == nil {
		return nil
	}
	if err := r.attachAll(x); err != nil {
		return err
	}
	for _, name := range r.ol.collectors {
		name := name
		filter := r.ol.filters[name]
		obs := func(_ context.Context, ev graph.Event) error {
			if filter != "" && eventType(ev) != filter {
				return nil
			}
			r.mu.Lock()
			r.events[name] = append(r.events[name], ev)
			r.mu.Unlock()
			return nil
		}
		if _, err := x.outer.AddObserver(obs); err != nil {
			return fmt.Errorf("registering typed observer %s: %w", name, err)
		}
	}
	return nil
}

// provider returns the OpenAI-compatible provider bound to model.
func (r *obsLLMRun) provider(model string) (llm.Provider, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.provs[model]; ok {
		return p, nil
	}
	p, err := openai.New(openai.Config{BaseURL: r.mock.url() + "/v1", APIKey: "sk-conformance-key", Model: model})
	if err != nil {
		return nil, err
	}
	r.provs[model] = p
	return p, nil
}

// step builds the engine step of a directive.
func (r *obsLLMRun) step(d *obsCallDir) (*geStep, error) {
	if d.global != "" {
		return globalStep(d), nil
	}
	switch d.kind {
	case "calls_embed":
		return r.embedStep(d)
	case "calls_rerank":
		return r.rerankStep(d)
	case "render":
		return r.renderStep(d)
	}
	if d.tool {
		if d.render != nil {
			return nil, notImplemented(capObs + " calls_tool in a node that renders a prompt")
		}
		return r.toolStep(d.v)
	}
	_, hasMessages := d.v.Get("messages")
	req, model, store, err := llmRequest(d.v, r.ol.defaultModel())
	if err != nil {
		return nil, err
	}
	var p llm.Provider
	if canned, ok := d.v.Get("response"); ok {
		p, err = r.cannedProvider(model, canned)
	} else {
		p, err = r.provider(model)
	}
	if err != nil {
		return nil, err
	}
	return &geStep{kind: stepCustom, pos: d.v.Pos, custom: func(ctx context.Context, _ graph.State, upd graph.Update) error {
		req := req
		if d.render != nil {
			bound, res, err := r.bindPrompt(ctx, d)
			if err != nil {
				return err
			}
			ctx = bound
			if !hasMessages {
				// A calls_llm without messages sends the rendered prompt.
				rq := *req
				rq.Messages = res.Messages
				req = &rq
			}
		}
		resp, err := llm.Complete(ctx, p, req)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.responses = append(r.responses, resp)
		r.mu.Unlock()
		if store != "" {
			var v any = resp.Message.Text()
			if len(resp.Parsed) > 0 {
				_ = json.Unmarshal(resp.Parsed, &v)
			}
			upd[store] = v
		}
		return nil
	}}, nil
}

// wrapperCall is the middleware of calls_llm_from_wrapper: it makes the
// call before (pre) or after (post) the node.
func wrapperCall(phase string, call func(ctx context.Context, s graph.State, upd graph.Update) error) graph.Middleware {
	return graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		if phase == "pre" {
			if err := call(ctx, s, graph.Update{}); err != nil {
				return nil, err
			}
			return next(ctx, s)
		}
		u, err := next(ctx, s)
		if err != nil {
			return nil, err
		}
		return u, call(ctx, s, graph.Update{})
	})
}

// llmRequest builds a calls_llm request.
func llmRequest(v *Value, model string) (req *llm.Request, _, store string, err error) {
	req = &llm.Request{}
	for _, f := range v.Fields {
		switch f.Key {
		case "messages":
			msgs, err := synthMessages(f.Value)
			if err != nil {
				return nil, "", "", err
			}
			data, _ := json.Marshal(msgs)
			if e := json.Unmarshal(data, &req.Messages); e != nil {
				return nil, "", "", schemaErrorf(f.Value.Pos, "calls_llm.messages: %v", e)
			}
		case "stores_response_in":
			store = f.Value.Str
		case "phase", "response":
		case "model":
			model = f.Value.Str
		case "stream":
			req.Stream = f.Value.Bool
		case "response_schema":
			req.ResponseSchema, _ = json.Marshal(f.Value.Native())
		case "retry":
			pol, e := lpRetry(f.Value)
			if e != nil {
				return nil, "", "", e
			}
			req.Retry = pol
		case "tools":
			// The OpenAI wire shape {type: function, function: {...}}
			// is unwrapped to the §4 tool record.
			tools, _ := f.Value.Native().([]any)
			for i, t := range tools {
				if m, ok := t.(map[string]any); ok && m["function"] != nil {
					tools[i] = m["function"]
				}
			}
			data, _ := json.Marshal(tools)
			if e := json.Unmarshal(data, &req.Tools); e != nil {
				return nil, "", "", schemaErrorf(f.Value.Pos, "calls_llm.tools: %v", e)
			}
		case "config":
			for _, c := range f.Value.Fields {
				if _, ok := llmConfigKeys[c.Key]; !ok {
					return nil, "", "", &DirectiveUnknownError{Name: "calls_llm.config." + c.Key, Pos: c.Pos}
				}
			}
			cfg, e := lpConfig(f.Value)
			if e != nil {
				return nil, "", "", e
			}
			req.Config = cfg
		}
	}
	if req.Messages == nil {
		// Fixture mismatch absorption: 038's calls_llm gives only a model
		// and a canned response; a request needs a message (llm-provider
		// §3), so the call sends one.
		req.Messages = []llm.Message{llm.UserText("ping")}
	}
	return req, model, store, nil
}

// synthMessages expands the fixtures' payload synthesizers:
// content_repeat {char, bytes} and an image source's
// base64_data_synthetic {bytes}.
func synthMessages(v *Value) (any, error) {
	n := v.Native()
	var walk func(x any) (any, error)
	walk = func(x any) (any, error) {
		switch t := x.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, val := range t {
				switch k {
				case "content_repeat":
					m, _ := val.(map[string]any)
					ch, _ := m["char"].(string)
					cnt, ok := toInt(m["bytes"])
					if ch == "" || !ok {
						return nil, schemaErrorf(v.Pos, "content_repeat needs char and bytes")
					}
					out["content"] = strings.Repeat(ch, cnt/len(ch))
				case "base64_data_synthetic":
					m, _ := val.(map[string]any)
					cnt, ok := toInt(m["bytes"])
					if !ok {
						return nil, schemaErrorf(v.Pos, "base64_data_synthetic needs bytes")
					}
					raw := make([]byte, cnt/4*3)
					out["base64_data"] = base64.StdEncoding.EncodeToString(raw)
				default:
					w, err := walk(val)
					if err != nil {
						return nil, err
					}
					out[k] = w
				}
			}
			return out, nil
		case []any:
			out := make([]any, len(t))
			for i, e := range t {
				w, err := walk(e)
				if err != nil {
					return nil, err
				}
				out[i] = w
			}
			return out, nil
		}
		return x, nil
	}
	return walk(n)
}

func toInt(v any) (int, bool) {
	switch n := normalize(v).(type) {
	case int64:
		return int(n), true
	case float64:
		return int(n), n == float64(int(n))
	}
	return 0, false
}

// toolError is a mock tool's failure with its declared error type.
type toolError struct{ typ, msg string }

func (e *toolError) Error() string     { return e.msg }
func (e *toolError) ErrorType() string { return e.typ }

func (r *obsLLMRun) toolStep(v *Value) (*geStep, error) {
	call := graph.ToolCall{}
	var store string
	var returns any
	var raise *toolError
	for _, f := range v.Fields {
		switch f.Key {
		case "tool_name":
			call.Name = f.Value.Str
		case "tool_call_id":
			if f.Value.Kind != KindString {
				return nil, notImplemented(capObs + " calls_tool.tool_call_id reference")
			}
			call.ID = f.Value.Str
		case "arguments":
			call.Arguments = f.Value.Native()
		case "stores_result_in":
			store = f.Value.Str
		case "mock_tool":
			if err := hcStrictKeys(f.Value, "mock_tool", "returns", "raises"); err != nil {
				return nil, err
			}
			if rv, ok := f.Value.Get("returns"); ok {
				returns = rv.Native()
			}
			if rv, ok := f.Value.Get("raises"); ok {
				if err := hcStrictKeys(rv, "mock_tool.raises", "error_type", "message"); err != nil {
					return nil, err
				}
				raise = &toolError{}
				if t, ok := rv.Get("error_type"); ok {
					raise.typ = t.Str
				}
				if m, ok := rv.Get("message"); ok {
					raise.msg = m.Str
				}
			}
		}
	}
	return &geStep{kind: stepCustom, pos: v.Pos, custom: func(ctx context.Context, _ graph.State, upd graph.Update) error {
		res, err := graph.CallTool(ctx, call, func(context.Context) (any, error) {
			if raise != nil {
				return nil, raise
			}
			return returns, nil
		})
		if err != nil {
			return err
		}
		if store != "" {
			upd[store] = res
		}
		return nil
	}}, nil
}

// --- assertions ----------------------------------------------------------------

// assert checks the LLM expectations of one invocation.
func (r *obsLLMRun) assert(m *matcher, run *obsRun) error {
	if r == nil {
		return nil
	}
	ol := r.ol
	var errs []error
	llmSpans := spansNamed(run.roots, otelobserver.LLMSpanName)
	errs = append(errs, r.assertGlobal(m))
	if ol.spanTree != nil && len(run.roots) == len(ol.spanTree.Items) {
		for i, w := range ol.spanTree.Items {
			errs = append(errs, checkSpanExtras(fmt.Sprintf("span_tree[%d]", i), w, run.roots[i]))
		}
	}
	if ol.noLLMSpan != nil {
		errs = append(errs, compareBool(ol.noLLMSpan, len(llmSpans) == 0, fmt.Sprintf("%d LLM spans", len(llmSpans))))
	}
	if ol.llmAttrs != nil || ol.llmAttrsAbsent != nil {
		if len(llmSpans) != 1 {
			errs = append(errs, fmt.Errorf("llm_span_attributes: want one LLM span, got %d", len(llmSpans)))
		} else {
			attrs := spanAttrs(llmSpans[0].span)
			if ol.llmAttrs != nil {
				errs = append(errs, m.match("llm_span_attributes", ol.llmAttrs.Native(), attrs, subsetTop))
			}
			if ol.llmAttrsAbsent != nil {
				for _, k := range ol.llmAttrsAbsent.Items {
					if v, ok := attrs[k.Str]; ok {
						errs = append(errs, fmt.Errorf("llm_span_attributes_absent: %s is %s", k.Str, formatValue(v)))
					}
				}
			}
		}
	}
	if ol.respUsage != nil {
		r.mu.Lock()
		resps := slices.Clone(r.responses)
		r.mu.Unlock()
		if len(resps) != 1 {
			errs = append(errs, fmt.Errorf("response_usage: want one response, got %d", len(resps)))
		} else {
			errs = append(errs, m.match("response_usage", ol.respUsage.Native(), usageView(resps[0].Usage, true), exact))
		}
	}
	if ol.nodeErr != nil {
		errs = append(errs, r.checkNodeErr(ol.nodeErr))
	}
	if ol.expectedError != nil {
		errs = append(errs, checkDerivedError(ol.expectedError, run))
	}
	if ol.observers != nil {
		errs = append(errs, r.checkObservers(m, ol.observers))
	}
	if ol.metrics != nil {
		obs, err := r.metricObservations()
		if err == nil {
			err = checkMetrics(m, ol.metrics, obs)
		}
		errs = append(errs, err)
	}
	env := &llmInvEnv{r: r, run: run, llmSpans: llmSpans}
	for _, f := range ol.invariants {
		if err := obsLLMInvariants[f.Key](env, f.Value); err != nil {
			errs = append(errs, fmt.Errorf("invariant %s: %w", f.Key, err))
		}
	}
	return errors.Join(errs...)
}

// spansNamed returns the spans named name in a forest, depth first.
func spansNamed(roots []*spanNode, name string) []*spanNode {
	var out []*spanNode
	walkSpans(roots, func(n *spanNode) {
		if n.span.Name == name {
			out = append(out, n)
		}
	})
	return out
}

// checkSpanExtras checks the span_tree keys handled here, walking the
// expected tree and the matched forest together.
func checkSpanExtras(path string, want *Value, got *spanNode) error {
	if want.Kind != KindMap {
		return nil
	}
	attrs := spanAttrs(got.span)
	var errs []error
	for _, f := range want.Fields {
		switch f.Key {
		case "attributes_present":
			for _, k := range f.Value.Items {
				if _, ok := attrs[k.Str]; !ok {
					errs = append(errs, fmt.Errorf("%s: attribute %s is absent", path, k.Str))
				}
			}
		case "attribute_parses_as_messages", "attribute_parses_as_object":
			for _, a := range f.Value.Fields {
				s, ok := attrs[a.Key].(string)
				if !ok {
					errs = append(errs, fmt.Errorf("%s: attribute %s is not a string", path, a.Key))
					continue
				}
				var got any
				if err := json.Unmarshal([]byte(s), &got); err != nil {
					errs = append(errs, fmt.Errorf("%s: attribute %s does not parse: %v", path, a.Key, err))
					continue
				}
				if !llm.JSONEqual(normJSON(a.Value.Native()), got) {
					errs = append(errs, fmt.Errorf("%s: attribute %s parses to %s, want %s", path, a.Key, s, formatValue(a.Value.Native())))
				}
			}
		case "attribute_does_not_contain":
			for _, a := range f.Value.Fields {
				s, _ := attrs[a.Key].(string)
				for _, sub := range a.Value.Items {
					if sub.Str != "" && strings.Contains(s, sub.Str) {
						errs = append(errs, fmt.Errorf("%s: attribute %s contains %q", path, a.Key, sub.Str))
					}
				}
			}
		case "attribute_truncation":
			for _, a := range f.Value.Fields {
				errs = append(errs, checkTruncation(path, a, attrs))
			}
		case "children":
			if len(f.Value.Items) == len(got.children) {
				for i, c := range f.Value.Items {
					errs = append(errs, checkSpanExtras(fmt.Sprintf("%s.children[%d]", path, i), c, got.children[i]))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// normJSON round-trips a fixture value through JSON.
func normJSON(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func checkTruncation(path string, a *Field, attrs map[string]any) error {
	s, ok := attrs[a.Key].(string)
	if !ok {
		return fmt.Errorf("%s: attribute %s is absent", path, a.Key)
	}
	for _, f := range a.Value.Fields {
		switch f.Key {
		case "max_bytes":
			if int64(len(s)) > f.Value.Int {
				return fmt.Errorf("%s: %s has %d bytes, over %d", path, a.Key, len(s), f.Value.Int)
			}
		case "marker_pattern":
			re, err := regexp.Compile(f.Value.Str)
			if err != nil {
				return schemaErrorf(f.Value.Pos, "marker_pattern: %v", err)
			}
			if !re.MatchString(s) {
				return fmt.Errorf("%s: %s does not end with the truncation marker", path, a.Key)
			}
		case "utf8_valid":
			if f.Value.Bool != utf8.ValidString(s) {
				return fmt.Errorf("%s: %s utf8_valid is %t", path, a.Key, !f.Value.Bool)
			}
		case "prefix_of_full_serialization":
			i := strings.LastIndex(s, "…[truncated, ")
			if i < 0 || !strings.HasPrefix(s, `[{"content":"`) {
				return fmt.Errorf("%s: %s is not a prefix of the message serialization", path, a.Key)
			}
		default:
			return &DirectiveUnknownError{Name: "attribute_truncation." + f.Key, Pos: f.Pos}
		}
	}
	return nil
}

// usageView is the fixture form of a usage record; full adds the cache
// counters even when unreported (null).
func usageView(u llm.Usage, full bool) map[string]any {
	ptr := func(p *int) any {
		if p == nil {
			return nil
		}
		return int64(*p)
	}
	out := map[string]any{"prompt_tokens": ptr(u.PromptTokens), "completion_tokens": ptr(u.CompletionTokens),
		"total_tokens": ptr(u.TotalTokens)}
	if full || u.CachedTokens != nil {
		out["cached_tokens"] = ptr(u.CachedTokens)
	}
	if full || u.CacheCreationTokens != nil {
		out["cache_creation_tokens"] = ptr(u.CacheCreationTokens)
	}
	return out
}

// eventType is the spec name of a typed event.
func eventType(ev graph.Event) string {
	switch ev.(type) {
	case *graph.LLMCompletionEvent:
		return "LlmCompletionEvent"
	case *graph.LLMFailedEvent:
		return "LlmFailedEvent"
	case *graph.LLMTokenEvent:
		return "LlmTokenEvent"
	case *graph.ToolCallEvent:
		return "ToolCallEvent"
	case *graph.ToolCallFailedEvent:
		return "ToolCallFailedEvent"
	case *graph.NodeEvent:
		return "NodeEvent"
	}
	if t, ok := retrievalEventType(ev); ok {
		return t
	}
	return fmt.Sprintf("%T", ev)
}

func sourceView(s *graph.CallSource) map[string]any {
	chainI := make([]any, len(s.FanOutIndexChain))
	for i, p := range s.FanOutIndexChain {
		if p != nil {
			chainI[i] = int64(*p)
		}
	}
	chainB := make([]any, len(s.BranchNameChain))
	for i, p := range s.BranchNameChain {
		if p != nil {
			chainB[i] = *p
		}
	}
	var fi, bn any
	if s.FanOutIndex != nil {
		fi = int64(*s.FanOutIndex)
	}
	if s.BranchName != nil {
		bn = *s.BranchName
	}
	ns := make([]any, len(s.Namespace))
	for i, n := range s.Namespace {
		ns[i] = n
	}
	return map[string]any{
		"invocation_id": s.InvocationID, "correlation_id": s.CorrelationID, "node_name": s.NodeName,
		"namespace": ns, "attempt_index": int64(s.AttemptIndex), "fan_out_index": fi, "branch_name": bn,
		"fan_out_index_chain": chainI, "branch_name_chain": chainB, "call_id": s.CallID,
		"caller_invocation_metadata": nil,
	}
}

func requestView(out map[string]any, q *graph.LLMRequest) {
	out["provider"], out["model"] = q.Provider, q.Model
	out["input_messages"] = normJSON(q.InputMessages)
	out["request_params"] = normalize(normJSON(q.Params))
	out["request_extras"] = normalize(normJSON(q.Extras))
	promptView(out, q.ActivePrompt, q.ActivePromptGroup)
	out["token_budget"] = budgetView(q.TokenBudget)
}

func responseView(out map[string]any, rs *graph.LLMResponse, withTools bool) {
	nilStr := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	if rs == nil {
		for _, k := range []string{"response_id", "response_model", "usage", "output_content", "finish_reason"} {
			out[k] = nil
		}
		return
	}
	out["response_id"], out["response_model"] = nilStr(rs.ResponseID), nilStr(rs.ResponseModel)
	out["usage"] = usageView(rs.Usage, false)
	out["finish_reason"] = nilStr(string(rs.FinishReason))
	out["output_content"] = nil
	if rs.OutputContent != nil {
		out["output_content"] = *rs.OutputContent
	}
	if withTools {
		out["output_tool_calls"] = nil
		if len(rs.OutputToolCalls) > 0 {
			calls := make([]any, len(rs.OutputToolCalls))
			for i, tc := range rs.OutputToolCalls {
				var args any
				_ = json.Unmarshal(tc.Arguments, &args)
				calls[i] = map[string]any{"id": tc.ID, "name": tc.Name, "arguments": normalize(args)}
			}
			out["output_tool_calls"] = calls
		}
	}
}

// eventView is the fixture field map of an event.
func eventView(ev graph.Event) map[string]any {
	switch e := ev.(type) {
	case *graph.LLMCompletionEvent:
		out := sourceView(&e.CallSource)
		requestView(out, &e.LLMRequest)
		responseView(out, &e.LLMResponse, true)
		out["latency_ms"] = e.LatencyMS
		return out
	case *graph.LLMFailedEvent:
		out := sourceView(&e.CallSource)
		requestView(out, &e.LLMRequest)
		responseView(out, e.Response, false)
		out["latency_ms"] = e.LatencyMS
		out["error_category"], out["error_message"] = string(e.ErrorCategory), e.ErrorMessage
		out["error_type"] = nil
		if e.ErrorType != "" {
			out["error_type"] = e.ErrorType
		}
		return out
	case *graph.LLMTokenEvent:
		out := sourceView(&e.CallSource)
		out["provider"], out["model"] = e.Provider, e.Model
		out["chunk_index"], out["delta_kind"], out["delta"] = int64(e.ChunkIndex), string(e.DeltaKind), e.Delta
		return out
	case *graph.ToolCallEvent:
		out := sourceView(&e.CallSource)
		out["tool_name"], out["tool_call_id"], out["arguments"] = e.ToolName, nilIfEmpty(e.ToolCallID), normalize(normJSON(e.Arguments))
		out["result"], out["latency_ms"] = normalize(normJSON(e.Result)), e.LatencyMS
		return out
	case *graph.ToolCallFailedEvent:
		out := sourceView(&e.CallSource)
		out["tool_name"], out["tool_call_id"], out["arguments"] = e.ToolName, nilIfEmpty(e.ToolCallID), normalize(normJSON(e.Arguments))
		out["error_type"], out["error_message"], out["latency_ms"] = nilIfEmpty(e.ErrorType), e.ErrorMessage, e.LatencyMS
		return out
	case *graph.NodeEvent:
		return map[string]any{"node_name": e.NodeName, "phase": string(e.Phase), "namespace": normalize(e.Namespace)}
	}
	if v := retrievalEventView(ev); v != nil {
		return v
	}
	return map[string]any{}
}

// typed returns the collector's events of one type.
func (r *obsLLMRun) typed(collector, typ string) ([]graph.Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs, ok := r.events[collector]
	if !ok && !slices.Contains(r.ol.collectors, collector) {
		return nil, fmt.Errorf("no typed observer %q", collector)
	}
	var out []graph.Event
	for _, ev := range evs {
		if typ == "" || eventType(ev) == typ {
			out = append(out, ev)
		}
	}
	return out, nil
}

// allTyped returns the events of one type across every collector's
// first-listed collector (they all see the same stream).
func (r *obsLLMRun) allTyped(typ string) []graph.Event {
	for _, c := range r.ol.collectors {
		if f := r.ol.filters[c]; f == "" || f == typ {
			evs, _ := r.typed(c, typ)
			return evs
		}
	}
	return nil
}

// collectorView is eventView as collector sees ev: with the caller
// metadata snapshot when it opted in.
func (r *obsLLMRun) collectorView(collector string, ev graph.Event) map[string]any {
	v := eventView(ev)
	if src, ok := graph.CallSourceOf(ev); ok && r.ol.withMeta[collector] {
		if mm := src.Metadata.Map(); mm != nil {
			v["caller_invocation_metadata"] = mm
		}
	}
	return v
}

func (r *obsLLMRun) checkObservers(m *matcher, v *Value) error {
	var errs []error
	for _, of := range v.Fields {
		name := of.Key
		for _, f := range of.Value.Fields {
			path := fmt.Sprintf("observers.%s.%s", name, f.Key)
			errs = append(errs, r.checkCollector(m, path, name, f))
		}
	}
	return errors.Join(errs...)
}

func (r *obsLLMRun) checkCollector(m *matcher, path, name string, f *Field) error {
	v := f.Value
	typeOf := func(v *Value) string {
		if t, ok := v.Get("event_type"); ok {
			return t.Str
		}
		return v.Str
	}
	count := func(typ string, want int64) error {
		evs, err := r.typed(name, typ)
		if err != nil {
			return err
		}
		if int64(len(evs)) != want {
			return fmt.Errorf("%s: want %d %s, got %d", path, want, typ, len(evs))
		}
		return nil
	}
	switch f.Key {
	case "contains_event":
		evs, err := r.typed(name, typeOf(v))
		if err != nil {
			return err
		}
		want, ok := v.Get("fields")
		if !ok {
			if len(evs) == 0 {
				return fmt.Errorf("%s: no %s event", path, typeOf(v))
			}
			return nil
		}
		var first error
		for _, ev := range evs {
			err := m.match(path, want.Native(), normalize(r.collectorView(name, ev)), subsetTop)
			if err == nil {
				return nil
			}
			if first == nil {
				first = err
			}
		}
		if first == nil {
			first = fmt.Errorf("%s: no %s event", path, typeOf(v))
		}
		return first
	case "contains_events_in_order":
		evs, err := r.typed(name, typeOf(v))
		if err != nil {
			return err
		}
		want, _ := v.Get("events")
		if len(want.Items) != len(evs) {
			return fmt.Errorf("%s: want %d %s events, got %d", path, len(want.Items), typeOf(v), len(evs))
		}
		for i, w := range want.Items {
			if err := m.match(fmt.Sprintf("%s[%d]", path, i), w.Native(), normalize(eventView(evs[i])), subsetTop); err != nil {
				return err
			}
		}
		return nil
	case "event_count", "contains_exactly_n_events_of_type":
		c, _ := v.Get("count")
		return count(typeOf(v), c.Int)
	case "event_counts":
		var errs []error
		for _, it := range v.Items {
			c, _ := it.Get("count")
			errs = append(errs, count(typeOf(it), c.Int))
		}
		return errors.Join(errs...)
	case "does_not_contain_event_of_type":
		return count(v.Str, 0)
	case "contains_exactly_one_event_of_type":
		return count(v.Str, 1)
	case "contains_event_of_type":
		evs, err := r.typed(name, v.Str)
		if err == nil && len(evs) == 0 {
			err = fmt.Errorf("%s: no %s event", path, v.Str)
		}
		return err
	case "captured_event_field_values_cover":
		fld, _ := v.Get("field")
		vals, _ := v.Get("values")
		evs, err := r.typed(name, "")
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, ev := range evs {
			if eventType(ev) == "NodeEvent" {
				continue
			}
			seen[formatValue(normalize(eventView(ev)[fld.Str]))] = true
		}
		for _, w := range vals.Items {
			if !seen[formatValue(normalize(w.Native()))] {
				return fmt.Errorf("%s: no event with %s = %s", path, fld.Str, formatValue(w.Native()))
			}
		}
		return nil
	case "sentinel_node_event_emission_is_impl_defined":
		// Informative (051): a sentinel-namespaced NodeEvent for the LLM
		// call may or may not be emitted; Armature emits none, so the
		// collector must hold no NodeEvent of that namespace but the
		// typed event alone.
		if v.Kind != KindBool {
			return schemaErrorf(v.Pos, "%s must be a bool", f.Key)
		}
		evs, err := r.typed(name, "NodeEvent")
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.(*graph.NodeEvent).NodeName == otelobserver.LLMSpanName {
				return fmt.Errorf("%s: a sentinel NodeEvent was emitted", path)
			}
		}
		return nil
	case "relative_order_of_events_matching":
		return r.checkRelativeOrder(m, path, name, v)
	case "every_captured_event_has":
		evs, err := r.typed(name, "")
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if eventType(ev) == "NodeEvent" {
				continue
			}
			if err := m.match(path, v.Native(), normalize(eventView(ev)), subsetTop); err != nil {
				return err
			}
		}
		return nil
	}
	return notImplemented(fmt.Sprintf("%s observers.%s", capObs, f.Key))
}

// checkNodeErr: the node's completed event carries the error category.
func (r *obsLLMRun) checkNodeErr(v *Value) error {
	node, _ := v.Get("node_name")
	cat, _ := v.Get("error_category")
	if node == nil || cat == nil {
		return schemaErrorf(v.Pos, "node_completed_event_carries_error needs node_name and error_category")
	}
	for _, ev := range r.allTyped("NodeEvent") {
		ne := ev.(*graph.NodeEvent)
		if ne.NodeName != node.Str || ne.Phase != graph.PhaseCompleted {
			continue
		}
		if ne.Err == nil {
			return fmt.Errorf("node_completed_event_carries_error: %s completed without an error", node.Str)
		}
		got, _ := errcat.Derived(ne.Err)
		if string(got) != cat.Str && string(ne.ErrorCategory) != cat.Str {
			return fmt.Errorf("node_completed_event_carries_error: %s failed with %s (%s), want %s", node.Str, got, ne.ErrorCategory, cat.Str)
		}
		return nil
	}
	return fmt.Errorf("node_completed_event_carries_error: no completed event of %s", node.Str)
}

// checkDerivedError checks expected_error{category, raised_from} of an
// LLM case: the category is the error's derived category
// (pipeline-utilities §6.4, the outermost non-carrier: a provider
// category the node's call raised), node_exception for an uncategorized
// raise.
func checkDerivedError(want *Value, run *obsRun) error {
	if err := hcStrictKeys(want, "expected_error", "category", "raised_from"); err != nil {
		return err
	}
	if run.Err == nil {
		return fmt.Errorf("expected_error: the invocation completed")
	}
	if c, ok := want.Get("category"); ok {
		got, _ := errcat.Derived(run.Err)
		if got == "" {
			got = errcat.Of(run.Err)
		}
		if string(got) != c.Str {
			return fmt.Errorf("expected_error.category: want %s, got %s (%v)", c.Str, got, run.Err)
		}
	}
	if rf, ok := want.Get("raised_from"); ok {
		var ne *graph.NodeError
		if !errors.As(run.Err, &ne) || (ne.Node != rf.Str && (len(ne.Namespace) == 0 || ne.Namespace[0] != rf.Str)) {
			return fmt.Errorf("expected_error.raised_from: want %s, got %v", rf.Str, run.Err)
		}
	}
	return nil
}

// lastResponse returns the last response a calls_llm node received.
func (r *obsLLMRun) lastResponse() *llm.Response {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.responses) == 0 {
		return nil
	}
	return r.responses[len(r.responses)-1]
}

// metricObservations reads the metric capture (none without one).
func (r *obsLLMRun) metricObservations() ([]metricObs, error) {
	if r.metricReader == nil {
		return nil, nil
	}
	return collectMetrics(r.metricReader)
}

// checkRelativeOrder: the collector's events matching filter have
// exactly the expected_order sequence (each entry a subset of an event's
// fields plus event_type).
func (r *obsLLMRun) checkRelativeOrder(m *matcher, path, name string, v *Value) error {
	if err := hcStrictKeys(v, "relative_order_of_events_matching", "filter", "expected_order"); err != nil {
		return err
	}
	filter, _ := v.Get("filter")
	order, _ := v.Get("expected_order")
	evs, err := r.typed(name, "")
	if err != nil {
		return err
	}
	var got []map[string]any
	for _, ev := range evs {
		view := normalize(eventView(ev)).(map[string]any)
		view["event_type"] = eventType(ev)
		if filter == nil || m.match(path, filter.Native(), view, subsetTop) == nil {
			got = append(got, view)
		}
	}
	if len(got) != len(order.Items) {
		return fmt.Errorf("%s: %d matching events, want %d", path, len(got), len(order.Items))
	}
	for i, w := range order.Items {
		if err := m.match(fmt.Sprintf("%s[%d]", path, i), w.Native(), got[i], subsetTop); err != nil {
			return err
		}
	}
	return nil
}
