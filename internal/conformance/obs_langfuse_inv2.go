package conformance

import (
	"fmt"

	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/otelobserver"
)

// The Langfuse invariants of the embedding, rerank and token-budget
// fixtures (083, 108, 137, 138, 140, 142, 150, 151, 155, 156), and the
// OTel invariants of the streamed-call fixture 117's OTel case.

func init() {
	for name, inv := range map[string]lfInvariant{
		"observation_type_is_embedding_not_generation":                 lfDedicatedType(langfuse.TypeEmbedding),
		"renders_as_embedding_observation_not_generation":              lfDedicatedType(langfuse.TypeEmbedding),
		"observation_type_is_retriever_not_generation":                 lfDedicatedType(langfuse.TypeRetriever),
		"renders_as_retriever_observation_not_generation":              lfDedicatedType(langfuse.TypeRetriever),
		"input_and_output_suppressed_under_default_privacy_posture":    lfCallsPayload(false),
		"input_and_output_populated_when_payload_flag_disabled":        lfCallsPayload(true),
		"embedding_failure_renders_error_level":                        lfErrorLevel(langfuse.TypeEmbedding),
		"rerank_failure_renders_error_level":                           lfErrorLevel(langfuse.TypeRetriever),
		"error_category_is_status_message":                             lfFailedCalls(checkFailCategory),
		"error_category_still_from_status":                             lfFailedCalls(checkFailCategory),
		"error_level_and_status_message_unchanged_by_payload_flag":     lfFailedCalls(checkFailCategory),
		"failure_observation_carries_no_output":                        lfFailedCalls(checkNoOutput),
		"no_output_even_with_payload_flag_off":                         lfPayloadOn(lfFailedCalls(checkNoOutput)),
		"request_side_input_populated_when_payload_flag_disabled":      lfPayloadOn(lfFailedCalls(checkInput)),
		"error_type_asserted_literally_from_raises":                    lfFailedCalls(checkRaised("error_type", "error_type")),
		"error_message_asserted_literally_from_raises":                 lfFailedCalls(checkRaised("error_message", "message")),
		"usage_details_input_omitted_when_no_usage_record":             lfUsageDetails(langfuse.TypeEmbedding, false),
		"usage_details_empty_when_no_usage_record":                     lfUsageDetails(langfuse.TypeRetriever, true),
		"exceeded_flag_survives_error_precedence_on_failed_generation": lfBudgetFlag(langfuse.LevelError, true),
		"declared_bounds_present_on_failed_generation":                 lfDeclaredBounds,
		"error_level_and_category_unchanged":                           lfFailedGeneration(false),
		"exceeded_flag_present_and_false_under_budget":                 lfBudgetFlag("", false),
		"no_warning_level_under_budget":                                lfNoWarning,
		"each_invocation_distinct_trace_id":                            lfDistinctRunTraces,
		"all_traces_share_session_id":                                  lfAllShareSession,
		"traces_group_into_one_langfuse_session":                       lfOneSession,
	} {
		lfInvariants[name] = inv
	}
	obsInvariants["exactly_one_llm_complete_span_under_stream"] = invOneLLMSpan
	obsInvariants["no_per_token_child_spans"] = invNoTokenSpans
	obsInvariants["span_output_is_full_assembled_content"] = invAssembledSpanOutput
}

// callObs returns the run's call observations (every type but span).
func (r *lfRun) calls() []lfObs {
	var out []lfObs
	for _, o := range r.all() {
		if o.Type != string(langfuse.TypeSpan) {
			out = append(out, o)
		}
	}
	return out
}

// lfCallsPayload: every call observation has (or lacks) input and output.
func lfCallsPayload(populated bool) lfInvariant {
	return perRun(func(_ *lfExec, r *lfRun) (bool, string) {
		calls := r.calls()
		for _, o := range calls {
			_, in := o.Fields["input"]
			_, out := o.Fields["output"]
			if in != populated || out != populated {
				return false, fmt.Sprintf("%s input %v output %v", o.Type, o.Fields["input"], o.Fields["output"])
			}
		}
		return len(calls) > 0, "no call observation"
	})
}

