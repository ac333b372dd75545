package eino

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/internal/callindex"
	"github.com/armature-go/armature/llm"
)

// providerModel is an Armature llm.Provider behind Eino's
// ToolCallingChatModel.
type providerModel struct {
	p        llm.Provider
	tools    []*schema.ToolInfo
	params   *paramsCache // shared by the models WithTools derives
	sampling llm.Config   // under each call's own options
}

// paramsCache holds the JSON Schema encoding of tools' parameters by
// tool name: Eino's agent hands the same tools to every model call, and
// converting and encoding a schema was most of a call's translation. An
// entry is the tool's parameters as last encoded: a call handing the
// same *schema.ParamsOneOf hits it, and so does one handing an equal
// copy (a run resumed from a checkpoint holds the tools Eino decoded
// from it, new values each time), without taking the entry's place; a
// tool whose parameters changed is encoded again. So the cache keeps
// one schema a tool, however many runs resume.
type paramsCache struct {
	mu sync.Mutex
	m  map[string]paramsEntry
}

type paramsEntry struct {
	p *schema.ParamsOneOf
	b json.RawMessage
}

// paramsCacheMax bounds the cached encodings: past it the cache starts
// over (tools of new names declared per call would otherwise grow it
// without end).
const paramsCacheMax = 256

// encode returns the JSON Schema of p, tool name's parameters, nil when
// p has none.
func (c *paramsCache) encode(name string, p *schema.ParamsOneOf) (json.RawMessage, error) {
	c.mu.Lock()
	e, ok := c.m[name]
	c.mu.Unlock()
	if ok && (e.p == p || reflect.DeepEqual(e.p, p)) {
		return e.b, nil
	}
	s, err := p.ToJSONSchema()
	if err != nil || s == nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= paramsCacheMax {
		c.m = map[string]paramsEntry{}
	}
	c.m[name] = paramsEntry{p: p, b: b}
	c.mu.Unlock()
	return b, nil
}

var _ model.ToolCallingChatModel = (*providerModel)(nil)

// NewProviderModel returns p as an Eino ToolCallingChatModel: each
// Generate is one p.Complete on the messages and tools translated to
// Armature's message model and back. Stream streams when p implements
// llm.Streamer (each text chunk a message chunk, the tool calls in the
// last), and otherwise delivers the answer as one chunk. It is how the
// scripted model, and the model a workspace agent declares, run inside an
// Eino agent.
func NewProviderModel(p llm.Provider) model.ToolCallingChatModel {
	return NewProviderModelConfig(p, llm.Config{})
}

// NewProviderModelConfig is NewProviderModel with model settings for
// every call (a workspace agent's max_tokens and temperature,
// adapter.Agent.Sampling): the call's own Eino options
// (model.WithMaxTokens, WithTemperature, WithTopP, WithStop) win over
// them, field by field.
func NewProviderModelConfig(p llm.Provider, sampling llm.Config) model.ToolCallingChatModel {
	return &providerModel{p: p, params: &paramsCache{}, sampling: sampling.Clone()}
}

// WithTools implements model.ToolCallingChatModel.
func (m *providerModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return &providerModel{p: m.p, tools: tools, params: m.params, sampling: m.sampling}, nil
}

// Generate implements model.BaseChatModel. The tools are those bound
// with WithTools or given with the model.WithTools option (as Eino's
// agent layer passes them).
func (m *providerModel) Generate(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	req, err := m.request(ctx, input, opts)
	if err != nil {
		return nil, err
	}
	resp, err := m.p.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := checkCalls("complete", resp.Message.ToolCalls); err != nil {
		return nil, err
	}
	resp.Message.ToolCalls = uniqueCalls(input, resp.Message.ToolCalls)
	msg := fromLLM(resp.Message)
	msg.ResponseMeta = responseMeta(resp)
	return msg, nil
}

// responseMeta is an Armature model call's finish reason and usage as
// Eino's response metadata.
func responseMeta(resp *llm.Response) *schema.ResponseMeta {
	meta := &schema.ResponseMeta{FinishReason: string(resp.FinishReason)}
	if u := resp.Usage; u.PromptTokens != nil || u.CompletionTokens != nil || u.TotalTokens != nil {
		n := func(p *int) int {
			if p == nil {
				return 0
			}
			return *p
		}
		meta.Usage = &schema.TokenUsage{PromptTokens: n(u.PromptTokens), CompletionTokens: n(u.CompletionTokens), TotalTokens: n(u.TotalTokens),
			PromptTokenDetails: schema.PromptTokenDetails{CachedTokens: n(u.CachedTokens), CacheWriteTokens: n(u.CacheCreationTokens)}}
	}
	return meta
}

