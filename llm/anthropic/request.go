package anthropic

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/jsonstr"
	"github.com/armature-go/armature/llm"
)

// Wire keys of the request body that the mapping manages (llm-provider §6
// Managed-field collision). A Config.Extras key naming one of them while
// the mapping emits it is not passed through: an equal value is a no-op, a
// conflicting one is rejected pre-send (provider_invalid_request), except
// stop_sequences, whose extras value merges after the declared ones.
//
//   - structural, emitted on every call or whenever the mapping produces
//     them: model, messages, system (when there is a system message),
//     tools and tool_choice (when the call has them), output_config (on
//     the native structured-output path);
//   - realizations of declared RuntimeConfig fields, while set:
//     max_tokens (always set: the mapping requires it), temperature,
//     top_p, and the additive stop_sequences;
//   - stream, on every call: true on a streamed call (Stream), false on
//     an atomic one (Complete); an extras value that contradicts it is
//     refused, a matching one is a no-op.
//
// These are wire identifiers: they must not change.
const (
	keyMaxTokens     = "max_tokens"
	keyMessages      = "messages"
	keyModel         = "model"
	keyOutputConfig  = "output_config"
	keyStopSequences = "stop_sequences"
	keyStream        = "stream"
	keySystem        = "system"
	keyTemperature   = "temperature"
	keyToolChoice    = "tool_choice"
	keyTools         = "tools"
	keyTopP          = "top_p"
)

// systemSeparator joins the texts of several system messages (§8.2.1).
const systemSeparator = "\n\n"

// built is a request body ready to send.
type built struct {
	body []byte
	// synthetic is set on the StructuredTool path: the reply's tool_use
	// is the structured value.
	synthetic bool
}

// field is one member of the body root.
type field struct {
	key string
	val []byte
}

// RequestBody returns the exact bytes Complete would send for req, after
// the same pre-send validation. Structurally equal requests give equal
// bytes (§8 intra-implementation wire-byte stability): every object the
// mapping writes has its keys in lexicographic order, tool input schemas,
// tool_use inputs, the response schema and extras values are
// canonicalized recursively ([llm.CanonicalJSON]: sorted keys, compact,
// number literals as written), system texts join in order with "\n\n",
// and arrays keep the caller's order. With req.Stream set, they are the
// bytes Stream would send (with "stream": true).
func (p *Provider) RequestBody(req *llm.Request) ([]byte, error) {
	b, err := p.build(req, req.Stream)
	if err != nil {
		return nil, err
	}
	return b.body, nil
}

// reject returns a pre-send provider_invalid_request failure.
func reject(msg string, cause error) *llm.ProviderError {
	return &llm.ProviderError{Cat: errcat.ProviderInvalidRequest, Provider: providerName, Op: "complete", Message: msg, Err: cause}
}