// lfFailedCalls runs check on every failed call observation (there must
// be one).
func lfFailedCalls(check func(le *lfExec, o lfObs) (bool, string)) lfInvariant {
	return perRun(func(le *lfExec, r *lfRun) (bool, string) {
		n := 0
		for _, o := range r.calls() {
			if o.Fields["level"] != langfuse.LevelError {
				continue
			}
			n++
			if ok, why := check(le, o); !ok {
				return false, o.Name() + ": " + why
			}
		}
		return n > 0, "no failed call observation"
	})
}

func checkFailCategory(le *lfExec, o lfObs) (bool, string) {
	return le.lf.expectedCat != "" && o.Fields["statusMessage"] == le.lf.expectedCat,
		fmt.Sprintf("statusMessage %v, expected category %q", o.Fields["statusMessage"], le.lf.expectedCat)
}

func checkNoOutput(_ *lfExec, o lfObs) (bool, string) {
	v, has := o.Fields["output"]
	return !has, fmt.Sprintf("output %v", v)
}

func checkInput(_ *lfExec, o lfObs) (bool, string) {
	v, has := o.Fields["input"]
	return has, fmt.Sprintf("input %v", v)
}

// checkRaised: the metadata key carries the mock's raises field.
func checkRaised(key, field string) func(le *lfExec, o lfObs) (bool, string) {
	return func(le *lfExec, o lfObs) (bool, string) {
		got := metaOf(o.Observation)[key]
		for _, r := range le.lf.raises {
			if r[field] == got {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s %v is no raises.%s of the mocks %v", key, got, field, le.lf.raises)
	}
}

// lfPayloadOn: the case runs the Langfuse observer with the provider
// payload on, and inv holds.
func lfPayloadOn(inv lfInvariant) lfInvariant {
	return func(m *matcher, le *lfExec, want *Value) error {
		if !le.lf.cfg.CaptureProviderPayload {
			return compareBool(want, false, "the case keeps the provider payload off")
		}
		return inv(m, le, want)
	}
}

func lfUsageDetails(typ langfuse.ObservationType, empty bool) lfInvariant {
	return perRun(func(_ *lfExec, r *lfRun) (bool, string) {
		obs := r.ofType(typ)
		for _, o := range obs {
			u, ok := o.Fields["usageDetails"].(map[string]any)
			if _, in := u["input"]; !ok || in || (empty && len(u) > 0) {
				return false, fmt.Sprintf("usageDetails %v", o.Fields["usageDetails"])
			}
		}
		return len(obs) > 0, "no " + string(typ) + " observation"
	})
}

// lfBudgetFlag: every generation carries token_budget_exceeded = flag
// (and, when level is set, that level).
func lfBudgetFlag(level string, flag bool) lfInvariant {
	return perRun(func(_ *lfExec, r *lfRun) (bool, string) {
		gens := r.ofType(langfuse.TypeGeneration)
		for _, g := range gens {
			got, ok := metaOf(g.Observation)["token_budget_exceeded"]
			if !ok || got != flag || (level != "" && g.Fields["level"] != level) {
				return false, fmt.Sprintf("level %v token_budget_exceeded %v", g.Fields["level"], got)
			}
		}
		return len(gens) > 0, "no generation"
	})
}

var lfDeclaredBounds = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	gens := r.ofType(langfuse.TypeGeneration)
	for _, g := range gens {
		tb, _ := metaOf(g.Observation)["token_budget"].(map[string]any)
		if g.Fields["level"] != langfuse.LevelError || len(tb) == 0 {
			return false, fmt.Sprintf("level %v token_budget %v", g.Fields["level"], tb)
		}
	}
	return len(gens) > 0, "no generation"
})

var lfNoWarning = perRun(func(_ *lfExec, r *lfRun) (bool, string) {
	gens := r.ofType(langfuse.TypeGeneration)
	for _, g := range gens {
		if g.Fields["level"] != langfuse.LevelDefault || g.Fields["statusMessage"] != nil {
			return false, fmt.Sprintf("level %v statusMessage %v", g.Fields["level"], g.Fields["statusMessage"])
		}
	}
	return len(gens) > 0, "no generation"
})

