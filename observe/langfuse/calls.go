package langfuse

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/llm"
)

// Observation names of the call observations (the OTel span names, §5.5).
const (
	GenerationName = "openarmature.llm.complete"
	ToolName       = "openarmature.tool.call"
	EmbeddingName  = "openarmature.embedding.complete"
	RerankName     = "openarmature.rerank.complete"
)

// observeCall renders the typed call events.
func (o *Observer) observeCall(ev graph.Event) {
	switch e := ev.(type) {
	case *graph.LLMTokenEvent:
		if e != nil {
			if _, seen := o.firstToken[e.CallID]; !seen {
				o.firstToken[e.CallID] = stamp(e.Time)
			}
		}
	case *graph.LLMCompletionEvent:
		if e != nil {
			o.generation(&e.CallSource, &e.LLMRequest, &e.LLMResponse, e.Start, e.End, nil)
		}
	case *graph.LLMFailedEvent:
		if e != nil {
			o.generation(&e.CallSource, &e.LLMRequest, e.Response, e.Start, e.End, e)
		}
	case *graph.ToolCallEvent:
		if e != nil {
			o.tool(&e.CallSource, e.ToolName, e.ToolCallID, e.Arguments, e.Result, true, e.Start, e.End, "", "")
		}
	case *graph.ToolCallFailedEvent:
		if e != nil {
			o.tool(&e.CallSource, e.ToolName, e.ToolCallID, e.Arguments, nil, false, e.Start, e.End, e.ErrorType, e.ErrorMessage)
		}
	default:
		o.observeRetrieval(ev)
	}
}

// callTarget returns the trace and parent observation ids of a call
// event's observation: the calling node's span observation for a call
// from the node body, else the nearest enclosing wrapper (§5.5
// lineage-resolved parent, §8.4.3), the trace root when none is open. It
// returns false for an invocation the observer does not track.
func (o *Observer) callTarget(src *graph.CallSource, t time.Time) (*invState, string, string, bool) {
	st := o.inv(src.InvocationID)
	if st == nil {
		return nil, "", "", false
	}
	ns, fan, br := src.Namespace, src.FanOutIndexChain, src.BranchNameChain
	var parent *span
	if !src.Wrapper {
		parent = st.nodeSpanOf(ns, fan, br)
	}
	if parent == nil {
		parent = o.parentOf(st, ns, fan, br, t, src.Metadata)
	}
	if parent == nil {
		return st, st.traceID(), "", true
	}
	return st, parent.traceID, parent.id, true
}

// nodeSpanOf returns the latest open node span at ns with the lineage.
func (st *invState) nodeSpanOf(ns []string, fan []*int, br []*string) *span {
	c := st.open.Candidates(ns, fan, br)
	for i := len(c) - 1; i >= 0; i-- {
		if s := c[i]; s.kind == kindNode && s.lineageIs(ns, fan, br) {
			return s
		}
	}
	return nil
}

