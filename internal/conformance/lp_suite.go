package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// llmProviderSuite runs the llm-provider fixtures (lp_*.go).
type llmProviderSuite struct{}

var (
	lpCaseKeys = []string{"name", "description", "mapping", "mock_provider", "calls", "call", "expected", "expected_wire_bytes_identical",
		"expected_wire_request", "expected_wire_request_checks", "expected_wire_request_absent_keys"}
	// lpCaseCallKeys are call directives a single-call case states beside
	// call: rather than inside it.
	lpCaseCallKeys = []string{"expected", "expected_wire_request", "expected_wire_request_checks", "expected_wire_request_absent_keys"}
	lpCallKeys     = []string{"operation", "messages", "tools", "tool_choice", "config", "response_schema", "retry", "stream",
		"retry_middleware", "expected", "expected_wire_request", "expected_wire_request_checks", "expected_wire_request_absent_keys"}
	lpExpectedKeys = []string{"response", "raises", "invariants", "success", "no_token_events_emitted", "provider_call_count",
		"caller_messages_unmodified", "wire_requests", "llm_spans"}
	lpRetryKeys = []string{"max_attempts", "backoff", "per_attempt_override", "reask", "classifier"}
)

// lpDefaultModel is the bound model when no expected wire request names
// one.
const lpDefaultModel = "test-model"

// lpCall is one executed call and everything observed about it.
type lpCall struct {
	item     *Value
	req      *llm.Request
	before   []byte // the caller's messages, encoded before the call
	resp     *llm.Response
	err      error
	chunks   []*llm.Chunk
	attempts []llm.Attempt
	wire     []lpWire
	// spans are the LLM spans the product emitted for the call, when
	// the call expects llm_spans (lp_spans.go).
	spans []tracetest.SpanStub
}

func (llmProviderSuite) RunCase(ctx context.Context, c *Case) error {
	body := c.Body
	mapping := "openai"
	if v, ok := body.Get("mapping"); ok {
		mapping = v.Str
	}
	factory, ok := lpMappings[mapping]
	if !ok {
		return notImplemented("llm-provider " + mapping + " mapping")
	}
	if err := hcStrictKeys(body, "case", lpCaseKeys...); err != nil {
		return err
	}
	var items []*Value
	if cs, ok := body.Get("calls"); ok {
		if cs.Kind != KindList || len(cs.Items) == 0 {
			return schemaErrorf(cs.Pos, "calls: must be a non-empty list")
		}
		items = cs.Items
		for _, k := range lpCaseCallKeys {
			if f, ok := body.Field(k); ok {
				return schemaErrorf(f.Pos, "%s: only with call:", k)
			}
		}
	} else if one, ok := body.Get("call"); ok {
		item := *one
		item.Fields = slices.Clone(one.Fields)
		for _, k := range lpCaseCallKeys {
			if f, ok := body.Field(k); ok {
				if _, dup := one.Get(k); dup {
					return schemaErrorf(f.Pos, "%s: given both beside and inside call:", k)
				}
				item.Fields = append(item.Fields, f)
			}
		}
		items = []*Value{&item}
	} else {
		return schemaErrorf(body.Pos, "calls: or call: is required")
	}
	mv, _ := body.Get("mock_provider")
	mock, err := newLPMock(mv)
	if err != nil {
		return err
	}
	defer mock.close()
	model := lpBoundModel(mock)
	for _, it := range items {
		if w, ok := it.Get("expected_wire_request"); ok {
			if m, ok := w.Get("model"); ok && m.Kind == KindString {
				model = m.Str
				break
			}
		}
	}
	p, err := factory(lpEnv{ServerURL: mock.url(), Model: model, Capabilities: mock.capabilities})
	if err != nil {
		return fmt.Errorf("building the %s mapping: %w", mapping, err)
	}
	var calls []*lpCall
	for i, it := range items {
		if err := hcStrictKeys(it, "call", lpCallKeys...); err != nil {
			return err
		}
		call, err := lpDo(ctx, p, mock, it)
		if err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
		calls = append(calls, call)
		if err := lpAssertCall(call, mock, model, mapping); err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
	}
	if v, ok := body.Get("expected_wire_bytes_identical"); ok {
		if err := hcStrictKeys(v, "expected_wire_bytes_identical", "calls"); err != nil {
			return err
		}
		idx, _ := v.Get("calls")
		var first []byte
		for n, it := range idx.Items {
			i := int(it.Int)
			if i < 0 || i >= len(calls) || len(calls[i].wire) == 0 {
				return fmt.Errorf("expected_wire_bytes_identical: call %d sent no request", i)
			}
			if n == 0 {
				first = calls[i].wire[0].Body
			} else if !bytes.Equal(first, calls[i].wire[0].Body) {
				return fmt.Errorf("expected_wire_bytes_identical: call %d bytes differ:\n%s\n%s", i, first, calls[i].wire[0].Body)
			}
		}
	}
	return nil
}

