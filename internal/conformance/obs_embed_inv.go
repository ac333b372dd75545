package conformance

import (
	"fmt"
	"slices"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// The invariants of the embedding, rerank, active-prompt and token-budget
// fixtures (each defined by its fixture's .md).

const (
	embedSpan  = otelobserver.EmbeddingSpanName
	rerankSpan = otelobserver.RerankSpanName
)

func init() {
	counts := func(want map[string]int) obsLLMInvariant {
		return pred(func(env *llmInvEnv) (bool, string) {
			for typ, n := range want {
				if got := len(env.r.allTyped(typ)); got != n {
					return false, fmt.Sprintf("%d %s events, want %d", got, typ, n)
				}
			}
			return true, ""
		})
	}
	one := func(typ string) obsLLMInvariant { return counts(map[string]int{typ: 1}) }
	zero := func(typ string) obsLLMInvariant { return counts(map[string]int{typ: 0}) }
	budgetInstruments := []string{otelobserver.MetricTokenBudgetExceeded, otelobserver.MetricTokenBudgetUtilization}
	for name, f := range map[string]obsLLMInvariant{
		"exactly_one_embedding_event_observed":        one("EmbeddingEvent"),
		"exactly_one_embedding_failed_event_observed": one("EmbeddingFailedEvent"),
		"zero_embedding_events_on_failed_call":        zero("EmbeddingEvent"),
		"success_emits_one_event_zero_failures":       counts(map[string]int{"EmbeddingEvent": 1, "EmbeddingFailedEvent": 0}),
		"failure_emits_one_event_zero_successes":      counts(map[string]int{"EmbeddingFailedEvent": 1, "EmbeddingEvent": 0}),
		"exactly_one_rerank_event":                    one("RerankEvent"),
		"exactly_one_rerank_event_observed":           one("RerankEvent"),
		"exactly_one_rerank_failed_event":             one("RerankFailedEvent"),
		"exactly_one_rerank_failed_event_observed":    one("RerankFailedEvent"),
		"zero_rerank_success_events":                  zero("RerankEvent"),
		"zero_rerank_success_events_observed":         zero("RerankEvent"),
		"zero_rerank_failed_events":                   zero("RerankFailedEvent"),
		"exception_propagates_out_of_rerank_call":     invRunErrored,
		"call_ids_distinct_across_embedding_events":   invDistinctCallIDs("EmbeddingEvent", "EmbeddingFailedEvent"),
		"call_ids_distinct_across_rerank_events":      invDistinctCallIDs("RerankEvent", "RerankFailedEvent"),
		"all_call_ids_non_null":                       invCallIDs(false),

		"input_strings_match_input_list_verbatim":              invInputStrings,
		"input_count_matches_input_list_length":                invInputCount,
		"dimensions_matches_inner_vector_length":               invDimensions,
		"request_params_populated_with_caller_supplied_fields": invRetrievalParams(true),
		"request_params_empty_when_caller_supplied_none":       invRetrievalParams(false),
		"query_carried_verbatim":                               invRerankRequest("query"),
		"documents_carried_verbatim":                           invRerankRequest("documents"),
		"document_count_matches_input":                         invRerankRequest("document_count"),
		"top_k_matches_caller_supplied_value":                  invRerankRequest("top_k"),
		"top_k_null_when_caller_passed_none":                   invRerankRequest("top_k_null"),
		"result_count_matches_response":                        invResultCount,

		"active_prompt_snapshot_matches_prompt_management_section_12_identity_attrs": invActivePrompt,
		"active_prompt_and_group_both_populated_inside_group_context":                invActiveGroup,

		"embedding_span_name_is_openarmature_embedding_complete": invProviderSpan(embedSpan),
		"rerank_span_name_is_openarmature_rerank_complete":       invProviderSpan(rerankSpan),
		"stable_genai_semconv_subset_emitted":                    invGenAISubset(embedSpan, "EmbeddingEvent"),
		"core_genai_semconv_subset_emitted":                      invGenAISubset(rerankSpan, "RerankEvent"),
		"operation_name_attribute_not_emitted_in_v1":             invNoOperationName,
		"usage_input_tokens_attribute_omitted_when_no_usage_record": invNoUsage(embedSpan, "EmbeddingEvent",
			"gen_ai.usage.input_tokens"),
		"rerank_usage_attributes_omitted_when_no_usage_record": invNoUsage(rerankSpan, "RerankEvent",
			"gen_ai.usage.input_tokens", otelobserver.AttrRerankSearchUnits),
		"input_tokens_emitted_when_provider_reports_it":   invRerankUsageAttr("gen_ai.usage.input_tokens", "input_tokens", true),
		"input_tokens_omitted_when_provider_reports_none": invRerankUsageAttr("gen_ai.usage.input_tokens", "input_tokens", false),
		"search_units_emitted_when_provider_reports_it":   invRerankUsageAttr(otelobserver.AttrRerankSearchUnits, "search_units", true),
		"search_units_omitted_when_provider_reports_none": invRerankUsageAttr(otelobserver.AttrRerankSearchUnits, "search_units", false),

		"span_omits_both_input_usage_attributes":                            attrsAbsent(llmSpan, "openarmature.llm.usage.prompt_tokens", "gen_ai.usage.input_tokens"),
		"exceeded_span_signal_absent_not_false":                             attrsAbsent(llmSpan, otelobserver.AttrLLMTokenBudgetExceeded),
		"exceeded_span_signal_absent_not_false_when_only_bound_unevaluable": invExceededAbsentDeclared,
		"token_budget_null_on_completion_event":                             invBudgetNull,
		"token_budget_populated_but_not_evaluated_without_usage":            invBudgetNotEvaluated,
		"input_bound_not_evaluated_when_prompt_tokens_null":                 invInputBoundSkipped,
		"null_prompt_tokens_reaches_no_span_histogram_or_budget_surface":    invNullPromptTokens,
	} {
		obsLLMInvariants[name] = f
	}
	for name, f := range map[string]func(obs []metricObs) (bool, string){
		"embedding_records_input_token_only": func(obs []metricObs) (bool, string) {
			in, out := countOp(obs, otelobserver.MetricTokenUsage, otelobserver.OperationEmbeddings, "input"), countTokens(obs, "output")
			return in == 1 && out == 0, fmt.Sprintf("%d input, %d output embedding token observations", in, out)
		},
		"no_output_token_observation_for_embedding": func(obs []metricObs) (bool, string) {
			n := countTokens(obs, "output")
			return n == 0, fmt.Sprintf("%d output token observations", n)
		},
		"rerank_records_input_token_when_reported": func(obs []metricObs) (bool, string) {
			n := countOp(obs, otelobserver.MetricTokenUsage, otelobserver.OperationRerank, "input")
			return n == 1, fmt.Sprintf("%d rerank input token observations", n)
		},
		"rerank_operation_dimension_is_rerank": func(obs []metricObs) (bool, string) {
			for _, o := range obs {
				if o.dims[otelobserver.DimOperation] != otelobserver.OperationRerank {
					return false, fmt.Sprintf("%s observed with operation %v", o.instrument, o.dims[otelobserver.DimOperation])
				}
			}
			return len(obs) > 0, "no observations"
		},
		"no_token_usage_observation_when_search_units_only":  noInstrument(otelobserver.MetricTokenUsage),
		"no_token_usage_observation_when_usage_absent":       noInstrument(otelobserver.MetricTokenUsage),
		"duration_recorded_for_rerank":                       durationOf(otelobserver.OperationRerank, false),
		"duration_recorded_when_usage_absent":                durationOf("", false),
		"errored_rerank_records_duration_with_error_type":    durationOf(otelobserver.OperationRerank, true),
		"errored_embedding_records_duration_with_error_type": durationOf(otelobserver.OperationEmbeddings, true),
		"no_token_budget_exceeded_observation_when_under_budget": func(obs []metricObs) (bool, string) {
			e, u := countInstrument(obs, otelobserver.MetricTokenBudgetExceeded), countInstrument(obs, otelobserver.MetricTokenBudgetUtilization)
			return e == 0 && u > 0, fmt.Sprintf("%d exceeded, %d utilization observations", e, u)
		},
		"utilization_records_under_budget": func(obs []metricObs) (bool, string) {
			for _, o := range obs {
				if o.instrument != otelobserver.MetricTokenBudgetUtilization {
					continue
				}
				if f, ok := o.value.(float64); ok && f <= 1 {
					return true, ""
				}
			}
			return false, "no utilization observation at or under 1"
		},
		"no_token_budget_instrument_observations_when_no_budget":             noInstrument(budgetInstruments...),
		"no_token_budget_instrument_observations_without_usage":              noInstrument(budgetInstruments...),
		"no_token_budget_instrument_observation_for_unevaluable_input_bound": noBudgetKind("input"),
		"no_input_kind_budget_observation_when_prompt_tokens_null":           noBudgetKind("input"),
		"no_input_token_usage_observation": func(obs []metricObs) (bool, string) {
			n := countTokens(obs, "input")
			return n == 0, fmt.Sprintf("%d input token observations", n)
		},
		"total_bound_evaluated_when_total_tokens_sound": func(obs []metricObs) (bool, string) {
			for _, o := range obs {
				if o.instrument == otelobserver.MetricTokenBudgetUtilization && o.dims[otelobserver.DimTokenBudgetKind] == "total" {
					return true, ""
				}
			}
			return false, "no total utilization observation"
		},
	} {
		obsLLMInvariants[name] = metricInvariant(f)
	}
}

// metricInvariant makes an invariant of a predicate over the captured
// observations.
func metricInvariant(f func(obs []metricObs) (bool, string)) obsLLMInvariant {
	return func(env *llmInvEnv, want *Value) error {
		obs, err := env.r.metricObservations()
		if err != nil {
			return err
		}
		ok, detail := f(obs)
		return compareBool(want, ok, detail)
	}
}

func countOp(obs []metricObs, instrument, op, tokenType string) int {
	n := 0
	for _, o := range obs {
		if o.instrument == instrument && o.dims[otelobserver.DimOperation] == op &&
			(tokenType == "" || o.dims[otelobserver.DimTokenType] == tokenType) {
			n++
		}
	}
	return n
}

func noInstrument(names ...string) func([]metricObs) (bool, string) {
	return func(obs []metricObs) (bool, string) {
		for _, o := range obs {
			if slices.Contains(names, o.instrument) {
				return false, fmt.Sprintf("%s observed %v", o.instrument, o.dims)
			}
		}
		return true, ""
	}
}

func noBudgetKind(kind string) func([]metricObs) (bool, string) {
	return func(obs []metricObs) (bool, string) {
		for _, o := range obs {
			if (o.instrument == otelobserver.MetricTokenBudgetExceeded || o.instrument == otelobserver.MetricTokenBudgetUtilization) &&
				o.dims[otelobserver.DimTokenBudgetKind] == kind {
				return false, fmt.Sprintf("%s observed for kind %s", o.instrument, kind)
			}
		}
		return true, ""
	}
}

// durationOf: exactly one duration observation of the operation ("" any),
// carrying error.type exactly when errored.
func durationOf(op string, errored bool) func([]metricObs) (bool, string) {
	return func(obs []metricObs) (bool, string) {
		var found []metricObs
		for _, o := range obs {
			if o.instrument == otelobserver.MetricOperationDuration && (op == "" || o.dims[otelobserver.DimOperation] == op) {
				found = append(found, o)
			}
		}
		if len(found) != 1 {
			return false, fmt.Sprintf("%d duration observations of %q", len(found), op)
		}
		_, has := found[0].dims[otelobserver.AttrErrorType]
		return has == errored, fmt.Sprintf("duration dimensions %v", found[0].dims)
	}
}

// retrievalEvents returns the typed events of the given types, in
// delivery order.
func (env *llmInvEnv) retrievalEvents(types ...string) []graph.Event {
	env.r.mu.Lock()
	defer env.r.mu.Unlock()
	var out []graph.Event
	for _, ev := range env.r.all {
		if slices.Contains(types, eventType(ev)) {
			out = append(out, ev)
		}
	}
	return out
}

func views(evs []graph.Event) []map[string]any {
	out := make([]map[string]any, len(evs))
	for i, ev := range evs {
		out[i] = normalize(eventView(ev)).(map[string]any)
	}
	return out
}

func invDistinctCallIDs(types ...string) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		evs := env.retrievalEvents(types...)
		seen := map[string]bool{}
		for _, v := range views(evs) {
			id, _ := v["call_id"].(string)
			if id == "" || seen[id] {
				return false, fmt.Sprintf("call_id %q empty or repeated", id)
			}
			seen[id] = true
		}
		return len(evs) > 1, fmt.Sprintf("%d events", len(evs))
	})
}