// build validates req and encodes its body; stream selects the
// streaming body (Stream) over the atomic one (Complete, RequestBody).
func (p *Provider) build(req *llm.Request, stream bool) (*built, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	c := &req.Config
	switch {
	case c.MaxTokens == nil:
		return nil, reject("max_tokens is required by the Anthropic Messages mapping (config.max_tokens is unset)", nil)
	case c.Seed != nil:
		return nil, reject("seed is not supported by the Anthropic Messages API", nil)
	case c.FrequencyPenalty != nil:
		return nil, reject("frequency_penalty is not supported by the Anthropic Messages API", nil)
	case c.PresencePenalty != nil:
		return nil, reject("presence_penalty is not supported by the Anthropic Messages API", nil)
	}

	system, msgs, tools, choice := req.System, req.Messages, req.Tools, req.ToolChoice
	out := &built{}
	var outputConfig []byte
	if req.ResponseSchema != nil {
		schema, err := llm.CanonicalJSON(req.ResponseSchema)
		if err != nil {
			return nil, reject("response_schema is not valid JSON", err)
		}
		mode := p.cfg.StructuredOutput
		if mode == StructuredTool && len(tools) > 0 {
			mode = StructuredPrompt
		}
		switch mode {
		case StructuredNative:
			outputConfig = slices.Concat([]byte(`{"format":{"schema":`), schema, []byte(`,"type":"json_schema"}}`))
		case StructuredTool:
			out.synthetic = true
			tools = []llm.Tool{{Name: SyntheticToolName, Description: syntheticToolDescription, Parameters: schema}}
			choice = llm.ForceTool(SyntheticToolName)
		default:
			system, msgs = "", llm.AugmentForSchema(req.Transcript(), schema)
		}
	}

	system, hasSystem, wireMsgs, err := encodeMessages(system, msgs)
	if err != nil {
		return nil, err
	}
	fields := make([]field, 0, 12)
	fields = append(fields,
		field{keyModel, llm.AppendJSONString(nil, p.cfg.Model)},
		field{keyMessages, wireMsgs},
		field{keyMaxTokens, strconv.AppendInt(nil, int64(*c.MaxTokens), 10)},
	)
	managed := make([]llm.ManagedField, 0, 12)
	managed = append(managed,
		llm.ManagedField{Key: keyModel, Value: p.cfg.Model},
		llm.ManagedField{Key: keyMessages, Value: json.RawMessage(wireMsgs)},
		llm.ManagedField{Key: keyMaxTokens, Value: *c.MaxTokens},
		llm.ManagedField{Key: keyStream, Value: stream},
	)
	if stream {
		fields = append(fields, field{keyStream, []byte("true")})
	}
	if hasSystem {
		fields = append(fields, field{keySystem, llm.AppendJSONString(nil, system)})
		managed = append(managed, llm.ManagedField{Key: keySystem, Value: system})
	}
	if len(tools) > 0 {
		t, err := encodeTools(tools)
		if err != nil {
			return nil, err
		}
		fields = append(fields, field{keyTools, t})
		managed = append(managed, llm.ManagedField{Key: keyTools, Value: json.RawMessage(t)})
	}
	if !choice.IsZero() {
		tc := encodeToolChoice(choice)
		fields = append(fields, field{keyToolChoice, tc})
		managed = append(managed, llm.ManagedField{Key: keyToolChoice, Value: json.RawMessage(tc)})
	}
	if outputConfig != nil {
		fields = append(fields, field{keyOutputConfig, outputConfig})
		managed = append(managed, llm.ManagedField{Key: keyOutputConfig, Value: json.RawMessage(outputConfig)})
	}
	for _, f := range []struct {
		key string
		v   *float64
	}{{keyTemperature, c.Temperature}, {keyTopP, c.TopP}} {
		if f.v == nil {
			continue
		}
		num, err := json.Marshal(*f.v)
		if err != nil {
			return nil, reject(f.key+" is not a finite number", err)
		}
		fields = append(fields, field{f.key, num})
		managed = append(managed, llm.ManagedField{Key: f.key, Value: *f.v})
	}
	if c.StopSequences != nil {
		managed = append(managed, llm.ManagedField{Key: keyStopSequences, List: c.StopSequences})
	}

	pass, lists, err := llm.ResolveExtras(c.Extras, managed)
	if err != nil {
		var pe *llm.ProviderError
		if errors.As(err, &pe) {
			pe.Provider, pe.Op = providerName, "complete"
		}
		return nil, err
	}
	if stops, ok := lists[keyStopSequences]; ok {
		fields = append(fields, field{keyStopSequences, jsonstr.AppendStrings(nil, stops)})
	}
	for k, v := range pass {
		raw, err := llm.CanonicalValue(v)
		if err != nil {
			return nil, reject("config extras key "+strconv.Quote(k)+" is not JSON-encodable", err)
		}
		fields = append(fields, field{k, raw})
	}
	slices.SortFunc(fields, func(a, b field) int { return strings.Compare(a.key, b.key) })

	size := 2
	for _, f := range fields {
		size += len(f.key) + len(f.val) + 4
	}
	body := make([]byte, 0, size)
	body = append(body, '{')
	for i, f := range fields {
		if i > 0 {
			body = append(body, ',')
		}
		body = llm.AppendJSONString(body, f.key)
		body = append(body, ':')
		body = append(body, f.val...)
	}
	out.body = append(body, '}')
	return out, nil
}

