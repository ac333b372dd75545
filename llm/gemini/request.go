package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// ClientCallIDPrefix starts the ID this mapping gives a functionCall part
// that arrives without one (the Gemini API omits functionCall.id on many
// models, while §3 needs an ID to correlate the tool message). IDs with
// this prefix are the mapping's own: they are never sent back, so Gemini
// matches the functionResponse by name and order as it does for its own
// ID-less calls. The prefix is a wire identifier and must not change.
const ClientCallIDPrefix = "gemini-call-"

// The wire shapes of a generateContent request (§8.3.1). Field order is
// fixed, caller-supplied JSON (schemas, arguments, extras) is
// canonicalized with sorted keys and generationConfig is a map (sorted by
// encoding/json), so equal requests encode to equal bytes (§8 wire-byte
// stability).
type (
	wireRequest struct {
		Contents          []wireContent              `json:"contents"`
		SystemInstruction *wireContent               `json:"systemInstruction,omitempty"`
		Tools             []wireTool                 `json:"tools,omitempty"`
		ToolConfig        *wireToolConfig            `json:"toolConfig,omitempty"`
		GenerationConfig  map[string]json.RawMessage `json:"generationConfig,omitempty"`
	}
	wireContent struct {
		Role  string     `json:"role,omitempty"`
		Parts []wirePart `json:"parts"`
	}
	wirePart struct {
		Text             string                `json:"text,omitempty"`
		Thought          bool                  `json:"thought,omitempty"`
		InlineData       *wireBlob             `json:"inlineData,omitempty"`
		FileData         *wireFile             `json:"fileData,omitempty"`
		FunctionCall     *wireFunctionCall     `json:"functionCall,omitempty"`
		FunctionResponse *wireFunctionResponse `json:"functionResponse,omitempty"`
		ThoughtSignature string                `json:"thoughtSignature,omitempty"`
	}
	wireBlob struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	}
	wireFile struct {
		MimeType string `json:"mimeType,omitempty"`
		FileURI  string `json:"fileUri"`
	}
	wireFunctionCall struct {
		Name string          `json:"name"`
		ID   string          `json:"id,omitempty"`
		Args json.RawMessage `json:"args"`
	}
	wireFunctionResponse struct {
		Name     string         `json:"name"`
		ID       string         `json:"id,omitempty"`
		Response wireToolResult `json:"response"`
	}
	wireToolResult struct {
		Result string `json:"result"`
	}
	wireTool struct {
		FunctionDeclarations []wireFunctionDecl `json:"functionDeclarations"`
	}
	wireFunctionDecl struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		// ParametersJSONSchema carries a schema the parameters field
		// (an OpenAPI subset) would reject; see openAPISubset.
		ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
	}
	wireToolConfig struct {
		FunctionCallingConfig wireFunctionCallingConfig `json:"functionCallingConfig"`
	}
	wireFunctionCallingConfig struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
	}
)

// Gemini wire names of the generationConfig fields the mapping manages.
const (
	keyTemperature      = "temperature"
	keyTopP             = "topP"
	keyMaxOutputTokens  = "maxOutputTokens"
	keyStopSequences    = "stopSequences"
	keySeed             = "seed"
	keyFrequencyPenalty = "frequencyPenalty"
	keyPresencePenalty  = "presencePenalty"
	keyResponseMimeType = "responseMimeType"
	keyResponseSchema   = "responseJsonSchema"
)

// invalidRequest is a pre-send rejection.
func invalidRequest(cat errcat.Category, msg string) *llm.ProviderError {
	return &llm.ProviderError{Cat: cat, Provider: ProviderName, Op: "complete", Message: msg}
}

// RequestBody returns the exact bytes Complete (and Stream) would send
// for req, after the same pre-send validation: a request Complete would
// refuse before sending, such as one whose Config.Extras conflict with a
// field the mapping manages ([llm.ErrManagedField]), is refused the same.
func (p *Provider) RequestBody(req *llm.Request) ([]byte, error) {
	return p.requestBody(req)
}

// requestBody validates req and encodes its generateContent body.
func (p *Provider) requestBody(req *llm.Request) ([]byte, error) {
	return buildRequest(req, p.cfg.StructuredOutput, &p.schemas)
}

