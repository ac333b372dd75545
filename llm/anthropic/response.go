package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

// wireResponse is the part of a Messages response the mapping reads; the
// body itself is kept verbatim on Response.Raw.
type wireResponse struct {
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	Content    *[]wireBlock    `json:"content"`
	StopReason *string         `json:"stop_reason"`
	Usage      json.RawMessage `json:"usage"`
}

// wireBlock is one entry of a content array, of a response or (with
// tool_result and image entries) of a request.
type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Source    *wireSource     `json:"source"`
}

// wireSource is an image entry's source.
type wireSource struct {
	Type      string `json:"type"`
	URL       string `json:"url"`
	Data      string `json:"data"`
	MediaType string `json:"media_type"`
}

// wireUsage holds the usage counters as raw JSON, so a malformed counter
// is not reported instead of failing the parse (§7).
type wireUsage struct {
	InputTokens  json.RawMessage `json:"input_tokens"`
	OutputTokens json.RawMessage `json:"output_tokens"`
}

func invalidResponse(msg string, err error) *llm.ProviderError {
	return &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: providerName, Message: msg, Err: err}
}

// ParseResponse maps a successful Messages response body onto an
// [llm.Response] (llm-provider §8.2.2):
//
//   - text, thinking and redacted_thinking entries become the message's
//     content blocks in order (a lone unsigned text entry becomes plain
//     text content); tool_use entries become Message.ToolCalls in order;
//     other entry types (server tools, citations) are left to Raw;
//   - stop_reason end_turn, stop_sequence and pause_turn map to stop,
//     max_tokens to length, tool_use to tool_calls, refusal to
//     content_filter, anything else to error;
//   - usage input_tokens and output_tokens give the prompt and completion
//     counters and their sum the total (nil when either is not reported,
//     §7 Malformed usage counter); the cache counters stay nil (§8.2.2);
//   - Raw is a copy of body.
//
// A body that does not have the Messages shape fails with a
// *llm.ProviderError in provider_invalid_response; a body of type "error"
// maps like an HTTP error ([ParseError]). ParseResponse never panics.
func ParseResponse(body []byte) (*llm.Response, error) {
	var w wireResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, invalidResponse("the response body is not a Messages response", err)
	}
	if w.Type == "error" {
		return nil, ParseError(http.StatusOK, nil, body)
	}
	if w.Role != "" && w.Role != "assistant" {
		return nil, invalidResponse("the response role is "+strconv.Quote(w.Role)+", not assistant", nil)
	}
	if w.Content == nil {
		return nil, invalidResponse("the response has no content array", nil)
	}
	finish := finishReason(w.StopReason)
	var blocks []llm.Block
	var calls []llm.ToolCall
	for i, b := range *w.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				blocks = append(blocks, llm.TextBlock(b.Text))
			}
		case "thinking":
			// An empty thinking text (omitted reasoning) is not a valid
			// §3.1.4 block; it stays on Raw.
			if b.Thinking != "" {
				blocks = append(blocks, llm.ThinkingBlock(b.Thinking, b.Signature))
			}
		case "redacted_thinking":
			if b.Data != "" {
				blocks = append(blocks, llm.RedactedThinkingBlock(b.Data))
			}
		case "tool_use":
			if finish != llm.FinishError && (b.ID == "" || b.Name == "") {
				return nil, invalidResponse("content["+strconv.Itoa(i)+"]: tool_use without id or name", nil)
			}
			args, err := llm.ToolArguments(string(b.Input), finish)
			if err != nil {
				return nil, invalidResponse("content["+strconv.Itoa(i)+"]: tool_use input is not a JSON object", err)
			}
			calls = append(calls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	resp := &llm.Response{
		Message:      llm.Message{Role: llm.RoleAssistant, ToolCalls: calls},
		FinishReason: finish,
		Usage:        parseUsage(w.Usage),
		Raw:          bytes.Clone(body),
	}
	switch {
	case len(blocks) == 1 && blocks[0].Type == llm.BlockText:
		resp.Message.Content = llm.Text(blocks[0].Text)
	case len(blocks) > 0:
		resp.Message.Content = llm.Blocks(blocks...)
	}
	return resp, nil
}

// finishReason maps stop_reason (§8.2.2 table).
func finishReason(s *string) llm.FinishReason {
	if s == nil {
		return llm.FinishError
	}
	switch *s {
	case "end_turn", "stop_sequence", "pause_turn":
		return llm.FinishStop
	case "max_tokens":
		return llm.FinishLength
	case "tool_use":
		return llm.FinishToolCalls
	case "refusal":
		return llm.FinishContentFilter
	}
	return llm.FinishError
}

// parseUsage reads the usage object; anything malformed is not reported.
func parseUsage(raw json.RawMessage) llm.Usage {
	var w wireUsage
	if len(raw) == 0 || json.Unmarshal(raw, &w) != nil {
		return llm.Usage{}
	}
	u := llm.Usage{PromptTokens: llm.ParseCounter(w.InputTokens), CompletionTokens: llm.ParseCounter(w.OutputTokens)}
	if u.PromptTokens != nil && u.CompletionTokens != nil {
		total := *u.PromptTokens + *u.CompletionTokens
		u.TotalTokens = &total
	}
	return u
}

