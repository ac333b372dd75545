package conformance

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
)

// The retrieval-provider fixtures name ~230 invariants. Each resolves
// here to a real check on the call: an exact name, or a regex family
// whose parts parameterize the check. An unknown name is
// fixture_directive_unknown.

type rpCheck func(ctx context.Context, c *rpCall) error

type rpFamily struct {
	re    *regexp.Regexp
	check func(m []string) rpCheck
}

func rpInvariant(name string) (rpCheck, bool) {
	for _, f := range rpFamilies() {
		if m := f.re.FindStringSubmatch(name); m != nil {
			return f.check(m), true
		}
	}
	return nil, false
}

func rpCat(want errcat.Category) rpCheck {
	return func(_ context.Context, c *rpCall) error {
		if got := errcat.Of(c.err); got != want {
			return fmt.Errorf("category %q, want %q (%v)", got, want, c.err)
		}
		return nil
	}
}

func rpOK(_ context.Context, c *rpCall) error {
	if c.err != nil {
		return fmt.Errorf("the call failed: %w", c.err)
	}
	return nil
}

func rpFailed(_ context.Context, c *rpCall) error {
	if c.err == nil || c.record() != nil {
		return errors.New("the call must fail and store no response")
	}
	return nil
}

func rpRequests(n int) rpCheck {
	return func(_ context.Context, c *rpCall) error {
		if len(c.wire) != n {
			return fmt.Errorf("%d requests reached the wire, want %d", len(c.wire), n)
		}
		return nil
	}
}

func rpAll(checks ...rpCheck) rpCheck {
	return func(ctx context.Context, c *rpCall) error {
		for _, ch := range checks {
			if err := ch(ctx, c); err != nil {
				return err
			}
		}
		return nil
	}
}

// rpRejected: a pre-send provider_invalid_request, nothing sent.
var rpRejected = rpAll(rpCat(errcat.ProviderInvalidRequest), rpRequests(0))

// rpManagedRejected: rejected as a managed-field collision.
var rpManagedRejected = rpAll(rpRejected, func(_ context.Context, c *rpCall) error {
	if !errors.Is(c.err, llm.ErrManagedField) {
		return fmt.Errorf("%v is not a managed-field rejection", c.err)
	}
	return nil
})

var rpWords = map[string]int{"one": 1, "two": 2, "three": 3}