// buildRequest is the §8.3.1 request mapping.
func buildRequest(req *llm.Request, mode StructuredOutputMode, schemas *subsetCache) ([]byte, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	native := req.ResponseSchema != nil && mode != StructuredPrompt
	system, msgs := req.System, req.Messages
	if req.ResponseSchema != nil && !native {
		system, msgs = "", llm.AugmentForSchema(req.Transcript(), req.ResponseSchema)
	}
	var w wireRequest
	var err error
	if w.SystemInstruction, w.Contents, err = contents(system, msgs); err != nil {
		return nil, err
	}
	if len(req.Tools) > 0 {
		decls := make([]wireFunctionDecl, len(req.Tools))
		for i, t := range req.Tools {
			decls[i] = wireFunctionDecl{Name: t.Name, Description: t.Description}
			if t.Parameters != nil {
				c, err := canonical(t.Parameters, "tools["+strconv.Itoa(i)+"].parameters")
				if err != nil {
					return nil, err
				}
				if schemas.fits(c) {
					decls[i].Parameters = c
				} else {
					decls[i].ParametersJSONSchema = c
				}
			}
		}
		w.Tools = []wireTool{{FunctionDeclarations: decls}}
	}
	w.ToolConfig = toolConfig(req.ToolChoice)
	if w.GenerationConfig, err = generationConfig(req.Config, req.ResponseSchema, native); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil {
		return nil, invalidRequest(errcat.ProviderInvalidRequest, "cannot encode the request: "+err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func canonical(raw json.RawMessage, field string) (json.RawMessage, error) {
	c, err := llm.CanonicalJSON(raw)
	if err != nil {
		pe := invalidRequest(errcat.ProviderInvalidRequest, field+" is not valid JSON")
		pe.Err = err
		return nil, pe
	}
	return c, nil
}

// subsetCache remembers openAPISubset's answer per schema: an agent
// sends the same tool schemas on every call, and the check decodes the
// schema. It keeps at most maxCachedSchemas answers.
type subsetCache struct {
	mu sync.RWMutex
	m  map[string]bool
}

const maxCachedSchemas = 1024

func (c *subsetCache) fits(raw json.RawMessage) bool {
	if c == nil {
		return openAPISubset(raw)
	}
	c.mu.RLock()
	ok, hit := c.m[string(raw)]
	c.mu.RUnlock()
	if hit {
		return ok
	}
	ok = openAPISubset(raw)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedSchemas {
		c.m = map[string]bool{}
	}
	c.m[string(raw)] = ok
	c.mu.Unlock()
	return ok
}

// schemaKeywords are the keywords of the Schema object that Gemini's
// functionDeclarations[].parameters accepts (an OpenAPI 3.0 subset). The
// API rejects any other field ("Unknown name"), such as the
// additionalProperties that struct-derived tool schemas always carry.
var schemaKeywords = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true, "enum": true,
	"maxItems": true, "minItems": true, "properties": true, "required": true, "minProperties": true,
	"maxProperties": true, "minLength": true, "maxLength": true, "pattern": true, "example": true,
	"anyOf": true, "propertyOrdering": true, "default": true, "items": true, "minimum": true, "maximum": true,
}

// openAPISubset reports whether the JSON Schema raw fits the parameters
// field as it is: every keyword, at every level, is one Gemini's Schema
// object has, and every type is a single name. §8.3.1 maps the schema
// verbatim into parameters; this mapping does so whenever the API takes
// it (so a plain schema goes out byte for byte as the spec shows), and
// otherwise sends it, still verbatim, as parametersJsonSchema, the
// declaration field that takes full JSON Schema — rather than dropping
// keywords, which would change what the model is told.
func openAPISubset(raw json.RawMessage) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	return fitsSubset(v)
}

func fitsSubset(v any) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k, val := range obj {
		if !schemaKeywords[k] {
			return false
		}
		switch k {
		case "type":
			if _, ok := val.(string); !ok {
				return false
			}
		case "properties":
			props, ok := val.(map[string]any)
			if !ok {
				return false
			}
			for _, p := range props {
				if !fitsSubset(p) {
					return false
				}
			}
		case "items":
			if !fitsSubset(val) {
				return false
			}
		case "anyOf":
			list, ok := val.([]any)
			if !ok {
				return false
			}
			for _, s := range list {
				if !fitsSubset(s) {
					return false
				}
			}
		}
	}
	return true
}

// toolConfig maps §5 tool_choice onto functionCallingConfig (§8.3.1).
func toolConfig(tc llm.ToolChoice) *wireToolConfig {
	var c wireFunctionCallingConfig
	switch tc.Mode {
	case llm.ToolChoiceAuto:
		c.Mode = "AUTO"
	case llm.ToolChoiceRequired:
		c.Mode = "ANY"
	case llm.ToolChoiceNone:
		c.Mode = "NONE"
	case llm.ToolChoiceTool:
		c.Mode, c.AllowedFunctionNames = "ANY", []string{tc.Name}
	default:
		return nil
	}
	return &wireToolConfig{FunctionCallingConfig: c}
}