// encodeMessages maps the spec message list (§8.2.1, §8.2.1.1, §8.2.1.2),
// the system prompt (prompt, when non-empty) followed by msgs without
// their asides (llm.AsideFilter): system messages leave the list and join
// into the system text; each run of tool messages becomes one user
// message of tool_result blocks.
func encodeMessages(prompt string, msgs []llm.Message) (system string, hasSystem bool, out []byte, err error) {
	var sys []string
	if prompt != "" {
		sys = append(sys, prompt)
	}
	var asides llm.AsideFilter
	out = append(make([]byte, 0, 256*len(msgs)), '[')
	first := true
	sep := func() {
		if !first {
			out = append(out, ',')
		}
		first = false
	}
	for i := 0; i < len(msgs); i++ {
		m := &msgs[i]
		if asides.Aside(m) {
			continue
		}
		switch m.Role {
		case llm.RoleSystem:
			if !m.Content.IsText() {
				return "", false, nil, reject("system message "+strconv.Itoa(i)+" has non-text content; the Anthropic system field takes text only", nil)
			}
			sys = append(sys, m.Content.Text())
		case llm.RoleUser:
			sep()
			out = append(out, `{"content":`...)
			out = appendUserContent(out, m.Content)
			out = append(out, `,"role":"user"}`...)
		case llm.RoleAssistant:
			sep()
			out = append(out, `{"content":`...)
			if out, err = appendAssistantContent(out, m); err != nil {
				return "", false, nil, err
			}
			out = append(out, `,"role":"assistant"}`...)
		case llm.RoleTool:
			sep()
			out = append(out, `{"content":[`...)
			j, n := i, 0
			for ; j < len(msgs); j++ {
				if j > i {
					next := asides // the filter past msgs[j], kept if the run goes on
					if next.Aside(&msgs[j]) {
						asides = next
						continue // an aside inside the run
					}
					if msgs[j].Role != llm.RoleTool {
						break
					}
					asides = next
				}
				if n++; n > 1 {
					out = append(out, ',')
				}
				out = append(out, `{"content":`...)
				out = llm.AppendJSONString(out, msgs[j].Content.Text())
				out = append(out, `,"tool_use_id":`...)
				out = llm.AppendJSONString(out, msgs[j].ToolCallID)
				out = append(out, `,"type":"tool_result"}`...)
			}
			i = j - 1
			out = append(out, `],"role":"user"}`...)
		}
	}
	out = append(out, ']')
	if len(sys) > 0 {
		return strings.Join(sys, systemSeparator), true, out, nil
	}
	return "", false, out, nil
}

// appendUserContent writes user content: a string as a string, blocks as
// an array of text and image entries.
func appendUserContent(dst []byte, c llm.Content) []byte {
	if !c.IsBlocks() {
		return llm.AppendJSONString(dst, c.Text())
	}
	dst = append(dst, '[')
	for i, b := range c.Blocks() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendBlock(dst, &b)
	}
	return append(dst, ']')
}

// appendAssistantContent writes an assistant message's content: its
// text, thinking and redacted-thinking blocks followed by one tool_use
// entry per tool call; a plain string when it has text only.
//
// Signatures that cannot have come from Anthropic are stripped (§3.1.7):
// Anthropic signs thinking blocks only, so a text-block or tool-call
// signature is dropped, and a thinking block without a signature (another
// provider's reasoning) is left out.
func appendAssistantContent(dst []byte, m *llm.Message) ([]byte, error) {
	if len(m.ToolCalls) == 0 && !m.Content.IsBlocks() {
		return llm.AppendJSONString(dst, m.Content.Text()), nil
	}
	dst = append(dst, '[')
	n := 0
	sep := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	if m.Content.IsBlocks() {
		for _, b := range m.Content.Blocks() {
			if b.Type == llm.BlockThinking && b.Signature == "" {
				continue
			}
			sep()
			dst = appendBlock(dst, &b)
		}
	} else if s := m.Content.Text(); s != "" {
		sep()
		dst = appendTextBlock(dst, s)
	}
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		input := []byte("{}")
		if len(tc.Arguments) > 0 && string(tc.Arguments) != "null" {
			canon, err := llm.CanonicalJSON(tc.Arguments)
			if err != nil {
				return nil, reject("tool call "+strconv.Quote(tc.ID)+" arguments are not valid JSON", err)
			}
			input = canon
		}
		sep()
		dst = append(dst, `{"id":`...)
		dst = llm.AppendJSONString(dst, tc.ID)
		dst = append(dst, `,"input":`...)
		dst = append(dst, input...)
		dst = append(dst, `,"name":`...)
		dst = llm.AppendJSONString(dst, tc.Name)
		dst = append(dst, `,"type":"tool_use"}`...)
	}
	return append(dst, ']'), nil
}