// reportCall reports the model call that returned assistant message m
// (its response metadata, set by the bridge or by an eino-ext model) as
// the turn's, as a native agent reports each of its calls, whether or
// not the model reported usage: its usage, when reported, adds to the
// turn's, and its finish reason becomes the turn's (a reply cut at the
// model's token limit makes the turn's finish reason length, which the
// OpenAI-compatible endpoints answer and the run record keeps).
func reportCall(ctx context.Context, m *schema.Message) {
	if m == nil {
		return
	}
	var (
		usage  llm.Usage
		reason string
	)
	if meta := m.ResponseMeta; meta != nil {
		reason = meta.FinishReason
		if u := meta.Usage; u != nil {
			n := func(v int) *int { return &v }
			usage = llm.Usage{PromptTokens: n(u.PromptTokens), CompletionTokens: n(u.CompletionTokens), TotalTokens: n(u.TotalTokens)}
			if c := u.PromptTokenDetails.CachedTokens; c > 0 {
				usage.CachedTokens = n(c)
			}
		}
	}
	adapter.ReportModelCall(ctx, usage, finishReason(reason, len(m.ToolCalls) > 0))
}

// finishReason normalizes the finish reason of a model call's response
// metadata: Armature's (the bridge's) as it is, and the names eino-ext's
// model clients pass on from their APIs (OpenAI's, Anthropic's, Gemini's)
// as Armature's; a reply with tool calls is tool_calls, and one that
// names no reason, or one Armature has no name for, is stop.
func finishReason(reason string, calls bool) llm.FinishReason {
	if calls {
		return llm.FinishToolCalls
	}
	switch strings.ToLower(reason) {
	case "length", "max_tokens", "max_output_tokens":
		return llm.FinishLength
	case "content_filter", "safety", "prohibited_content", "blocklist", "spii", "recitation":
		return llm.FinishContentFilter
	case "error":
		return llm.FinishError
	}
	return llm.FinishStop
}

// request translates a call's messages and tools. A turn's per-request
// instructions (adapter.InstructionsOf: adapter.Request.Instructions)
// replace the system messages Eino hands over (the agent's instruction,
// which the run's state keeps: a resumed turn has the resuming
// request's instructions, or the agent's).
func (m *providerModel) request(ctx context.Context, input []*schema.Message, opts []model.Option) (*llm.Request, error) {
	tools := m.tools
	req := &llm.Request{Config: m.sampling}
	if len(opts) > 0 {
		o := model.GetCommonOptions(&model.Options{Tools: tools}, opts...)
		tools = o.Tools
		req.Config = m.sampling.Merge(samplingOf(o))
	}
	for _, t := range tools {
		params := json.RawMessage(`{"type":"object"}`)
		if t.ParamsOneOf != nil {
			b, err := m.params.encode(t.Name, t.ParamsOneOf)
			if err != nil {
				return nil, fmt.Errorf("eino: the parameters of tool %q: %w", t.Name, err)
			}
			if b != nil {
				params = b
			}
		}
		req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Description: t.Desc, Parameters: params})
	}
	for _, msg := range input {
		if msg.Role == schema.System {
			if req.System != "" {
				req.System += "\n\n"
			}
			req.System += msg.Content
			continue
		}
		lm, err := toLLM(msg)
		if err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, lm)
	}
	if text, ok := adapter.InstructionsOf(ctx); ok {
		req.System = text
	}
	return req, nil
}

// samplingOf is the model settings of a call's Eino options.
func samplingOf(o *model.Options) llm.Config {
	c := llm.Config{MaxTokens: o.MaxTokens, Temperature: adapter.Float64(o.Temperature), TopP: adapter.Float64(o.TopP)}
	if len(o.Stop) > 0 {
		c.StopSequences = o.Stop
	}
	return c
}

// Stream implements model.BaseChatModel.
func (m *providerModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	st, ok := m.p.(llm.Streamer)
	if !ok {
		msg, err := m.Generate(ctx, input, opts...)
		if err != nil {
			return nil, err
		}
		return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
	}
	req, err := m.request(ctx, input, opts)
	if err != nil {
		return nil, err
	}
	sr, sw := schema.Pipe[*schema.Message](8)
	go func() {
		defer sw.Close()
		var (
			acc  llm.Accumulator
			resp *llm.Response
			err  error
		)
		for c, err := range st.Stream(ctx, req) {
			if err != nil {
				sw.Send(nil, err)
				return
			}
			acc.Add(c)
			if c.Response != nil {
				resp = c.Response
			}
			if c.Content != "" && sw.Send(schema.AssistantMessage(c.Content, nil), nil) {
				return // the reader closed
			}
		}
		if resp == nil {
			// The mapping's own assembly, when it gives one, keeps what
			// the deltas cannot carry: reasoning signatures, redacted
			// reasoning (llm.Chunk.Response).
			resp, err = acc.Response()
		}
		if err == nil {
			err = checkCalls("stream", resp.Message.ToolCalls)
		}
		if err != nil {
			sw.Send(nil, err)
			return
		}
		resp.Message.ToolCalls = uniqueCalls(input, resp.Message.ToolCalls)
		last := fromLLM(resp.Message)
		last.Content = ""
		for i := range last.ToolCalls {
			last.ToolCalls[i].Index = &i
		}
		last.ResponseMeta = responseMeta(resp) // the finish reason and usage, concatenated with the text
		sw.Send(last, nil)
	}()
	return sr, nil
}