// generation renders one LLM call as one Generation observation (§8.4.3):
// the call's terminal outcome, whatever its wire attempts.
func (o *Observer) generation(src *graph.CallSource, req *graph.LLMRequest, resp *graph.LLMResponse, start, end time.Time, failure *graph.LLMFailedEvent) {
	first, streamed := o.firstToken[src.CallID]
	delete(o.firstToken, src.CallID)
	if o.disableLLM {
		return
	}
	start, end = stamp(start), stamp(end)
	st, traceID, parentID, ok := o.callTarget(src, start)
	if !ok {
		return
	}
	meta := st.baseMeta(src.Metadata, src.FanOutIndexChain, src.BranchNameChain)
	if req.Provider != "" {
		meta["system"] = req.Provider
	}
	b := &ObservationBody{ID: o.newID(), TraceID: traceID, ParentObservationID: parentID, Name: GenerationName,
		StartTime: ptr(start), EndTime: ptr(end), Model: req.Model, Level: LevelDefault, Environment: o.env}
	if streamed {
		b.CompletionStartTime = ptr(first)
	}
	if len(req.Params) > 0 {
		b.ModelParameters = maps.Clone(req.Params)
	}
	if o.payload {
		msgs := req.InputMessages
		if msgs == nil {
			msgs = []llm.Message{}
		}
		b.Input = structured(llm.RedactImages(msgs), o.payloadMax)
		if len(req.Extras) > 0 {
			meta["request_extras"] = structured(req.Extras, o.payloadMax)
		}
	}
	if resp != nil {
		if b.Model == "" {
			b.Model = resp.ResponseModel
		}
		if resp.FinishReason != "" {
			meta["finish_reason"] = string(resp.FinishReason)
		}
		if resp.ResponseModel != "" {
			meta["response_model"] = resp.ResponseModel
		}
		if resp.ResponseID != "" {
			meta["response_id"] = resp.ResponseID
		}
		u := resp.Usage
		if u.PromptTokens != nil || u.CompletionTokens != nil || u.TotalTokens != nil {
			b.Usage = &Usage{Input: u.PromptTokens, Output: u.CompletionTokens, Total: u.TotalTokens}
		}
		if o.payload {
			switch {
			case resp.OutputContent != nil:
				b.Output = text(*resp.OutputContent, o.payloadMax)
			case len(resp.OutputToolCalls) > 0:
				b.Output = structured(map[string]any{"tool_calls": toolCallsView(resp.OutputToolCalls)}, o.payloadMax)
			}
		}
	}
	if failure != nil {
		failed(b, meta, o.payloadMax, string(failure.ErrorCategory), failure.ErrorType, failure.ErrorMessage)
	}
	o.promptLinkage(b, meta, req, resp)
	if b.Level == LevelDefault && resp != nil && (resp.FinishReason == llm.FinishContentFilter || resp.FinishReason == llm.FinishLength) {
		// A soft error the provider reported (§8.4.3 RECOMMENDED).
		b.Level, b.StatusMessage = LevelWarning, "finish_reason: "+string(resp.FinishReason)
	}
	b.Metadata = meta
	o.emit(o.event(GenerationCreate, b))
}

// toolCallsView is the [{id, name, arguments}] rendering of tool calls.
func toolCallsView(calls []llm.ToolCall) []map[string]any {
	out := make([]map[string]any, len(calls))
	for i, c := range calls {
		args := json.RawMessage(c.Arguments)
		if len(args) == 0 || !jsonvalid.Valid(args) {
			args = json.RawMessage("null")
		}
		out[i] = map[string]any{"id": c.ID, "name": c.Name, "arguments": args}
	}
	return out
}

// tool renders one tool execution as a Tool observation (§8.4.6).
func (o *Observer) tool(src *graph.CallSource, name, callID string, args, result any, ok bool, start, end time.Time, errType, errMsg string) {
	start, end = stamp(start), stamp(end)
	st, traceID, parentID, found := o.callTarget(src, start)
	if !found {
		return
	}
	meta := st.baseMeta(src.Metadata, src.FanOutIndexChain, src.BranchNameChain)
	meta["openarmature_tool_name"] = name
	if callID != "" {
		meta["openarmature_tool_call_id"] = callID
	}
	b := &ObservationBody{ID: o.newID(), TraceID: traceID, ParentObservationID: parentID, Name: ToolName,
		StartTime: ptr(start), EndTime: ptr(end), Level: LevelDefault, Environment: o.env}
	if o.payload {
		b.Input = structured(args, o.payloadMax)
		if ok {
			b.Output = structured(result, o.payloadMax)
		}
	}
	if !ok {
		b.Level, b.StatusMessage = LevelError, errType
		if errType != "" {
			meta["error_type"] = errType
		}
		if errMsg != "" {
			// Capped (§5.5.5), as in failed.
			meta["error_message"] = Truncate(errMsg, o.payloadMax)
		}
	}
	b.Metadata = meta
	o.emit(o.event(ToolCreate, b))
}