func rpFamilies() []rpFamily {
	f := func(expr string, check func(m []string) rpCheck) rpFamily {
		return rpFamily{regexp.MustCompile("^" + expr + "$"), check}
	}
	fixed := func(ch rpCheck) func([]string) rpCheck { return func([]string) rpCheck { return ch } }
	return []rpFamily{
		// Outcome.
		f(`exception_raised_out_of_(embed|rerank)_call`, func(m []string) rpCheck {
			return func(_ context.Context, c *rpCall) error {
				if c.err == nil || c.embed != (m[1] == "embed") {
					return fmt.Errorf("no failure raised out of the %s call", m[1])
				}
				return nil
			}
		}),
		f(`(no_provider_invalid_response_raised|no_error_raised_on_malformed_extras|mapping_does_not_error_on_\w+|(classification|clustering)_not_rejected_pre_send|top_k_exceeding_document_count_permitted|result_count_below_top_k_permitted)`,
			fixed(rpOK)),
		f(`(provider_invalid_response_raised|malformed_base64_raises_provider_invalid_response|non_conforming_embedding_shape_raises_provider_invalid_response|(out_of_range_index|duplicate_index|top_k_violation|non_object_scalar_document_echo)_detected)`,
			fixed(rpAll(rpCat(errcat.ProviderInvalidResponse), rpFailed))),
		f(`rate_limit_not_misclassified_as_unavailable`, fixed(rpCat(errcat.ProviderRateLimit))),
		f(`(bare_400_maps_to_provider_invalid_request|bare_400_not_misclassified_as_unavailable|over_token_400_maps_to_provider_invalid_request)`,
			fixed(rpAll(rpCat(errcat.ProviderInvalidRequest), rpFailed))),
		f(`(no_truncated_(score|vector)_returned|malformed_base64_not_truncated_or_padded|whole_call_fails_loud_no_partial_stitch|fails_loud_no_embedding_response_stored|no_embedding_response_stored_on_failure)`,
			fixed(rpFailed)),
		f(`(unrecognized_input_type_rejected_pre_send|not_silently_coerced_to_search_document_default)`, fixed(rpRejected)),
		f(`(conflicting_managed_truncat(e|ion)_rejected_pre_send|conflicting_value_not_forwarded_to_wire|conflicting_value_not_silently_dropped|declared_dimensions_conflict_rejected_pre_send|extras_(dimensions|task)_neither_dropped_nor_forwarded|task_managed_while_input_type_set_conflict_rejected_pre_send|relied_upon_default_reject_no_wire_field_to_intercept)`,
			fixed(rpManagedRejected)),
		f(`no_(embed|rerank)_request_issued`, fixed(rpRequests(0))),
		f(`exactly_(one|two|three)_((embed|rerank)_)?requests?_issued`, func(m []string) rpCheck { return rpRequests(rpWords[m[1]]) }),
		f(`no_retry_loop`, fixed(rpAll(rpRequests(1), func(_ context.Context, c *rpCall) error {
			if c.err == nil {
				return errors.New("the call succeeded")
			}
			return nil
		}))),
		f(`both_chunk_requests_reached_wire_before_raise`, fixed(rpAll(rpRequests(2), rpFailed))),
		// Wire body.
		f(`authorization_bearer_header_present`, fixed(rpBearer)),
		f(`(wire_request|chunk_requests)_omits?_(\w+?)(_field|_when_\w+)?`, func(m []string) rpCheck { return rpOmits(strings.Split(m[2], "_and_")) }),
		f(`wire_request_(carries_)?(\w+?)(_explicit|_field|_from_top_k|_when_input_type_absent|_default)?`, func(m []string) rpCheck {
			return rpCarries(m[2], m[3])
		}),
		f(`truncate_absent_from_wire`, fixed(rpOmits([]string{"truncate"}))),
		f(`wire_(truncate|truncation|dimensions)_is_(managed_\w+_unduplicated|declared_value_once)`, func(m []string) rpCheck { return rpOnce(m[1]) }),
		f(`wire_body_byte_identical_to_(symmetric|default)_path`, fixed(rpIdentical(func(c *rpCall) (retrieval.EmbeddingConfig, retrieval.RerankConfig) {
			e := c.ecfg
			e.InputType = ""
			return e, retrieval.RerankConfig{}
		}))),
		f(`(matching_extras_\w+_(noop|no_op|is_noop)|matching_value_omitted_body_stays_minimal)`, fixed(rpAll(rpOK, rpIdentical(func(c *rpCall) (retrieval.EmbeddingConfig, retrieval.RerankConfig) {
			e, r := c.ecfg, c.rcfg
			e.Extras, r.Extras = nil, nil
			return e, r
		})))),
		f(`(extras_task_rides_untouched_to_wire|input_type_absent_no_managed_task)`, fixed(rpExtrasForwarded("task"))),
		f(`encoding_format_base64_forwarded_to_wire`, fixed(rpExtrasForwarded("encoding_format"))),
		f(`(extras_embedding_types_merged_not_replaced|managed_float_not_dropped_by_extras|caller_supplied_float_not_duplicated|malformed_extras_embedding_types_treated_as_absent|malformed_list_not_salvaged)`,
			fixed(rpEmbeddingTypes)),
		// Chunking.
		f(`(chunk_(inputs|texts)_sizes|chunked_by_count_into_sizes)_([0-9_]+?)(_consecutive_slices)?`, func(m []string) rpCheck { return rpSizes(m[3]) }),
		f(`identical_per_call_params_across_chunks`, fixed(rpIdenticalParams("input", "inputs", "texts"))),
		f(`same_query_on_every_chunk_request`, fixed(rpIdenticalParams("texts"))),
		f(`(over_cap_request_chunked_not_sent_whole|multi_input_chunk_sent_as_one_request_not_token_sub_chunked|over_token_chunk_not_sub_chunked_by_tokens|token_sub_chunker_would_issue_two_requests_and_fail)`,
			fixed(rpChunkedByCount)),
		// Embedding response.
		f(`(vectors_length_matches_input_length|all_vectors_same_dimensionality|dimensions_field_matches_inner_vector_length)`, fixed(rpVectorShape)),
		f(`(vector_at_index_\w+_matches_\w+_input|vectors_in_input_order|vectors_concatenated_in_input_order|decoded_vectors_in_input_order|vectors_assembled_from_embeddings_float_in_input_order|base64_embedding_decoded_to_float_vector)`,
			fixed(rpVectorsOracle)),
		f(`model_is_bound_id(_when_\w+)?`, fixed(rpBoundModel)),
		// Rerank response.
		f(`(results_sorted_by_relevance_descending|results_globally_sorted_by_score_descending_across_chunks)`, fixed(rpSorted)),
		f(`(each_index_valid_into_input_documents|no_duplicate_index_across_stitched_results|result_count_at_most_document_count|result_count_at_most_top_k|result_count_equals_top_k|result_count_matches_response|result_indices_are_absolute_into_original_document_list|chunk_local_indices_rebased_to_absolute_positions|top_k_honored_after_global_sort)`,
			fixed(rpResultsOracle)),
		f(`(\w*echo\w*|echoed_\w+_preserved_verbatim(_on_document)?|textdoc_object_unwrapped_to_text|imagedoc_maps_document_to_null|per_result_document_shape_variance_preserved|document_null_when_provider_omits_echo)`,
			fixed(rpEchoOracle)),
		// Raw, usage, id.
		f(`(\w*_on_raw(_list)?|raw_is_(single_verbatim_response_object_not_list|list_of_per_chunk_response_objects)|raw_preserves_base64_strings_verbatim|verbatim_response_preserved_on_raw)`,
			fixed(rpRawOracle)),
		f(`(\w*usage\w*|\w*(tokens|search_units)\w*)`, fixed(rpUsageOracle)),
		f(`(\w*response_id\w*|malformed_first_chunk_id_nulled|no_fall_through_to_later_chunk_id)`, fixed(rpIDOracle)),
		// Typed events.
		f(`(input_type_in_embedding_event_request_params|request_params_empty_when_input_type_absent|wire_mandatory_default_not_reflected_onto_event)`, fixed(rpEventParams)),
		f(`(embedding|rerank)_event_(usage|response_id)_\w*mirrors_response`, fixed(rpEventMirrors)),
	}
}