// generationConfig maps the declared RuntimeConfig fields, the native
// structured-output fields and the extras under generationConfig,
// resolving extras that collide with a managed field (§6, §8.3.1).
func generationConfig(c llm.Config, schema json.RawMessage, native bool) (map[string]json.RawMessage, error) {
	gc := make(map[string]json.RawMessage)
	var managed []llm.ManagedField
	scalar := func(key string, v any) {
		b, _ := json.Marshal(v)
		gc[key] = b
		managed = append(managed, llm.ManagedField{Key: key, Value: json.RawMessage(b)})
	}
	if c.Temperature != nil {
		scalar(keyTemperature, *c.Temperature)
	}
	if c.TopP != nil {
		scalar(keyTopP, *c.TopP)
	}
	if c.MaxTokens != nil {
		scalar(keyMaxOutputTokens, *c.MaxTokens)
	}
	if c.Seed != nil {
		scalar(keySeed, *c.Seed)
	}
	if c.FrequencyPenalty != nil {
		scalar(keyFrequencyPenalty, *c.FrequencyPenalty)
	}
	if c.PresencePenalty != nil {
		scalar(keyPresencePenalty, *c.PresencePenalty)
	}
	if c.StopSequences != nil {
		list := c.StopSequences
		if len(list) == 0 {
			list = []string{} // set but empty: still managed (List non-nil)
		}
		managed = append(managed, llm.ManagedField{Key: keyStopSequences, List: list})
	}
	if native {
		canon, err := canonical(schema, "response_schema")
		if err != nil {
			return nil, err
		}
		gc[keyResponseMimeType] = json.RawMessage(`"application/json"`)
		gc[keyResponseSchema] = canon
		managed = append(managed,
			llm.ManagedField{Key: keyResponseMimeType, Value: "application/json"},
			llm.ManagedField{Key: keyResponseSchema, Value: canon})
	}
	pass, lists, err := llm.ResolveExtras(c.Extras, managed)
	if err != nil {
		var pe *llm.ProviderError
		if errors.As(err, &pe) {
			pe.Provider, pe.Op = ProviderName, "complete"
		}
		return nil, err
	}
	if stop, ok := lists[keyStopSequences]; ok {
		b, _ := json.Marshal(stop)
		gc[keyStopSequences] = b
	}
	for _, k := range llm.SortedKeys(pass) {
		v, err := llm.CanonicalValue(pass[k])
		if err != nil {
			pe := invalidRequest(errcat.ProviderInvalidRequest, "config extras key "+strconv.Quote(k)+" is not JSON-encodable")
			pe.Err = err
			return nil, pe
		}
		gc[k] = v
	}
	if len(gc) == 0 {
		return nil, nil
	}
	return gc, nil
}

// contents maps the message list, the system prompt (prompt, when
// non-empty) followed by msgs without their asides (llm.AsideFilter):
// system messages join into the systemInstruction (§8.3.1 system extraction), user and assistant
// messages become user and model Contents, and each run of consecutive
// tool messages becomes one user Content of functionResponse parts
// (§8.3.1.2).
func contents(prompt string, msgs []llm.Message) (*wireContent, []wireContent, error) {
	var system []string
	if prompt != "" {
		system = append(system, prompt)
	}
	out := make([]wireContent, 0, len(msgs))
	var asides llm.AsideFilter
	afterTool := false // the message before m, asides aside, is a tool message
	for i := range msgs {
		m := &msgs[i]
		if asides.Aside(m) {
			continue
		}
		prevTool := afterTool
		afterTool = m.Role == llm.RoleTool
		switch m.Role {
		case llm.RoleSystem:
			system = append(system, m.Content.Text())
		case llm.RoleUser:
			parts, err := userParts(m, i)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, wireContent{Role: "user", Parts: parts})
		case llm.RoleAssistant:
			if parts := modelParts(m); len(parts) > 0 {
				out = append(out, wireContent{Role: "model", Parts: parts})
			}
		case llm.RoleTool:
			part := wirePart{FunctionResponse: &wireFunctionResponse{
				Name:     toolName(msgs[:i], m.ToolCallID),
				ID:       sendID(m.ToolCallID),
				Response: wireToolResult{Result: m.Content.Text()},
			}}
			if prevTool {
				last := &out[len(out)-1]
				last.Parts = append(last.Parts, part)
				continue
			}
			out = append(out, wireContent{Role: "user", Parts: []wirePart{part}})
		}
	}
	if len(system) == 0 {
		return nil, out, nil
	}
	return &wireContent{Parts: []wirePart{{Text: strings.Join(system, "\n\n")}}}, out, nil
}

// sendID returns the functionCall/functionResponse id to send: the
// caller's ID, or none for an ID this mapping minted.
func sendID(id string) string {
	if strings.HasPrefix(id, ClientCallIDPrefix) {
		return ""
	}
	return id
}