// --- OTel: a streamed call is one span (117) --------------------------------

func llmSpans(run *obsRun) []*spanNode {
	var out []*spanNode
	walkSpans(run.roots, func(n *spanNode) {
		if n.span.Name == otelobserver.LLMSpanName {
			out = append(out, n)
		}
	})
	return out
}

func invOneLLMSpan(_ *matcher, runs []*obsRun, want *Value) error {
	for _, r := range runs {
		if n := len(llmSpans(r)); n != 1 {
			return compareBool(want, false, fmt.Sprintf("%s: %d LLM spans", r.Name, n))
		}
	}
	return compareBool(want, len(runs) > 0, "no invocation")
}

func invNoTokenSpans(_ *matcher, runs []*obsRun, want *Value) error {
	for _, r := range runs {
		for _, s := range llmSpans(r) {
			if len(s.children) > 0 {
				return compareBool(want, false, fmt.Sprintf("%s: the LLM span has %d children", r.Name, len(s.children)))
			}
		}
		n := 0
		walkSpans(r.roots, func(*spanNode) { n++ })
		if n != 3 { // invocation, node, LLM call
			return compareBool(want, false, fmt.Sprintf("%s: %d spans %s", r.Name, n, spanNames(r.roots)))
		}
	}
	return compareBool(want, len(runs) > 0, "no invocation")
}

func invAssembledSpanOutput(_ *matcher, runs []*obsRun, want *Value) error {
	for _, r := range runs {
		spans := llmSpans(r)
		if len(spans) != 1 {
			return compareBool(want, false, fmt.Sprintf("%s: %d LLM spans", r.Name, len(spans)))
		}
		// The node stored the assembled response in the state.
		out, _ := spanAttrs(spans[0].span)[otelobserver.AttrLLMOutputContent].(string)
		stored := false
		if fs, ok := r.FinalState.(map[string]any); ok {
			for _, v := range fs {
				stored = stored || (out != "" && v == out)
			}
		}
		if !stored {
			return compareBool(want, false, fmt.Sprintf("%s: span output %q is not the assembled response in the final state %v", r.Name, out, r.FinalState))
		}
	}
	return compareBool(want, len(runs) > 0, "no invocation")
}

// --- sessions (084) ----------------------------------------------------------

var lfDistinctRunTraces = boolInv(func(le *lfExec) (bool, string) {
	seen := map[string]bool{}
	for _, r := range le.runs {
		t, ok := mainTrace(r)
		if !ok || len(r.traces) != 1 || seen[t.ID] {
			return false, fmt.Sprintf("%s: %d traces, id %v repeated or missing", r.run.Name, len(r.traces), traceIDOf(r))
		}
		seen[t.ID] = true
	}
	return len(le.runs) > 1, fmt.Sprintf("%d invocations", len(le.runs))
})

func lfAllShareSession(_ *matcher, le *lfExec, want *Value) error {
	if want.Kind != KindString {
		return schemaErrorf(want.Pos, "all_traces_share_session_id wants the session id")
	}
	for _, r := range le.runs {
		for _, t := range r.traces {
			if t.Fields["sessionId"] != want.Str {
				return fmt.Errorf("%s: trace %s sessionId %v, want %q", r.run.Name, t.ID, t.Fields["sessionId"], want.Str)
			}
		}
	}
	if len(le.runs) == 0 {
		return fmt.Errorf("no invocation")
	}
	return nil
}

var lfOneSession = boolInv(func(le *lfExec) (bool, string) {
	ids := map[any]bool{}
	n := 0
	for _, r := range le.runs {
		for _, t := range r.traces {
			ids[t.Fields["sessionId"]] = true
			n++
		}
	}
	return n > 1 && len(ids) == 1 && !ids[nil], fmt.Sprintf("%d traces, session ids %v", n, ids)
})