func rpBearer(_ context.Context, c *rpCall) error {
	if len(c.wire) == 0 {
		return errors.New("no request")
	}
	for i, w := range c.wire {
		if !strings.HasPrefix(w.Header.Get("Authorization"), "Bearer ") {
			return fmt.Errorf("request %d carries no bearer token", i)
		}
	}
	return nil
}

// rpCarries checks a named wire key (and value) on every request: the
// name is <key> or <key>_<value> (value normalized by rpLower); model is
// the bound model, top_n the top_k.
func rpCarries(name, suffix string) rpCheck {
	return func(_ context.Context, c *rpCall) error {
		if len(c.wire) == 0 {
			return errors.New("no request")
		}
		for i, w := range c.wire {
			if err := rpCarriesOne(name, suffix, c, w); err != nil {
				return fmt.Errorf("request %d: %w", i, err)
			}
		}
		return nil
	}
}

func rpCarriesOne(name, suffix string, c *rpCall, w rpWire) error {
	switch {
	case name == "is_array_form" || name == "input_sent_verbatim" || name == "documents_sent_as_string_array" ||
		strings.HasSuffix(name, "match_in_order") || name == "texts_match_documents_in_order":
		return rpListsMatch(c)
	case strings.HasPrefix(name, "input_carries_") && strings.HasSuffix(name, "_prefix"):
		key := strings.TrimPrefix(name, "input_carries_")
		p, _ := c.prov.Get(key)
		if p == nil {
			return fmt.Errorf("no %s configured", key)
		}
		for _, s := range rpList(w.JSON["input"]) {
			if !strings.HasPrefix(fmt.Sprint(s), p.Str) {
				return fmt.Errorf("input %q lacks the %s", s, key)
			}
		}
		return nil
	case name == "routes_to_base_url":
		base, _ := c.prov.Get("base_url")
		if !strings.HasPrefix(w.URL, strings.TrimRight(base.Str, "/")+"/") {
			return fmt.Errorf("URL %s is not under %s", w.URL, base.Str)
		}
		return nil
	case name == "overrides_jina_true":
		if w.JSON["return_documents"] != c.rcfg.ReturnDocuments {
			return fmt.Errorf("return_documents %v, want %v", w.JSON["return_documents"], c.rcfg.ReturnDocuments)
		}
		return nil
	case name == "model":
		if w.JSON["model"] != c.model {
			return fmt.Errorf("model %v, want %s", w.JSON["model"], c.model)
		}
		return nil
	case suffix == "_from_top_k":
		if rpNum(w.JSON[name]) != float64(c.topK) {
			return fmt.Errorf("%s %v, want top_k %d", name, w.JSON[name], c.topK)
		}
		return nil
	case strings.HasPrefix(name, "embedding_types_"):
		return rpEmbeddingTypesOne(c, w)
	}
	keys := slices.Sorted(maps.Keys(w.JSON))
	for _, k := range slices.Backward(keys) {
		switch {
		case name == k:
			return nil
		case strings.HasPrefix(name, k+"_"):
			want := strings.TrimPrefix(name, k+"_")
			if got := rpLower(w.JSON[k]); got != want {
				return fmt.Errorf("%s is %v, want %s", k, w.JSON[k], want)
			}
			return nil
		}
	}
	return fmt.Errorf("no wire key for %s in %s", name, w.Body)
}

