package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

var _ llm.Streamer = (*Provider)(nil)

// errStreamTruncated reports a stream that ended without message_stop.
var errStreamTruncated = errors.New("anthropic: the stream ended before message_stop")

// Stream performs a streaming Messages call: the body of Complete with
// "stream": true, whose server-sent events are yielded as [llm.Chunk]s as
// they arrive — text_delta as Content, thinking_delta as Reasoning,
// tool_use blocks and their input_json_delta fragments as ToolCalls (by
// tool order), message_delta's stop_reason and usage as FinishReason and
// Usage. The last chunk carries the Response assembled from the events
// exactly as [ParseResponse] maps the equivalent atomic body (thinking
// signatures, redacted thinking and all), so a streamed call is
// indistinguishable from an atomic one (§6 Streaming assembly). An error
// event mid-stream maps like an HTTP error ([ParseError]); a stream that
// ends before message_stop fails with provider_unavailable, and a 200
// HTML page (a proxy's, a wrong base URL) with provider_invalid_response.
// Breaking out of the loop closes the connection.
//
// llm-provider §8.2 defines no streaming in its current version (§5 has
// non-streaming mappings reject stream-set calls); this is the follow-on
// the spec anticipates, on Anthropic's documented event stream.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		b, err := p.build(req, true)
		if err != nil {
			yield(nil, err)
			return
		}
		ctx, cancel := p.withTimeout(ctx)
		defer cancel()
		hresp, err := p.do(ctx, "stream", http.MethodPost, MessagesPath, b.body)
		if err != nil {
			yield(nil, err)
			return
		}
		defer hresp.Body.Close()
		if pe := p.wire.NotEventStream("stream", hresp); pe != nil {
			yield(nil, pe)
			return
		}
		var st streamState
		done := false
		// Bounded: each event and the accumulated deltas by the reply
		// bound, the whole stream by a multiple of it (event framing).
		budget := wire.Budget{Max: p.maxReply}
		rd := wire.LimitReader(hresp.Body, wire.StreamLimit(p.maxReply))
		err = wire.ReadSSE(rd, p.maxReply, func(data []byte) (bool, error) {
			c, end, err := st.event(data)
			if err != nil {
				return false, err
			}
			if err := budget.Add(c); err != nil {
				return false, err
			}
			if end {
				done = true
				resp, err := st.response(b.synthetic)
				if err != nil {
					return false, err
				}
				c.Response = resp
			}
			if c == nil {
				return true, nil
			}
			return yield(c, nil) && !end, nil
		})
		switch {
		case errors.Is(err, llm.ErrResponseTooLarge):
			yield(nil, p.wire.TooLarge("stream", hresp.StatusCode, p.maxReply))
		case err != nil:
			var pe *llm.ProviderError
			switch {
			case ctx.Err() != nil:
				err = p.wire.TransportError(ctx, "stream", ctx.Err())
			case errors.As(err, &pe):
				pe.Provider, pe.Op = providerName, "stream"
				if pe.StatusCode == 0 {
					pe.StatusCode = hresp.StatusCode
				}
				pe.Message = p.wire.Redact(pe.Message)
			default:
				err = p.fail("stream", errcat.ProviderUnavailable, hresp.StatusCode, "", "reading the stream", p.wire.Redacted(err, err))
			}
			yield(nil, err)
		case !done:
			yield(nil, p.fail("stream", errcat.ProviderUnavailable, hresp.StatusCode, "", "the stream ended before completion", errStreamTruncated))
		}
	}
}

// streamState assembles a Messages event stream into the atomic message
// it stands for.
type streamState struct {
	started bool
	msg     map[string]json.RawMessage // message_start's message
	blocks  []*streamBlock             // by content index
	tools   int                        // tool_use blocks so far
	stop    json.RawMessage            // message_delta's stop_reason
	stopSeq json.RawMessage
	usage   map[string]json.RawMessage
}

// streamBlock is one content block being streamed.
type streamBlock struct {
	start    map[string]json.RawMessage // content_block_start's block
	kind     string
	tool     int // ordinal among tool_use blocks
	text     strings.Builder
	thinking strings.Builder
	input    strings.Builder
	sig      string
}

