package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

var _ llm.Streamer = (*Provider)(nil)

// errStreamTruncated reports a stream that ended without a finish reason.
var errStreamTruncated = errors.New("gemini: the stream ended before a finishReason")

// Stream performs a streaming call: the generateContent body sent to
// streamGenerateContent?alt=sse, whose events (each a partial
// GenerateContentResponse) are yielded as [llm.Chunk]s as they arrive —
// text parts as Content, thought parts as Reasoning, functionCall parts
// as ToolCalls (by call order, with the ids Complete would give them),
// the finish reason and usage when reported. The last chunk carries the
// Response assembled from the events exactly as [ParseResponse] maps the
// equivalent atomic body (adjacent text parts joined, signatures kept),
// so a streamed call is indistinguishable from an atomic one (§6
// Streaming assembly). An error event mid-stream maps like an HTTP error
// ([ParseError]); a stream that ends before a finish reason fails with
// provider_unavailable, and a 200 HTML page (a proxy's, a wrong base
// URL) with provider_invalid_response. Breaking out of the loop closes
// the connection.
//
// llm-provider §8.3 defines no streaming in its current version; this is
// the follow-on its §5 anticipates, on Gemini's documented SSE endpoint.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		body, err := p.requestBody(req)
		if err != nil {
			yield(nil, err)
			return
		}
		ctx, cancel := p.withTimeout(ctx)
		defer cancel()
		const op = "stream"
		hreq, err := p.wire.NewRequest(ctx, http.MethodPost, p.base+"/"+p.resource+":streamGenerateContent?alt=sse", body, "application/json")
		if err != nil {
			yield(nil, p.fail(op, errcat.ProviderInvalidRequest, 0, "", "cannot build the request", p.wire.Redacted(err, nil)))
			return
		}
		hresp, err := p.wire.Send(ctx, op, hreq)
		if err != nil {
			yield(nil, err)
			return
		}
		drain := true
		defer func() {
			if drain {
				_, _ = io.Copy(io.Discard, io.LimitReader(hresp.Body, wire.MaxErrorBody))
			}
			_ = hresp.Body.Close()
		}()
		if hresp.StatusCode/100 != 2 {
			data, _ := io.ReadAll(io.LimitReader(hresp.Body, wire.MaxErrorBody))
			pe := ParseError(hresp.StatusCode, hresp.Header, data)
			pe.Op, pe.Message = op, p.wire.Redact(pe.Message)
			yield(nil, pe)
			return
		}
		if pe := p.wire.NotEventStream(op, hresp); pe != nil {
			yield(nil, pe)
			return
		}
		st := &streamState{callID: p.callIDs(), parts: []map[string]json.RawMessage{}}
		stopped := false
		// Bounded: each event and the accumulated deltas by the reply
		// bound, the whole stream by a multiple of it (event framing).
		budget := wire.Budget{Max: p.maxReply}
		rd := wire.LimitReader(hresp.Body, wire.StreamLimit(p.maxReply))
		err = wire.ReadSSE(rd, p.maxReply, func(data []byte) (bool, error) {
			c, err := st.event(data)
			if err != nil {
				return false, err
			}
			if err := budget.Add(c); err != nil {
				return false, err
			}
			if !yield(c, nil) {
				stopped = true
				return false, nil
			}
			return true, nil
		})
		if err == nil && !stopped {
			if st.finish == "" {
				err = p.fail(op, errcat.ProviderUnavailable, hresp.StatusCode, "", "the stream ended before completion", errStreamTruncated)
			} else {
				var resp *llm.Response
				if resp, err = st.response(); err == nil {
					if err = checkToolCalls(resp, req.Tools); err == nil {
						yield(&llm.Chunk{Response: resp}, nil)
						return
					}
				}
			}
		}
		if err == nil {
			return
		}
		var pe *llm.ProviderError
		switch {
		case errors.Is(err, llm.ErrResponseTooLarge):
			// Stop reading at once: no drain before the close.
			drain = false
			err = p.wire.TooLarge(op, hresp.StatusCode, p.maxReply)
		case ctx.Err() != nil:
			err = p.wire.TransportError(ctx, op, ctx.Err())
		case errors.As(err, &pe):
			pe.Provider, pe.Op = ProviderName, op
			if pe.StatusCode == 0 {
				pe.StatusCode = hresp.StatusCode
			}
			pe.Message = p.wire.Redact(pe.Message)
		default:
			err = p.fail(op, errcat.ProviderUnavailable, hresp.StatusCode, "", "reading the stream", p.wire.Redacted(err, err))
		}
		yield(nil, err)
	}
}