func rpNum(v any) float64 {
	f, _ := v.(float64)
	return f
}

func rpList(v any) []any {
	l, _ := v.([]any)
	return l
}

// rpListsMatch: the requests' list fields, concatenated, are the call's
// strings (documents or input) in order.
func rpListsMatch(c *rpCall) error {
	var got []any
	for _, w := range c.wire {
		for _, k := range []string{"input", "inputs", "texts", "documents"} {
			if v, ok := w.JSON[k]; ok {
				l, ok := v.([]any)
				if !ok {
					return fmt.Errorf("%s is not an array", k)
				}
				got = append(got, l...)
			}
		}
	}
	if len(got) != len(c.input) {
		return fmt.Errorf("%d strings on the wire for %d", len(got), len(c.input))
	}
	for i, s := range got {
		if s != c.input[i] {
			return fmt.Errorf("string %d is %v, want %q", i, s, c.input[i])
		}
	}
	return nil
}

func rpOmits(keys []string) rpCheck {
	return func(_ context.Context, c *rpCall) error {
		if len(c.wire) == 0 {
			return errors.New("no request")
		}
		for i, w := range c.wire {
			for _, k := range keys {
				if _, ok := w.JSON[k]; ok {
					return fmt.Errorf("request %d carries %s", i, k)
				}
			}
		}
		return nil
	}
}

// rpOnce: the key appears once in the raw body (not duplicated by the
// extras) with the mapping's value.
func rpOnce(key string) rpCheck {
	return func(_ context.Context, c *rpCall) error {
		if len(c.wire) == 0 {
			return errors.New("no request")
		}
		for _, w := range c.wire {
			if n := bytes.Count(w.Body, []byte(`"`+key+`":`)); n != 1 {
				return fmt.Errorf("%s appears %d times", key, n)
			}
		}
		return nil
	}
}

