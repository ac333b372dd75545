package adk

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/internal/callindex"
	"github.com/armature-go/armature/llm"
)

// providerModel is an Armature llm.Provider behind ADK-Go's model.LLM:
// the scripted model, and the model a workspace agent declares.
type providerModel struct {
	name     string
	p        llm.Provider
	schemas  *schemaCache
	sampling llm.Config // under each request's own settings
}

// schemaCache holds the JSON encoding of the function declarations'
// parameter schemas by schema pointer: ADK-Go hands the same tools' schemas to
// every model call, and encoding a jsonschema.Schema is costly (it was
// most of the translation's work per call). A schema is not expected to
// change once its tool is declared.
type schemaCache struct {
	mu sync.Mutex
	m  map[any]json.RawMessage
}

// schemaCacheMax bounds the schemas cached: past it the cache starts
// over (tools declared per call would otherwise grow it without end).
const schemaCacheMax = 256

func (c *schemaCache) encode(s any) (json.RawMessage, error) {
	if c == nil || reflect.TypeOf(s).Kind() != reflect.Pointer {
		return json.Marshal(s) // not a pointer: not a key to trust
	}
	c.mu.Lock()
	b, ok := c.m[s]
	c.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= schemaCacheMax {
		c.m = map[any]json.RawMessage{}
	}
	c.m[s] = b
	c.mu.Unlock()
	return b, nil
}

var _ model.LLM = providerModel{}

// NewProviderModel returns p as an ADK-Go model.LLM named name: each
// GenerateContent is one p.Complete on the request's contents, system
// instruction and function declarations, translated to Armature's
// message model and back. Asked to stream (ADK-Go's SSE mode), a p that
// implements llm.Streamer streams: each text chunk is a partial
// response, and the assembled answer the final one. It is how the
// scripted model, and the model a workspace agent declares, run inside
// an ADK agent.
func NewProviderModel(name string, p llm.Provider) model.LLM {
	return NewProviderModelConfig(name, p, llm.Config{})
}

// NewProviderModelConfig is NewProviderModel with model settings for
// every call (a workspace agent's max_tokens and temperature,
// adapter.Agent.Sampling): the settings of the ADK-Go request's own
// GenerateContentConfig (MaxOutputTokens, Temperature, TopP, Seed,
// penalties, StopSequences) win over them, field by field.
func NewProviderModelConfig(name string, p llm.Provider, sampling llm.Config) model.LLM {
	return providerModel{name: name, p: p, schemas: &schemaCache{}, sampling: sampling.Clone()}
}

// Name implements model.LLM.
func (m providerModel) Name() string { return m.name }

// GenerateContent implements model.LLM.
func (m providerModel) GenerateContent(ctx context.Context, req *model.LLMRequest, stream bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		lreq, err := toLLMRequest(req, m.schemas)
		if err != nil {
			yield(nil, err)
			return
		}
		lreq.Config = m.sampling.Merge(lreq.Config)
		var resp *llm.Response
		op := "complete"
		if st, ok := m.p.(llm.Streamer); ok && stream {
			op = "stream"
			var (
				acc       llm.Accumulator
				assembled *llm.Response // declared here: only a streamed call moves it to the heap
			)
			for c, err := range st.Stream(ctx, lreq) {
				if err != nil {
					yield(nil, err)
					return
				}
				acc.Add(c)
				if c.Response != nil {
					assembled = c.Response
				}
				if c.Content != "" && !yield(&model.LLMResponse{Content: genai.NewContentFromText(c.Content, genai.RoleModel), Partial: true}, nil) {
					return
				}
			}
			// The mapping's own assembly, when it gives one, keeps what the
			// deltas cannot carry: reasoning signatures, redacted reasoning
			// (llm.Chunk.Response).
			if resp = assembled; resp == nil {
				resp, err = acc.Response()
			}
		} else {
			resp, err = m.p.Complete(ctx, lreq)
		}
		if err != nil {
			yield(nil, err)
			return
		}
		if len(resp.Message.ToolCalls) > 0 {
			if err := checkCalls(op, resp.Message.ToolCalls); err != nil {
				yield(nil, err)
				return
			}
			resp.Message.ToolCalls = uniqueCalls(req.Contents, resp.Message.ToolCalls)
		}
		content, err := fromLLMMessage(resp.Message)
		if err != nil {
			yield(nil, err)
			return
		}
		yield(&model.LLMResponse{Content: content, TurnComplete: true, FinishReason: genaiFinish(resp.FinishReason), UsageMetadata: genaiUsage(resp.Usage)}, nil)
	}
}