// lpDo parses and performs one call.
func lpDo(ctx context.Context, p llm.Provider, mock *lpMock, it *Value) (*lpCall, error) {
	call := &lpCall{item: it}
	opv, _ := it.Get("operation")
	op := "complete"
	if opv != nil {
		op = opv.Str
	}
	start := len(mock.wire())
	defer func() { call.wire = mock.wire()[start:] }()
	switch op {
	case "ready":
		call.err = p.Ready(ctx)
		return call, nil
	case "complete", "stream":
	default:
		return nil, &DirectiveUnknownError{Name: "operation " + op, Pos: opv.Pos}
	}
	req, decodeErr, err := lpRequest(it)
	if err != nil {
		return nil, err
	}
	if op == "stream" {
		req.Stream = true
	}
	call.req = req
	if decodeErr != nil {
		// The message model rejects the shape at decoding, before any
		// provider is involved: the call raises provider_invalid_request.
		call.err = decodeErr
		return call, nil
	}
	call.before, _ = json.Marshal(req.Messages)
	req.OnChunk = func(c *llm.Chunk) { call.chunks = append(call.chunks, c) }
	if req.Retry != nil {
		req.Retry.OnAttempt = func(_ context.Context, a llm.Attempt) { call.attempts = append(call.attempts, a) }
	}
	if rm, ok := it.Get("retry_middleware"); ok {
		if err := hcStrictKeys(rm, "retry_middleware", "max_attempts", "classifier"); err != nil {
			return nil, err
		}
		max := 3
		if v, ok := rm.Get("max_attempts"); ok {
			max = int(v.Int)
		}
		if v, ok := rm.Get("classifier"); ok && v.Str != "default" {
			return nil, schemaErrorf(v.Pos, "retry_middleware.classifier: only default is known")
		}
		// A node-level retry around the call: the §6.1 default classifier.
		for a := 0; a < max; a++ {
			call.resp, call.err = llm.Complete(ctx, p, req)
			if call.err == nil || !llm.DefaultTransient(call.err) {
				break
			}
		}
		return call, nil
	}
	if lpExpectsSpans(it) {
		call.spans, call.resp, call.err = lpTraced(ctx, p, req)
		return call, nil
	}
	call.resp, call.err = llm.Complete(ctx, p, req)
	return call, nil
}

// lpRequest builds the request of a call. decodeErr is a message-model
// decoding failure (a provider_invalid_request the call raises).
func lpRequest(it *Value) (req *llm.Request, decodeErr, err error) {
	req = &llm.Request{}
	if v, ok := it.Get("messages"); ok {
		data, _ := json.Marshal(v.Native())
		if e := json.Unmarshal(data, &req.Messages); e != nil {
			decodeErr = e
		}
	}
	if v, ok := it.Get("tools"); ok && !v.IsNull() {
		data, _ := json.Marshal(v.Native())
		if e := json.Unmarshal(data, &req.Tools); e != nil && decodeErr == nil {
			decodeErr = e
		}
	}
	if v, ok := it.Get("tool_choice"); ok && !v.IsNull() {
		switch v.Kind {
		case KindString:
			req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceMode(v.Str)}
		case KindMap:
			t, _ := v.Get("type")
			n, _ := v.Get("name")
			if t != nil {
				req.ToolChoice.Mode = llm.ToolChoiceMode(t.Str)
			}
			if n != nil {
				req.ToolChoice.Name = n.Str
			}
		default:
			return nil, nil, schemaErrorf(v.Pos, "tool_choice: must be a string or mapping")
		}
	}
	if v, ok := it.Get("config"); ok && !v.IsNull() {
		cfg, e := lpConfig(v)
		if e != nil {
			return nil, nil, e
		}
		req.Config = cfg
	}
	if v, ok := it.Get("response_schema"); ok && !v.IsNull() {
		req.ResponseSchema, _ = json.Marshal(v.Native())
	}
	if v, ok := it.Get("stream"); ok {
		req.Stream = v.Bool
	}
	if v, ok := it.Get("retry"); ok && !v.IsNull() {
		pol, e := lpRetry(v)
		if e != nil {
			return nil, nil, e
		}
		req.Retry = pol
	}
	return req, decodeErr, nil
}

