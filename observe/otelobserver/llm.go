package otelobserver

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
)

// LLM provider span attributes (observability §5.5).
const (
	LLMSpanName                 = "openarmature.llm.complete"
	AttrLLMModel                = "openarmature.llm.model"
	AttrLLMFinishReason         = "openarmature.llm.finish_reason"
	AttrLLMPromptTokens         = "openarmature.llm.usage.prompt_tokens"
	AttrLLMCompletionTokens     = "openarmature.llm.usage.completion_tokens"
	AttrLLMTotalTokens          = "openarmature.llm.usage.total_tokens"
	AttrLLMAttemptIndex         = "openarmature.llm.attempt_index"
	AttrLLMRetryReason          = "openarmature.llm.retry_reason"
	AttrLLMCallID               = "openarmature.llm.call_id"
	AttrLLMInputMessages        = "openarmature.llm.input.messages"
	AttrLLMOutputContent        = "openarmature.llm.output.content"
	AttrLLMOutputToolCalls      = "openarmature.llm.output.tool_calls"
	AttrLLMOutputToolCallsCount = "openarmature.llm.output.tool_calls.count"
	AttrLLMOutputToolCallsNames = "openarmature.llm.output.tool_calls.names"
	AttrLLMOutputToolCallsIDs   = "openarmature.llm.output.tool_calls.ids"
	AttrLLMRequestExtras        = "openarmature.llm.request.extras"
	AttrLLMCacheReadTokens      = "openarmature.llm.cache_read.input_tokens"
	AttrLLMCacheCreationTokens  = "openarmature.llm.cache_creation.input_tokens"
	AttrGenAISystem             = "gen_ai.system"
	AttrGenAIRequestModel       = "gen_ai.request.model"
	AttrGenAIResponseModel      = "gen_ai.response.model"
	AttrGenAIResponseID         = "gen_ai.response.id"
	AttrGenAIInputTokens        = "gen_ai.usage.input_tokens"
	AttrGenAIOutputTokens       = "gen_ai.usage.output_tokens"
	AttrGenAIFinishReasons      = "gen_ai.response.finish_reasons"
	AttrGenAIRequestPrefix      = "gen_ai.request."
	ToolSpanName                = "openarmature.tool.call"
	AttrToolName                = "openarmature.tool.name"
	AttrToolCallID              = "openarmature.tool.call.id"
	AttrToolCallArguments       = "openarmature.tool.call.arguments"
	AttrToolCallResult          = "openarmature.tool.call.result"
	AttrErrorType               = "error.type"
)

// Payload caps (observability §5.5.5).
const (
	// DefaultPayloadMaxBytes is the per-attribute payload cap when
	// Config.PayloadMaxBytes is 0.
	DefaultPayloadMaxBytes = 64 << 10
	// MinPayloadMaxBytes is the smallest cap [New] accepts.
	MinPayloadMaxBytes = 256
)

const truncationMarkerFormat = "…[truncated, %d bytes total]"

// llmCall renders the spans of one typed LLM terminal event: one span
// per wire attempt (observability §5.5, llm-provider §7.1), parented
// under the calling node's span or, when that is not open, the nearest
// enclosing wrapper.
func (o *Observer) llmCall(src *graph.CallSource, req *graph.LLMRequest, resp *graph.LLMResponse, attempts []llm.AttemptRecord, start, end time.Time, failure *graph.LLMFailedEvent) {
	if len(attempts) == 0 {
		var err error
		if failure != nil {
			err = failure.Err
		}
		attempts = []llm.AttemptRecord{{Err: err, Start: start, End: end}}
	}
	system := req.Provider
	if o.genAISystem != "" {
		system = o.genAISystem
	}
	checks := budgetChecks(req, resp)
	if o.metrics != nil {
		o.metrics.record(req.Model, system, resp, attempts)
		o.metrics.recordBudget(req.Model, system, checks)
	}
	o.warnBudget(src, req, checks)
	if o.disableLLMSpans {
		return
	}
	st := o.inv(src.InvocationID)
	if st == nil {
		return
	}
	parent := st.callParent(o, src, start)
	for i, a := range attempts {
		last := i == len(attempts)-1
		buf := o.attrBuf()
		attrs := append(buf.kv, attribute.Int(AttrLLMAttemptIndex, a.Index))
		if a.Reason != "" {
			attrs = append(attrs, attribute.String(AttrLLMRetryReason, string(a.Reason)))
		}
		attrs = append(attrs, attribute.String(AttrLLMCallID, src.CallID))
		model := req.Model
		var rs *graph.LLMResponse
		switch {
		case last && resp != nil:
			rs = resp
		case a.Response != nil:
			r := graph.ResponseSide(a.Response)
			rs = &r
		}
		if model == "" && rs != nil {
			model = rs.ResponseModel
		}
		attrs = append(attrs, attribute.String(AttrLLMModel, model))
		if !o.disableGenAI {
			if system != "" {
				attrs = append(attrs, attribute.String(AttrGenAISystem, system))
			}
			attrs = append(attrs, attribute.String(AttrGenAIRequestModel, model))
			attrs = appendRequestParams(attrs, req.Params)
		}
		if rs != nil {
			attrs = o.responseAttrs(attrs, rs)
		}
		attrs = promptAttrs(attrs, req)
		if exceeded, evaluated := llm.BudgetExceeded(checks); evaluated && last {
			attrs = append(attrs, attribute.Bool(AttrLLMTokenBudgetExceeded, exceeded))
		}
		if o.payload {
			attrs = o.payloadAttr(attrs, AttrLLMInputMessages, messagesJSON(req.InputMessages))
			if len(req.Extras) > 0 {
				attrs = o.payloadAttr(attrs, AttrLLMRequestExtras, canonicalJSON(req.Extras))
			}
		}
		attrs = st.lineageAttrs(attrs, src.InvocationID, src.CorrelationID, src.FanOutIndexChain, src.BranchNameChain, src.Metadata)
		d := callSpan{name: LLMSpanName, kind: o.client, start: stamp(a.Start), end: stamp(a.End), buf: buf, attrs: attrs, err: a.Err}
		if a.Err != nil {
			d.cat = string(errcat.Of(a.Err))
		}
		st.endCall(o, parent, d)
	}
}

