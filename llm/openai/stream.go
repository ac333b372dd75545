package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"math"
	"mime"
	"net/http"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

// errStreamTruncated reports a stream that ended without [DONE] or a
// finish reason.
var errStreamTruncated = errors.New("openai: the stream ended before completion")

// Stream performs a streaming chat completion (§8.1.6): the body carries
// stream:true and stream_options {include_usage:true}, and each SSE data
// event is yielded as an [llm.Chunk] as it arrives, until data: [DONE].
// Breaking out of the loop closes the connection. A server that ignores
// stream:true and answers with a whole completion (a JSON Content-Type)
// yields it as one chunk carrying the parsed response; an HTML page (a
// proxy's, or a base URL naming a web site) fails with
// provider_invalid_response.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		body, err := p.requestBody(req, true)
		if err != nil {
			yield(nil, err)
			return
		}
		ctx, cancel := p.withTimeout(ctx)
		defer cancel()
		hresp, err := p.do(ctx, "stream", http.MethodPost, "/chat/completions", body, true)
		if err != nil {
			yield(nil, err)
			return
		}
		defer hresp.Body.Close()
		if pe := p.wire.NotEventStream("stream", hresp); pe != nil {
			yield(nil, pe)
			return
		}
		if isJSON(hresp.Header.Get("Content-Type")) {
			// Some OpenAI-compatible servers ignore stream:true and answer
			// with the whole completion: take it as a one-chunk stream.
			yield(p.wholeResponse(ctx, hresp))
			return
		}
		finished := false
		ix := &toolIndexer{}
		// Bounded: each event and the accumulated deltas by the reply
		// bound, the whole stream by a multiple of it (event framing).
		budget := wire.Budget{Max: p.maxReply}
		rd := wire.LimitReader(hresp.Body, wire.StreamLimit(p.maxReply))
		err = wire.ReadSSE(rd, p.maxReply, func(data []byte) (bool, error) {
			if bytes.Equal(data, []byte("[DONE]")) {
				finished = true
				return false, nil
			}
			c, err := parseChunk(data, ix)
			if err != nil {
				var pe *llm.ProviderError
				if errors.As(err, &pe) {
					pe.Message = p.wire.Redact(pe.Message)
					pe.StatusCode = hresp.StatusCode
				}
				return false, err
			}
			if err := budget.Add(c); err != nil {
				return false, err
			}
			if c.FinishReason != "" {
				finished = true
			}
			return yield(c, nil), nil
		})
		switch {
		case errors.Is(err, llm.ErrResponseTooLarge):
			yield(nil, p.wire.TooLarge("stream", hresp.StatusCode, p.maxReply))
		case err != nil:
			if ctx.Err() != nil {
				// The caller's cancellation stays one; this call's
				// timeout (the stream stalled) is the provider's failure.
				err = p.wire.TransportError(ctx, "stream", ctx.Err())
			} else {
				var pe *llm.ProviderError
				if !errors.As(err, &pe) {
					err = p.fail("stream", errcat.ProviderUnavailable, hresp.StatusCode, "", "reading the stream", p.wire.Redacted(err, err))
				}
			}
			yield(nil, err)
		case !finished:
			yield(nil, p.fail("stream", errcat.ProviderUnavailable, hresp.StatusCode, "", "the stream ended before completion", errStreamTruncated))
		}
	}
}

// isJSON reports whether a Content-Type names a JSON body rather than an
// event stream.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// wholeResponse reads a non-streamed completion answered to a streaming
// request and returns it as the stream's only chunk, carrying the parsed
// response.
func (p *Provider) wholeResponse(ctx context.Context, hresp *http.Response) (*llm.Chunk, error) {
	resp, err := p.readCompletion(ctx, "stream", hresp)
	if err != nil {
		return nil, err
	}
	c := &llm.Chunk{Content: resp.Message.Text(), FinishReason: resp.FinishReason, Raw: resp.Raw, Response: resp}
	if u := resp.Usage; u != (llm.Usage{}) {
		c.Usage = &u
	}
	for i, tc := range resp.Message.ToolCalls {
		c.ToolCalls = append(c.ToolCalls, llm.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)})
	}
	return c, nil
}

// ParseChunk maps one streamed chat.completion.chunk event onto an
// [llm.Chunk] (§8.1.6): choices[0].delta content, reasoning_content or
// reasoning, refusal (taken as content, as the atomic mapping takes
// message.refusal), and tool_calls deltas (arguments as a string or, as
// some servers send them, the JSON object itself; a thought signature
// from extra_content.google.thought_signature); choices[0].finish_reason;
// and a non-null top-level usage. A tool-call delta without "index"
// takes its position in the event; [Provider.Stream] instead numbers
// such deltas across events (one carrying a new id opens a call, one
// without an id continues the last). An event carrying an "error" member
// fails with the category the same error answered as an HTTP status maps
// to (§8.1.3), its status read from a numeric code, a gRPC-style status
// or a known code or type (rate_limit_exceeded is provider_rate_limit,
// invalid_request_error or code 400 provider_invalid_request,
// insufficient_quota provider_authentication, a 5xx code
// provider_unavailable), and provider_unavailable when it names none; an
// event that is not a JSON object with the chunk shape fails with
// provider_invalid_response.
func ParseChunk(data []byte) (*llm.Chunk, error) {
	return parseChunk(data, nil)
}