func toLLMRequest(req *model.LLMRequest, schemas *schemaCache) (*llm.Request, error) {
	out := &llm.Request{}
	if cfg := req.Config; cfg != nil {
		if si := cfg.SystemInstruction; si != nil {
			out.System = contentText(si)
		}
		out.Config = samplingOf(cfg)
		for _, t := range cfg.Tools {
			for _, d := range t.FunctionDeclarations {
				params, err := declParams(d, schemas)
				if err != nil {
					return nil, err
				}
				out.Tools = append(out.Tools, llm.Tool{Name: d.Name, Description: d.Description, Parameters: params})
			}
		}
	}
	for _, c := range req.Contents {
		if c == nil {
			continue
		}
		msgs, err := toLLMMessages(c)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	return out, nil
}

// samplingOf is the model settings of an ADK-Go request's config.
func samplingOf(cfg *genai.GenerateContentConfig) llm.Config {
	var c llm.Config
	if cfg.MaxOutputTokens > 0 {
		c.MaxTokens = new(int(cfg.MaxOutputTokens))
	}
	c.Temperature = adapter.Float64(cfg.Temperature)
	c.TopP = adapter.Float64(cfg.TopP)
	c.PresencePenalty = adapter.Float64(cfg.PresencePenalty)
	c.FrequencyPenalty = adapter.Float64(cfg.FrequencyPenalty)
	if cfg.Seed != nil {
		c.Seed = new(int64(*cfg.Seed))
	}
	if len(cfg.StopSequences) > 0 {
		c.StopSequences = cfg.StopSequences
	}
	return c
}

func declParams(d *genai.FunctionDeclaration, schemas *schemaCache) (json.RawMessage, error) {
	var s any
	switch {
	case d.ParametersJsonSchema != nil:
		s = d.ParametersJsonSchema
	case d.Parameters != nil:
		s = d.Parameters
	default:
		return json.RawMessage(`{"type":"object"}`), nil
	}
	b, err := schemas.encode(s)
	if err != nil {
		return nil, fmt.Errorf("adk: the parameters of tool %q: %w", d.Name, err)
	}
	return b, nil
}

func contentText(c *genai.Content) string {
	if len(c.Parts) == 1 {
		// The usual content (a model's answer, a user's message): its text
		// as it is, without a copy.
		if p := c.Parts[0]; p != nil && !p.Thought {
			return p.Text
		}
		return ""
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p != nil && !p.Thought {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// toLLMMessages translates one genai content: a model content becomes an
// assistant message (text and tool calls), a user content a user message
// and one tool message per function response.
func toLLMMessages(c *genai.Content) ([]llm.Message, error) {
	if c.Role == genai.RoleModel {
		msg := llm.Message{Role: llm.RoleAssistant, Content: modelContent(c)}
		for _, p := range c.Parts {
			if p == nil || p.FunctionCall == nil {
				continue
			}
			args, err := argsJSON(p.FunctionCall.Args)
			if err != nil {
				return nil, fmt.Errorf("adk: the arguments of call %q: %w", p.FunctionCall.ID, err)
			}
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Arguments: args,
				Signature: signatureOf(p)})
		}
		return []llm.Message{msg}, nil
	}
	var out []llm.Message
	if m, ok, err := userMessage(c); err != nil {
		return nil, err
	} else if ok {
		out = append(out, m)
	}
	for _, p := range c.Parts {
		if p == nil || p.FunctionResponse == nil {
			continue
		}
		text, err := responseText(p.FunctionResponse.Response)
		if err != nil {
			return nil, err
		}
		out = append(out, llm.ToolResult(p.FunctionResponse.ID, text))
	}
	return out, nil
}

// responseText is a function response as the text of a tool message: the
// "result" string a bridged Armature tool returns, or the JSON of the
// response (an error, a structured result).
func responseText(resp map[string]any) (string, error) {
	if s, ok := resp["result"].(string); ok && len(resp) == 1 {
		return s, nil
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return "", fmt.Errorf("adk: a function response: %w", err)
	}
	return string(b), nil
}

// fromLLMMessage translates an assistant message to a model content: its
// text, or its blocks in order (reasoning as thought parts, see
// modelContent), then its tool calls.
func fromLLMMessage(m llm.Message) (*genai.Content, error) {
	c := &genai.Content{Role: genai.RoleModel}
	if m.Content.IsBlocks() {
		for _, b := range m.Content.Blocks() {
			switch b.Type {
			case llm.BlockText:
				if b.Text != "" {
					c.Parts = append(c.Parts, &genai.Part{Text: b.Text, ThoughtSignature: signatureBytes(b.Signature)})
				}
			case llm.BlockThinking:
				c.Parts = append(c.Parts, &genai.Part{Text: b.Text, Thought: true, ThoughtSignature: signatureBytes(b.Signature)})
			case llm.BlockRedactedThinking:
				c.Parts = append(c.Parts, &genai.Part{Thought: true, ThoughtSignature: signatureBytes(b.Data)})
			}
		}
	} else if text := m.Text(); text != "" {
		c.Parts = append(c.Parts, genai.NewPartFromText(text))
	}
	for _, tc := range m.ToolCalls {
		var args map[string]any
		if len(tc.Arguments) > 0 {
			if err := json.Unmarshal(tc.Arguments, &args); err != nil {
				return nil, fmt.Errorf("adk: the arguments of call %q: %w", tc.ID, err)
			}
		}
		c.Parts = append(c.Parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: tc.ID, Name: tc.Name, Args: args},
			ThoughtSignature: signatureBytes(tc.Signature)})
	}
	return c, nil
}