// toolName finds the name of the tool call id answers, searching the
// earlier messages from the nearest back (validation guarantees a match).
func toolName(earlier []llm.Message, id string) string {
	for i := len(earlier) - 1; i >= 0; i-- {
		for _, tc := range earlier[i].ToolCalls {
			if tc.ID == id {
				return tc.Name
			}
		}
	}
	return ""
}

// userParts maps user content (§8.3.1.1): text and image parts.
func userParts(m *llm.Message, index int) ([]wirePart, error) {
	if m.Content.IsText() {
		return []wirePart{{Text: m.Content.Text()}}, nil
	}
	blocks := m.Content.Blocks()
	parts := make([]wirePart, 0, len(blocks))
	for j, b := range blocks {
		switch b.Type {
		case llm.BlockText:
			parts = append(parts, wirePart{Text: b.Text})
		case llm.BlockImage:
			part, err := imagePart(b)
			if err != nil {
				err.Message = "messages[" + strconv.Itoa(index) + "].content[" + strconv.Itoa(j) + "]: " + err.Message
				return nil, err
			}
			parts = append(parts, part)
		}
	}
	return parts, nil
}

// imagePart maps an image block: inline data to inlineData, a URL to
// fileData with the media type inferred from the URL. The detail hint is
// dropped (Gemini has none).
func imagePart(b llm.Block) (wirePart, *llm.ProviderError) {
	if b.Source.Type == llm.SourceInline {
		if !SupportedImageMediaType(b.MediaType) {
			return wirePart{}, invalidRequest(errcat.ProviderUnsupportedContentBlock,
				"Gemini does not accept inline images of media type "+strconv.Quote(b.MediaType))
		}
		return wirePart{InlineData: &wireBlob{MimeType: b.MediaType, Data: b.Source.Base64Data}}, nil
	}
	mt := InferMediaType(b.Source.URL)
	if mt == "" {
		mt = b.MediaType
	}
	return wirePart{FileData: &wireFile{MimeType: mt, FileURI: b.Source.URL}}, nil
}

// SupportedImageMediaType reports whether Gemini documents support for
// inline images of mediaType: image/png, image/jpeg, image/webp,
// image/heic and image/heif. Others (image/gif among them) are rejected
// before sending with provider_unsupported_content_block.
func SupportedImageMediaType(mediaType string) bool {
	switch mediaType {
	case llm.MediaTypePNG, llm.MediaTypeJPEG, llm.MediaTypeWebP, "image/heic", "image/heif":
		return true
	}
	return false
}

// InferMediaType returns the media type of the image a URL names: the
// media type of a data: URL, or the one its path's extension stands for
// (.png, .jpg/.jpeg, .webp, .gif, .heic, .heif), or "" when it cannot
// tell. The query and fragment are ignored.
func InferMediaType(u string) string {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		mt, _, _ := strings.Cut(rest, ",")
		mt, _, _ = strings.Cut(mt, ";")
		return strings.ToLower(mt)
	}
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	switch strings.ToLower(path.Ext(u)) {
	case ".png":
		return llm.MediaTypePNG
	case ".jpg", ".jpeg":
		return llm.MediaTypeJPEG
	case ".webp":
		return llm.MediaTypeWebP
	case ".gif":
		return llm.MediaTypeGIF
	case ".heic":
		return "image/heic"
	case ".heif":
		return "image/heif"
	}
	return ""
}

// modelParts maps an assistant message (§8.3.1.1): its content blocks in
// order, then its tool calls as functionCall parts, each with its
// thoughtSignature when it carries one. Reasoning that Gemini cannot have
// issued is stripped (§3.1.7): redacted-thinking blocks and thinking
// blocks with a signature of their own (Gemini's thought summaries carry
// none; the signature rides on the sibling part).
func modelParts(m *llm.Message) []wirePart {
	var parts []wirePart
	if m.Content.IsText() {
		if s := m.Content.Text(); s != "" {
			parts = append(parts, wirePart{Text: s})
		}
	}
	for _, b := range m.Content.Blocks() {
		switch b.Type {
		case llm.BlockText:
			parts = append(parts, wirePart{Text: b.Text, ThoughtSignature: b.Signature})
		case llm.BlockThinking:
			if b.Signature == "" {
				parts = append(parts, wirePart{Text: b.Text, Thought: true})
			}
		}
	}
	for _, tc := range m.ToolCalls {
		args := tc.Arguments
		if c, err := llm.CanonicalJSON(args); err == nil && len(args) > 0 {
			args = c
		}
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		parts = append(parts, wirePart{
			FunctionCall:     &wireFunctionCall{Name: tc.Name, ID: sendID(tc.ID), Args: args},
			ThoughtSignature: tc.Signature,
		})
	}
	return parts
}