func lpConfig(v *Value) (llm.Config, error) {
	var c llm.Config
	if v.Kind != KindMap {
		return c, schemaErrorf(v.Pos, "config: must be a mapping")
	}
	num := func(f *Field) float64 {
		if f.Value.Kind == KindInt {
			return float64(f.Value.Int)
		}
		return f.Value.Float
	}
	for _, f := range v.Fields {
		if f.Value.IsNull() {
			continue // §6 null-skip
		}
		switch f.Key {
		case "temperature":
			c.Temperature = new(num(f))
		case "top_p":
			c.TopP = new(num(f))
		case "frequency_penalty":
			c.FrequencyPenalty = new(num(f))
		case "presence_penalty":
			c.PresencePenalty = new(num(f))
		case "max_tokens":
			c.MaxTokens = new(int(f.Value.Int))
		case "seed":
			c.Seed = new(f.Value.Int)
		case "stop_sequences":
			c.StopSequences = []string{}
			for _, s := range f.Value.Items {
				c.StopSequences = append(c.StopSequences, s.Str)
			}
		case "extras":
			if c.Extras == nil {
				c.Extras = map[string]any{}
			}
			for _, e := range f.Value.Fields {
				c.Extras[e.Key] = e.Value.Native()
			}
		default:
			// An undeclared field given directly is an extra (§6).
			if c.Extras == nil {
				c.Extras = map[string]any{}
			}
			c.Extras[f.Key] = f.Value.Native()
		}
	}
	return c, nil
}

func lpRetry(v *Value) (*llm.RetryPolicy, error) {
	if err := hcStrictKeys(v, "retry", lpRetryKeys...); err != nil {
		return nil, err
	}
	pol := &llm.RetryPolicy{}
	if m, ok := v.Get("max_attempts"); ok {
		pol.MaxAttempts = int(m.Int)
	}
	if b, ok := v.Get("backoff"); ok {
		if err := hcStrictKeys(b, "retry.backoff", "type", "seconds"); err != nil {
			return nil, err
		}
		t, _ := b.Get("type")
		if t == nil || t.Str != "deterministic" {
			return nil, schemaErrorf(b.Pos, "retry.backoff.type: only deterministic is known")
		}
		secs := 0.0
		if s, ok := b.Get("seconds"); ok {
			secs = s.Float + float64(s.Int)
		}
		d := time.Duration(secs * float64(time.Second))
		pol.Backoff = func(int) time.Duration { return d }
	}
	if cl, ok := v.Get("classifier"); ok && cl.Str != "default" {
		return nil, schemaErrorf(cl.Pos, "retry.classifier: only default is known")
	}
	if o, ok := v.Get("per_attempt_override"); ok {
		for _, it := range o.Items {
			c, err := lpConfig(it)
			if err != nil {
				return nil, err
			}
			pol.PerAttemptOverride = append(pol.PerAttemptOverride, c)
		}
	}
	if r, ok := v.Get("reask"); ok {
		if err := hcStrictKeys(r, "retry.reask", "template"); err != nil {
			return nil, err
		}
		t, _ := r.Get("template")
		tmpl := t.Str
		pol.Reask = func(e *llm.StructuredOutputError) string {
			return strings.NewReplacer("{output_content}", e.OutputContent, "{error_message}", e.ErrorMessage).Replace(tmpl)
		}
	}
	return pol, nil
}

// lpNative decodes JSON into plain values for the matcher.
func lpNative(b []byte) any {
	var v any
	if len(b) == 0 || json.Unmarshal(b, &v) != nil {
		return nil
	}
	return v
}