// streamState assembles Gemini's streamed responses into the atomic one.
type streamState struct {
	callID   func(int) string
	parts    []map[string]json.RawMessage // merged, in order (never nil)
	calls    int                          // functionCall parts so far
	finish   string
	usage    json.RawMessage
	feedback json.RawMessage
	// joined holds the text of the last part while later text parts are
	// being joined to it (joining is true): its "text" member is stale
	// until flush, so each delta is appended once, not the whole text
	// re-encoded per event.
	joined  strings.Builder
	joining bool
}

// flush writes the joined text into the last part.
func (st *streamState) flush() {
	if !st.joining {
		return
	}
	st.parts[len(st.parts)-1]["text"], _ = json.Marshal(st.joined.String())
	st.joined.Reset()
	st.joining = false
}

// streamChunk is one event: a partial GenerateContentResponse.
type streamChunk struct {
	Candidates []struct {
		Content *struct {
			Parts []map[string]json.RawMessage `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata  json.RawMessage `json:"usageMetadata"`
	PromptFeedback json.RawMessage `json:"promptFeedback"`
	Error          json.RawMessage `json:"error"`
}

// event folds one event in and returns its chunk.
func (st *streamState) event(data []byte) (*llm.Chunk, error) {
	var e streamChunk
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, invalidResponse("a stream event is not a generateContent response", err)
	}
	if len(e.Error) > 0 && string(e.Error) != "null" {
		return nil, ParseError(http.StatusOK, nil, data)
	}
	c := &llm.Chunk{Raw: bytes.Clone(data)}
	if len(e.UsageMetadata) > 0 && string(e.UsageMetadata) != "null" {
		st.usage = e.UsageMetadata
		u := usage(e.UsageMetadata)
		c.Usage = &u
	}
	if len(e.PromptFeedback) > 0 && string(e.PromptFeedback) != "null" {
		st.feedback = e.PromptFeedback
		var pf struct {
			BlockReason string `json:"blockReason"`
		}
		if json.Unmarshal(e.PromptFeedback, &pf) == nil && pf.BlockReason != "" {
			st.finish = "SAFETY"
			c.FinishReason = llm.FinishContentFilter
		}
	}
	if len(e.Candidates) == 0 {
		return c, nil
	}
	cand := e.Candidates[0]
	if cand.Content != nil {
		for _, part := range cand.Content.Parts {
			st.add(part, c)
		}
	}
	if cand.FinishReason != "" {
		st.finish = cand.FinishReason
		c.FinishReason = finishReason(cand.FinishReason)
		if st.calls > 0 {
			c.FinishReason = llm.FinishToolCalls
		}
	}
	return c, nil
}

// add appends one part, joining a text part to the previous one of the
// same kind, and reports its delta on c.
func (st *streamState) add(part map[string]json.RawMessage, c *llm.Chunk) {
	var text string
	_, isText := part["text"]
	if isText {
		_ = json.Unmarshal(part["text"], &text)
	}
	thought := string(part["thought"]) == "true"
	if isText {
		if thought {
			c.Reasoning += text
		} else {
			c.Content += text
		}
		if n := len(st.parts); n > 0 {
			prev := st.parts[n-1]
			_, prevText := prev["text"]
			_, prevSig := prev["thoughtSignature"]
			if prevText && !prevSig && (string(prev["thought"]) == "true") == thought {
				if !st.joining {
					var old string
					_ = json.Unmarshal(prev["text"], &old)
					st.joined.WriteString(old)
					st.joining = true
				}
				st.joined.WriteString(text)
				if sig, ok := part["thoughtSignature"]; ok {
					prev["thoughtSignature"] = sig
				}
				return
			}
		}
		st.flush()
		st.parts = append(st.parts, part)
		return
	}
	st.flush()
	if fc, ok := part["functionCall"]; ok {
		var call struct {
			Name string          `json:"name"`
			ID   string          `json:"id"`
			Args json.RawMessage `json:"args"`
		}
		_ = json.Unmarshal(fc, &call)
		id := call.ID
		if id == "" {
			id = st.callID(st.calls)
		}
		var sig string
		_ = json.Unmarshal(part["thoughtSignature"], &sig)
		c.ToolCalls = append(c.ToolCalls, llm.ToolCallDelta{Index: st.calls, ID: id, Name: call.Name, Arguments: string(call.Args), Signature: sig})
		st.calls++
	}
	st.parts = append(st.parts, part)
}

// response maps the assembled atomic body with the ids the deltas used.
func (st *streamState) response() (*llm.Response, error) {
	st.flush()
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": st.parts}, "finishReason": st.finish}
	body := map[string]any{"candidates": []any{cand}}
	if st.usage != nil {
		body["usageMetadata"] = st.usage
	}
	if st.feedback != nil {
		body["promptFeedback"] = st.feedback
		if len(st.parts) == 0 {
			body["candidates"] = []any{} // a blocked prompt has none
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, invalidResponse("cannot assemble the streamed response", err)
	}
	return parseResponse(raw, st.callID)
}
