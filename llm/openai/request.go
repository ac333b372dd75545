package openai

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// The request body is built by hand, key by key, so its bytes are stable
// (§8 wire-byte stability): root keys in the fixed order model, messages,
// tools, tool_choice, temperature, max_tokens, top_p, seed,
// frequency_penalty, presence_penalty, stop, response_format, stream,
// stream_options, then the pass-through extras sorted by key; every
// caller-supplied JSON value (tool parameters, response schema, tool call
// arguments, extras) is re-encoded canonically with
// [llm.CanonicalJSON] (object keys sorted recursively, numbers as
// written).

// RequestBody returns the exact bytes Complete would send for req (with
// req.Stream set, those Stream would send: stream and stream_options
// included), after the same pre-send validation: a request Complete would
// refuse before sending, such as one whose Config.Extras conflict with a
// field the mapping manages ([llm.ErrManagedField]), is refused the same.
func (p *Provider) RequestBody(req *llm.Request) ([]byte, error) {
	return p.requestBody(req, req.Stream)
}

// requestBody validates req and returns the wire body.
func (p *Provider) requestBody(req *llm.Request, stream bool) ([]byte, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	system, msgs := req.System, req.Messages
	native := req.ResponseSchema != nil && p.cfg.StructuredOutput == StructuredNative
	if req.ResponseSchema != nil && !native {
		system, msgs = "", llm.AugmentForSchema(req.Transcript(), req.ResponseSchema)
	}
	b := make([]byte, 0, 512)
	messages, err := appendMessages(nil, system, msgs, p.googleTarget())
	if err != nil {
		return nil, err
	}
	var tools, choice []byte
	if len(req.Tools) > 0 {
		if tools, err = appendTools(nil, req.Tools); err != nil {
			return nil, err
		}
	}
	if !req.ToolChoice.IsZero() {
		choice = appendToolChoice(nil, req.ToolChoice)
	}
	var format []byte
	if native {
		if format, err = responseFormat(req.ResponseSchema); err != nil {
			return nil, err
		}
	}
	cfg := req.Config
	managed := []llm.ManagedField{
		{Key: "model", Value: p.cfg.Model},
		{Key: "messages", Value: json.RawMessage(messages)},
		{Key: "tools", Value: rawOrNil(tools)},
		{Key: "tool_choice", Value: rawOrNil(choice)},
		{Key: "stream", Value: stream},
	}
	addScalar := func(key string, v any, set bool) {
		if set {
			managed = append(managed, llm.ManagedField{Key: key, Value: v})
		}
	}
	addScalar("temperature", deref(cfg.Temperature), cfg.Temperature != nil)
	addScalar("max_tokens", deref(cfg.MaxTokens), cfg.MaxTokens != nil)
	addScalar("top_p", deref(cfg.TopP), cfg.TopP != nil)
	addScalar("seed", deref(cfg.Seed), cfg.Seed != nil)
	addScalar("frequency_penalty", deref(cfg.FrequencyPenalty), cfg.FrequencyPenalty != nil)
	addScalar("presence_penalty", deref(cfg.PresencePenalty), cfg.PresencePenalty != nil)
	if cfg.StopSequences != nil {
		managed = append(managed, llm.ManagedField{Key: "stop", List: cfg.StopSequences, CoerceString: true})
	}
	if native {
		managed = append(managed, llm.ManagedField{Key: "response_format", Value: json.RawMessage(format)})
	}
	if stream {
		managed = append(managed, llm.ManagedField{Key: "stream_options", Value: json.RawMessage(`{"include_usage":true}`)})
	}
	pass, lists, err := llm.ResolveExtras(cfg.Extras, managed)
	if err != nil {
		var pe *llm.ProviderError
		if errors.As(err, &pe) {
			pe.Provider, pe.Op = providerName, op(stream)
		}
		return nil, err
	}

	b = append(b, `{"model":`...)
	b = appendString(b, p.cfg.Model)
	b = append(b, `,"messages":`...)
	b = append(b, messages...)
	if tools != nil {
		b = append(b, `,"tools":`...)
		b = append(b, tools...)
	}
	if choice != nil {
		b = append(b, `,"tool_choice":`...)
		b = append(b, choice...)
	}
	if cfg.Temperature != nil {
		b = appendFloat(append(b, `,"temperature":`...), *cfg.Temperature)
	}
	if cfg.MaxTokens != nil {
		b = strconv.AppendInt(append(b, `,"max_tokens":`...), int64(*cfg.MaxTokens), 10)
	}
	if cfg.TopP != nil {
		b = appendFloat(append(b, `,"top_p":`...), *cfg.TopP)
	}
	if cfg.Seed != nil {
		b = strconv.AppendInt(append(b, `,"seed":`...), *cfg.Seed, 10)
	}
	if cfg.FrequencyPenalty != nil {
		b = appendFloat(append(b, `,"frequency_penalty":`...), *cfg.FrequencyPenalty)
	}
	if cfg.PresencePenalty != nil {
		b = appendFloat(append(b, `,"presence_penalty":`...), *cfg.PresencePenalty)
	}
	if stop, ok := lists["stop"]; ok {
		b = append(b, `,"stop":[`...)
		for i, s := range stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	if format != nil {
		b = append(b, `,"response_format":`...)
		b = append(b, format...)
	}
	if stream {
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	for _, k := range llm.SortedKeys(pass) {
		v, err := llm.CanonicalValue(pass[k])
		if err != nil {
			return nil, &llm.ProviderError{Cat: errcat.ProviderInvalidRequest, Provider: providerName, Op: op(stream),
				Message: "config extras key " + strconv.Quote(k) + " is not JSON-encodable", Err: err}
		}
		b = append(appendString(append(b, ','), k), ':')
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// googleTarget reports whether the provider speaks to Gemini (Google's
// OpenAI-compatible endpoint, by its host, or a model named gemini-*):
// the only server issuing the tool-call thought signatures
// (extra_content.google.thought_signature) this mapping captures and must
// return. ToolCall.Signature is Google-issued whichever mapping captured
// it (this one or llm/gemini), so sending it to Google is the same-provider
// round-trip §3.1.7 requires; to any other server it is stripped, as
// §3.1.7 requires across providers (fixture 053).
func (p *Provider) googleTarget() bool {
	if u, err := url.Parse(p.base); err == nil {
		h := strings.ToLower(u.Hostname())
		if h == "generativelanguage.googleapis.com" || h == "aiplatform.googleapis.com" || strings.HasSuffix(h, "-aiplatform.googleapis.com") {
			return true
		}
	}
	m := strings.ToLower(strings.TrimPrefix(p.cfg.Model, "models/"))
	return strings.HasPrefix(m, "gemini-")
}

func op(stream bool) string {
	if stream {
		return "stream"
	}
	return "complete"
}

func rawOrNil(b []byte) any {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func appendFloat(b []byte, f float64) []byte {
	v, _ := json.Marshal(f)
	return append(b, v...)
}

func appendString(b []byte, s string) []byte {
	v, _ := json.Marshal(s)
	return append(b, v...)
}

func appendCanonical(b []byte, raw json.RawMessage, field string) ([]byte, error) {
	c, err := llm.CanonicalJSON(raw)
	if err != nil {
		return nil, &llm.ValidationError{Index: -1, Field: field, Reason: "not valid JSON", Err: err}
	}
	return append(b, c...), nil
}

// appendMessages appends the OpenAI messages array (§8.1.1, §8.1.1.1):
// the system prompt (when non-empty) as a leading system message, then
// msgs without their asides (llm.AsideFilter). A tool call's Signature is
// sent as extra_content.google.thought_signature when signatures is set
// (the server is Google's, see [Provider.googleTarget]) and stripped
// otherwise (§3.1.7).
func appendMessages(b []byte, system string, msgs []llm.Message, signatures bool) ([]byte, error) {
	b = append(b, '[')
	first := true
	if system != "" {
		b = append(b, `{"role":"system","content":`...)
		b = appendString(b, system)
		b = append(b, '}')
		first = false
	}
	var asides llm.AsideFilter
	for i := range msgs {
		m := &msgs[i]
		if asides.Aside(m) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"role":`...)
		b = appendString(b, string(m.Role))
		b = append(b, `,"content":`...)
		switch {
		case m.Role == llm.RoleAssistant:
			// Thinking and redacted-thinking blocks are stripped (§8.1.1);
			// the remaining text is sent as a string, or null when empty.
			if t := m.Text(); t != "" {
				b = appendString(b, t)
			} else {
				b = append(b, "null"...)
			}
		case m.Content.IsBlocks():
			b = appendBlocks(b, m.Content.Blocks())
		default:
			b = appendString(b, m.Content.Text())
		}
		if len(m.ToolCalls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for j, tc := range m.ToolCalls {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"id":`...)
				b = appendString(b, tc.ID)
				b = append(b, `,"type":"function","function":{"name":`...)
				b = appendString(b, tc.Name)
				b = append(b, `,"arguments":`...)
				args := []byte("{}")
				if len(tc.Arguments) > 0 {
					c, err := llm.CanonicalJSON(tc.Arguments)
					if err != nil {
						return nil, &llm.ValidationError{Index: i, Field: "messages[" + strconv.Itoa(i) + "].tool_calls[" + strconv.Itoa(j) + "].arguments", Reason: "not valid JSON", Err: err}
					}
					args = c
				}
				b = appendString(b, string(args))
				b = append(b, '}')
				if signatures && tc.Signature != "" {
					// Gemini's OpenAI-compatible endpoint requires a
					// call's thought signature back where it sent it.
					b = append(b, `,"extra_content":{"google":{"thought_signature":`...)
					b = appendString(b, tc.Signature)
					b = append(b, "}}"...)
				}
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		if m.Role == llm.RoleTool {
			b = append(b, `,"tool_call_id":`...)
			b = appendString(b, m.ToolCallID)
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// appendBlocks appends a user content array (§8.1.1.1).
func appendBlocks(b []byte, blocks []llm.Block) []byte {
	b = append(b, '[')
	n := 0
	for _, blk := range blocks {
		switch blk.Type {
		case llm.BlockText:
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"text","text":`...)
			b = appendString(b, blk.Text)
			b = append(b, '}')
		case llm.BlockImage:
			if n > 0 {
				b = append(b, ',')
			}
			url := blk.Source.URL
			if blk.Source.Type == llm.SourceInline {
				url = "data:" + blk.MediaType + ";base64," + blk.Source.Base64Data
			}
			b = append(b, `{"type":"image_url","image_url":{`...)
			if blk.Detail != "" {
				b = append(b, `"detail":`...)
				b = appendString(b, string(blk.Detail))
				b = append(b, ',')
			}
			b = append(b, `"url":`...)
			b = appendString(b, url)
			b = append(b, "}}"...)
		default:
			continue // thinking blocks never reach the wire
		}
		n++
	}
	return append(b, ']')
}

// appendTools appends the tools array (§8.1.1).
func appendTools(b []byte, tools []llm.Tool) ([]byte, error) {
	b = append(b, '[')
	for i, t := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"function","function":{"name":`...)
		b = appendString(b, t.Name)
		if t.Description != "" {
			b = append(b, `,"description":`...)
			b = appendString(b, t.Description)
		}
		if len(t.Parameters) > 0 {
			var err error
			b = append(b, `,"parameters":`...)
			if b, err = appendCanonical(b, t.Parameters, "tools["+strconv.Itoa(i)+"].parameters"); err != nil {
				return nil, err
			}
		}
		b = append(b, "}}"...)
	}
	return append(b, ']'), nil
}

// appendToolChoice appends the wire tool_choice (§8.1.1 table).
func appendToolChoice(b []byte, tc llm.ToolChoice) []byte {
	if tc.Mode == llm.ToolChoiceTool {
		b = append(b, `{"type":"function","function":{"name":`...)
		b = appendString(b, tc.Name)
		return append(b, "}}"...)
	}
	return appendString(b, string(tc.Mode))
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// responseFormat returns the native response_format (§8.1.5): the name is
// the schema's title (sanitized) or "response_" and a hash of the
// canonical schema; strict is true when the schema meets the strict-mode
// constraints.
func responseFormat(schema json.RawMessage) ([]byte, error) {
	canon, err := llm.CanonicalJSON(schema)
	if err != nil {
		return nil, &llm.ValidationError{Index: -1, Field: "response_schema", Reason: "not valid JSON", Err: err}
	}
	var root map[string]any
	_ = json.Unmarshal(canon, &root)
	name := ""
	if t, ok := root["title"].(string); ok {
		name = nameUnsafe.ReplaceAllString(t, "_")
		if len(name) > 64 {
			name = name[:64]
		}
	}
	if name == "" {
		sum := sha256.Sum256(canon)
		name = "response_" + hex.EncodeToString(sum[:6])
	}
	b := append([]byte(`{"type":"json_schema","json_schema":{"name":`), appendString(nil, name)...)
	b = append(b, `,"schema":`...)
	b = append(b, canon...)
	b = append(b, `,"strict":`...)
	b = strconv.AppendBool(b, strictSchema(root))
	return append(b, "}}"...), nil
}

// strictSchema reports whether every object schema in s forbids
// additional properties and requires all its properties (OpenAI strict
// mode).
func strictSchema(s any) bool {
	switch x := s.(type) {
	case map[string]any:
		if props, ok := x["properties"].(map[string]any); ok || x["type"] == "object" {
			if ap, ok := x["additionalProperties"].(bool); !ok || ap {
				return false
			}
			req, _ := x["required"].([]any)
			have := map[string]bool{}
			for _, r := range req {
				if s, ok := r.(string); ok {
					have[s] = true
				}
			}
			for k := range props {
				if !have[k] {
					return false
				}
			}
		}
		for _, v := range x {
			if !strictSchema(v) {
				return false
			}
		}
	case []any:
		for _, v := range x {
			if !strictSchema(v) {
				return false
			}
		}
	}
	return true
}