// rpIdentical reruns the call with an altered config and compares the
// request bytes.
func rpIdentical(alter func(*rpCall) (retrieval.EmbeddingConfig, retrieval.RerankConfig)) rpCheck {
	return func(ctx context.Context, c *rpCall) error {
		e, r := alter(c)
		if err := rpRun(ctx, c, e, r, false); err != nil {
			return err
		}
		if len(c.wire) == 0 || len(c.rerun) != len(c.wire) {
			return fmt.Errorf("%d requests, the comparison path %d", len(c.wire), len(c.rerun))
		}
		for i := range c.wire {
			if !bytes.Equal(c.wire[i].Body, c.rerun[i].Body) {
				return fmt.Errorf("request %d differs:\n%s\n%s", i, c.wire[i].Body, c.rerun[i].Body)
			}
		}
		return nil
	}
}

func rpExtrasForwarded(key string) rpCheck {
	return func(_ context.Context, c *rpCall) error {
		want, ok := c.ecfg.Extras[key]
		if !ok || len(c.wire) == 0 {
			return fmt.Errorf("no extras %s or no request", key)
		}
		for _, w := range c.wire {
			if !llm.JSONEqual(w.JSON[key], want) {
				return fmt.Errorf("%s on the wire is %v, want %v", key, w.JSON[key], want)
			}
		}
		return nil
	}
}

func rpEmbeddingTypes(_ context.Context, c *rpCall) error {
	if len(c.wire) == 0 {
		return errors.New("no request")
	}
	return rpEmbeddingTypesOne(c, c.wire[0])
}

// rpEmbeddingTypesOne: embedding_types is "float" then the extras'
// precisions (a malformed extras value ignored), de-duplicated.
func rpEmbeddingTypesOne(c *rpCall, w rpWire) error {
	want := []any{"float"}
	if l, ok := c.ecfg.Extras["embedding_types"].([]any); ok {
		var extra []any
		for _, e := range l {
			s, ok := e.(string)
			if !ok {
				extra = nil
				break
			}
			if !slices.Contains(want, any(s)) && !slices.Contains(extra, any(s)) {
				extra = append(extra, s)
			}
		}
		want = append(want, extra...)
	}
	if got := rpList(w.JSON["embedding_types"]); !slices.Equal(got, want) {
		return fmt.Errorf("embedding_types %v, want %v", got, want)
	}
	return nil
}

func rpSizes(spec string) rpCheck {
	return func(_ context.Context, c *rpCall) error {
		var want []int
		for _, s := range strings.Split(spec, "_") {
			n, _ := strconv.Atoi(s)
			want = append(want, n)
		}
		var got []int
		for _, w := range c.wire {
			for _, k := range []string{"input", "inputs", "texts"} {
				if l, ok := w.JSON[k].([]any); ok {
					got = append(got, len(l))
				}
			}
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("chunk sizes %v, want %v", got, want)
		}
		if c.err == nil {
			return rpListsMatch(c)
		}
		return nil
	}
}

// rpIdenticalParams: every request is the same apart from the listed
// (chunked) keys.
func rpIdenticalParams(except ...string) rpCheck {
	return func(_ context.Context, c *rpCall) error {
		if len(c.wire) < 2 {
			return fmt.Errorf("%d requests, not a chunked call", len(c.wire))
		}
		strip := func(m map[string]any) map[string]any {
			out := maps.Clone(m)
			for _, k := range except {
				delete(out, k)
			}
			return out
		}
		first := strip(c.wire[0].JSON)
		for i, w := range c.wire[1:] {
			if !llm.JSONEqual(first, strip(w.JSON)) {
				return fmt.Errorf("request %d params differ from request 0", i+1)
			}
		}
		return nil
	}
}