// wireInputs are the input lists the embedding mapping sent.
func (env *llmInvEnv) wireInputs() [][]any {
	r := env.r
	r.embedRT.mu.Lock()
	defer r.embedRT.mu.Unlock()
	var out [][]any
	for _, w := range r.embedRT.record {
		in, _ := w.JSON["input"].([]any)
		out = append(out, in)
	}
	return out
}

var invInputStrings = pred(func(env *llmInvEnv) (bool, string) {
	evs := views(env.retrievalEvents("EmbeddingEvent", "EmbeddingFailedEvent"))
	wire := env.wireInputs()
	if len(evs) == 0 || len(evs) != len(wire) {
		return false, fmt.Sprintf("%d embedding events, %d requests sent", len(evs), len(wire))
	}
	for i, v := range evs {
		if formatValue(v["input_strings"]) != formatValue(normalize(wire[i])) {
			return false, fmt.Sprintf("input_strings %v, sent %v", v["input_strings"], wire[i])
		}
	}
	return true, ""
})

var invInputCount = pred(func(env *llmInvEnv) (bool, string) {
	evs := views(env.retrievalEvents("EmbeddingEvent", "EmbeddingFailedEvent"))
	wire := env.wireInputs()
	if len(evs) == 0 || len(evs) != len(wire) {
		return false, fmt.Sprintf("%d embedding events, %d requests sent", len(evs), len(wire))
	}
	for i, v := range evs {
		strs, _ := v["input_strings"].([]any)
		if v["input_count"] != int64(len(strs)) || len(strs) != len(wire[i]) {
			return false, fmt.Sprintf("input_count %v for %d strings (%d sent)", v["input_count"], len(strs), len(wire[i]))
		}
	}
	return true, ""
})

