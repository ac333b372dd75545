package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/armature-go/armature/graph"
)

// llmInvEnv is what an LLM invariant reads: the run, its LLM spans and
// the typed events the collectors saw.
type llmInvEnv struct {
	r        *obsLLMRun
	run      *obsRun
	llmSpans []*spanNode
}

// obsLLMInvariant checks one named LLM invariant (each defined by its
// fixture's .md).
type obsLLMInvariant func(env *llmInvEnv, want *Value) error

// obsLLMInvariants are the LLM and tool invariants the suite implements.
var obsLLMInvariants = map[string]obsLLMInvariant{}

func init() {
	count := func(typ string, n int) obsLLMInvariant {
		return func(env *llmInvEnv, want *Value) error {
			got := len(env.r.allTyped(typ))
			return compareBool(want, got == n, fmt.Sprintf("%d %s events, want %d", got, typ, n))
		}
	}
	for name, c := range map[string]struct {
		typ string
		n   int
	}{
		"exactly_one_llm_completion_event_observed":    {"LlmCompletionEvent", 1},
		"exactly_one_llm_completion_event":             {"LlmCompletionEvent", 1},
		"exactly_one_terminal_llm_completion_event":    {"LlmCompletionEvent", 1},
		"exactly_one_llm_failed_event_observed":        {"LlmFailedEvent", 1},
		"exactly_one_llm_failed_event_per_failed_call": {"LlmFailedEvent", 1},
		"exactly_one_terminal_llm_failed_event":        {"LlmFailedEvent", 1},
		"zero_llm_completion_events_on_failed_call":    {"LlmCompletionEvent", 0},
		"zero_llm_completion_events_per_failed_call":   {"LlmCompletionEvent", 0},
		"zero_llm_completion_events_on_failed_stream":  {"LlmCompletionEvent", 0},
		"no_typed_event_on_failure":                    {"LlmCompletionEvent", 0},
		"exactly_one_tool_call_event_observed":         {"ToolCallEvent", 1},
		"exactly_one_tool_call_failed_event_observed":  {"ToolCallFailedEvent", 1},
		"zero_tool_call_failed_events_on_success":      {"ToolCallFailedEvent", 0},
		"zero_tool_call_events_on_failure":             {"ToolCallEvent", 0},
		"zero_token_events_on_non_streamed_call":       {"LlmTokenEvent", 0},
	} {
		obsLLMInvariants[name] = count(c.typ, c.n)
	}
	for name, f := range map[string]obsLLMInvariant{
		"exception_propagates_alongside_typed_event":               invRunErrored,
		"exception_propagates_out_of_complete":                     invRunErrored,
		"failure_surfaces_via_exception_path":                      invRunErrored,
		"exactly_one_llm_span_when_retry_absent":                   spanCount(1),
		"llm_provider_span_count":                                  invLLMSpanCount,
		"attempt_index_defaults_to_zero":                           invSpanAttrIs("openarmature.llm.attempt_index", int64(0)),
		"all_call_ids_present":                                     invCallIDs(false),
		"all_call_ids_are_non_empty_strings":                       invCallIDs(false),
		"call_ids_pairwise_distinct":                               invCallIDs(true),
		"two_call_ids_distinct_and_non_null":                       invCallIDs(true),
		"completion_and_failed_event_call_ids_distinct":            invCallIDs(true),
		"completion_event_call_id_present_and_non_empty":           invCallIDs(false),
		"failed_event_call_id_present_and_non_empty":               invCallIDs(false),
		"chunk_index_monotonic_from_zero":                          invChunkIndices,
		"chunk_index_restarts_at_zero_per_call":                    invChunkIndices,
		"all_token_event_call_ids_match_terminal_completion_event": invTokenCallIDs,
		"token_event_call_id_matches_terminal_completion_event":    invTokenCallIDs,
		"all_token_events_share_one_call_id":                       invTokenCallIDs,
		"ordered_deltas_concatenate_to_assembled_content":          invDeltasConcatenate,
		"no_tool_call_kind_token_events":                           invTokenKinds("content", "reasoning"),
		"only_content_kind_token_events_emitted":                   invTokenKinds("content"),
		"tool_call_event_carries_full_field_set":                   invToolFields,
		"latency_ms_present":                                       invToolFields,
		"no_error_category_field_on_tool_failure_event":            invToolFields,
		"tool_call_attributes_omitted_when_none_requested":         invNoToolAttrs,
	} {
		obsLLMInvariants[name] = f
	}
}