// rpChunkedByCount: ceil(n/chunk_size) requests, each within the cap.
func rpChunkedByCount(_ context.Context, c *rpCall) error {
	size := 0
	if c.prov != nil {
		if v, ok := c.prov.Get("chunk_size"); ok {
			size = int(v.Int)
		}
	}
	if size == 0 {
		size = map[string]int{"cohere": 96, "tei": 32, "openai": 2048}[c.mapping]
	}
	want := (len(c.input) + size - 1) / size
	if c.err != nil && len(c.wire) < want {
		want = len(c.wire) // a failing chunk stops the call
	}
	if len(c.wire) != want {
		return fmt.Errorf("%d requests, want %d (chunks of %d)", len(c.wire), want, size)
	}
	return rpSizesWithin(c, size)
}

func rpSizesWithin(c *rpCall, size int) error {
	for i, w := range c.wire {
		for _, k := range []string{"input", "inputs", "texts"} {
			if l, ok := w.JSON[k].([]any); ok && len(l) > size {
				return fmt.Errorf("request %d sends %d > %d", i, len(l), size)
			}
		}
	}
	return nil
}

func rpVectorShape(_ context.Context, c *rpCall) error {
	r := c.eresp
	if r == nil {
		return errors.New("no response")
	}
	if len(r.Vectors) != len(c.input) {
		return fmt.Errorf("%d vectors for %d inputs", len(r.Vectors), len(c.input))
	}
	for i, v := range r.Vectors {
		if len(v) != r.Dimensions {
			return fmt.Errorf("vector %d has %d dimensions, the response says %d", i, len(v), r.Dimensions)
		}
	}
	return nil
}

// rpVectorsOracle decodes the served mock bodies independently (by
// index for a data list, by position otherwise; array or base64
// float32) and compares the stitched vectors.
func rpVectorsOracle(_ context.Context, c *rpCall) error {
	if c.eresp == nil {
		return errors.New("no response")
	}
	var want [][]float64
	for _, s := range c.mocks[:c.served] {
		var body any
		_ = json.Unmarshal(s.body, &body)
		var list []any
		switch b := body.(type) {
		case []any:
			list = b
		case map[string]any:
			if d, ok := b["data"].([]any); ok {
				list = make([]any, len(d))
				for _, e := range d {
					em, _ := e.(map[string]any)
					if i := int(rpNum(em["index"])); i < len(list) {
						list[i] = em["embedding"]
					}
				}
			} else if e, ok := b["embeddings"].(map[string]any); ok {
				list, _ = e["float"].([]any)
			}
		}
		for _, v := range list {
			want = append(want, rpOracleVector(v))
		}
	}
	if len(want) != len(c.eresp.Vectors) {
		return fmt.Errorf("%d vectors, the mock served %d", len(c.eresp.Vectors), len(want))
	}
	for i := range want {
		if !slices.Equal(want[i], c.eresp.Vectors[i]) {
			return fmt.Errorf("vector %d is %v, want %v", i, c.eresp.Vectors[i], want[i])
		}
	}
	return nil
}

func rpOracleVector(v any) []float64 {
	var out []float64
	switch x := v.(type) {
	case []any:
		for _, f := range x {
			out = append(out, rpNum(f))
		}
	case string:
		var b []byte
		_ = json.Unmarshal([]byte(strconv.Quote(x)), &x)
		b, _ = base64Decode(x)
		for i := 0; i+4 <= len(b); i += 4 {
			bits := uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
			out = append(out, float64(math.Float32frombits(bits)))
		}
	}
	return out
}

func rpBoundModel(_ context.Context, c *rpCall) error {
	if c.eresp == nil || c.eresp.Model != c.model {
		return fmt.Errorf("response model is not the bound %s", c.model)
	}
	return nil
}

func rpSorted(_ context.Context, c *rpCall) error {
	if c.rresp == nil {
		return errors.New("no response")
	}
	if !slices.IsSortedFunc(c.rresp.Results, func(a, b retrieval.ScoredDocument) int {
		switch {
		case a.RelevanceScore > b.RelevanceScore:
			return -1
		case a.RelevanceScore < b.RelevanceScore:
			return 1
		}
		return 0
	}) {
		return errors.New("results are not sorted by score, descending")
	}
	return nil
}