// signatureOf is p's thoughtSignature as llm.ToolCall.Signature holds it:
// base64-encoded, as the Gemini API sends it (and Armature's Gemini
// client keeps it); empty for none. A model that reasons (Gemini 3)
// refuses a request whose current turn's function calls lack theirs, so
// the signature goes wherever the call goes: into the runtime's history
// and back, into a seeded ADK-Go session, through the model bridge.
func signatureOf(p *genai.Part) string {
	if len(p.ThoughtSignature) == 0 {
		return ""
	}
	if raw, ok := bytes.CutPrefix(p.ThoughtSignature, []byte(rawSignature)); ok {
		return string(raw)
	}
	return base64.StdEncoding.EncodeToString(p.ThoughtSignature)
}

// signatureBytes is signatureOf's inverse: a signature in canonical
// base64 (Gemini's) is decoded; any other (another provider's token, such
// as an Anthropic thinking block's signature or redacted data that is not
// canonical base64) is kept as its bytes behind rawSignature, so that
// signatureOf gives it back exactly.
func signatureBytes(sig string) []byte {
	if sig == "" {
		return nil
	}
	if b, err := base64.StdEncoding.DecodeString(sig); err == nil && base64.StdEncoding.EncodeToString(b) == sig {
		return b
	}
	return append([]byte(rawSignature), sig...)
}

// rawSignature marks a thoughtSignature holding a token that is not
// canonical base64, as it was (signatureBytes). A session stored before
// it kept such a token's bytes unmarked; signatureOf reads those as
// before.
const rawSignature = "\x00armature-raw\x00"

// modelContent is a model content's text as an assistant message's
// content: a string (contentText), unless reasoningContent keeps more.
func modelContent(c *genai.Content) llm.Content {
	if r := reasoningContent(c); !r.IsZero() {
		return r
	}
	return llm.Text(contentText(c))
}

// reasoningContent is a model content's text and thought parts as text,
// thinking and redacted-thinking blocks, in order, with their
// signatures, when a part carries reasoning (a thought part: its text,
// or a redacted one's data in its signature) or is signed text; zero
// otherwise, the content's text being all of it. A provider that reasons
// (Anthropic with extended thinking) refuses a tool turn's next request
// without them.
func reasoningContent(c *genai.Content) llm.Content {
	if !slices.ContainsFunc(c.Parts, richPart) {
		return llm.Content{}
	}
	blocks := make([]llm.Block, 0, len(c.Parts))
	for _, p := range c.Parts {
		switch {
		case p == nil || p.FunctionCall != nil || p.FunctionResponse != nil:
		case p.Thought && p.Text != "":
			blocks = append(blocks, llm.ThinkingBlock(p.Text, signatureOf(p)))
		case p.Thought && len(p.ThoughtSignature) > 0:
			blocks = append(blocks, llm.RedactedThinkingBlock(signatureOf(p)))
		case !p.Thought && p.Text != "":
			b := llm.TextBlock(p.Text)
			b.Signature = signatureOf(p)
			blocks = append(blocks, b)
		}
	}
	return llm.Blocks(blocks...)
}