func invRunErrored(env *llmInvEnv, want *Value) error {
	return compareBool(want, env.run.Err != nil, fmt.Sprintf("invocation ended %s", env.run.Status))
}

func spanCount(n int) obsLLMInvariant {
	return func(env *llmInvEnv, want *Value) error {
		return compareBool(want, len(env.llmSpans) == n, fmt.Sprintf("%d LLM spans", len(env.llmSpans)))
	}
}

func invLLMSpanCount(env *llmInvEnv, want *Value) error {
	if want.Kind != KindInt {
		return schemaErrorf(want.Pos, "llm_provider_span_count must be an integer")
	}
	if int64(len(env.llmSpans)) != want.Int {
		return fmt.Errorf("%d LLM spans, want %d", len(env.llmSpans), want.Int)
	}
	return nil
}

func invSpanAttrIs(key string, v any) obsLLMInvariant {
	return func(env *llmInvEnv, want *Value) error {
		ok := len(env.llmSpans) > 0
		for _, s := range env.llmSpans {
			if spanAttrs(s.span)[key] != v {
				ok = false
			}
		}
		return compareBool(want, ok, fmt.Sprintf("%s is not %v on every LLM span", key, v))
	}
}

// terminalEvents are the call-outcome events (LLM and tool).
func terminalEvents(env *llmInvEnv) []graph.Event {
	var out []graph.Event
	for _, t := range append([]string{"LlmCompletionEvent", "LlmFailedEvent", "ToolCallEvent", "ToolCallFailedEvent"}, retrievalTerminal...) {
		out = append(out, env.r.allTyped(t)...)
	}
	return out
}

func invCallIDs(distinct bool) obsLLMInvariant {
	return func(env *llmInvEnv, want *Value) error {
		evs := terminalEvents(env)
		seen := map[string]bool{}
		ok, detail := len(evs) > 0, "no terminal events"
		for _, ev := range evs {
			id, _ := eventView(ev)["call_id"].(string)
			if id == "" {
				ok, detail = false, "an event has no call_id"
			}
			if distinct && seen[id] {
				ok, detail = false, "call_id "+id+" repeats"
			}
			seen[id] = true
		}
		return compareBool(want, ok, detail)
	}
}

// tokenStreams groups the token events by call id, in delivery order.
func tokenStreams(env *llmInvEnv) (order []string, by map[string][]*graph.LLMTokenEvent) {
	by = map[string][]*graph.LLMTokenEvent{}
	for _, ev := range env.r.allTyped("LlmTokenEvent") {
		t := ev.(*graph.LLMTokenEvent)
		if _, ok := by[t.CallID]; !ok {
			order = append(order, t.CallID)
		}
		by[t.CallID] = append(by[t.CallID], t)
	}
	return order, by
}

func invChunkIndices(env *llmInvEnv, want *Value) error {
	order, by := tokenStreams(env)
	ok := len(order) > 0
	for _, id := range order {
		for i, t := range by[id] {
			if t.ChunkIndex != i {
				ok = false
			}
		}
	}
	return compareBool(want, ok, "chunk indices are not 0..n-1 per call")
}

func invTokenCallIDs(env *llmInvEnv, want *Value) error {
	order, _ := tokenStreams(env)
	terminal := map[string]bool{}
	for _, ev := range terminalEvents(env) {
		id, _ := eventView(ev)["call_id"].(string)
		terminal[id] = true
	}
	ok := len(order) > 0
	for _, id := range order {
		ok = ok && terminal[id]
	}
	return compareBool(want, ok, fmt.Sprintf("token call ids %v, terminal %v", order, terminal))
}

func invDeltasConcatenate(env *llmInvEnv, want *Value) error {
	_, by := tokenStreams(env)
	for _, ev := range env.r.allTyped("LlmCompletionEvent") {
		c := ev.(*graph.LLMCompletionEvent)
		var b strings.Builder
		for _, t := range by[c.CallID] {
			if t.DeltaKind == "content" {
				b.WriteString(t.Delta)
			}
		}
		got := ""
		if c.OutputContent != nil {
			got = *c.OutputContent
		}
		if b.String() != got {
			return compareBool(want, false, fmt.Sprintf("deltas %q, content %q", b.String(), got))
		}
	}
	return compareBool(want, len(by) > 0, "no token events")
}