// rpMockResults returns the served rerank entries with absolute indices
// (chunk-relative ones re-based by the chunk's offset on the wire).
func rpMockResults(c *rpCall) []map[string]any {
	var out []map[string]any
	base := 0
	for i, s := range c.mocks[:c.served] {
		var body any
		_ = json.Unmarshal(s.body, &body)
		list, _ := body.([]any)
		if m, ok := body.(map[string]any); ok {
			list, _ = m["results"].([]any)
		}
		for _, e := range list {
			em, _ := e.(map[string]any)
			em = maps.Clone(em)
			em["index"] = float64(base) + rpNum(em["index"])
			out = append(out, em)
		}
		if i < len(c.wire) {
			base += len(rpList(c.wire[i].JSON["texts"]))
		}
	}
	return out
}

// rpResultsOracle: the results are the served entries (absolute
// indices, each valid and once), the best top_k of them.
func rpResultsOracle(ctx context.Context, c *rpCall) error {
	if c.rresp == nil {
		return errors.New("no response")
	}
	served := rpMockResults(c)
	if c.topK > 0 && len(served) > c.topK && c.mapping == "tei" {
		slices.SortStableFunc(served, func(a, b map[string]any) int {
			return int(math.Copysign(1, rpNum(a["score"])-rpNum(b["score"]))) * -1
		})
		served = served[:c.topK]
	}
	if len(served) != len(c.rresp.Results) {
		return fmt.Errorf("%d results, the provider returned %d", len(c.rresp.Results), len(served))
	}
	if c.topK > 0 && len(c.rresp.Results) > c.topK {
		return fmt.Errorf("%d results for top_k %d", len(c.rresp.Results), c.topK)
	}
	seen := map[int]bool{}
	for _, r := range c.rresp.Results {
		if r.Index < 0 || r.Index >= len(c.input) || seen[r.Index] {
			return fmt.Errorf("index %d is out of range or repeated", r.Index)
		}
		seen[r.Index] = true
		i := slices.IndexFunc(served, func(m map[string]any) bool { return int(rpNum(m["index"])) == r.Index })
		if i < 0 {
			return fmt.Errorf("index %d was not returned by the provider", r.Index)
		}
		score := served[i]["relevance_score"]
		if score == nil {
			score = served[i]["score"]
		}
		if rpNum(score) != r.RelevanceScore {
			return fmt.Errorf("index %d score %v, the provider said %v", r.Index, r.RelevanceScore, score)
		}
	}
	return rpSorted(ctx, c)
}

// rpEchoOracle: each result's document is derived from the provider's
// echo (string → itself, {text: string} → text, other object or absent
// → null; Cohere never echoes), never from the input.
func rpEchoOracle(_ context.Context, c *rpCall) error {
	if c.rresp == nil {
		return errors.New("no response")
	}
	served := rpMockResults(c)
	for _, r := range c.rresp.Results {
		i := slices.IndexFunc(served, func(m map[string]any) bool { return int(rpNum(m["index"])) == r.Index })
		if i < 0 {
			return fmt.Errorf("index %d was not returned", r.Index)
		}
		echo := served[i]["document"]
		if echo == nil {
			echo = served[i]["text"]
		}
		var want *string
		switch e := echo.(type) {
		case string:
			want = &e
		case map[string]any:
			if t, ok := e["text"].(string); ok {
				want = &t
			}
		}
		if c.mapping == "cohere" {
			want = nil
		}
		if (want == nil) != (r.Document == nil) || (want != nil && *want != *r.Document) {
			return fmt.Errorf("index %d document %v, want %v", r.Index, rpStr(r.Document), rpStr(want))
		}
	}
	return nil
}