// toolIndexer numbers the tool-call deltas of one stream that come
// without an index: a delta carrying an id not seen before opens a new
// call, one carrying a seen id continues that call, one without an id
// continues the last call. Indexed deltas keep their index.
type toolIndexer struct {
	last  int // the index of the last call a delta went to, once begun
	next  int // an index above every one seen
	byID  map[string]int
	begun bool
}

// indexed records a delta that went to call i, carrying id (or "").
func (x *toolIndexer) indexed(i int, id string) {
	x.begun, x.last = true, i
	if i >= x.next && i < math.MaxInt {
		x.next = i + 1
	}
	if id != "" {
		if x.byID == nil {
			x.byID = map[string]int{}
		}
		if _, ok := x.byID[id]; !ok {
			x.byID[id] = i
		}
	}
}

// assign returns the call an index-less delta carrying id (or "") goes
// to.
func (x *toolIndexer) assign(id string) int {
	i, ok := x.byID[id]
	switch {
	case id != "" && ok:
	case id == "" && x.begun:
		i = x.last
	default:
		i = x.next
	}
	x.indexed(i, id)
	return i
}

func parseChunk(data []byte, ix *toolIndexer) (*llm.Chunk, error) {
	var w wireResponse
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: providerName, Op: "stream", Message: "a stream event is not a valid chunk", Err: err}
	}
	if hasError(w.Error) {
		return nil, inbandError(data, "stream")
	}
	c := &llm.Chunk{Raw: bytes.Clone(data)}
	if w.Choices != nil && len(*w.Choices) > 0 {
		ch := (*w.Choices)[0]
		if ch.FinishReason != nil {
			c.FinishReason = finishReason(ch.FinishReason)
		}
		if d := ch.Delta; d != nil {
			text, ok := contentText(d.Content)
			if !ok {
				return nil, &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: providerName, Op: "stream", Message: "delta.content is neither a string nor text parts"}
			}
			if d.Refusal != nil {
				text += *d.Refusal
			}
			c.Content = text
			if d.ReasoningContent != nil {
				c.Reasoning = *d.ReasoningContent
			} else if d.Reasoning != nil {
				c.Reasoning = *d.Reasoning
			}
			for i, tc := range d.ToolCalls {
				idx := i
				switch {
				case tc.Index != nil:
					idx = *tc.Index
					if ix != nil {
						ix.indexed(idx, tc.ID)
					}
				case ix != nil:
					idx = ix.assign(tc.ID)
				}
				var args string
				switch a := bytes.TrimSpace(tc.Function.Arguments); {
				case len(a) > 0 && a[0] == '"':
					_ = json.Unmarshal(a, &args)
				case len(a) > 0 && a[0] == '{':
					args = string(a) // some servers send the object itself
				}
				c.ToolCalls = append(c.ToolCalls, llm.ToolCallDelta{Index: idx, ID: tc.ID, Name: tc.Function.Name, Arguments: args, Signature: tc.signature()})
			}
		}
	}
	if u := bytes.TrimSpace(w.Usage); len(u) > 0 && string(u) != "null" {
		us := usage(w.Usage)
		c.Usage = &us
	}
	return c, nil
}

// AssembleRaw builds the Raw of a streamed call in the chat.completion
// shape: the top-level members of the events overlaid in order (so id,
// model, created and the terminal usage survive verbatim), object
// "chat.completion", and choices holding the assembled message and
// finish reason.
func (p *Provider) AssembleRaw(events []json.RawMessage, resp *llm.Response) json.RawMessage {
	var root map[string]json.RawMessage
	_ = json.Unmarshal(llm.OverlayJSON(events), &root)
	if root == nil {
		root = map[string]json.RawMessage{}
	}
	root["object"] = json.RawMessage(`"chat.completion"`)
	msg := map[string]any{"role": "assistant", "content": nil}
	if t := resp.Message.Text(); t != "" {
		msg["content"] = t
	}
	for _, b := range resp.Message.Content.Blocks() {
		if b.Type == llm.BlockThinking {
			msg["reasoning_content"] = b.Text
		}
	}
	if len(resp.Message.ToolCalls) > 0 {
		calls := make([]any, len(resp.Message.ToolCalls))
		for i, tc := range resp.Message.ToolCalls {
			args := "null"
			if tc.Arguments != nil {
				args = string(tc.Arguments)
			}
			call := map[string]any{"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": args}}
			if tc.Signature != "" {
				call["extra_content"] = map[string]any{"google": map[string]any{"thought_signature": tc.Signature}}
			}
			calls[i] = call
		}
		msg["tool_calls"] = calls
	}
	var finish any = string(resp.FinishReason)
	choices, _ := json.Marshal([]any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}})
	root["choices"] = choices
	b, _ := json.Marshal(root)
	return b
}