// lpResponseView renders a response as the fixture's response mapping.
func lpResponseView(r *llm.Response) map[string]any {
	msg := map[string]any{"role": string(r.Message.Role), "content": nil, "tool_calls": nil}
	switch {
	case r.Message.Content.IsText():
		msg["content"] = r.Message.Content.Text()
	case r.Message.Content.IsBlocks():
		b, _ := json.Marshal(r.Message.Content)
		msg["content"] = lpNative(b)
	}
	if len(r.Message.ToolCalls) > 0 {
		var calls []any
		for _, tc := range r.Message.ToolCalls {
			call := map[string]any{"id": tc.ID, "name": tc.Name, "arguments": lpNative(tc.Arguments)}
			if tc.Signature != "" { // a reasoning-continuity token (§3, §8.3.2)
				call["signature"] = tc.Signature
			}
			calls = append(calls, call)
		}
		msg["tool_calls"] = calls
	}
	counter := func(p *int) any {
		if p == nil {
			return nil
		}
		return *p
	}
	usage := map[string]any{
		"prompt_tokens":     counter(r.Usage.PromptTokens),
		"completion_tokens": counter(r.Usage.CompletionTokens),
		"total_tokens":      counter(r.Usage.TotalTokens),
	}
	if r.Usage.CachedTokens != nil {
		usage["cached_tokens"] = *r.Usage.CachedTokens
	}
	if r.Usage.CacheCreationTokens != nil {
		usage["cache_creation_tokens"] = *r.Usage.CacheCreationTokens
	}
	return map[string]any{"message": msg, "finish_reason": string(r.FinishReason), "usage": usage, "parsed": lpNative(r.Parsed)}
}