func invTokenKinds(kinds ...string) obsLLMInvariant {
	return func(env *llmInvEnv, want *Value) error {
		for _, ev := range env.r.allTyped("LlmTokenEvent") {
			k := string(ev.(*graph.LLMTokenEvent).DeltaKind)
			if !strings.Contains(" "+strings.Join(kinds, " ")+" ", " "+k+" ") {
				return compareBool(want, false, "token event of kind "+k)
			}
		}
		return compareBool(want, true, "")
	}
}

func invToolFields(env *llmInvEnv, want *Value) error {
	evs := append(env.r.allTyped("ToolCallEvent"), env.r.allTyped("ToolCallFailedEvent")...)
	if len(evs) == 0 {
		return compareBool(want, false, "no tool events")
	}
	var errs []error
	for _, ev := range evs {
		v := eventView(ev)
		if _, has := v["error_category"]; has {
			errs = append(errs, errors.New("a tool event has error_category"))
		}
		if l, _ := v["latency_ms"].(float64); l < 0 {
			errs = append(errs, errors.New("negative latency"))
		}
		for _, k := range []string{"tool_name", "call_id", "node_name", "invocation_id"} {
			if s, _ := v[k].(string); s == "" {
				errs = append(errs, fmt.Errorf("tool event without %s", k))
			}
		}
	}
	return compareBool(want, len(errs) == 0, fmt.Sprint(errors.Join(errs...)))
}

func invNoToolAttrs(env *llmInvEnv, want *Value) error {
	for _, s := range env.llmSpans {
		for k := range spanAttrs(s.span) {
			if strings.HasPrefix(k, "openarmature.llm.output.tool_calls") {
				return compareBool(want, false, k+" is set")
			}
		}
	}
	return compareBool(want, len(env.llmSpans) > 0, "no LLM span")
}

// --- span and event predicates -------------------------------------------

// llmAttrs returns the attributes of the first LLM span (nil without one).
func (env *llmInvEnv) llmAttrs() map[string]any {
	if len(env.llmSpans) == 0 {
		return nil
	}
	return spanAttrs(env.llmSpans[0].span)
}

// firstView returns the field view of the first event of a type.
func (env *llmInvEnv) firstView(typ string) map[string]any {
	evs := env.r.allTyped(typ)
	if len(evs) == 0 {
		return nil
	}
	return normalize(eventView(evs[0])).(map[string]any)
}

// pred makes an invariant of a predicate returning (holds, detail).
func pred(f func(env *llmInvEnv) (bool, string)) obsLLMInvariant {
	return func(env *llmInvEnv, want *Value) error {
		ok, detail := f(env)
		return compareBool(want, ok, detail)
	}
}

// attrsPresent holds when the first LLM span (or, for tool attributes,
// the first tool span) has every key.
func attrsPresent(span string, keys ...string) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		a := env.spanAttrsOf(span)
		for _, k := range keys {
			if _, ok := a[k]; !ok {
				return false, k + " is absent"
			}
		}
		return a != nil, "no " + span + " span"
	})
}

func attrsAbsent(span string, keys ...string) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		a := env.spanAttrsOf(span)
		for _, k := range keys {
			if v, ok := a[k]; ok {
				return false, fmt.Sprintf("%s is %v", k, v)
			}
		}
		return a != nil, "no " + span + " span"
	})
}

func (env *llmInvEnv) spanAttrsOf(name string) map[string]any {
	if name == "openarmature.llm.complete" {
		return env.llmAttrs()
	}
	s := spansNamed(env.run.roots, name)
	if len(s) == 0 {
		return nil
	}
	return spanAttrs(s[0].span)
}

const (
	llmSpan  = "openarmature.llm.complete"
	toolSpan = "openarmature.tool.call"
)