// responseAttrs adds the response-side attributes of one attempt.
func (o *Observer) responseAttrs(attrs []attribute.KeyValue, rs *graph.LLMResponse) []attribute.KeyValue {
	if rs.FinishReason != "" {
		attrs = append(attrs, attribute.String(AttrLLMFinishReason, string(rs.FinishReason)))
	}
	u := rs.Usage
	for _, c := range []struct {
		key, genai string
		v          *int
	}{
		{AttrLLMPromptTokens, AttrGenAIInputTokens, u.PromptTokens},
		{AttrLLMCompletionTokens, AttrGenAIOutputTokens, u.CompletionTokens},
		{AttrLLMTotalTokens, "", u.TotalTokens},
	} {
		if c.v == nil {
			continue
		}
		attrs = append(attrs, attribute.Int(c.key, *c.v))
		if c.genai != "" && !o.disableGenAI {
			attrs = append(attrs, attribute.Int(c.genai, *c.v))
		}
	}
	if !o.disableGenAI {
		if rs.ResponseModel != "" {
			attrs = append(attrs, attribute.String(AttrGenAIResponseModel, rs.ResponseModel))
		}
		if rs.ResponseID != "" {
			attrs = append(attrs, attribute.String(AttrGenAIResponseID, rs.ResponseID))
		}
		if rs.FinishReason != "" {
			kv, ok := o.finishReasons[rs.FinishReason]
			if !ok {
				kv = attribute.StringSlice(AttrGenAIFinishReasons, []string{string(rs.FinishReason)})
			}
			attrs = append(attrs, kv)
		}
		if u.CachedTokens != nil {
			attrs = append(attrs, attribute.Int(AttrLLMCacheReadTokens, *u.CachedTokens))
		}
		if u.CacheCreationTokens != nil {
			attrs = append(attrs, attribute.Int(AttrLLMCacheCreationTokens, *u.CacheCreationTokens))
		}
	}
	if n := len(rs.OutputToolCalls); n > 0 {
		names, ids := make([]string, n), make([]string, n)
		for i, tc := range rs.OutputToolCalls {
			names[i], ids[i] = tc.Name, tc.ID
		}
		attrs = append(attrs, attribute.Int(AttrLLMOutputToolCallsCount, n),
			attribute.StringSlice(AttrLLMOutputToolCallsNames, names),
			attribute.StringSlice(AttrLLMOutputToolCallsIDs, ids))
		if o.payload {
			attrs = o.payloadAttr(attrs, AttrLLMOutputToolCalls, toolCallsJSON(rs.OutputToolCalls))
		}
	}
	if o.payload && rs.OutputContent != nil && *rs.OutputContent != "" {
		attrs = o.payloadAttr(attrs, AttrLLMOutputContent, *rs.OutputContent)
	}
	return attrs
}