// richPart reports whether p is a part reasoningContent keeps as more
// than text: a thought with text or a signature, or a signed text part.
func richPart(p *genai.Part) bool {
	if p == nil || p.FunctionCall != nil || p.FunctionResponse != nil {
		return false
	}
	if p.Thought {
		return p.Text != "" || len(p.ThoughtSignature) > 0
	}
	return p.Text != "" && len(p.ThoughtSignature) > 0
}

// genaiUsage is an Armature model call's usage as genai's (nil when it
// reports none).
func genaiUsage(u llm.Usage) *genai.GenerateContentResponseUsageMetadata {
	if u.PromptTokens == nil && u.CompletionTokens == nil && u.TotalTokens == nil {
		return nil
	}
	n := func(p *int) int32 {
		if p == nil {
			return 0
		}
		return int32(min(*p, math.MaxInt32))
	}
	return &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: n(u.PromptTokens), CandidatesTokenCount: n(u.CompletionTokens),
		TotalTokenCount: n(u.TotalTokens), CachedContentTokenCount: n(u.CachedTokens)}
}

// llmUsage is genai's usage as Armature's.
func llmUsage(m *genai.GenerateContentResponseUsageMetadata) llm.Usage {
	n := func(v int32) *int { i := int(v); return &i }
	u := llm.Usage{PromptTokens: n(m.PromptTokenCount), CompletionTokens: n(m.CandidatesTokenCount), TotalTokens: n(m.TotalTokenCount)}
	if m.CachedContentTokenCount > 0 {
		u.CachedTokens = n(m.CachedContentTokenCount)
	}
	return u
}

// genaiFinish is an Armature finish reason as genai's; llmFinish maps it
// back.
func genaiFinish(f llm.FinishReason) genai.FinishReason {
	switch f {
	case llm.FinishLength:
		return genai.FinishReasonMaxTokens
	case llm.FinishContentFilter:
		return genai.FinishReasonSafety
	}
	return genai.FinishReasonStop
}

func llmFinish(f genai.FinishReason, calls bool) llm.FinishReason {
	switch {
	case calls:
		return llm.FinishToolCalls
	case f == genai.FinishReasonMaxTokens:
		return llm.FinishLength
	case f == genai.FinishReasonSafety, f == genai.FinishReasonProhibitedContent, f == genai.FinishReasonBlocklist, f == genai.FinishReasonSPII, f == genai.FinishReasonRecitation:
		return llm.FinishContentFilter
	}
	return llm.FinishStop
}

// checkCalls fails a model's answer holding a tool call without an id
// or a name as provider_invalid_response ([ErrInvalidToolCall]), as a
// native agent's turn fails on it, before ADK-Go sees the answer.
// ADK-Go would give the call an id of its own ("adk-…") and run it (or
// ask its confirmation), then strip that id from every request it
// builds after (it takes such ids for Gemini's, which the Gemini API
// never sees): the next request would send the workspace's model a
// call and a result without an id, failing the turn only once the
// tool ran (or, for an approval-gated tool, once it was approved).
// ADK-Go's own Gemini client is not bridged: its calls without ids are
// the Gemini API's way, and go through ADK-Go's.
func checkCalls(op string, calls []llm.ToolCall) error {
	return adapter.CheckToolCalls(op, calls, ErrInvalidToolCall)
}

// uniqueCalls gives the calls of a model's answer ids no call of the
// request's contents (ADK-Go's session) has: a model that repeats an id
// (an OpenAI-compatible server naming every call call_0, or one
// numbering its calls by what it sees) would make ADK-Go answer every
// call of that id with the last one's result when it builds the next
// request. A repeated id gets the number of contents as a suffix
// (callindex.Fresh), as the runtime's history would.
func uniqueCalls(contents []*genai.Content, calls []llm.ToolCall) []llm.ToolCall {
	return callindex.Fresh(calls, len(contents), func(id string) bool {
		for _, c := range contents {
			if c == nil {
				continue
			}
			for _, p := range c.Parts {
				if p != nil && p.FunctionCall != nil && p.FunctionCall.ID == id {
					return true
				}
			}
		}
		return false
	})
}

// argsJSON encodes a function call's arguments as the JSON object the
// call carries: "{}" for none. A call without arguments reaches ADK-Go's
// session as a nil map, which json.Marshal writes as null, and servers
// that read a call's arguments as an object refuse null.
func argsJSON(args map[string]any) (json.RawMessage, error) {
	if len(args) == 0 {
		return json.RawMessage(`{}`), nil
	}
	return json.Marshal(args)
}