// unwrapSynthetic turns the forced tool_use of the StructuredTool path
// into the reply: its input becomes the text content (after any
// reasoning blocks) and the call finishes with stop, so that
// [llm.ParseStructured] validates it. The model's text is replaced: with
// a forced tool choice the input is the answer.
func unwrapSynthetic(resp *llm.Response) {
	if len(resp.Message.ToolCalls) == 0 || resp.Message.ToolCalls[0].Arguments == nil {
		return
	}
	value := string(resp.Message.ToolCalls[0].Arguments)
	var kept []llm.Block
	for _, b := range resp.Message.Content.Blocks() {
		if b.Type != llm.BlockText {
			kept = append(kept, b)
		}
	}
	if len(kept) > 0 {
		resp.Message.Content = llm.Blocks(append(kept, llm.TextBlock(value))...)
	} else {
		resp.Message.Content = llm.Text(value)
	}
	resp.Message.ToolCalls = nil
	if resp.FinishReason == llm.FinishToolCalls {
		resp.FinishReason = llm.FinishStop
	}
}

// APIError is the provider's error envelope (§8.2.3:
// {"type":"error","error":{"type","message"},"request_id"}), the cause
// (Unwrap) of the *llm.ProviderError an HTTP failure maps to. Read it
// with errors.As for the fields the category does not carry.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Type is error.type, such as "overloaded_error"; "" when the body
	// had no envelope.
	Type string
	// Message is error.message (redacted by the Provider).
	Message string
	// RequestID is the body's request_id or the request-id header.
	RequestID string
	// Body is the error body as received (redacted by the Provider, at
	// most 1 MiB).
	Body []byte
}

// Error formats the error as "anthropic: HTTP <status> <type>: <message>".
func (e *APIError) Error() string {
	if e == nil {
		return "<nil>"
	}
	s := "anthropic: HTTP " + strconv.Itoa(e.StatusCode)
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// typeCategories maps error.type to a §7 category, for bodies whose HTTP
// status does not decide (§8.2.3 table).
var typeCategories = map[string]errcat.Category{
	"authentication_error":  errcat.ProviderAuthentication,
	"billing_error":         errcat.ProviderAuthentication,
	"permission_error":      errcat.ProviderAuthentication,
	"not_found_error":       errcat.ProviderInvalidModel,
	"request_too_large":     errcat.ProviderInvalidRequest,
	"invalid_request_error": errcat.ProviderInvalidRequest,
	"rate_limit_error":      errcat.ProviderRateLimit,
	"api_error":             errcat.ProviderUnavailable,
	"timeout_error":         errcat.ProviderUnavailable,
	"overloaded_error":      errcat.ProviderUnavailable,
}

// ParseError maps an error answer onto a *llm.ProviderError (§8.2.3):
// 401, 402 and 403 are provider_authentication, 404
// provider_invalid_model, 413 provider_invalid_request, 429
// provider_rate_limit, 408 and 5xx (500, 504, 529, ...)
// provider_unavailable, 400
// provider_unsupported_content_block when the message says the model
// rejected a content block (an image, media type or source) and
// provider_invalid_request otherwise. Other statuses map by error.type,
// then 4xx to provider_invalid_request and the rest to
// provider_unavailable. RetryAfter is read from the retry-after header
// (seconds or an HTTP date) whatever the status: an overloaded 529 or
// 503 may ask for a wait as a 429 does. The cause is an
// *[APIError]. header may be nil.
// ParseError does not redact; the Provider does before returning it.
func ParseError(status int, header http.Header, body []byte) *llm.ProviderError {
	var env struct {
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	ae := &APIError{StatusCode: status, Body: bytes.Clone(body)}
	if json.Unmarshal(body, &env) == nil {
		if env.Error != nil {
			ae.Type, ae.Message = env.Error.Type, env.Error.Message
		}
		ae.RequestID = env.RequestID
	}
	if ae.RequestID == "" && header != nil {
		ae.RequestID = header.Get("request-id")
	}
	if ae.Type == "" && ae.Message == "" {
		ae.Message = snippet(body)
	}

	var cat errcat.Category
	switch {
	case status == 401 || status == 402 || status == 403:
		cat = errcat.ProviderAuthentication
	case status == 404:
		cat = errcat.ProviderInvalidModel
	case status == 413:
		cat = errcat.ProviderInvalidRequest
	case status == 429:
		cat = errcat.ProviderRateLimit
	case status == 408 || status >= 500:
		cat = errcat.ProviderUnavailable
	case status == 400:
		cat = errcat.ProviderInvalidRequest
		if contentBlockRejected(ae.Message) {
			cat = errcat.ProviderUnsupportedContentBlock
		}
	default:
		if c, ok := typeCategories[ae.Type]; ok {
			cat = c
		} else if status >= 400 && status < 500 {
			cat = errcat.ProviderInvalidRequest
		} else {
			cat = errcat.ProviderUnavailable
		}
	}
	pe := &llm.ProviderError{Cat: cat, Provider: providerName, Code: ae.Type, Message: ae.Message, Err: ae}
	if status != http.StatusOK {
		pe.StatusCode = status
	}
	if ae.RequestID != "" {
		pe.Message += " (request_id " + ae.RequestID + ")"
	}
	if header != nil {
		pe.RetryAfter = wire.RetryAfter(header.Get("retry-after"))
	}
	return pe
}

// contentBlockRejected reports whether a 400 message says the model
// rejected a content block: an image, its media type or its source kind.
func contentBlockRejected(msg string) bool {
	m := strings.ToLower(msg)
	for _, w := range []string{"image", "media type", "media_type", "pdf", "document"} {
		if strings.Contains(m, w) {
			return true
		}
	}
	return strings.Contains(m, "source") && strings.Contains(m, "support")
}

// snippet returns the start of a body that is not an error envelope.
func snippet(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
