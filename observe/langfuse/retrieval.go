package langfuse

import (
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm/retrieval"
)

// observeRetrieval renders the embedding and rerank events.
func (o *Observer) observeRetrieval(ev graph.Event) {
	switch e := ev.(type) {
	case *graph.EmbeddingEvent:
		if e != nil {
			o.embedding(&e.CallSource, &e.EmbeddingRequest, e, e.Start, e.End, nil)
		}
	case *graph.EmbeddingFailedEvent:
		if e != nil {
			o.embedding(&e.CallSource, &e.EmbeddingRequest, nil, e.Start, e.End, e)
		}
	case *graph.RerankEvent:
		if e != nil {
			o.rerank(&e.CallSource, &e.RerankCall, e, e.Start, e.End, nil)
		}
	case *graph.RerankFailedEvent:
		if e != nil {
			o.rerank(&e.CallSource, &e.RerankCall, nil, e.Start, e.End, e)
		}
	}
}

// failed sets a call observation's §4.2 / §8.4.2 error mapping: ERROR,
// the category as status message, error_type and error_message metadata.
// A failure without a provider error code reports its category as
// error_type (the §11 error.type convention).
//
// The error text is capped at limit like a payload field (§5.5.5): a
// failure quoting a large upstream answer would otherwise make the
// event larger than a request may be, and the client would drop the
// ERROR observation.
func failed(b *ObservationBody, meta map[string]any, limit int, category, errType, errMsg string) {
	b.Level, b.StatusMessage = LevelError, category
	if errType == "" {
		errType = category
	}
	if errType != "" {
		meta["error_type"] = errType
	}
	if errMsg != "" {
		meta["error_message"] = Truncate(errMsg, limit)
	}
}

// embedding renders one embedding call as an Embedding observation
// (§8.4.5).
func (o *Observer) embedding(src *graph.CallSource, req *graph.EmbeddingRequest, ok *graph.EmbeddingEvent, start, end time.Time, fail *graph.EmbeddingFailedEvent) {
	start, end = stamp(start), stamp(end)
	st, traceID, parentID, found := o.callTarget(src, start)
	if !found {
		return
	}
	meta := st.baseMeta(src.Metadata, src.FanOutIndexChain, src.BranchNameChain)
	meta["openarmature_input_count"] = req.InputCount
	b := &ObservationBody{ID: o.newID(), TraceID: traceID, ParentObservationID: parentID, Name: EmbeddingName,
		StartTime: ptr(start), EndTime: ptr(end), Model: req.Model, Level: LevelDefault, Environment: o.env,
		UsageDetails: map[string]int{}}
	if o.payload {
		b.Input = structured(req.InputStrings, o.payloadMax)
	}
	if ok != nil {
		if ok.ResponseModel != "" {
			b.Model = ok.ResponseModel
		}
		if ok.Usage != nil {
			b.UsageDetails["input"] = ok.Usage.InputTokens
		}
		if ok.Dimensions > 0 {
			meta["openarmature_dimensions"] = ok.Dimensions
		}
		if ok.ResponseID != "" {
			meta["openarmature_response_id"] = ok.ResponseID
		}
		if o.payload {
			b.Output = structured(ok.OutputVectors, o.payloadMax)
		}
	}
	if fail != nil {
		failed(b, meta, o.payloadMax, string(fail.ErrorCategory), fail.ErrorType, fail.ErrorMessage)
	}
	b.Metadata = meta
	o.emit(o.event(EmbeddingCreate, b))
}

// rerank renders one rerank call as a Retriever observation (§8.4.7).
func (o *Observer) rerank(src *graph.CallSource, call *graph.RerankCall, ok *graph.RerankEvent, start, end time.Time, fail *graph.RerankFailedEvent) {
	start, end = stamp(start), stamp(end)
	st, traceID, parentID, found := o.callTarget(src, start)
	if !found {
		return
	}
	meta := st.baseMeta(src.Metadata, src.FanOutIndexChain, src.BranchNameChain)
	meta["openarmature_query_length"] = len(call.Query)
	meta["openarmature_document_count"] = call.DocumentCount
	if call.TopK != nil {
		meta["openarmature_top_k"] = *call.TopK
	}
	b := &ObservationBody{ID: o.newID(), TraceID: traceID, ParentObservationID: parentID, Name: RerankName,
		StartTime: ptr(start), EndTime: ptr(end), Model: call.Model, Level: LevelDefault, Environment: o.env,
		UsageDetails: map[string]int{}}
	if o.payload {
		docs := call.Documents
		if docs == nil {
			docs = []string{}
		}
		b.Input = structured(map[string]any{"query": call.Query, "documents": docs}, o.payloadMax)
	}
	if ok != nil {
		if ok.ResponseModel != "" {
			b.Model = ok.ResponseModel
		}
		if u := ok.Usage; u != nil {
			if u.InputTokens != nil {
				b.UsageDetails["input"] = *u.InputTokens
			}
			if u.SearchUnits != nil {
				b.UsageDetails["searchUnits"] = *u.SearchUnits
			}
		}
		meta["openarmature_result_count"] = ok.ResultCount
		if ok.ResponseID != "" {
			meta["openarmature_response_id"] = ok.ResponseID
		}
		if o.payload {
			b.Output = structured(resultsView(ok.OutputResults), o.payloadMax)
		}
	}
	if fail != nil {
		failed(b, meta, o.payloadMax, string(fail.ErrorCategory), fail.ErrorType, fail.ErrorMessage)
	}
	b.Metadata = meta
	o.emit(o.event(RetrieverCreate, b))
}

// resultsView renders rerank results as [{index, relevance_score,
// document?}].
func resultsView(rs []retrieval.ScoredDocument) []map[string]any {
	out := make([]map[string]any, len(rs))
	for i, r := range rs {
		m := map[string]any{"index": r.Index, "relevance_score": r.RelevanceScore}
		if r.Document != nil {
			m["document"] = *r.Document
		}
		out[i] = m
	}
	return out
}