func init() {
	usageKeys := []string{"openarmature.llm.usage.prompt_tokens", "openarmature.llm.usage.completion_tokens",
		"openarmature.llm.usage.total_tokens", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"}
	inputKeys := []string{"openarmature.llm.usage.prompt_tokens", "gen_ai.usage.input_tokens"}
	idKeys := []string{"openarmature.llm.output.tool_calls.count", "openarmature.llm.output.tool_calls.names", "openarmature.llm.output.tool_calls.ids"}
	toolPayload := []string{"openarmature.tool.call.arguments", "openarmature.tool.call.result"}
	for name, f := range map[string]obsLLMInvariant{
		"cache_creation_attribute_absent_for_openai_compatible": attrsAbsent(llmSpan, "openarmature.llm.cache_creation.input_tokens"),
		"cache_attribute_absent_when_field_unpopulated":         attrsAbsent(llmSpan, "openarmature.llm.cache_read.input_tokens", "openarmature.llm.cache_creation.input_tokens"),
		"absent_distinct_from_zero":                             attrsAbsent(llmSpan, "openarmature.llm.cache_read.input_tokens"),
		"cache_read_attribute_emits_zero_when_reported":         invCacheRead,
		"reported_zero_distinct_from_absent":                    invCacheRead,
		"cache_read_attribute_equals_usage_field":               invCacheRead,
		"baseline_attributes_still_emit_alongside_attempt_index": attrsPresent(llmSpan, "openarmature.llm.model", "openarmature.llm.finish_reason",
			"openarmature.llm.usage.prompt_tokens", "openarmature.llm.attempt_index"),
		"count_equals_names_length":                                             invToolCallProjections,
		"tool_call_arrays_in_request_order":                                     invToolCallProjections,
		"tool_call_names_and_ids_index_aligned":                                 invToolCallProjections,
		"identity_projections_survive_payload_off":                              attrsPresent(llmSpan, idKeys...),
		"identity_projections_present_regardless_of_flag":                       attrsPresent(llmSpan, idKeys...),
		"gated_output_tool_calls_suppressed_when_payload_off":                   invGatedToolCalls,
		"input_usage_attributes_omitted_when_prompt_tokens_null":                attrsAbsent(llmSpan, inputKeys...),
		"gen_ai_input_tokens_never_sourced_from_null_counter":                   attrsAbsent(llmSpan, "gen_ai.usage.input_tokens"),
		"span_omits_both_input_usage_attributes_on_malformed_wire_counter":      attrsAbsent(llmSpan, inputKeys...),
		"span_omits_all_usage_attributes_when_all_counters_malformed":           attrsAbsent(llmSpan, usageKeys...),
		"output_and_total_usage_attributes_emitted_when_sound":                  attrsPresent(llmSpan, "openarmature.llm.usage.completion_tokens", "openarmature.llm.usage.total_tokens", "gen_ai.usage.output_tokens"),
		"error_span_carries_output_usage_finish_reason":                         invErrorSpan(true),
		"error_status_and_exception_event_unchanged":                            invErrorSpan(false),
		"finish_reason_usage_and_error_status_unchanged_under_payload_disabled": invErrorSpan(false),
		"output_content_redacted_under_payload_disabled":                        attrsAbsent(llmSpan, "openarmature.llm.output.content"),
		"tool_span_name_is_openarmature_tool_call":                              attrsPresent(toolSpan, "openarmature.tool.name"),
		"oa_namespace_tool_attributes_emitted":                                  attrsPresent(toolSpan, "openarmature.tool.name", "openarmature.tool.call.id"),
		"gen_ai_tool_attributes_not_emitted_in_v1":                              invNoGenAITool,
		"execute_tool_span_name_not_used":                                       invNoExecuteTool,
		"identity_attributes_present_with_payload_off":                          attrsPresent(toolSpan, "openarmature.tool.name", "openarmature.tool.call.id"),
		"payload_off_suppresses_tool_arguments_and_result":                      attrsAbsent(toolSpan, toolPayload...),
		"payload_on_populates_tool_arguments_and_result":                        attrsPresent(toolSpan, toolPayload...),
		"implementation_name_non_empty":                                         invImplementationName,
		"event_typed_fields_match_provider_response":                            invFieldsMatchResponse,
		"identity_scoping_fields_populated":                                     invIdentityPopulated,
		"type_discrimination_filter_works":                                      invFilterWorks,
		"type_filtered_count_independent_of_sentinel_emission":                  invFilterWorks,
		"typed_event_arrives_after_node_started":                                invWithinNode,
		"typed_event_arrives_before_node_completed":                             invWithinNode,
		"typed_event_arrives_within_calling_node_span":                          invWithinNode,
		"input_messages_populated_unconditionally":                              invInputMessages,
		"input_messages_shape_matches_llm_provider_section_3":                   invInputMessages,
		"output_content_null_when_tool_calls_present_with_empty_content":        invToolOnlyOutput,
		"absence_distinct_from_zero_value":                                      invRequestParams,
		"request_params_carries_only_caller_supplied_keys":                      invRequestParams,
		"request_extras_is_native_mapping_not_json_string":                      invExtrasNative,
		"active_prompt_null_parallels_prompt_attr_absence_on_span":              invNoActivePrompt,
		"response_model_distinct_from_request_model":                            invResponseModel(true),
		"response_model_null_when_absent_from_response":                         invResponseModel(false),
		"error_category_matches_raised_exception_category":                      invFailureCategory,
		"success_one_tool_call_event_zero_failed":                               invToolOutcome("ToolCallEvent", "ToolCallFailedEvent"),
		"failure_one_tool_call_failed_event_zero_success":                       invToolOutcome("ToolCallFailedEvent", "ToolCallEvent"),
		"tool_call_id_matches_requesting_llm_output_tool_calls_id":              invToolCallLinked,
		"standalone_tool_call_id_is_null":                                       invStandaloneTool,
		"n_content_chunks_emit_n_token_events":                                  invContentChunks,
		"tool_call_argument_deltas_emit_no_token_events":                        invContentChunks,
		"atomic_path_unchanged_by_streaming_capability":                         invAtomic,
		"terminal_output_tool_calls_reassembled_complete_and_parsed":            invReassembled,
		"reassembled_tool_calls_identical_to_non_streamed":                      invReassembled,
		"token_events_group_by_call_id_into_two_streams":                        invTwoStreams,
		"call1_token_events_share_call1_completion_call_id":                     invStreamOwner(0),
		"call2_token_events_share_call2_completion_call_id":                     invStreamOwner(1),
		"reasoning_content_field_recognized_as_reasoning_kind":                  invReasoningFirst,
		"reasoning_field_recognized_as_reasoning_kind":                          invReasoningFirst,
		"ordered_reasoning_then_content_chunk_indices":                          invReasoningFirst,
		"reasoning_deltas_precede_content_deltas":                               invReasoningFirst,
		"both_reasoning_field_names_produce_identical_token_events":             invReasoningFirst,
		"content_assembles_into_message_content":                                invDeltasConcatenate,
		"reasoning_assembles_into_terminal_thinking_block":                      invThinkingAssembled,
		"finish_reason_is_stop_not_truncation":                                  invFailedFinish("stop"),
		"response_side_surface_null_for_non_structured_output_failure":          invNoResponseSide,
		"malformed_wire_prompt_tokens_nulled_before_event_and_span":             invNulledCounters("prompt_tokens"),
		"all_three_malformed_wire_counters_nulled_before_event_and_span":        invNulledCounters("prompt_tokens", "completion_tokens", "total_tokens"),
		"event_usage_is_present_record_of_nulls_not_null_record":                invUsageRecord,
		"event_usage_prompt_tokens_null_not_verbatim_wire_value":                invNulledCounters("prompt_tokens"),
	} {
		obsLLMInvariants[name] = f
	}
}

var invCacheRead = pred(func(env *llmInvEnv) (bool, string) {
	a := env.llmAttrs()
	v, ok := a["openarmature.llm.cache_read.input_tokens"]
	if !ok {
		return false, "cache_read attribute absent"
	}
	r := env.r.lastResponse()
	if r == nil || r.Usage.CachedTokens == nil || int64(*r.Usage.CachedTokens) != v {
		return false, fmt.Sprintf("cache_read %v does not equal the response's cached_tokens", v)
	}
	return true, ""
})

var invToolCallProjections = pred(func(env *llmInvEnv) (bool, string) {
	a := env.llmAttrs()
	r := env.r.lastResponse()
	if r == nil || a == nil {
		return false, "no LLM call"
	}
	var names, ids []any
	for _, tc := range r.Message.ToolCalls {
		names, ids = append(names, tc.Name), append(ids, tc.ID)
	}
	got := fmt.Sprint(a["openarmature.llm.output.tool_calls.count"], a["openarmature.llm.output.tool_calls.names"], a["openarmature.llm.output.tool_calls.ids"])
	want := fmt.Sprint(int64(len(names)), names, ids)
	return got == want, fmt.Sprintf("projections %s, want %s", got, want)
})

var invGatedToolCalls = pred(func(env *llmInvEnv) (bool, string) {
	_, present := env.llmAttrs()["openarmature.llm.output.tool_calls"]
	return present == env.r.ol.cfg.CaptureProviderPayload, fmt.Sprintf("output.tool_calls present %t with payload capture %t", present, env.r.ol.cfg.CaptureProviderPayload)
})

func invErrorSpan(payloadSide bool) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		if len(env.llmSpans) == 0 {
			return false, "no LLM span"
		}
		s := env.llmSpans[0].span
		a := spanAttrs(s)
		if statusName(s.Status.Code) != "ERROR" {
			return false, "the LLM span is not ERROR"
		}
		if !strings.Contains(fmt.Sprint(s.Events), "exception") {
			return false, "no exception event"
		}
		for _, k := range []string{"openarmature.llm.finish_reason", "openarmature.llm.usage.completion_tokens"} {
			if _, ok := a[k]; !ok {
				return false, k + " absent"
			}
		}
		if _, ok := a["openarmature.llm.output.content"]; payloadSide && ok != env.r.ol.cfg.CaptureProviderPayload {
			return false, "output.content does not follow the payload flag"
		}
		return true, ""
	})
}