func appendTextBlock(dst []byte, text string) []byte {
	dst = append(dst, `{"text":`...)
	dst = llm.AppendJSONString(dst, text)
	return append(dst, `,"type":"text"}`...)
}

// appendBlock writes one content block (§8.2.1.1). The image detail hint
// is dropped: Anthropic does not honor it.
func appendBlock(dst []byte, b *llm.Block) []byte {
	switch b.Type {
	case llm.BlockImage:
		if b.Source.Type == llm.SourceInline {
			dst = append(dst, `{"source":{"data":`...)
			dst = llm.AppendJSONString(dst, b.Source.Base64Data)
			dst = append(dst, `,"media_type":`...)
			dst = llm.AppendJSONString(dst, b.MediaType)
			dst = append(dst, `,"type":"base64"}`...)
		} else {
			dst = append(dst, `{"source":{"type":"url","url":`...)
			dst = llm.AppendJSONString(dst, b.Source.URL)
			dst = append(dst, '}')
		}
		return append(dst, `,"type":"image"}`...)
	case llm.BlockThinking:
		dst = append(dst, `{"signature":`...)
		dst = llm.AppendJSONString(dst, b.Signature)
		dst = append(dst, `,"thinking":`...)
		dst = llm.AppendJSONString(dst, b.Text)
		return append(dst, `,"type":"thinking"}`...)
	case llm.BlockRedactedThinking:
		dst = append(dst, `{"data":`...)
		dst = llm.AppendJSONString(dst, b.Data)
		return append(dst, `,"type":"redacted_thinking"}`...)
	default:
		return appendTextBlock(dst, b.Text)
	}
}

// encodeTools writes the tools array: {description, input_schema, name},
// the schema canonicalized.
func encodeTools(tools []llm.Tool) ([]byte, error) {
	dst := []byte{'['}
	for i := range tools {
		t := &tools[i]
		schema := []byte(`{"type":"object"}`)
		if len(t.Parameters) > 0 {
			canon, err := llm.CanonicalJSON(t.Parameters)
			if err != nil {
				return nil, reject("tool "+strconv.Quote(t.Name)+" parameters are not valid JSON", err)
			}
			schema = canon
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if t.Description != "" {
			dst = append(dst, `"description":`...)
			dst = llm.AppendJSONString(dst, t.Description)
			dst = append(dst, ',')
		}
		dst = append(dst, `"input_schema":`...)
		dst = append(dst, schema...)
		dst = append(dst, `,"name":`...)
		dst = llm.AppendJSONString(dst, t.Name)
		dst = append(dst, '}')
	}
	return append(dst, ']'), nil
}

// encodeToolChoice maps a non-zero tool choice (§8.2.1): required becomes
// {"type":"any"}.
func encodeToolChoice(tc llm.ToolChoice) []byte {
	switch tc.Mode {
	case llm.ToolChoiceRequired:
		return []byte(`{"type":"any"}`)
	case llm.ToolChoiceNone:
		return []byte(`{"type":"none"}`)
	case llm.ToolChoiceTool:
		dst := append([]byte(nil), `{"name":`...)
		dst = llm.AppendJSONString(dst, tc.Name)
		return append(dst, `,"type":"tool"}`...)
	default:
		return []byte(`{"type":"auto"}`)
	}
}
