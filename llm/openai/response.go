package openai

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

type wireToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
	// ExtraContent carries Gemini's thought signature (its
	// OpenAI-compatible endpoint): extra_content.google.thought_signature.
	ExtraContent *struct {
		Google *struct {
			ThoughtSignature string `json:"thought_signature"`
		} `json:"google"`
	} `json:"extra_content"`
}

// signature returns the call's thought signature, or "".
func (tc *wireToolCall) signature() string {
	if tc.ExtraContent == nil || tc.ExtraContent.Google == nil {
		return ""
	}
	return tc.ExtraContent.Google.ThoughtSignature
}

type wireMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ToolCalls        []wireToolCall  `json:"tool_calls"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	// Refusal is OpenAI's refusal text (content is then null).
	Refusal *string `json:"refusal"`
}

type wireChoice struct {
	Message      *wireMessage `json:"message"`
	Delta        *wireMessage `json:"delta"`
	FinishReason *string      `json:"finish_reason"`
}

type wireResponse struct {
	Choices *[]wireChoice   `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

// providerName is the mapping's name in the errors it reports.
const providerName = "openai"

func invalidResponse(msg string, err error) *llm.ProviderError {
	return &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: providerName, Op: "complete", Message: msg, Err: err}
}

// ParseResponse maps a successful Chat Completions body onto a Response
// (§8.1.2): choices[0].message becomes the message (a reasoning_content
// or reasoning member becomes a leading thinking block),
// finish_reason is normalized (function_call becomes tool_calls, anything
// unknown error), usage counters are read with [llm.ParseCounter] and
// usage.prompt_tokens_details.cached_tokens gives CachedTokens, and Raw is
// the body verbatim. A refusal (message.refusal, content null) is the
// message's text, under the finish reason the server gave; a tool call's
// extra_content.google.thought_signature (Gemini's OpenAI-compatible
// endpoint) is its Signature. A body holding a non-null "error" member
// (OpenRouter answers an upstream failure with a 200) fails as the same
// error in a stream does ([ParseChunk]). A body that does not fit the
// completion shape fails with provider_invalid_response.
func ParseResponse(body []byte) (*llm.Response, error) {
	var w wireResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, invalidResponse("the response body is not a valid chat completion", err)
	}
	if hasError(w.Error) {
		return nil, inbandError(body, "complete")
	}
	if w.Choices == nil || len(*w.Choices) == 0 {
		return nil, invalidResponse("the response has no choices", nil)
	}
	c := (*w.Choices)[0]
	if c.Message == nil {
		return nil, invalidResponse("choices[0] has no message", nil)
	}
	resp := &llm.Response{FinishReason: finishReason(c.FinishReason), Raw: bytes.Clone(body)}
	msg, err := message(c.Message, resp.FinishReason)
	if err != nil {
		return nil, err
	}
	resp.Message = msg
	resp.Usage = usage(w.Usage)
	return resp, nil
}

func finishReason(s *string) llm.FinishReason {
	if s == nil {
		return llm.FinishError
	}
	switch *s {
	case "stop":
		return llm.FinishStop
	case "length":
		return llm.FinishLength
	case "tool_calls", "function_call":
		return llm.FinishToolCalls
	case "content_filter":
		return llm.FinishContentFilter
	}
	return llm.FinishError
}

// contentText reads a message content: a string, null, or an array of
// text parts.
func contentText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			sb.WriteString(p.Text)
		}
	}
	return sb.String(), true
}

func message(m *wireMessage, finish llm.FinishReason) (llm.Message, error) {
	out := llm.Message{Role: llm.RoleAssistant}
	text, ok := contentText(m.Content)
	if !ok {
		return out, invalidResponse("choices[0].message.content is neither a string nor text parts", nil)
	}
	hasContent := len(bytes.TrimSpace(m.Content)) > 0 && string(bytes.TrimSpace(m.Content)) != "null"
	if text == "" && m.Refusal != nil && *m.Refusal != "" {
		// A refusal: its text is the reply (never a silent empty answer).
		text, hasContent = *m.Refusal, true
	}
	reasoning := ""
	if m.ReasoningContent != nil {
		reasoning = *m.ReasoningContent
	} else if m.Reasoning != nil {
		reasoning = *m.Reasoning
	}
	switch {
	case reasoning != "":
		blocks := []llm.Block{llm.ThinkingBlock(reasoning, "")}
		if text != "" {
			blocks = append(blocks, llm.TextBlock(text))
		}
		out.Content = llm.Blocks(blocks...)
	case hasContent:
		out.Content = llm.Text(text)
	}
	for i, tc := range m.ToolCalls {
		if tc.ID == "" || tc.Function.Name == "" {
			return out, invalidResponse("tool_calls["+strconv.Itoa(i)+"] lacks an id or function name", nil)
		}
		var argStr string
		switch a := bytes.TrimSpace(tc.Function.Arguments); {
		case len(a) == 0 || string(a) == "null":
		case a[0] == '"':
			if err := json.Unmarshal(a, &argStr); err != nil {
				return out, invalidResponse("tool_calls["+strconv.Itoa(i)+"].function.arguments is not a string", err)
			}
		case a[0] == '{':
			argStr = string(a) // some servers send the object itself
		default:
			return out, invalidResponse("tool_calls["+strconv.Itoa(i)+"].function.arguments is not a string", nil)
		}
		args, err := llm.ToolArguments(argStr, finish)
		if pe, ok := err.(*llm.ProviderError); ok {
			pe.Message = "tool_calls[" + strconv.Itoa(i) + "]: " + pe.Message
		}
		if err != nil {
			return out, err
		}
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args, Signature: tc.signature()})
	}
	return out, nil
}

// usage reads the usage object; absent, null or non-object usage reports
// nothing (§6).
func usage(raw json.RawMessage) llm.Usage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		return llm.Usage{}
	}
	u := llm.Usage{
		PromptTokens:     llm.ParseCounter(m["prompt_tokens"]),
		CompletionTokens: llm.ParseCounter(m["completion_tokens"]),
		TotalTokens:      llm.ParseCounter(m["total_tokens"]),
	}
	var details map[string]json.RawMessage
	if d, ok := m["prompt_tokens_details"]; ok && json.Unmarshal(d, &details) == nil {
		u.CachedTokens = llm.ParseCounter(details["cached_tokens"])
	}
	return u
}

// hasError reports whether an "error" member is present and says
// something: not null, false, "" or {}.
func hasError(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null", "false", `""`:
		return false
	}
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) != nil || len(obj) > 0
}