// toLLM translates an Eino message to Armature's: a user message's
// images included (see userLLM).
func toLLM(m *schema.Message) (llm.Message, error) {
	switch m.Role {
	case schema.User:
		return userLLM(m)
	case schema.Tool:
		return llm.ToolResult(m.ToolCallID, m.Content), nil
	}
	out := llm.Message{Role: llm.RoleAssistant, Content: assistantContent(m)}
	for _, tc := range m.ToolCalls {
		var args json.RawMessage
		if tc.Function.Arguments != "" {
			args = json.RawMessage(tc.Function.Arguments)
		}
		sig, _ := tc.Extra[SignatureExtra].(string)
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args, Signature: sig})
	}
	return out, nil
}

// SignatureExtra is the key of an Eino tool call's Extra holding the
// call's llm.ToolCall.Signature (a provider's reasoning-continuity
// token, such as Gemini's thoughtSignature), which the model bridge
// sends back with the call. It is stored in checkpoints and must not
// change.
const SignatureExtra = "armature_signature"

// fromLLM translates an Armature message to Eino's: a user message's
// images included (see userSchema).
func fromLLM(m llm.Message) *schema.Message {
	switch m.Role {
	case llm.RoleUser:
		return userSchema(m)
	case llm.RoleSystem:
		return schema.SystemMessage(m.Text())
	case llm.RoleTool:
		return schema.ToolMessage(m.Text(), m.ToolCallID)
	}
	var calls []schema.ToolCall
	for _, tc := range m.ToolCalls {
		c := schema.ToolCall{ID: tc.ID, Type: "function",
			Function: schema.FunctionCall{Name: tc.Name, Arguments: string(tc.Arguments)}}
		if tc.Signature != "" {
			// The provider's reasoning-continuity token (Gemini's
			// thoughtSignature) goes back with the call.
			c.Extra = map[string]any{SignatureExtra: tc.Signature}
		}
		calls = append(calls, c)
	}
	msg := schema.AssistantMessage(m.Text(), calls)
	if richContent(m.Content) {
		// The model's reasoning, with its signatures, goes back with the
		// message: see ContentExtra.
		if b, err := m.Content.MarshalJSON(); err == nil {
			msg.Extra = map[string]any{ContentExtra: string(b)}
		}
		msg.ReasoningContent = reasoningText(m.Content)
	}
	return msg
}

// ContentExtra is the key of an Eino assistant message's Extra holding
// the message's llm.Content, as JSON, when it holds more than its text:
// the model's reasoning (thinking and redacted-thinking blocks, with
// their signatures) or signed text. A provider that reasons (Anthropic
// with extended thinking) refuses a tool turn's next request without
// them, so the model bridge sends them back, and the runtime's history
// keeps them. The message's ReasoningContent holds the reasoning's text
// for Eino's own readers. It is stored in checkpoints and must not
// change.
const ContentExtra = "armature_content"

// richContent reports whether c holds more than its text (see
// ContentExtra).
func richContent(c llm.Content) bool {
	for _, b := range c.Blocks() {
		if b.Type == llm.BlockThinking || b.Type == llm.BlockRedactedThinking || b.Signature != "" {
			return true
		}
	}
	return false
}

// reasoningText is the text of c's thinking blocks.
func reasoningText(c llm.Content) string {
	var s strings.Builder
	for _, b := range c.Blocks() {
		if b.Type == llm.BlockThinking {
			s.WriteString(b.Text)
		}
	}
	return s.String()
}

// assistantContent is an Eino assistant message's content: the one
// ContentExtra holds when its text is still the message's (Eino, or a
// callback, may have rewritten the message since), else its text.
func assistantContent(m *schema.Message) llm.Content {
	if s, ok := m.Extra[ContentExtra].(string); ok {
		var c llm.Content
		if err := c.UnmarshalJSON([]byte(s)); err == nil && c.Text() == m.Content {
			return c
		}
	}
	return llm.Text(m.Content)
}

// checkCalls fails a model's answer (of operation op) with a tool call
// that has no id or no name, in provider_invalid_response, as the model
// clients fail such an answer (and a native agent the turn that would
// store it): Eino would run the call, or interrupt for its approval,
// under no id, which no result, approval or later request can name. An
// id the model gave is kept, or renamed when repeated or over-long
// (uniqueCalls); none is made up for a call that has none.
func checkCalls(op string, calls []llm.ToolCall) error {
	return adapter.CheckToolCalls(op, calls, ErrInvalidToolCall)
}

// uniqueCalls gives the calls of a model's answer ids no message of the
// call's input has: a model that repeats an id (an OpenAI-compatible
// server naming every call call_0) would send the next request two
// calls of one id, which a strict server refuses. A repeated id gets the
// input's length as a suffix (callindex.Fresh), as the runtime's history
// would.
func uniqueCalls(input []*schema.Message, calls []llm.ToolCall) []llm.ToolCall {
	if len(calls) == 0 {
		return calls
	}
	return callindex.Fresh(calls, len(input), func(id string) bool {
		for _, m := range input {
			if m == nil {
				continue
			}
			for _, tc := range m.ToolCalls {
				if tc.ID == id {
					return true
				}
			}
		}
		return false
	})
}