var invNoGenAITool = pred(func(env *llmInvEnv) (bool, string) {
	for _, s := range env.run.otel.allSpans() {
		for k := range spanAttrs(s) {
			if strings.HasPrefix(k, "gen_ai.tool.") || k == "gen_ai.operation.name" {
				return false, k + " on " + s.Name
			}
		}
	}
	return true, ""
})

var invNoExecuteTool = pred(func(env *llmInvEnv) (bool, string) {
	for _, s := range env.run.otel.allSpans() {
		if strings.HasPrefix(s.Name, "execute_tool") {
			return false, "span " + s.Name
		}
	}
	return len(spansNamed(env.run.roots, toolSpan)) > 0, "no tool span"
})

var invImplementationName = pred(func(env *llmInvEnv) (bool, string) {
	for _, s := range env.run.otel.allSpans() {
		if s.Name == "openarmature.invocation" {
			n, _ := spanAttrs(s)["openarmature.implementation.name"].(string)
			return n != "", "implementation name empty"
		}
	}
	return false, "no invocation span"
})

var invFieldsMatchResponse = pred(func(env *llmInvEnv) (bool, string) {
	if env.firstView("LlmCompletionEvent") == nil {
		return retrievalFieldsMatch(env)
	}
	v := env.firstView("LlmCompletionEvent")
	r := env.r.lastResponse()
	if v == nil || r == nil {
		return false, "no completion"
	}
	id, model := r.ResponseIdentity()
	ok := v["response_id"] == id && v["response_model"] == model && v["finish_reason"] == string(r.FinishReason) &&
		formatValue(v["usage"]) == formatValue(normalize(usageView(r.Usage, false)))
	return ok, fmt.Sprintf("event %v does not match the response", v)
})