var invDimensions = pred(func(env *llmInvEnv) (bool, string) {
	evs := views(env.retrievalEvents("EmbeddingEvent"))
	env.r.mu.Lock()
	resps := slices.Clone(env.r.eresps)
	env.r.mu.Unlock()
	if len(evs) == 0 || len(evs) != len(resps) {
		return false, fmt.Sprintf("%d embedding events, %d responses", len(evs), len(resps))
	}
	for i, v := range evs {
		vecs := resps[i].Vectors
		if len(vecs) == 0 || v["dimensions"] != int64(len(vecs[0])) {
			return false, fmt.Sprintf("dimensions %v, vectors %v", v["dimensions"], vecs)
		}
	}
	return true, ""
})

// retrievalParamKeys are the declared config fields of each operation.
var retrievalParamKeys = map[string][]string{
	"EmbeddingEvent": {"dimensions", "input_type"},
	"RerankEvent":    {"return_documents"},
}

// invRetrievalParams: the first embedding or rerank event's
// request_params carries only declared config fields, non-empty (or
// empty when none was supplied); an embedding's params are also on the
// wire.
func invRetrievalParams(populated bool) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		evs := env.retrievalEvents("EmbeddingEvent", "RerankEvent")
		if len(evs) == 0 {
			return false, "no embedding or rerank event"
		}
		typ := eventType(evs[0])
		v := views(evs[:1])[0]
		params, ok := v["request_params"].(map[string]any)
		if !ok {
			return false, fmt.Sprintf("request_params %v is not a mapping", v["request_params"])
		}
		if !populated {
			return len(params) == 0, fmt.Sprintf("request_params %v", params)
		}
		if len(params) == 0 {
			return false, "request_params is empty"
		}
		var sent map[string]any
		if typ == "EmbeddingEvent" {
			env.r.embedRT.mu.Lock()
			if len(env.r.embedRT.record) > 0 {
				sent = env.r.embedRT.record[0].JSON
			}
			env.r.embedRT.mu.Unlock()
		}
		for k, val := range params {
			if !slices.Contains(retrievalParamKeys[typ], k) {
				return false, "request_params carries " + k
			}
			if sent != nil && formatValue(normalize(sent[k])) != formatValue(val) {
				return false, fmt.Sprintf("request_params %s = %v, sent %v", k, val, sent[k])
			}
		}
		return true, ""
	})
}

