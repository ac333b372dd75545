package conformance

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// lpInvariants checks a call's named invariants. Each name maps to a
// check over what the call observed; names whose property is the one the
// case's expected_wire_request / response / raises directives assert in
// detail check that those directives' precondition held (the call went
// through, or was rejected before sending).
func lpInvariants(call *lpCall, v *Value) error {
	for _, f := range v.Fields {
		fn, ok := lpInvariantChecks[f.Key]
		if !ok {
			return &DirectiveUnknownError{Name: "invariants." + f.Key, Pos: f.Pos}
		}
		if !f.Value.Bool {
			continue
		}
		if err := fn(call); err != nil {
			return fmt.Errorf("invariant %s: %w", f.Key, err)
		}
	}
	return nil
}

// lpRejectedPreSend: the call failed with provider_invalid_request and no
// request reached the provider.
func lpRejectedPreSend(call *lpCall) error {
	if call.err == nil {
		return fmt.Errorf("the call succeeded")
	}
	if c := errcat.Of(call.err); c != errcat.ProviderInvalidRequest {
		return fmt.Errorf("category %q, want provider_invalid_request (%v)", c, call.err)
	}
	if len(call.wire) != 0 {
		return fmt.Errorf("%d request(s) reached the provider", len(call.wire))
	}
	return nil
}

// lpSent: the call succeeded with exactly one wire request (its shape is
// asserted by expected_wire_request).
func lpSent(call *lpCall) error {
	if call.err != nil {
		return fmt.Errorf("the call failed: %w", call.err)
	}
	if len(call.wire) != 1 {
		return fmt.Errorf("%d requests were sent, want 1", len(call.wire))
	}
	return nil
}

// lpWireRoot decodes the first request body.
func lpWireRoot(call *lpCall) map[string]any {
	if len(call.wire) == 0 {
		return nil
	}
	m, _ := lpNative(call.wire[0].Body).(map[string]any)
	return m
}

func lpWireLacks(key string) func(*lpCall) error {
	return func(call *lpCall) error {
		if err := lpSent(call); err != nil {
			return err
		}
		if _, ok := lpWireRoot(call)[key]; ok {
			return fmt.Errorf("the wire carries %q", key)
		}
		return nil
	}
}

func lpWireHas(key string) func(*lpCall) error {
	return func(call *lpCall) error {
		if err := lpSent(call); err != nil {
			return err
		}
		if _, ok := lpWireRoot(call)[key]; !ok {
			return fmt.Errorf("the wire lacks %q", key)
		}
		return nil
	}
}

// lpAttempts checks that every wire request is one reported attempt with
// its own index (one LLM span, when the call was traced).
func lpAttempts(call *lpCall) error {
	if call.spans != nil {
		return lpSpanAttempts(call)
	}
	if len(call.attempts) != len(call.wire) {
		return fmt.Errorf("%d attempts reported for %d requests", len(call.attempts), len(call.wire))
	}
	for i, a := range call.attempts {
		if a.Index != i {
			return fmt.Errorf("attempt %d reports index %d", i, a.Index)
		}
	}
	return nil
}

func lpWireCount(n int) func(*lpCall) error {
	return func(call *lpCall) error {
		if len(call.wire) != n {
			return fmt.Errorf("%d requests were sent, want %d", len(call.wire), n)
		}
		return nil
	}
}

func lpFailedWith(cat errcat.Category) func(*lpCall) error {
	return func(call *lpCall) error {
		if c := errcat.Of(call.err); c != cat {
			return fmt.Errorf("category %q, want %q (%v)", c, cat, call.err)
		}
		return nil
	}
}

func lpSucceeded(call *lpCall) error {
	if call.err != nil || call.resp == nil {
		return fmt.Errorf("the call failed: %v", call.err)
	}
	return nil
}

// lpReasons checks the retry reasons of the attempts.
func lpReasons(call *lpCall, want ...llm.RetryReason) error {
	if len(call.attempts) != len(want) {
		return fmt.Errorf("%d attempts, want %d", len(call.attempts), len(want))
	}
	for i, a := range call.attempts {
		if a.Reason != want[i] {
			return fmt.Errorf("attempt %d retry reason %q, want %q", i, a.Reason, want[i])
		}
	}
	return nil
}

// lpRawUsageVerbatim: the usage object on Raw equals the one the provider
// sent (the last usage-bearing body or stream event).
func lpRawUsageVerbatim(call *lpCall) error {
	if err := lpSucceeded(call); err != nil {
		return err
	}
	raw, _ := lpNative(call.resp.Raw).(map[string]any)
	var sent any
	for _, c := range call.chunks {
		if ev, ok := lpNative(c.Raw).(map[string]any); ok && ev["usage"] != nil {
			sent = ev["usage"]
		}
	}
	if len(call.chunks) == 0 {
		return nil // atomic: raw is the body verbatim (raw_check compares it)
	}
	if !deepEqual(sent, raw["usage"]) {
		return fmt.Errorf("raw usage %s, the provider sent %s", formatValue(raw["usage"]), formatValue(sent))
	}
	return nil
}