func rpStr(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// rpServedRaw is what raw must be: the one served body, or the list of
// the served bodies of a chunked call.
func rpServedRaw(c *rpCall) any {
	bodies := c.mocks[:c.served]
	if len(bodies) == 1 {
		return rpJSON(bodies[0].body)
	}
	list := make([]any, len(bodies))
	for i, b := range bodies {
		list[i] = rpJSON(b.body)
	}
	return list
}

func rpRawOracle(_ context.Context, c *rpCall) error {
	rec, _ := c.record().(map[string]any)
	if rec == nil {
		return errors.New("no response")
	}
	if err := newMatcher().match("raw", rpServedRaw(c), rec["raw"], exact); err != nil {
		return err
	}
	return nil
}

// rpUsageOracle recomputes the usage from the served bodies: a figure is
// reported when it is a non-negative integer; a chunked embed call sums
// them, or is null when any chunk reported none.
func rpUsageOracle(_ context.Context, c *rpCall) error {
	rec, _ := c.record().(map[string]any)
	if rec == nil {
		return errors.New("no response")
	}
	figure := func(body map[string]any, path ...string) *int {
		var v any = body
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		f, ok := v.(float64)
		if !ok || f < 0 || f != math.Trunc(f) {
			return nil
		}
		n := int(f)
		return &n
	}
	var want any
	if c.embed {
		sum := 0
		for i, s := range c.mocks[:c.served] {
			var body map[string]any
			_ = json.Unmarshal(s.body, &body)
			var n *int
			switch c.mapping {
			case "cohere":
				n = figure(body, "meta", "billed_units", "input_tokens")
			case "jina":
				n = figure(body, "usage", "total_tokens")
			case "openai", "harness":
				n = figure(body, "usage", "prompt_tokens")
			}
			if n == nil {
				sum = -1
			}
			if sum >= 0 {
				sum += *n
			}
			if i == c.served-1 && sum >= 0 {
				want = map[string]any{"input_tokens": sum}
			}
		}
	} else {
		var body map[string]any
		if c.served > 0 {
			_ = json.Unmarshal(c.mocks[0].body, &body)
		}
		su, it := figure(body, "meta", "billed_units", "search_units"), (*int)(nil)
		if c.mapping == "jina" {
			it, su = figure(body, "usage", "total_tokens"), nil
		}
		if su != nil || it != nil {
			want = rerankUsage(&retrieval.RerankUsage{SearchUnits: su, InputTokens: it})
		}
	}
	return newMatcher().match("usage", want, rec["usage"], exact)
}

// rpIDOracle: the response id is the first served body's top-level id
// when it is a non-empty string, else null.
func rpIDOracle(_ context.Context, c *rpCall) error {
	rec, _ := c.record().(map[string]any)
	if rec == nil {
		return errors.New("no response")
	}
	var want any
	if c.served > 0 && c.mapping != "tei" && c.mapping != "jina" {
		var body map[string]any
		_ = json.Unmarshal(c.mocks[0].body, &body)
		if s, ok := body["id"].(string); ok && s != "" {
			want = s
		}
	}
	return newMatcher().match("response_id", want, rec["response_id"], exact)
}

// rpEventParams: the event's request_params are the declared fields the
// caller set, nothing the mapping defaulted on the wire.
func rpEventParams(_ context.Context, c *rpCall) error {
	if len(c.eevents) != 1 {
		return fmt.Errorf("%d embedding events", len(c.eevents))
	}
	want := map[string]any{}
	if c.ecfg.InputType != "" {
		want["input_type"] = string(c.ecfg.InputType)
	}
	if c.ecfg.Dimensions != 0 {
		want["dimensions"] = c.ecfg.Dimensions
	}
	return newMatcher().match("request_params", want, c.eevents[0].RequestParams, exact)
}

// rpEventMirrors: the event's usage and response id are the response's.
func rpEventMirrors(_ context.Context, c *rpCall) error {
	rec, _ := c.record().(map[string]any)
	evs := c.events()
	if rec == nil || len(evs) != 1 {
		return errors.New("no response or no single event")
	}
	for _, k := range []string{"usage", "response_id"} {
		if err := newMatcher().match("event."+k, rec[k], evs[0][k], exact); err != nil {
			return err
		}
	}
	return nil
}

func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