// invRerankRequest compares the first rerank event with the request the
// provider received.
func invRerankRequest(what string) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		evs := views(env.retrievalEvents("RerankEvent", "RerankFailedEvent"))
		env.r.mu.Lock()
		reqs := slices.Clone(env.r.rreqs)
		env.r.mu.Unlock()
		if len(evs) == 0 || len(evs) != len(reqs) {
			return false, fmt.Sprintf("%d rerank events, %d requests", len(evs), len(reqs))
		}
		v, q := evs[0], reqs[0]
		switch what {
		case "query":
			return v["query"] == q.Query, fmt.Sprintf("query %v, sent %q", v["query"], q.Query)
		case "documents":
			return formatValue(v["documents"]) == formatValue(normalize(q.Documents)), fmt.Sprintf("documents %v, sent %v", v["documents"], q.Documents)
		case "document_count":
			return v["document_count"] == int64(len(q.Documents)), fmt.Sprintf("document_count %v for %d documents", v["document_count"], len(q.Documents))
		case "top_k":
			return q.TopK > 0 && v["top_k"] == int64(q.TopK), fmt.Sprintf("top_k %v, sent %d", v["top_k"], q.TopK)
		}
		return q.TopK == 0 && v["top_k"] == nil, fmt.Sprintf("top_k %v, sent %d", v["top_k"], q.TopK)
	})
}

