package gemini

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

// The wire shapes of a generateContent response (§8.3.2). Pointers tell
// an absent member from a zero one.
type (
	respBody struct {
		Candidates     *[]respCandidate `json:"candidates"`
		UsageMetadata  json.RawMessage  `json:"usageMetadata"`
		PromptFeedback *struct {
			BlockReason string `json:"blockReason"`
		} `json:"promptFeedback"`
	}
	respCandidate struct {
		Content *struct {
			Parts []respPart `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	}
	respPart struct {
		Text             *string `json:"text"`
		Thought          bool    `json:"thought"`
		ThoughtSignature string  `json:"thoughtSignature"`
		FunctionCall     *struct {
			Name string          `json:"name"`
			ID   string          `json:"id"`
			Args json.RawMessage `json:"args"`
		} `json:"functionCall"`
	}
)

func invalidResponse(msg string, err error) *llm.ProviderError {
	return &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: ProviderName, Op: "complete", Message: msg, Err: err}
}

// ParseResponse maps a successful generateContent body onto a Response
// (§8.3.2):
//
//   - candidates[0].content.parts become the assistant message in order:
//     text parts become text (a single string when every text part is
//     plain; text blocks, with their thoughtSignature as Signature,
//     otherwise), thought parts thinking blocks, functionCall parts tool
//     calls (thoughtSignature as Signature; a call without an id gets
//     [ClientCallIDPrefix]+index). Empty text parts and parts of other
//     kinds (inline data, code execution) are left to Raw.
//   - finishReason is normalized: a functionCall part makes it
//     tool_calls; STOP is stop, MAX_TOKENS length, the safety reasons
//     (SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII)
//     content_filter, anything else error (the image-generation
//     IMAGE_* reasons included, per the spec's §8.3.2 table). A body without candidates
//     whose promptFeedback.blockReason is set (a blocked prompt) is an
//     empty content_filter response.
//   - usageMetadata gives the usage (promptTokenCount,
//     candidatesTokenCount, totalTokenCount, cachedContentTokenCount),
//     each read with [llm.ParseCounter].
//   - Raw is the body verbatim.
//
// A body that does not fit fails with provider_invalid_response. Tool
// call arguments that are not a JSON object fail too, except under
// finish reason error, where they are null (§3).
func ParseResponse(body []byte) (*llm.Response, error) {
	return parseResponse(body, indexCallID)
}

// indexCallID is ParseResponse's id for an ID-less call: the prefix and
// the call's index.
func indexCallID(i int) string { return ClientCallIDPrefix + strconv.Itoa(i) }

// parseResponse is ParseResponse with callID naming the ID-less calls.
func parseResponse(body []byte, callID func(i int) string) (*llm.Response, error) {
	var w respBody
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, invalidResponse("the response body is not a generateContent response", err)
	}
	resp := &llm.Response{Raw: bytes.Clone(body), Usage: usage(w.UsageMetadata)}
	if w.Candidates == nil || len(*w.Candidates) == 0 {
		if w.PromptFeedback != nil && w.PromptFeedback.BlockReason != "" {
			resp.Message = llm.Message{Role: llm.RoleAssistant, Content: llm.Text("")}
			resp.FinishReason = llm.FinishContentFilter
			return resp, nil
		}
		return nil, invalidResponse("the response has no candidates", nil)
	}
	c := (*w.Candidates)[0]
	var parts []respPart
	if c.Content != nil {
		parts = c.Content.Parts
	}
	resp.FinishReason = finishReason(c.FinishReason)
	for _, p := range parts {
		if p.FunctionCall != nil {
			resp.FinishReason = llm.FinishToolCalls
			break
		}
	}
	msg, err := message(parts, resp.FinishReason, callID)
	if err != nil {
		return nil, err
	}
	resp.Message = msg
	return resp, nil
}

// finishReason maps Gemini's finishReason (§8.3.2 table).
func finishReason(s string) llm.FinishReason {
	switch s {
	case "STOP":
		return llm.FinishStop
	case "MAX_TOKENS":
		return llm.FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII":
		return llm.FinishContentFilter
	}
	return llm.FinishError
}

func message(parts []respPart, finish llm.FinishReason, callID func(i int) string) (llm.Message, error) {
	out := llm.Message{Role: llm.RoleAssistant}
	var blocks []llm.Block
	plain := true
	for i, p := range parts {
		switch {
		case p.FunctionCall != nil:
			fc := p.FunctionCall
			if fc.Name == "" && finish != llm.FinishError {
				return out, invalidResponse("parts["+strconv.Itoa(i)+"].functionCall has no name", nil)
			}
			id := fc.ID
			if id == "" {
				id = callID(len(out.ToolCalls))
			}
			args, err := arguments(fc.Args, finish)
			if err != nil {
				return out, invalidResponse("parts["+strconv.Itoa(i)+"].functionCall.args is not a JSON object", nil)
			}
			out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: id, Name: fc.Name, Arguments: args, Signature: p.ThoughtSignature})
		case p.Text != nil && *p.Text != "":
			if p.Thought {
				blocks = append(blocks, llm.ThinkingBlock(*p.Text, ""))
				plain = false
				continue
			}
			b := llm.TextBlock(*p.Text)
			b.Signature = p.ThoughtSignature
			if b.Signature != "" {
				plain = false
			}
			blocks = append(blocks, b)
		}
	}
	switch {
	case len(blocks) == 0 && len(out.ToolCalls) == 0:
		out.Content = llm.Text("")
	case len(blocks) == 0:
	case plain:
		out.Content = llm.Text(llm.Blocks(blocks...).Text())
	default:
		out.Content = llm.Blocks(blocks...)
	}
	return out, nil
}

// arguments reads functionCall.args: an object gives its compact form, an
// absent or null one {} (a call without arguments); anything else is
// malformed, null under finish reason error (§3).
func arguments(raw json.RawMessage, finish llm.FinishReason) (json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) == 0 || string(t) == "null":
		return json.RawMessage(`{}`), nil
	case t[0] == '{':
		var buf bytes.Buffer
		if err := json.Compact(&buf, t); err == nil {
			return buf.Bytes(), nil
		}
	}
	if finish == llm.FinishError {
		return nil, nil
	}
	return nil, invalidResponse("functionCall.args is not a JSON object", nil)
}

// usage reads usageMetadata; absent, null or non-object metadata reports
// nothing (§6). Other Gemini counters stay in Raw.
func usage(raw json.RawMessage) llm.Usage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		return llm.Usage{}
	}
	return llm.Usage{
		PromptTokens:     llm.ParseCounter(m["promptTokenCount"]),
		CompletionTokens: llm.ParseCounter(m["candidatesTokenCount"]),
		TotalTokens:      llm.ParseCounter(m["totalTokenCount"]),
		CachedTokens:     llm.ParseCounter(m["cachedContentTokenCount"]),
	}
}

// checkToolCalls applies the §3 response rule to tool calls under a
// non-error finish: each names a declared tool and its arguments validate
// against that tool's parameters; otherwise provider_invalid_response.
func checkToolCalls(resp *llm.Response, tools []llm.Tool) error {
	if resp.FinishReason == llm.FinishError {
		return nil
	}
	for i, tc := range resp.Message.ToolCalls {
		j := 0
		for j < len(tools) && tools[j].Name != tc.Name {
			j++
		}
		if j == len(tools) {
			return invalidResponse("tool call "+strconv.Itoa(i)+" names "+strconv.Quote(tc.Name)+", which is not among the request's tools", nil)
		}
		if tools[j].Parameters == nil {
			continue
		}
		if err := llm.ValidateJSON(tools[j].Parameters, tc.Arguments); err != nil {
			return invalidResponse("tool call "+strconv.Itoa(i)+" ("+tc.Name+") arguments do not match the tool's parameters", err)
		}
	}
	return nil
}

// errorBody is the Gemini error envelope (§8.3.3).
type errorBody struct {
	Error *struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
		Status  string          `json:"status"`
		Details []struct {
			Type       string `json:"@type"`
			Reason     string `json:"reason"`
			RetryDelay string `json:"retryDelay"`
		} `json:"details"`
	} `json:"error"`
}

// ParseError maps a non-2xx generateContent (or model) answer to its §7
// category (§8.3.3), from the HTTP status and the body's
// {"error": {"code", "message", "status", "details"}}. The HTTP status
// decides; error.status and the details refine a 400 or other 4xx:
//
//   - 400 and 403 whose message says a content part was refused (an
//     unsupported MIME type, an unusable fileUri) are
//     provider_unsupported_content_block;
//   - 400 with an ErrorInfo reason API_KEY_INVALID (Gemini's answer to a
//     bad key), 401, 403, UNAUTHENTICATED and PERMISSION_DENIED are
//     provider_authentication;
//   - 404 and NOT_FOUND are provider_invalid_model;
//   - 429 and RESOURCE_EXHAUSTED are provider_rate_limit;
//   - 408, 5xx, INTERNAL, UNAVAILABLE and DEADLINE_EXCEEDED are
//     provider_unavailable;
//   - any other status (400 INVALID_ARGUMENT, FAILED_PRECONDITION, ...)
//     is provider_invalid_request.
//
// RetryAfter comes from the Retry-After header or the RetryInfo detail,
// whatever the status (an overloaded 503 UNAVAILABLE sends them as a 429
// does). Code is error.status, Message error.message (not yet redacted: the
// Provider redacts it), and the result never fails. header may be nil.
func ParseError(status int, header http.Header, body []byte) *llm.ProviderError {
	var eb errorBody
	t := bytes.TrimSpace(body)
	if len(t) > 0 && t[0] == '[' { // some endpoints wrap the envelope in a list
		var list []errorBody
		if json.Unmarshal(t, &list) == nil && len(list) > 0 {
			eb = list[0]
		}
	} else {
		_ = json.Unmarshal(t, &eb)
	}
	pe := &llm.ProviderError{Provider: ProviderName, StatusCode: status}
	var reasons []string
	var retryDelay string
	if e := eb.Error; e != nil {
		pe.Code, pe.Message = e.Status, e.Message
		for _, d := range e.Details {
			if d.Reason != "" {
				reasons = append(reasons, d.Reason)
			}
			if d.RetryDelay != "" {
				retryDelay = d.RetryDelay
			}
		}
	}
	if pe.Message == "" {
		pe.Message = http.StatusText(status)
	}
	lower := strings.ToLower(pe.Message)
	// The HTTP status decides; error.status and the details refine a
	// status that does not (400 and the other 4xx).
	switch {
	case (status == 400 || status == 403) && contentPartRejected(lower):
		pe.Cat = errcat.ProviderUnsupportedContentBlock
	case status == 401 || status == 403:
		pe.Cat = errcat.ProviderAuthentication
	case status == 404:
		pe.Cat = errcat.ProviderInvalidModel
	case status == 429:
		pe.Cat = errcat.ProviderRateLimit
	case status == 408 || status >= 500:
		pe.Cat = errcat.ProviderUnavailable
	case containsString(reasons, "API_KEY_INVALID"), containsString(reasons, "API_KEY_EXPIRED"),
		pe.Code == "UNAUTHENTICATED", pe.Code == "PERMISSION_DENIED":
		pe.Cat = errcat.ProviderAuthentication
	case pe.Code == "NOT_FOUND":
		pe.Cat = errcat.ProviderInvalidModel
	case pe.Code == "RESOURCE_EXHAUSTED":
		pe.Cat = errcat.ProviderRateLimit
	case pe.Code == "INTERNAL", pe.Code == "UNAVAILABLE", pe.Code == "DEADLINE_EXCEEDED":
		pe.Cat = errcat.ProviderUnavailable
	default:
		pe.Cat = errcat.ProviderInvalidRequest
	}
	pe.RetryAfter = retryAfter(header, retryDelay)
	return pe
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// contentPartRejected recognizes Gemini's messages for a refused content
// part: unsupported MIME types and unusable file URIs.
func contentPartRejected(lower string) bool {
	for _, s := range []string{
		"unsupported mime type", "mime type", "mimetype",
		"file uri", "fileuri", "file_uri",
		"unsupported file", "cannot fetch content", "unable to process input image",
		"image input modality is not enabled", "does not support image",
	} {
		if strings.Contains(lower, s) {
			return true
		}
	}
	return false
}

// retryAfter reads the wait an error answer asks for: the
// Retry-After header (seconds or an HTTP date, see [wire.RetryAfter]),
// else the RetryInfo retryDelay ("37s"). Unreadable values give 0; a
// wait over [wire.MaxRetryAfter] is clamped to it.
func retryAfter(h http.Header, delay string) time.Duration {
	if d := wire.RetryAfter(h.Get("Retry-After")); d > 0 {
		return d
	}
	if d, err := time.ParseDuration(strings.TrimSpace(delay)); err == nil && d > 0 {
		return min(d, wire.MaxRetryAfter)
	}
	return 0
}