var invIdentityPopulated = pred(func(env *llmInvEnv) (bool, string) {
	for _, ev := range terminalEvents(env) {
		v := eventView(ev)
		for _, k := range []string{"invocation_id", "node_name", "call_id"} {
			if s, _ := v[k].(string); s == "" {
				return false, k + " empty"
			}
		}
		if ns, _ := v["namespace"].([]any); len(ns) == 0 {
			return false, "namespace empty"
		}
	}
	return len(terminalEvents(env)) > 0, "no events"
})

var invFilterWorks = pred(func(env *llmInvEnv) (bool, string) {
	for c, typ := range env.r.ol.filters {
		evs, _ := env.r.typed(c, "")
		for _, ev := range evs {
			if eventType(ev) != typ {
				return false, c + " holds a " + eventType(ev)
			}
		}
		if len(evs) != len(env.r.allTyped(typ)) {
			return false, c + " missed events"
		}
	}
	return len(env.r.ol.filters) > 0, "no filtered collector"
})

// invWithinNode: every typed call event arrives after its node's started
// event and before its completed event, in one collector's stream.
var invWithinNode = pred(func(env *llmInvEnv) (bool, string) {
	evs := env.r.allTyped("")
	open := map[string]bool{}
	seen := 0
	for _, ev := range evs {
		if ne, ok := ev.(*graph.NodeEvent); ok {
			open[strings.Join(ne.Namespace, "/")] = ne.Phase == graph.PhaseStarted
			continue
		}
		if s, ok := graph.CallSourceOf(ev); ok {
			seen++
			if !open[strings.Join(s.Namespace, "/")] {
				return false, eventType(ev) + " outside its node's started/completed pair"
			}
		}
	}
	return seen > 0, "no typed events"
})