var invResultCount = pred(func(env *llmInvEnv) (bool, string) {
	evs := views(env.retrievalEvents("RerankEvent"))
	env.r.mu.Lock()
	resps := slices.Clone(env.r.rresps)
	env.r.mu.Unlock()
	if len(evs) == 0 || len(evs) != len(resps) {
		return false, fmt.Sprintf("%d rerank events, %d responses", len(evs), len(resps))
	}
	for i, v := range evs {
		if v["result_count"] != int64(len(resps[i].Results)) {
			return false, fmt.Sprintf("result_count %v, %d results", v["result_count"], len(resps[i].Results))
		}
	}
	return true, ""
})

// callEvents are the typed call events that carry a prompt-context.
var callEvents = []string{"LlmCompletionEvent", "LlmFailedEvent", "EmbeddingEvent", "EmbeddingFailedEvent", "RerankEvent", "RerankFailedEvent"}

// invActivePrompt: every call event's active_prompt is the rendered
// prompt's identity, and the LLM span (when there is one) carries the
// same prompt-management §12 identity attributes.
var invActivePrompt = pred(func(env *llmInvEnv) (bool, string) {
	evs := views(env.retrievalEvents(callEvents...))
	env.r.mu.Lock()
	renders := slices.Clone(env.r.renders)
	env.r.mu.Unlock()
	if len(evs) == 0 || len(renders) == 0 {
		return false, fmt.Sprintf("%d call events, %d renders", len(evs), len(renders))
	}
	res := renders[len(renders)-1]
	want := map[string]any{"name": res.Name, "version": res.Version, "label": res.Label,
		"template_hash": res.TemplateHash, "rendered_hash": res.RenderedHash}
	for _, v := range evs {
		if formatValue(v["active_prompt"]) != formatValue(want) {
			return false, fmt.Sprintf("active_prompt %v, rendered %v", v["active_prompt"], want)
		}
	}
	if a := env.llmAttrs(); a != nil {
		for k, val := range want {
			if a["openarmature.prompt."+k] != val {
				return false, fmt.Sprintf("span openarmature.prompt.%s = %v, want %v", k, a["openarmature.prompt."+k], val)
			}
		}
	}
	return true, ""
})