// appendRequestParams appends the §5.5.2 request parameters to out,
// sorted by name.
func appendRequestParams(out []attribute.KeyValue, params map[string]any) []attribute.KeyValue {
	if len(params) == 0 {
		return out
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		key := AttrGenAIRequestPrefix + k
		switch v := params[k].(type) {
		case float64:
			out = append(out, attribute.Float64(key, v))
		case int:
			out = append(out, attribute.Int(key, v))
		case int64:
			out = append(out, attribute.Int64(key, v))
		case []string:
			out = append(out, attribute.StringSlice(key, v))
		default:
			out = append(out, attrValue(key, v))
		}
	}
	return out
}

// payloadAttr adds a payload attribute, truncated to the configured cap
// (observability §5.5.5).
func (o *Observer) payloadAttr(attrs []attribute.KeyValue, key, val string) []attribute.KeyValue {
	return append(attrs, attribute.String(key, Truncate(validUTF8(val), o.payloadMax)))
}

// Truncate applies the observability §5.5.5 truncation contract: a value
// longer than limit bytes keeps its longest prefix ending on a UTF-8
// code-point boundary that leaves room for the marker
// "…[truncated, M bytes total]" (M the original length), followed by the
// marker. Shorter values are returned unchanged.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	marker := fmt.Sprintf(truncationMarkerFormat, len(s))
	n := max(limit-len(marker), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + marker
}

// canonicalJSON encodes v with sorted object keys and no insignificant
// whitespace (observability §5.5.1); v is first normalized through JSON
// so structs and maps encode alike.
func canonicalJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return strconv.Quote(fmt.Sprint(v))
	}
	var generic any
	if json.Unmarshal(b, &generic) != nil {
		return string(b)
	}
	out, err := json.Marshal(generic)
	if err != nil {
		return string(b)
	}
	return string(out)
}

// messagesJSON is the openarmature.llm.input.messages value: the
// messages (inline images already redacted) as a JSON array with sorted
// keys.
func messagesJSON(msgs []llm.Message) string {
	if msgs == nil {
		msgs = []llm.Message{}
	}
	return canonicalJSON(llm.RedactImages(msgs))
}

// toolCallsJSON is the [{id, name, arguments}] encoding of tool calls
// (observability §5.5.5 tool-call serialization).
func toolCallsJSON(calls []llm.ToolCall) string {
	type call struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	out := make([]call, len(calls))
	for i, c := range calls {
		args := c.Arguments
		if len(args) == 0 {
			args = json.RawMessage("null")
		}
		out[i] = call{ID: c.ID, Name: c.Name, Arguments: args}
	}
	return canonicalJSON(out)
}

// callParent returns the span a call event nests under: the calling
// node's open span for a call from the node body, else the nearest
// enclosing wrapper (fan-out instance, branch, subgraph), nil for the
// invocation span.
func (st *invState) callParent(o *Observer, src *graph.CallSource, t time.Time) *nodeSpan {
	ns, fan, br := src.Namespace, src.FanOutIndexChain, src.BranchNameChain
	if !src.Wrapper {
		if s := st.nodeSpanOf(ns, fan, br); s != nil {
			return s
		}
	}
	return st.parentOf(o, ns, fan, br, src.InvocationID, src.CorrelationID, t, src.Metadata)
}

// nodeSpanOf returns the latest open node span at ns with the lineage.
func (st *invState) nodeSpanOf(ns []string, fan []*int, br []*string) *nodeSpan {
	c := st.open.Candidates(ns, fan, br)
	for i := len(c) - 1; i >= 0; i-- {
		if s := c[i]; s.kind == kindNode && s.lineageIs(ns, fan, br) {
			return s
		}
	}
	return nil
}

// toolCall renders the span of one typed tool event (observability
// §5.5.11).
func (o *Observer) toolCall(src *graph.CallSource, name, callID string, args, result any, hasResult bool, start, end time.Time, err error, errType string) {
	st := o.inv(src.InvocationID)
	if st == nil {
		return
	}
	parent := st.callParent(o, src, start)
	buf := o.attrBuf()
	attrs := append(buf.kv, attribute.String(AttrToolName, name))
	if callID != "" {
		attrs = append(attrs, attribute.String(AttrToolCallID, callID))
	}
	if o.payload {
		attrs = o.payloadAttr(attrs, AttrToolCallArguments, canonicalJSON(args))
		if hasResult {
			attrs = o.payloadAttr(attrs, AttrToolCallResult, canonicalJSON(result))
		}
	}
	if err != nil && errType != "" {
		attrs = append(attrs, attribute.String(AttrErrorType, errType))
	}
	attrs = st.lineageAttrs(attrs, src.InvocationID, src.CorrelationID, src.FanOutIndexChain, src.BranchNameChain, src.Metadata)
	st.endCall(o, parent, callSpan{name: ToolSpanName, kind: o.internal, start: stamp(start), end: stamp(end), buf: buf, attrs: attrs, err: err, cat: errType, tool: true})
}