var invInputMessages = pred(func(env *llmInvEnv) (bool, string) {
	for _, ev := range append(env.r.allTyped("LlmCompletionEvent"), env.r.allTyped("LlmFailedEvent")...) {
		msgs, _ := eventView(ev)["input_messages"].([]any)
		if len(msgs) == 0 {
			return false, "input_messages empty"
		}
		for _, m := range msgs {
			if mm, _ := m.(map[string]any); mm["role"] == nil {
				return false, "a message without a role"
			}
		}
	}
	return true, ""
})

var invToolOnlyOutput = pred(func(env *llmInvEnv) (bool, string) {
	v := env.firstView("LlmCompletionEvent")
	return v != nil && v["output_content"] == nil && v["output_tool_calls"] != nil, fmt.Sprintf("output %v / %v", v["output_content"], v["output_tool_calls"])
})

var invRequestParams = pred(func(env *llmInvEnv) (bool, string) {
	known := "temperature max_tokens top_p seed frequency_penalty presence_penalty stop_sequences"
	for _, ev := range env.r.allTyped("LlmCompletionEvent") {
		for k, v := range ev.(*graph.LLMCompletionEvent).Params {
			if v == nil || !strings.Contains(" "+known+" ", " "+k+" ") {
				return false, "request_params has " + k
			}
		}
	}
	return true, ""
})

var invExtrasNative = pred(func(env *llmInvEnv) (bool, string) {
	v := env.firstView("LlmCompletionEvent")
	_, ok := v["request_extras"].(map[string]any)
	return ok, "request_extras is not a mapping"
})

var invNoActivePrompt = pred(func(env *llmInvEnv) (bool, string) {
	v := env.firstView("LlmCompletionEvent")
	for k := range env.llmAttrs() {
		if strings.HasPrefix(k, "openarmature.prompt.") {
			return false, k + " on the span"
		}
	}
	return v != nil && v["active_prompt"] == nil, "active_prompt set"
})

func invResponseModel(distinct bool) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		v := env.firstView("LlmCompletionEvent")
		if v == nil {
			return false, "no completion"
		}
		if distinct {
			return v["response_model"] != nil && v["response_model"] != v["model"], fmt.Sprintf("response_model %v, model %v", v["response_model"], v["model"])
		}
		return v["response_model"] == nil, fmt.Sprintf("response_model %v", v["response_model"])
	})
}

var invFailureCategory = pred(func(env *llmInvEnv) (bool, string) {
	evs := env.r.allTyped("LlmFailedEvent")
	if len(evs) == 0 || env.run.Err == nil {
		return false, "no failure"
	}
	f := evs[0].(*graph.LLMFailedEvent)
	return errors.Is(env.run.Err, f.ErrorCategory), fmt.Sprintf("event %s, raised %v", f.ErrorCategory, env.run.Err)
})

func invToolOutcome(one, zero string) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		a, b := len(env.r.allTyped(one)), len(env.r.allTyped(zero))
		return a == 1 && b == 0, fmt.Sprintf("%d %s, %d %s", a, one, b, zero)
	})
}

var invToolCallLinked = pred(func(env *llmInvEnv) (bool, string) {
	ids := map[any]bool{}
	for _, ev := range env.r.allTyped("LlmCompletionEvent") {
		for _, tc := range ev.(*graph.LLMCompletionEvent).OutputToolCalls {
			ids[tc.ID] = true
		}
	}
	tools := env.r.allTyped("ToolCallEvent")
	for _, ev := range tools {
		if id := ev.(*graph.ToolCallEvent).ToolCallID; !ids[id] {
			return false, "tool_call_id " + id + " was not requested"
		}
	}
	return len(tools) > 0, "no tool events"
})

var invStandaloneTool = pred(func(env *llmInvEnv) (bool, string) {
	tools := env.r.allTyped("ToolCallEvent")
	for _, ev := range tools {
		if ev.(*graph.ToolCallEvent).ToolCallID != "" {
			return false, "a standalone tool has a tool_call_id"
		}
	}
	return len(tools) > 0, "no tool events"
})