var invActiveGroup = pred(func(env *llmInvEnv) (bool, string) {
	evs := views(env.retrievalEvents(callEvents...))
	if len(evs) == 0 {
		return false, "no call events"
	}
	for _, v := range evs {
		g, _ := v["active_prompt_group"].(map[string]any)
		if v["active_prompt"] == nil || g == nil || g["group_name"] == "" {
			return false, fmt.Sprintf("active_prompt %v, active_prompt_group %v", v["active_prompt"], v["active_prompt_group"])
		}
		if a := env.llmAttrs(); a != nil && a[otelobserver.AttrPromptGroupName] != g["group_name"] {
			return false, fmt.Sprintf("span group_name %v", a[otelobserver.AttrPromptGroupName])
		}
	}
	return true, ""
})

// invProviderSpan: exactly one span of the name, a child of the calling
// node's span.
func invProviderSpan(name string) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		var found []*spanNode
		var parents []*spanNode
		var walk func(parent *spanNode, ns []*spanNode)
		walk = func(parent *spanNode, ns []*spanNode) {
			for _, n := range ns {
				if n.span.Name == name {
					found, parents = append(found, n), append(parents, parent)
				}
				walk(n, n.children)
			}
		}
		walk(nil, env.run.roots)
		if len(found) != 1 {
			return false, fmt.Sprintf("%d %s spans", len(found), name)
		}
		p := parents[0]
		if p == nil || p.span.Name == otelobserver.InvocationSpanName {
			return false, name + " is not under a node span"
		}
		return true, ""
	})
}

// invGenAISubset: the provider span carries the recognized-core GenAI
// attributes its event supports (system, request and response model,
// response id when present).
func invGenAISubset(span, typ string) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		a := env.spanAttrsOf(span)
		evs := views(env.retrievalEvents(typ))
		if a == nil || len(evs) == 0 {
			return false, "no " + span + " span or " + typ
		}
		v := evs[0]
		want := map[string]any{"gen_ai.system": v["provider"], "gen_ai.request.model": v["model"],
			"gen_ai.response.model": v["response_model"], "gen_ai.response.id": v["response_id"]}
		for k, val := range want {
			if val == nil {
				if _, ok := a[k]; ok {
					return false, k + " set without a source"
				}
				continue
			}
			if a[k] != val {
				return false, fmt.Sprintf("%s = %v, want %v", k, a[k], val)
			}
		}
		return true, ""
	})
}

var invNoOperationName = pred(func(env *llmInvEnv) (bool, string) {
	n := 0
	for _, name := range []string{llmSpan, embedSpan, rerankSpan} {
		for _, s := range spansNamed(env.run.roots, name) {
			n++
			if v, ok := spanAttrs(s.span)["gen_ai.operation.name"]; ok {
				return false, fmt.Sprintf("%s carries gen_ai.operation.name %v", name, v)
			}
		}
	}
	return n > 0, "no provider span"
})

// invNoUsage: the event reports no usage record and the span carries
// none of the usage attributes.
func invNoUsage(span, typ string, keys ...string) obsLLMInvariant {
	absent := attrsAbsent(span, keys...)
	return func(env *llmInvEnv, want *Value) error {
		evs := views(env.retrievalEvents(typ))
		ok := len(evs) > 0 && evs[0]["usage"] == nil
		if absent(env, &Value{Kind: KindBool, Bool: true}) != nil {
			ok = false
		}
		return compareBool(want, ok, fmt.Sprintf("%s usage or usage attributes present", span))
	}
}

// invRerankUsageAttr: the rerank span carries the usage attribute,
// equal to the event's usage figure, exactly when the provider reported
// the figure.
func invRerankUsageAttr(attr, field string, present bool) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		a := env.spanAttrsOf(rerankSpan)
		evs := views(env.retrievalEvents("RerankEvent"))
		if a == nil || len(evs) == 0 {
			return false, "no rerank span or event"
		}
		var fig any
		if u, ok := evs[0]["usage"].(map[string]any); ok {
			fig = u[field]
		}
		got, has := a[attr]
		if !present {
			return !has && fig == nil, fmt.Sprintf("%s = %v, usage %s = %v", attr, got, field, fig)
		}
		return has && fig != nil && got == fig, fmt.Sprintf("%s = %v, usage %s = %v", attr, got, field, fig)
	})
}

// llmBudgetEvent returns the view of the first terminal LLM event.
func (env *llmInvEnv) llmBudgetEvent() map[string]any {
	evs := env.retrievalEvents("LlmCompletionEvent", "LlmFailedEvent")
	if len(evs) == 0 {
		return nil
	}
	return views(evs[:1])[0]
}