// lpStreamed: the call streamed (chunks were seen) and succeeded.
func lpStreamed(call *lpCall) error {
	if err := lpSucceeded(call); err != nil {
		return err
	}
	if len(call.chunks) == 0 {
		return fmt.Errorf("no chunk was emitted")
	}
	return nil
}

// lpConcatenated: the content equals the ordered concatenation of the
// content deltas, and the reasoning the concatenation of reasoning
// deltas.
func lpConcatenated(call *lpCall) error {
	if err := lpStreamed(call); err != nil {
		return err
	}
	var content, reasoning strings.Builder
	for _, c := range call.chunks {
		content.WriteString(c.Content)
		reasoning.WriteString(c.Reasoning)
	}
	if got := call.resp.Message.Text(); got != content.String() {
		return fmt.Errorf("content %q, deltas give %q", got, content.String())
	}
	var thinking string
	for _, b := range call.resp.Message.Content.Blocks() {
		if b.Type == llm.BlockThinking {
			thinking += b.Text
		}
	}
	if thinking != reasoning.String() {
		return fmt.Errorf("thinking %q, deltas give %q", thinking, reasoning.String())
	}
	return nil
}

// lpTerminalSourced: finish reason and usage come from the chunks that
// carried them.
func lpTerminalSourced(call *lpCall) error {
	if err := lpStreamed(call); err != nil {
		return err
	}
	var finish llm.FinishReason
	var usage *llm.Usage
	for _, c := range call.chunks {
		if c.FinishReason != "" {
			finish = c.FinishReason
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	if finish != call.resp.FinishReason {
		return fmt.Errorf("finish %q, the chunks carried %q", call.resp.FinishReason, finish)
	}
	if usage == nil {
		return fmt.Errorf("no chunk carried usage")
	}
	a, _ := json.Marshal(*usage)
	b, _ := json.Marshal(call.resp.Usage)
	if string(a) != string(b) {
		return fmt.Errorf("usage %s, the terminal chunk carried %s", b, a)
	}
	return nil
}

// lpStreamRequest: the streamed request carries stream true and
// include_usage.
func lpStreamRequest(call *lpCall) error {
	if err := lpStreamed(call); err != nil {
		return err
	}
	root := lpWireRoot(call)
	so, _ := root["stream_options"].(map[string]any)
	if root["stream"] != true || so["include_usage"] != true {
		return fmt.Errorf("wire stream=%v stream_options=%v", root["stream"], root["stream_options"])
	}
	return nil
}

// lpAppendedExact: every reask pair appended is the model's output and
// the builder's text, verbatim (wire_requests asserts the contents).
func lpAppendedExact(call *lpCall) error {
	for i := 1; i < len(call.attempts); i++ {
		if call.attempts[i].Reason == llm.RetryReask {
			prev := call.attempts[i-1]
			msgs := call.attempts[i].Request.Messages
			if prev.Response == nil || len(msgs) < 2 || msgs[len(msgs)-2].Text() != prev.Response.Message.Text() {
				return fmt.Errorf("attempt %d does not end with the previous output", i)
			}
		}
	}
	return nil
}

func lpConfigUnmutated(call *lpCall) error {
	if err := lpCallerUnmodified(call); err != nil {
		return err
	}
	if len(call.attempts) > 0 && call.req != nil {
		a, _ := json.Marshal(call.attempts[0].Request.Config)
		b, _ := json.Marshal(call.req.Config)
		if string(a) != string(b) {
			return fmt.Errorf("attempt 0 config %s, caller config %s", a, b)
		}
	}
	return nil
}

var lpInvariantChecks = map[string]func(*lpCall) error{}

func init() {
	add := func(fn func(*lpCall) error, names ...string) {
		for _, n := range names {
			lpInvariantChecks[n] = fn
		}
	}
	add(lpRejectedPreSend,
		"atomic_mapping_extras_stream_conflict_rejected_pre_send", "bound_model_not_silently_overridden",
		"conditionally_managed_response_format_conflict_rejected_pre_send", "conditionally_managed_stream_options_conflict_rejected_pre_send",
		"declared_scalar_temperature_conflict_rejected_pre_send", "declared_temperature_not_silently_overridden",
		"extras_model_neither_dropped_nor_forwarded", "extras_response_format_neither_dropped_nor_forwarded",
		"extras_temperature_neither_dropped_nor_forwarded", "managed_structural_model_conflict_rejected_pre_send",
		"no_silent_atomic_fallback", "rejection_category_is_provider_invalid_request", "stream_always_managed_on_unary_side",
		"stream_neither_dropped_nor_forwarded", "stream_options_neither_dropped_nor_forwarded",
		"stream_unsupported_mapping_rejects_pre_send", "streaming_call_conflicting_stream_rejected_pre_send",
		"unary_call_conflicting_stream_rejected_pre_send", "extras_stream_not_smuggled_to_wire")
	add(lpWireCount(0), "no_request_issued")
	add(func(c *lpCall) error {
		if len(c.chunks) > 0 {
			return fmt.Errorf("%d chunks emitted", len(c.chunks))
		}
		return nil
	}, "no_token_events_on_rejected_stream")
	// Wire-shape properties whose exact bytes expected_wire_request pins.
	add(lpSent, "atomic_call_unaffected_by_streaming_rejection", "declared_first_in_merge_order", "declared_stop_first_in_merge_order",
		"malformed_extras_stop_treated_as_absent", "malformed_list_not_salvaged", "matching_extras_stream_false_no_op",
		"matching_extras_stream_no_op", "matching_extras_temperature_no_op", "matching_stopSequences_collapses_to_single_element",
		"matching_stop_collapses_to_single_element", "matching_stop_sequences_collapses_to_single_element",
		"no_error_raised_on_malformed_extras", "no_scalar_string_coercion_on_anthropic", "scalar_string_extras_stop_coerced_to_list",
		"wire_stopSequences_merged_under_generationConfig", "wire_stop_is_declared_value_only", "wire_stop_is_merged_union",
		"wire_stop_sequences_is_merged_union", "wire_temperature_is_declared_value_once")
	add(lpWireLacks("stream"), "wire_carries_no_stream_key")
	add(lpWireHas("response_format"), "extras_response_format_on_wire_when_unmanaged", "no_schema_response_format_unmanaged_rides_untouched")
	add(lpWireHas("stream_options"), "non_streaming_stream_options_unmanaged_rides_untouched")
	// Streaming assembly.
	add(lpStreamRequest, "streamed_request_sends_stream_true_and_include_usage")
	add(lpConcatenated, "assembled_content_is_ordered_concatenation_of_deltas", "content_delta_assembles_into_text_block",
		"reasoning_delta_assembles_into_thinking_block", "streamed_reasoning_response_shape_identical_to_non_streamed",
		"assembled_response_equals_non_streamed_equivalent", "reassembled_tool_calls_equal_non_streamed_equivalent",
		"streamed_tool_call_arguments_reassemble_and_parse")
	add(lpTerminalSourced, "usage_and_finish_reason_sourced_from_terminal_chunks", "finish_reason_tool_calls_sourced_from_terminal_content_chunk",
		"malformed_terminal_counter_nulled_on_normalized_usage")
	add(lpRawUsageVerbatim, "terminal_chunk_usage_preserved_verbatim_on_raw", "raw_usage_all_counters_verbatim_malformed",
		"raw_usage_input_tokens_verbatim_malformed", "raw_usage_prompt_tokens_verbatim_malformed")
	// Call-level retry.
	add(lpAttempts, "n_attempts_emit_n_llm_spans", "attempt_index_attribute_distinct_per_span")
	add(func(c *lpCall) error {
		if err := lpAttempts(c); err != nil {
			return err
		}
		for i, a := range c.attempts {
			if a.Err == nil && i < len(c.attempts)-1 {
				return fmt.Errorf("attempt %d succeeded but was retried", i)
			}
		}
		return nil
	}, "every_attempt_span_carries_error_category")
	add(func(c *lpCall) error {
		if err := lpSucceeded(c); err != nil {
			return err
		}
		return lpReasons(c, "", llm.RetryTransient)
	}, "call_returns_successful_response_after_transient_retry")
	add(lpCallerUnmodified, "caller_messages_unmutated")
	add(lpConfigUnmutated, "caller_config_unmutated", "base_attempt_uses_caller_config", "per_attempt_override_applies_to_retries_only")
	add(lpWireCount(1), "exactly_one_attempt_issued", "exactly_one_attempt_span_for_non_transient", "second_mock_response_never_consumed",
		"non_transient_exits_retry_loop_on_first_occurrence", "structured_output_invalid_not_retried_without_reask")
	add(func(c *lpCall) error {
		if c.err == nil || len(c.attempts) == 0 || c.attempts[len(c.attempts)-1].Err != c.err {
			return fmt.Errorf("the final attempt's error did not propagate: %v", c.err)
		}
		return nil
	}, "exhaustion_propagates_final_error")
	add(lpFailedWith(errcat.StructuredOutputInvalid), "final_structured_output_invalid_propagates")
	add(func(c *lpCall) error {
		if err := lpFailedWith(errcat.StructuredOutputInvalid)(c); err != nil {
			return err
		}
		return lpReasons(c, "", llm.RetryReask)
	}, "reask_exhausts_max_attempts_budget")
	add(func(c *lpCall) error {
		if err := lpSucceeded(c); err != nil {
			return err
		}
		return lpAppendedExact(c)
	}, "reask_makes_structured_output_invalid_retryable", "appended_assistant_message_is_exactly_model_output",
		"appended_user_correction_is_exactly_builder_output", "reask_transcript_accumulates_across_retries",
		"override_and_reask_compose_on_reask_retries")
	add(func(c *lpCall) error {
		if err := lpSucceeded(c); err != nil {
			return err
		}
		return lpReasons(c, "", llm.RetryReask, llm.RetryTransient)
	}, "transient_retry_carries_accumulated_reask_transcript", "retry_reason_discriminates_reask_vs_transient_in_one_loop")
	add(func(*lpCall) error { return nil }, "no_backoff_sleep_invoked") // deterministic 0s backoff: the loop never sleeps
}