// lpAssertCall checks a call's expectations.
func lpAssertCall(call *lpCall, mock *lpMock, model, mapping string) error {
	if w, ok := call.item.Get("expected_wire_request"); ok {
		if len(call.wire) == 0 {
			return fmt.Errorf("expected_wire_request: no request was sent (error: %v)", call.err)
		}
		if err := lpMatchWire("wire", w.Native(), lpWireView(mapping, call.wire[0])); err != nil {
			return fmt.Errorf("expected_wire_request: %w\nsent: %s", err, call.wire[0].Body)
		}
	}
	if w, ok := call.item.Get("expected_wire_request_checks"); ok {
		if err := lpWireChecks(call, w); err != nil {
			return err
		}
	}
	if w, ok := call.item.Get("expected_wire_request_absent_keys"); ok {
		if len(call.wire) == 0 {
			return fmt.Errorf("expected_wire_request_absent_keys: no request was sent")
		}
		root, _ := lpNative(call.wire[0].Body).(map[string]any)
		for _, k := range w.Items {
			if _, present := root[k.Str]; present {
				return fmt.Errorf("expected_wire_request_absent_keys: %q is on the wire: %s", k.Str, call.wire[0].Body)
			}
		}
	}
	ev, ok := call.item.Get("expected")
	if !ok {
		return nil
	}
	if err := hcStrictKeys(ev, "expected", lpExpectedKeys...); err != nil {
		return err
	}
	m := newMatcher()
	for _, f := range ev.Fields {
		var err error
		switch f.Key {
		case "response":
			err = lpAssertResponse(m, call, mock, f.Value)
		case "raises":
			err = lpAssertRaises(call, f.Value)
		case "success":
			if f.Value.Bool && call.err != nil {
				err = fmt.Errorf("success: the call failed: %w", call.err)
			}
		case "no_token_events_emitted":
			if f.Value.Bool && len(call.chunks) > 0 {
				err = fmt.Errorf("no_token_events_emitted: %d chunks were emitted", len(call.chunks))
			}
		case "provider_call_count":
			if len(call.wire) != int(f.Value.Int) {
				err = fmt.Errorf("provider_call_count: want %d, got %d", f.Value.Int, len(call.wire))
			}
		case "caller_messages_unmodified":
			err = lpCallerUnmodified(call)
		case "wire_requests":
			err = lpAssertWireRequests(call, f.Value)
		case "llm_spans":
			err = lpAssertSpans(m, call, model, f.Value)
		case "invariants":
			err = lpInvariants(call, f.Value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func lpCallerUnmodified(call *lpCall) error {
	if call.req == nil {
		return nil
	}
	after, _ := json.Marshal(call.req.Messages)
	if !bytes.Equal(call.before, after) {
		return fmt.Errorf("caller messages changed: %s -> %s", call.before, after)
	}
	return nil
}

func lpAssertResponse(m *matcher, call *lpCall, mock *lpMock, v *Value) error {
	if call.err != nil {
		return fmt.Errorf("response: the call failed: %w", call.err)
	}
	if call.resp == nil {
		return fmt.Errorf("response: no response")
	}
	want, _ := v.Native().(map[string]any)
	if rc, ok := want["raw_check"]; ok {
		delete(want, "raw_check")
		if err := lpRawCheck(call, mock, rc); err != nil {
			return err
		}
	}
	if len(call.resp.Raw) == 0 || !json.Valid(call.resp.Raw) {
		return fmt.Errorf("response.raw: not populated with JSON")
	}
	return m.match("response", want, lpResponseView(call.resp), subsetDeep)
}

func lpRawCheck(call *lpCall, mock *lpMock, rc any) error {
	spec, _ := rc.(map[string]any)
	raw, _ := lpNative(call.resp.Raw).(map[string]any)
	if raw == nil {
		return fmt.Errorf("raw_check: raw is not a JSON object: %s", call.resp.Raw)
	}
	var body map[string]any
	if s, ok := mock.lastConsumed(); ok && !s.streamBody {
		body, _ = lpNative(s.body).(map[string]any)
	}
	for k := range spec {
		if k != "required_keys" {
			return &DirectiveUnknownError{Name: "raw_check." + k}
		}
	}
	keys, _ := spec["required_keys"].([]any)
	for _, k := range keys {
		key, _ := k.(string)
		got, ok := raw[key]
		if !ok {
			return fmt.Errorf("raw_check: raw lacks %q: %s", key, call.resp.Raw)
		}
		if body != nil && !deepEqual(body[key], got) {
			return fmt.Errorf("raw_check: raw %q = %s, the provider sent %s", key, formatValue(got), formatValue(body[key]))
		}
	}
	return nil
}

func lpAssertRaises(call *lpCall, v *Value) error {
	if err := hcStrictKeys(v, "raises", "category", "retry_after_seconds", "carries", "message"); err != nil {
		return err
	}
	if call.err == nil {
		return fmt.Errorf("raises: the call succeeded")
	}
	if c, ok := v.Get("category"); ok {
		if got := errcat.Of(call.err); string(got) != c.Str {
			return fmt.Errorf("raises: category %q, want %q (%v)", got, c.Str, call.err)
		}
	}
	if msg, ok := v.Get("message"); ok && !strings.Contains(call.err.Error(), msg.Str) {
		return fmt.Errorf("raises: error %q does not carry the message %q", call.err, msg.Str)
	}
	if ra, ok := v.Get("retry_after_seconds"); ok {
		var pe *llm.ProviderError
		if !errors.As(call.err, &pe) || pe.RetryAfter.Seconds() != float64(ra.Int)+ra.Float {
			return fmt.Errorf("raises: retry_after %v, want %vs", call.err, ra.Native())
		}
	}
	if cv, ok := v.Get("carries"); ok {
		if err := hcStrictKeys(cv, "raises.carries", "response_schema_present", "output_content", "error_message_present",
			"error_message_mentions", "finish_reason", "usage"); err != nil {
			return err
		}
		var soe *llm.StructuredOutputError
		if !errors.As(call.err, &soe) {
			return fmt.Errorf("raises.carries: %v is not a structured-output error", call.err)
		}
		view := lpResponseView(&llm.Response{Message: llm.Message{Role: llm.RoleAssistant}, FinishReason: soe.FinishReason, Usage: soe.Usage})
		for _, f := range cv.Fields {
			var bad bool
			switch f.Key {
			case "response_schema_present":
				bad = f.Value.Bool != (len(soe.Schema) > 0)
			case "output_content":
				bad = soe.OutputContent != f.Value.Str
			case "error_message_present":
				bad = f.Value.Bool != (soe.ErrorMessage != "")
			case "error_message_mentions":
				bad = !strings.Contains(soe.ErrorMessage, f.Value.Str)
			case "finish_reason":
				bad = string(soe.FinishReason) != f.Value.Str
			case "usage":
				if err := newMatcher().match("raises.carries.usage", f.Value.Native(), view["usage"], subsetDeep); err != nil {
					return err
				}
			}
			if bad {
				return fmt.Errorf("raises.carries.%s: want %s, error has schema=%t output=%q message=%q finish=%q",
					f.Key, f.Value, len(soe.Schema) > 0, soe.OutputContent, soe.ErrorMessage, soe.FinishReason)
			}
		}
	}
	return nil
}

// lpMatchWire compares an expected wire body with the sent one exactly
// (mappings at every depth), numbers numerically, "*" matching any
// value, and tool-call argument strings as decoded JSON (their byte form
// is implementation-defined).
func lpMatchWire(path string, want, got any) error {
	if s, ok := want.(string); ok && s == "*" {
		if got == nil {
			return fmt.Errorf("%s: want a value, got none", path)
		}
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return mismatch(path, want, got)
		}
		for _, k := range sortedKeys(w) {
			gv, present := g[k]
			if !present {
				return fmt.Errorf("%s: missing key %q (want %s)", path, k, formatValue(w[k]))
			}
			wv := w[k]
			if k == "arguments" {
				if ws, ok := wv.(string); ok {
					if gs, ok := gv.(string); ok {
						wv, gv = lpNative([]byte(ws)), lpNative([]byte(gs))
					}
				}
			}
			if err := lpMatchWire(joinPath(path, k), wv, gv); err != nil {
				return err
			}
		}
		for _, k := range sortedKeys(g) {
			if _, ok := w[k]; !ok {
				return fmt.Errorf("%s: unexpected key %q = %s", path, k, formatValue(g[k]))
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return mismatch(path, want, got)
		}
		for i := range w {
			if err := lpMatchWire(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if !deepEqual(want, got) {
		return mismatch(path, want, got)
	}
	return nil
}

func lpWireChecks(call *lpCall, v *Value) error {
	if len(call.wire) == 0 {
		return fmt.Errorf("expected_wire_request_checks: no request was sent")
	}
	root, _ := lpNative(call.wire[0].Body).(map[string]any)
	for _, f := range v.Fields {
		if !f.Value.Bool {
			continue
		}
		switch {
		case f.Key == "system_message_content_references_schema":
			msgs, _ := root["messages"].([]any)
			first, _ := msgs[0].(map[string]any)
			content, _ := first["content"].(string)
			if first["role"] != "system" || !lpReferencesSchema(content, call.req.ResponseSchema) {
				return fmt.Errorf("expected_wire_request_checks: the system message does not carry the schema: %s", call.wire[0].Body)
			}
		case strings.HasSuffix(f.Key, "_absent"):
			key := strings.TrimSuffix(f.Key, "_absent")
			if _, present := root[key]; present {
				return fmt.Errorf("expected_wire_request_checks: %q is on the wire: %s", key, call.wire[0].Body)
			}
		default:
			return &DirectiveUnknownError{Name: "expected_wire_request_checks." + f.Key, Pos: f.Pos}
		}
	}
	return nil
}

// lpReferencesSchema reports whether text names every property of the
// schema and carries its JSON.
func lpReferencesSchema(text string, schema json.RawMessage) bool {
	var s struct {
		Properties map[string]any `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || !strings.Contains(text, `"properties"`) {
		return false
	}
	for k := range s.Properties {
		if !strings.Contains(text, `"`+k+`"`) {
			return false
		}
	}
	return true
}

func lpAssertWireRequests(call *lpCall, v *Value) error {
	if len(call.wire) != len(v.Items) {
		return fmt.Errorf("wire_requests: want %d requests, got %d", len(v.Items), len(call.wire))
	}
	var caller []any
	_ = json.Unmarshal(call.before, &caller)
	for i, it := range v.Items {
		if err := hcStrictKeys(it, "wire_requests[]", "appended_messages", "sampling"); err != nil {
			return err
		}
		root, _ := lpNative(call.wire[i].Body).(map[string]any)
		msgs, _ := root["messages"].([]any)
		if am, ok := it.Get("appended_messages"); ok {
			if len(msgs) < len(caller) || len(msgs)-len(caller) != len(am.Items) {
				return fmt.Errorf("wire_requests[%d]: want %d appended messages, wire has %d messages for %d of the caller's", i, len(am.Items), len(msgs), len(caller))
			}
			for j, want := range am.Items {
				if err := hcStrictKeys(want, "appended_messages[]", "role", "content", "content_contains"); err != nil {
					return err
				}
				got, _ := msgs[len(caller)+j].(map[string]any)
				role, _ := want.Get("role")
				if got["role"] != role.Str {
					return fmt.Errorf("wire_requests[%d].appended_messages[%d]: role %v, want %s", i, j, got["role"], role.Str)
				}
				content, _ := got["content"].(string)
				if c, ok := want.Get("content"); ok && content != c.Str {
					return fmt.Errorf("wire_requests[%d].appended_messages[%d]: content %q, want %q", i, j, content, c.Str)
				}
				if cc, ok := want.Get("content_contains"); ok {
					for _, s := range cc.Items {
						if !strings.Contains(content, s.Str) {
							return fmt.Errorf("wire_requests[%d].appended_messages[%d]: content %q lacks %q", i, j, content, s.Str)
						}
					}
				}
			}
		}
		if sm, ok := it.Get("sampling"); ok {
			for _, f := range sm.Fields {
				if !deepEqual(f.Value.Native(), root[f.Key]) {
					return fmt.Errorf("wire_requests[%d].sampling.%s: want %s, wire has %s", i, f.Key, f.Value, formatValue(root[f.Key]))
				}
			}
		}
	}
	return nil
}