// invContentChunks: one content token event per scripted chunk carrying
// content, and none for the other chunks (tool-call argument deltas).
var invContentChunks = pred(func(env *llmInvEnv) (bool, string) {
	want := 0
	for _, s := range env.r.ol.mock {
		for _, ch := range s.stream {
			var c struct {
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal(ch, &c) == nil && len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
				want++
			}
		}
	}
	got := len(env.r.allTyped("LlmTokenEvent"))
	return got == want && want > 0, fmt.Sprintf("%d content token events for %d content chunks", got, want)
})

var invAtomic = pred(func(env *llmInvEnv) (bool, string) {
	a, b := len(env.r.allTyped("LlmTokenEvent")), len(env.r.allTyped("LlmCompletionEvent"))
	return a == 0 && b == 1, fmt.Sprintf("%d token events, %d completions", a, b)
})

var invReassembled = pred(func(env *llmInvEnv) (bool, string) {
	v := env.firstView("LlmCompletionEvent")
	calls, _ := v["output_tool_calls"].([]any)
	for _, c := range calls {
		m, _ := c.(map[string]any)
		if _, ok := m["arguments"].(map[string]any); !ok || m["name"] == "" || m["id"] == "" {
			return false, fmt.Sprintf("tool call %v is incomplete", m)
		}
	}
	return len(calls) > 0, "no output tool calls"
})

var invTwoStreams = pred(func(env *llmInvEnv) (bool, string) {
	order, _ := tokenStreams(env)
	return len(order) == 2, fmt.Sprintf("%d token streams", len(order))
})

func invStreamOwner(i int) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		order, _ := tokenStreams(env)
		comps := env.r.allTyped("LlmCompletionEvent")
		if i >= len(order) || i >= len(comps) {
			return false, "too few streams"
		}
		return comps[i].(*graph.LLMCompletionEvent).CallID == order[i], "stream and completion call ids differ"
	})
}

var invReasoningFirst = pred(func(env *llmInvEnv) (bool, string) {
	kinds := ""
	for _, ev := range env.r.allTyped("LlmTokenEvent") {
		kinds += string(ev.(*graph.LLMTokenEvent).DeltaKind)[:1]
	}
	t := strings.TrimLeft(kinds, "r")
	return len(t) < len(kinds) && strings.Trim(t, "c") == "", "token kinds " + kinds
})

var invThinkingAssembled = pred(func(env *llmInvEnv) (bool, string) {
	var want strings.Builder
	for _, ev := range env.r.allTyped("LlmTokenEvent") {
		if t := ev.(*graph.LLMTokenEvent); t.DeltaKind == "reasoning" {
			want.WriteString(t.Delta)
		}
	}
	r := env.r.lastResponse()
	if r == nil {
		return false, "no response"
	}
	for _, b := range r.Message.Content.Blocks() {
		if b.Type == "thinking" && b.Text == want.String() {
			return true, ""
		}
	}
	return false, "no thinking block " + want.String()
})

func invFailedFinish(reason string) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		v := env.firstView("LlmFailedEvent")
		return v != nil && v["finish_reason"] == reason, fmt.Sprintf("finish_reason %v", v["finish_reason"])
	})
}

var invNoResponseSide = pred(func(env *llmInvEnv) (bool, string) {
	v := env.firstView("LlmFailedEvent")
	if v == nil {
		return false, "no failure event"
	}
	for _, k := range []string{"output_content", "finish_reason", "usage", "response_id", "response_model"} {
		if v[k] != nil {
			return false, k + " is set"
		}
	}
	return true, ""
})

func invNulledCounters(counters ...string) obsLLMInvariant {
	return pred(func(env *llmInvEnv) (bool, string) {
		v := env.firstView("LlmCompletionEvent")
		u, _ := v["usage"].(map[string]any)
		a := env.llmAttrs()
		for _, c := range counters {
			if u == nil || u[c] != nil {
				return false, "event usage " + c + " is not null"
			}
			if _, ok := a["openarmature.llm.usage."+c]; ok {
				return false, "span carries " + c
			}
		}
		return true, ""
	})
}

var invUsageRecord = pred(func(env *llmInvEnv) (bool, string) {
	_, ok := env.firstView("LlmCompletionEvent")["usage"].(map[string]any)
	return ok, "usage is not a record"
})