var invExceededAbsentDeclared = pred(func(env *llmInvEnv) (bool, string) {
	a := env.llmAttrs()
	if a == nil {
		return false, "no LLM span"
	}
	if _, ok := a[otelobserver.AttrPromptBudgetInputMaxTokens]; !ok {
		return false, "the declared input bound is not on the span"
	}
	v, has := a[otelobserver.AttrLLMTokenBudgetExceeded]
	return !has, fmt.Sprintf("exceeded is %v", v)
})

var invBudgetNull = pred(func(env *llmInvEnv) (bool, string) {
	evs := views(env.retrievalEvents("LlmCompletionEvent"))
	if len(evs) == 0 {
		return false, "no completion event"
	}
	return evs[0]["token_budget"] == nil, fmt.Sprintf("token_budget %v", evs[0]["token_budget"])
})

// invBudgetNotEvaluated: the failure carries the budget but no usage,
// and neither the span signal nor a budget instrument records.
var invBudgetNotEvaluated = pred(func(env *llmInvEnv) (bool, string) {
	v := env.llmBudgetEvent()
	if v == nil || v["token_budget"] == nil || v["usage"] != nil {
		return false, fmt.Sprintf("event %v", v)
	}
	if a := env.llmAttrs(); a != nil {
		if x, ok := a[otelobserver.AttrLLMTokenBudgetExceeded]; ok {
			return false, fmt.Sprintf("exceeded is %v", x)
		}
	}
	obs, err := env.r.metricObservations()
	if err != nil {
		return false, err.Error()
	}
	return noInstrument(otelobserver.MetricTokenBudgetExceeded, otelobserver.MetricTokenBudgetUtilization)(obs)
})

// invInputBoundSkipped: the input bound is declared, its counter null,
// and no input-kind budget observation was recorded.
var invInputBoundSkipped = pred(func(env *llmInvEnv) (bool, string) {
	v := env.llmBudgetEvent()
	if v == nil {
		return false, "no LLM event"
	}
	tb, _ := v["token_budget"].(map[string]any)
	u, _ := v["usage"].(map[string]any)
	if tb == nil || tb["input_max_tokens"] == nil || u == nil || u["prompt_tokens"] != nil {
		return false, fmt.Sprintf("token_budget %v, usage %v", v["token_budget"], v["usage"])
	}
	obs, err := env.r.metricObservations()
	if err != nil {
		return false, err.Error()
	}
	return noBudgetKind("input")(obs)
})

// invNullPromptTokens: the null prompt_tokens reaches no span input
// attribute, no input token observation, no budget instrument and no
// exceeded signal.
var invNullPromptTokens = pred(func(env *llmInvEnv) (bool, string) {
	a := env.llmAttrs()
	if a == nil {
		return false, "no LLM span"
	}
	for _, k := range []string{"openarmature.llm.usage.prompt_tokens", "gen_ai.usage.input_tokens", otelobserver.AttrLLMTokenBudgetExceeded} {
		if x, ok := a[k]; ok {
			return false, fmt.Sprintf("%s = %v", k, x)
		}
	}
	obs, err := env.r.metricObservations()
	if err != nil {
		return false, err.Error()
	}
	if n := countTokens(obs, "input"); n > 0 {
		return false, fmt.Sprintf("%d input token observations", n)
	}
	return noInstrument(otelobserver.MetricTokenBudgetExceeded, otelobserver.MetricTokenBudgetUtilization)(obs)
})

// retrievalFieldsMatch: the first embedding or rerank event's
// response-side fields are the response's.
func retrievalFieldsMatch(env *llmInvEnv) (bool, string) {
	env.r.mu.Lock()
	eresps, rresps := slices.Clone(env.r.eresps), slices.Clone(env.r.rresps)
	env.r.mu.Unlock()
	if v := env.firstView("EmbeddingEvent"); v != nil && len(eresps) > 0 {
		return checkEmbedResponse(v, eresps[0])
	}
	if v := env.firstView("RerankEvent"); v != nil && len(rresps) > 0 {
		return checkRerankResponse(v, rresps[0])
	}
	return false, "no completion"
}