// streamEvent is the envelope of every event.
type streamEvent struct {
	Type         string                     `json:"type"`
	Index        *int                       `json:"index"`
	Message      map[string]json.RawMessage `json:"message"`
	ContentBlock map[string]json.RawMessage `json:"content_block"`
	Delta        struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		Thinking     string          `json:"thinking"`
		Signature    string          `json:"signature"`
		PartialJSON  string          `json:"partial_json"`
		StopReason   json.RawMessage `json:"stop_reason"`
		StopSequence json.RawMessage `json:"stop_sequence"`
	} `json:"delta"`
	Usage map[string]json.RawMessage `json:"usage"`
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// event folds one event in and returns the chunk to yield (nil for
// none) and whether the stream ended (message_stop).
func (st *streamState) event(data []byte) (*llm.Chunk, bool, error) {
	var e streamEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, false, invalidResponse("a stream event is not a JSON object", err)
	}
	raw := json.RawMessage(bytes.Clone(data)) // data is the reader's buffer, reused for the next event
	block := func() (*streamBlock, error) {
		if e.Index == nil || *e.Index < 0 || *e.Index >= len(st.blocks) {
			return nil, invalidResponse(e.Type+" names no started content block", nil)
		}
		return st.blocks[*e.Index], nil
	}
	switch e.Type {
	case "message_start":
		if e.Message == nil {
			return nil, false, invalidResponse("message_start without a message", nil)
		}
		st.started, st.msg = true, e.Message
		st.usage = map[string]json.RawMessage{}
		if u, ok := e.Message["usage"]; ok {
			_ = json.Unmarshal(u, &st.usage)
		}
		return &llm.Chunk{Raw: raw}, false, nil
	case "content_block_start":
		// Blocks start in index order, each once.
		if !st.started || e.Index == nil || *e.Index != len(st.blocks) || e.ContentBlock == nil {
			return nil, false, invalidResponse("content_block_start out of order", nil)
		}
		b := &streamBlock{start: e.ContentBlock, kind: str(e.ContentBlock["type"])}
		st.blocks = append(st.blocks, b)
		c := &llm.Chunk{Raw: raw}
		switch b.kind {
		case "text":
			b.text.WriteString(str(e.ContentBlock["text"]))
			c.Content = b.text.String()
		case "thinking":
			b.thinking.WriteString(str(e.ContentBlock["thinking"]))
			b.sig = str(e.ContentBlock["signature"])
			c.Reasoning = b.thinking.String()
		case "tool_use":
			b.tool = st.tools
			st.tools++
			c.ToolCalls = []llm.ToolCallDelta{{Index: b.tool, ID: str(e.ContentBlock["id"]), Name: str(e.ContentBlock["name"])}}
		}
		return c, false, nil
	case "content_block_delta":
		b, err := block()
		if err != nil {
			return nil, false, err
		}
		c := &llm.Chunk{Raw: raw}
		switch e.Delta.Type {
		case "text_delta":
			b.text.WriteString(e.Delta.Text)
			c.Content = e.Delta.Text
		case "thinking_delta":
			b.thinking.WriteString(e.Delta.Thinking)
			c.Reasoning = e.Delta.Thinking
		case "signature_delta":
			b.sig = e.Delta.Signature
		case "input_json_delta":
			b.input.WriteString(e.Delta.PartialJSON)
			if b.kind == "tool_use" {
				c.ToolCalls = []llm.ToolCallDelta{{Index: b.tool, Arguments: e.Delta.PartialJSON}}
			}
		}
		return c, false, nil
	case "content_block_stop":
		_, err := block()
		return nil, false, err
	case "message_delta":
		if !st.started {
			return nil, false, invalidResponse("message_delta before message_start", nil)
		}
		st.stop, st.stopSeq = e.Delta.StopReason, e.Delta.StopSequence
		for k, v := range e.Usage {
			st.usage[k] = v
		}
		c := &llm.Chunk{Raw: raw}
		if len(st.stop) > 0 && string(st.stop) != "null" {
			s := str(st.stop)
			c.FinishReason = finishReason(&s)
		}
		if u := st.usageRaw(); u != nil {
			parsed := parseUsage(u)
			c.Usage = &parsed
		}
		return c, false, nil
	case "message_stop":
		if !st.started {
			return nil, false, invalidResponse("message_stop before message_start", nil)
		}
		return &llm.Chunk{Raw: raw}, true, nil
	case "error":
		return nil, false, ParseError(http.StatusOK, nil, data)
	}
	return nil, false, nil // ping, and event types added later
}

func (st *streamState) usageRaw() json.RawMessage {
	if len(st.usage) == 0 {
		return nil
	}
	b, _ := json.Marshal(st.usage)
	return b
}

// response assembles the atomic message the events stand for and maps it
// with ParseResponse.
func (st *streamState) response(synthetic bool) (*llm.Response, error) {
	msg := make(map[string]json.RawMessage, len(st.msg)+3)
	for k, v := range st.msg {
		msg[k] = v
	}
	content := make([]json.RawMessage, 0, len(st.blocks))
	for _, b := range st.blocks {
		raw, err := b.assemble()
		if err != nil {
			return nil, err
		}
		content = append(content, raw)
	}
	var err error
	if msg["content"], err = json.Marshal(content); err != nil {
		return nil, invalidResponse("cannot assemble the streamed content", err)
	}
	if len(st.stop) > 0 {
		msg["stop_reason"] = st.stop
	}
	if len(st.stopSeq) > 0 {
		msg["stop_sequence"] = st.stopSeq
	}
	if u := st.usageRaw(); u != nil {
		msg["usage"] = u
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, invalidResponse("cannot assemble the streamed message", err)
	}
	resp, err := ParseResponse(body)
	if err != nil {
		return nil, err
	}
	if synthetic {
		unwrapSynthetic(resp)
	}
	return resp, nil
}

// assemble renders the block as the atomic response would carry it.
func (b *streamBlock) assemble() (json.RawMessage, error) {
	out := make(map[string]any, len(b.start))
	for k, v := range b.start {
		out[k] = v
	}
	switch b.kind {
	case "text":
		out["text"] = b.text.String()
	case "thinking":
		out["thinking"] = b.thinking.String()
		out["signature"] = b.sig
	case "tool_use":
		in := strings.TrimSpace(b.input.String())
		switch {
		case in == "":
			// No input deltas: the start's input (usually {}).
		case jsonvalid.Valid([]byte(in)):
			out["input"] = json.RawMessage(in)
		default:
			out["input"] = in // not JSON: ParseResponse rejects it as it would
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, invalidResponse("cannot assemble a streamed content block", err)
	}
	return raw, nil
}
