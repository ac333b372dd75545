package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/jsonexact"
	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/internal/uuid"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/session"
)

// The OpenAI-compatible API (see the package documentation for the
// mapping onto chat sessions):
//
//	POST /v1/chat/completions     a chat turn as a chat.completion, or as chat.completion.chunk SSE frames
//	GET  /v1/models               the agents (and task hints) as models
//	GET  /v1/models/{model}       one of them
func (s *Server) openAIRoutes() {
	s.handleOpenAI("POST /v1/chat/completions", s.chatCompletions)
	s.handleOpenAI("GET /v1/models", s.listModels)
	s.handleOpenAI("GET /v1/models/{model}", s.getModel)
	s.responsesRoutes()
}

// Wire identifiers of the OpenAI-compatible endpoint. They are part of
// the documented API and must not change.
const (
	// SessionHeader names the chat session of a completion request; the
	// response carries it back (also for a session the server minted).
	SessionHeader = "X-Armature-Session-Id"
	// IdempotencyHeader makes a completion request idempotent: a
	// retransmission with the same key (at most 256 bytes) answers the
	// first try's recorded turn, before or after a restart, and runs
	// nothing. Without a session named, the key also names the session.
	IdempotencyHeader = "Idempotency-Key"
	// MetadataSessionID is the request metadata key that names the
	// session when the header is absent.
	MetadataSessionID = "session_id"
	// ToolProgressEvent is the SSE event name of tool progress frames on
	// a streamed completion (PROTOCOLS §3).
	ToolProgressEvent = "stable_harness.tool.progress"
	// CodeModelNotFound is the error code of an unknown model.
	CodeModelNotFound = "model_not_found"
	// CodeUnsupportedParameter is the error code of a request parameter
	// the endpoint cannot honor (n > 1, client-side tools).
	CodeUnsupportedParameter = "unsupported_parameter"
)

// retryAfterSeconds is the Retry-After of a 503 (a retryable_transient
// turn, too many streams).
const retryAfterSeconds = 1

// sseWriteTimeout bounds each write of an SSE stream's frames: a client
// that stops reading for that long is dropped (the turn still
// completes; see sseWriter).
const sseWriteTimeout = 30 * time.Second

// closeStream ends the stream of r that sw writes (see sseWriter.close),
// logging a stream that fell behind its turn.
func (s *Server) closeStream(r *http.Request, sw *sseWriter) {
	if sw.close() {
		s.log.WarnContext(r.Context(), "server: stream dropped: the client read too slowly (its turn ran to its end)",
			"route", r.Pattern)
	}
}

// CodeStreamDropped is the code of the error frame that ends a stream
// whose client read it too slowly: its frames were dropped while the
// turn ran on to its end (see sseWriter).
const CodeStreamDropped = "stream_dropped"

// streamDropped is the error that ends a stream that fell behind its
// turn (runID: the turn's run, "" when none was recorded).
func streamDropped(runID string) *Error {
	msg := "the client read the stream too slowly and its events were dropped; the turn ran to its end and was recorded: retry with the same Idempotency-Key for its answer"
	if runID != "" {
		msg += ", or read its run, " + runID + " (GET /v1/runs/" + runID + ")"
	}
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeStreamDropped, Message: msg}
}

// handleOpenAI registers an authenticated route whose errors use the
// OpenAI error shape.
func (s *Server) handleOpenAI(pattern string, h handlerFunc) {
	s.mux.Handle(pattern, s.wrapWith(pattern, true, h, s.writeOpenAIError))
}

// openAIErrorBody is the OpenAI error shape:
// {"error": {"message", "type", "param", "code"}}.
type openAIErrorBody struct {
	Error openAIError `json:"error"`
}

type openAIError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	// Param names the request field the error is about; null when it
	// is about none.
	Param *string `json:"param"`
	Code  string  `json:"code"`
}

// openAIErrorOf renders e in the OpenAI error shape.
func openAIErrorOf(e *Error) openAIError {
	oe := openAIError{Message: e.Message, Type: openAIErrorType(e.Status, e.Code), Code: e.Code}
	if e.Param != "" {
		oe.Param = &e.Param
	}
	return oe
}

// openAIErrorType is the OpenAI error type of an HTTP status (and, for
// a 404, of its code: an unknown model or previous response is an
// invalid_request_error, as OpenAI answers them).
func openAIErrorType(status int, code string) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound && code != CodeModelNotFound && code != CodePreviousResponseNotFound:
		return "not_found_error"
	case status == http.StatusConflict:
		return "conflict_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// writeOpenAIError renders err in the OpenAI error shape; like
// writeError, errors that are not *Error are internal and opaque.
func (s *Server) writeOpenAIError(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.apiError(r, err)
	switch {
	case ae.Final:
	case ae.RetryAfter > 0:
		w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
	case ae.Status == http.StatusServiceUnavailable && !cancelRequested(ae):
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	if finalOpenAIError(ae) {
		w.Header().Set(ShouldRetryHeader, "false")
	}
	writeJSON(w, ae.Status, openAIErrorBody{Error: openAIErrorOf(ae)})
}

// ShouldRetryHeader is the response header with which the OpenAI
// endpoints tell a client whether retrying the request may help: the
// official OpenAI SDKs retry a 409 and any 5xx on their own unless it
// says "false".
const ShouldRetryHeader = "X-Should-Retry"

// finalOpenAIError reports whether retrying the request that failed
// with ae cannot help: one marked so (Error.Final), a 409 (the conversation cannot continue, or the
// approval was answered already: the decision stands), a turn stopped by
// a cancel request (POST /v1/runs/{id}/cancel: sending it again would
// run what someone stopped), or the server's own credentials or model
// refused by its upstream (502), which waits for its operator.
func finalOpenAIError(ae *Error) bool {
	switch {
	case ae.Final, ae.Status == http.StatusConflict, cancelRequested(ae):
		return true
	case ae.Status == http.StatusBadGateway:
		c := errcat.Category(ae.Code)
		return c == errcat.ProviderAuthentication || c == errcat.ProviderInvalidModel
	}
	return false
}

// cancelRequested reports whether ae is a turn's invocation_cancelled
// for a cancel request (not the server's shutdown, which another server
// or a restart may retry).
func cancelRequested(ae *Error) bool {
	return ae.Code == string(errcat.InvocationCancelled) && errors.Is(ae.Err, runtime.ErrCancelled) && !errors.Is(ae.Err, runtime.ErrShutdown)
}

// restResources are the first path segments under /v1 of Armature's own
// APIs (the chat REST API, run records, direct tools, OpenHarness).
var restResources = []string{"sessions", "runs", "agents", "openharness"}

// openAIPath reports whether a request path belongs to the
// OpenAI-compatible API, whose errors, also those answered before
// routing, take the OpenAI error shape: every path under /v1 but those
// of Armature's own APIs, served or not (/v1/embeddings, which an
// OpenAI client may try, is a 404 in OpenAI's shape).
func openAIPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/v1/")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	return !slices.Contains(restResources, first)
}

// writeErrorFor renders err in the error shape of the request's API:
// OpenAI's on an OpenAI path, the REST envelope elsewhere.
func (s *Server) writeErrorFor(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case openAIPath(r.URL.Path):
		s.writeOpenAIError(w, r, err)
	case r.URL.Path == "/v1/openharness":
		s.writeOHError(w, r, err)
	default:
		s.writeError(w, r, err)
	}
}

// --- models ---

// modelJSON is one entry of GET /v1/models.
type modelJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// XArmature says which agent serves the model name.
	XArmature modelExt `json:"x_armature"`
}

type modelExt struct {
	Agent string `json:"agent"`
	// Model is the agent's underlying model, when configured.
	Model string `json:"model,omitempty"`
	// TaskHint is set when the name is a task hint, not an agent id.
	TaskHint bool `json:"task_hint,omitempty"`
}

// models lists the served agents in configuration order, then the task
// hints in name order.
func (s *Server) models() []modelJSON {
	out := make([]modelJSON, 0, len(s.cfg.Agents)+len(s.cfg.TaskHints))
	for _, a := range s.cfg.Agents {
		out = append(out, modelJSON{ID: a.ID, Object: "model", OwnedBy: "armature", XArmature: modelExt{Agent: a.ID, Model: a.Model}})
	}
	hints := make([]string, 0, len(s.cfg.TaskHints))
	for h := range s.cfg.TaskHints {
		if _, isAgent := s.agents[h]; !isAgent {
			hints = append(hints, h)
		}
	}
	slices.Sort(hints)
	for _, h := range hints {
		a := s.agents[s.cfg.TaskHints[h]]
		out = append(out, modelJSON{ID: h, Object: "model", OwnedBy: "armature", XArmature: modelExt{Agent: a.ID, Model: a.Model, TaskHint: true}})
	}
	return out
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, struct {
		Object string      `json:"object"`
		Data   []modelJSON `json:"data"`
	}{"list", s.models()})
	return nil
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("model")
	for _, m := range s.models() {
		if m.ID == name {
			writeJSON(w, http.StatusOK, m)
			return nil
		}
	}
	return modelNotFound(name)
}

func modelNotFound(name string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeModelNotFound, Param: "model",
		Message: fmt.Sprintf("the model %q does not exist: GET /v1/models lists the served agents", name)}
}

// openAIAgent resolves a request's model: an agent id or a task hint;
// "" is the default agent.
func (s *Server) openAIAgent(model string) (*Agent, error) {
	a, err := s.agentFor(model)
	if err != nil {
		return nil, modelNotFound(model)
	}
	return a, nil
}

// --- request decoding ---

// completionRequest is the part of an OpenAI chat completion request the
// endpoint reads; every other field is ignored (sampling parameters and
// max_tokens belong to the agent's configuration). response_format is
// refused unless it asks for text: a client that asks for JSON must not
// get prose it then fails to parse; tool_choice unless it is "auto": a
// client that forbids tool calls must not have them run; and
// parallel_tool_calls unless it is true, for the same reason.
type completionRequest struct {
	Model string `json:"model"`
	// Messages are decoded one by one (wireMessage), so that an error
	// names the message.
	Messages      []json.RawMessage `json:"messages"`
	Stream        bool              `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N         *int            `json:"n"`
	Tools     json.RawMessage `json:"tools"`
	Functions json.RawMessage `json:"functions"`
	// ToolChoice and its deprecated form FunctionCall are refused
	// unless they leave the choice to the agent (autoToolChoice).
	ToolChoice   json.RawMessage `json:"tool_choice"`
	FunctionCall json.RawMessage `json:"function_call"`
	// ParallelToolCalls is refused unless it is true (or null).
	ParallelToolCalls json.RawMessage            `json:"parallel_tool_calls"`
	Metadata          map[string]json.RawMessage `json:"metadata"`
	// ResponseFormat is refused unless its type is "text".
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

// completionShape is a completion request as jsonexact filters it: the
// request, its messages as wireMessage with their content parts (a
// content given as a string is left as it is), so that a key naming a
// field only up to case is dropped at every depth in the one pass over
// the body, before the messages are decoded one by one.
type completionShape struct {
	completionRequest
	Messages []struct {
		wireMessage
		Content []wirePart `json:"content"`
	} `json:"messages"`
}

// wireMessage is an OpenAI chat message.
type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
}

// completionPlan is a decoded, validated completion request: what to
// run and where.
type completionPlan struct {
	model        string
	stream       bool
	includeUsage bool
	// sessionID is the metadata's session id ("" when absent).
	sessionID string
	// history is the request's messages before the last, converted
	// (system and developer messages dropped).
	history []llm.Message
	// turn is the last message: the user message the turn sends.
	turn llm.Message
}

// autoToolChoice reports whether a request's tool_choice (raw) leaves
// the choice of tool calls to the agent: absent, null or "auto". The
// agent's tools run server-side and its model decides when to call
// them: a request cannot forbid calls ("none"), require one
// ("required") or name one, and one that tries is refused rather than
// have the calls it forbade run.
func autoToolChoice(raw json.RawMessage) bool {
	if !present(raw) {
		return true
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == "auto"
}

// parallelAllowed reports whether a request's parallel_tool_calls (raw)
// leaves the agent's model free to call several tools at once: absent,
// null or true. The agent's tools run server-side, as its model calls
// them: a request that forbids parallel calls is refused rather than
// have the calls it forbade run together.
func parallelAllowed(raw json.RawMessage) bool {
	if !present(raw) {
		return true
	}
	var b bool
	return json.Unmarshal(raw, &b) == nil && b
}

// parallelRefusal is the message of a refused parallel_tool_calls.
const parallelRefusal = "parallel_tool_calls must be true: the agent's own tools run server-side, and its model decides how many it calls at once"

// toolChoiceRefusal is the message of a refused tool_choice (its
// parameter's name the argument).
const toolChoiceRefusal = `%s must be "auto": the agent's own tools run server-side, and the agent decides when to call them ` +
	`(a request cannot forbid, require or name a call)`

// decodeCompletion decodes and validates a chat completion request body.
// Every failure is a 400 *Error whose message describes the problem
// without echoing input.
func decodeCompletion(body []byte) (*completionPlan, error) {
	var req completionRequest
	if err := json.Unmarshal(jsonexact.Filter(body, completionRequestType), &req); err != nil {
		problem, param := jsonProblem(err)
		return nil, badParam(param, "the body is not a valid chat completion request: %s", problem)
	}
	if len(req.Model) > maxAgentName {
		return nil, badParam("model", "model must not exceed %d bytes", maxAgentName)
	}
	if req.N != nil && *req.N != 1 {
		return nil, unsupported("n", "n must be 1: a turn has one answer")
	}
	if !emptyJSONList(req.Tools) || !emptyJSONList(req.Functions) {
		param := "tools"
		if emptyJSONList(req.Tools) {
			param = "functions"
		}
		return nil, unsupported(param, "client-side tools are not supported: the agent's own tools run server-side")
	}
	for _, tc := range []struct {
		param string
		raw   json.RawMessage
	}{{"tool_choice", req.ToolChoice}, {"function_call", req.FunctionCall}} {
		if !autoToolChoice(tc.raw) {
			return nil, unsupported(tc.param, toolChoiceRefusal, tc.param)
		}
	}
	if !parallelAllowed(req.ParallelToolCalls) {
		return nil, unsupported("parallel_tool_calls", parallelRefusal)
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type != "" && rf.Type != "text" {
		return nil, unsupported("response_format", "response_format must be text: structured output is part of the agent's configuration, not of a request")
	}
	p := &completionPlan{model: req.Model, stream: req.Stream, includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	if raw, ok := req.Metadata[MetadataSessionID]; ok {
		if err := json.Unmarshal(raw, &p.sessionID); err != nil || !validID(p.sessionID) {
			return nil, badParam("metadata.session_id", "metadata.session_id must be 1-128 characters of [A-Za-z0-9._:-]")
		}
	}
	if len(req.Messages) == 0 {
		return nil, badParam("messages", "messages must hold at least one message")
	}
	wms := make([]wireMessage, len(req.Messages))
	for i, raw := range req.Messages {
		if err := json.Unmarshal(raw, &wms[i]); err != nil {
			return nil, elementError("messages", i, "a message object", err)
		}
	}
	last := len(wms) - 1
	if wms[last].Role != string(llm.RoleUser) {
		return nil, badParam(fmt.Sprintf("messages[%d].role", last), "messages[%d]: the last message must be a user message (it is the turn's input)", last)
	}
	var msgs []llm.Message
	var index []int // index[i] is msgs[i]'s index in req.Messages
	for i, wm := range wms {
		m, keep, err := wm.convert()
		if err != nil {
			param := fmt.Sprintf("messages[%d]", i)
			switch {
			case errors.Is(err, errUnknownRole):
				param += ".role"
			case errors.Is(err, errNoContent):
				param += ".content"
			}
			return nil, badParam(param, "messages[%d]: %s", i, err.Error())
		}
		if keep {
			msgs = append(msgs, m)
			index = append(index, i)
		}
	}
	if err := llm.ValidateMessages(msgs, nil); err != nil {
		var ve *llm.ValidationError
		if errors.As(err, &ve) && ve.Index >= 0 && ve.Index < len(index) {
			field := ve.Field[strings.IndexByte(ve.Field, ']')+1:]
			return nil, badParam(fmt.Sprintf("messages[%d]%s", index[ve.Index], field), "messages[%d]%s: %s", index[ve.Index], field, ve.Reason)
		}
		return nil, badParam("messages", "invalid messages")
	}
	p.history, p.turn = msgs[:len(msgs)-1], msgs[len(msgs)-1]
	return p, nil
}

// elementError is the 400 of element i of the list field list that
// does not decode: not what (an object) at all, or a field of it of the
// wrong JSON type.
func elementError(list string, i int, what string, err error) *Error {
	at := fmt.Sprintf("%s[%d]", list, i)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return badParam(at+"."+te.Field, "%s.%s must be %s", at, te.Field, jsonKind(te.Type))
	}
	return badParam(at, "%s must be %s", at, what)
}

// emptyJSONList reports whether raw is absent, null or [].
func emptyJSONList(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return true
	}
	var v []json.RawMessage
	return json.Unmarshal(raw, &v) == nil && len(v) == 0
}

// convert maps an OpenAI message to an llm.Message; keep is false for
// system and developer messages, which the agent's own instructions
// replace.
func (wm wireMessage) convert() (m llm.Message, keep bool, err error) {
	switch wm.Role {
	case "system", "developer":
		return m, false, nil
	case string(llm.RoleUser):
		if t := bytes.TrimSpace(wm.Content); len(t) == 0 || string(t) == "null" {
			return m, false, errNoContent
		}
		c, err := parseContent(wm.Content, true)
		return llm.Message{Role: llm.RoleUser, Content: c}, true, err
	case string(llm.RoleAssistant):
		c, err := parseContent(wm.Content, false)
		if err != nil {
			return m, false, err
		}
		m = llm.Message{Role: llm.RoleAssistant, Content: c}
		for j, tc := range wm.ToolCalls {
			if tc.Type != "" && tc.Type != "function" {
				return m, false, fmt.Errorf("tool_calls[%d]: only function tool calls are supported", j)
			}
			args := json.RawMessage(tc.Function.Arguments)
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			if !jsonvalid.Valid(args) {
				return m, false, fmt.Errorf("tool_calls[%d].function.arguments is not valid JSON", j)
			}
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
		}
		return m, true, nil
	case string(llm.RoleTool):
		c, err := parseContent(wm.Content, false)
		if err != nil {
			return m, false, err
		}
		return llm.ToolResult(wm.ToolCallID, c.Text()), true, nil
	}
	return m, false, errUnknownRole
}

// errNoContent is the conversion error of a user message without content
// (none, or null: only an assistant's message with tool calls may have
// none), param messages[i].content.
var errNoContent = errors.New("content is required: a string or an array of content parts")

// errUnknownRole is the conversion error of a message whose role is none
// of the roles the endpoint takes (param messages[i].role).
var errUnknownRole = errors.New("role must be system, developer, user, assistant or tool")

// textOrParts decodes a content that is absent or null (both results
// nil), a string (text), or a list of parts.
func textOrParts[P any](raw json.RawMessage) (text *string, parts []P, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return &s, nil, nil
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, nil, errors.New("content must be a string or a list of content parts")
	}
	return nil, parts, nil
}

// parseContent reads a message's content: absent, null, a string or an
// array of text (and, for users, image_url) parts.
func parseContent(raw json.RawMessage, user bool) (llm.Content, error) {
	text, parts, err := textOrParts[wirePart](raw)
	switch {
	case err != nil:
		return llm.Content{}, err
	case text != nil:
		return llm.Text(*text), nil
	}
	blocks := make([]llm.Block, 0, len(parts))
	for j, p := range parts {
		switch {
		case p.Type == "text":
			blocks = append(blocks, llm.TextBlock(p.Text))
		case p.Type == "refusal" && !user:
			blocks = append(blocks, llm.TextBlock(p.Refusal))
		case p.Type == "image_url" && user && p.ImageURL != nil:
			b, err := imageBlock(p.ImageURL.URL)
			if err != nil {
				return llm.Content{}, fmt.Errorf("content[%d].image_url.url: %w", j, err)
			}
			if p.ImageURL.Detail != "" {
				b = b.WithDetail(llm.Detail(p.ImageURL.Detail))
			}
			blocks = append(blocks, b)
		default:
			return llm.Content{}, fmt.Errorf("content[%d]: unsupported content part type", j)
		}
	}
	return llm.Blocks(blocks...), nil
}

// imageBlock is the image an image_url part names: an http(s) URL,
// which the model's provider fetches, or a data: URL of an image in
// base64, which travels inline. Any other scheme (file:, javascript:,
// a data: URL of something else) is refused: a provider that fetches
// what it is given, run next to other services, must not be handed a
// local file or another scheme by a client.
func imageBlock(url string) (llm.Block, error) {
	scheme, rest, ok := strings.Cut(url, ":")
	switch {
	case ok && (strings.EqualFold(scheme, "https") || strings.EqualFold(scheme, "http")) && strings.HasPrefix(rest, "//") && len(rest) > 2:
		return llm.ImageURL(url), nil
	case ok && strings.EqualFold(scheme, "data"):
		meta, data, ok := strings.Cut(rest, ",")
		media, enc, _ := strings.Cut(meta, ";")
		media = strings.ToLower(strings.TrimSpace(media))
		if !ok || !strings.EqualFold(enc, "base64") || !strings.HasPrefix(media, "image/") || data == "" {
			return llm.Block{}, errors.New("a data: URL must be an image in base64 (data:image/<type>;base64,<data>)")
		}
		if _, err := base64.StdEncoding.DecodeString(data); err != nil {
			return llm.Block{}, errors.New("a data: URL's image is not valid base64")
		}
		return llm.ImageInline(media, data), nil
	}
	return llm.Block{}, errors.New("must be an http(s) URL or a data:image/<type>;base64 URL")
}

// --- the turn ---

// openAITurn resolves what both OpenAI turn endpoints read besides
// their body: the agent *model names (the default agent when empty,
// whose id *model then takes) and the Idempotency-Key.
func (s *Server) openAITurn(r *http.Request, model *string) (*Agent, string, error) {
	a, err := s.openAIAgent(*model)
	if err != nil {
		return nil, "", err
	}
	if *model == "" {
		*model = a.ID
	}
	key := r.Header.Get(IdempotencyHeader)
	if len(key) > chat.MaxIDLength {
		return nil, "", badRequest("%s must not exceed %d bytes", IdempotencyHeader, chat.MaxIDLength)
	}
	return a, key, nil
}

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	p, err := decodeCompletion(body)
	if err != nil {
		return err
	}
	a, key, err := s.openAITurn(r, &p.model)
	if err != nil {
		return err
	}
	sid, err := completionSession(r.Header.Get(SessionHeader), p.sessionID)
	if err != nil {
		return err
	}
	tenant := tenantOf(r)
	if key == "" {
		key = s.retryKey(r, tenant, body)
	}
	if sid.fresh && key != "" {
		sid = keyedSession(key)
	}
	if err := s.seedSession(r.Context(), tenant, sid.id, sid.fresh, p.history); err != nil {
		return err
	}
	c := &completion{id: "chatcmpl-" + uuid.New(), created: time.Now().Unix(), model: p.model, sessionID: sid.id, messageID: key}
	w.Header().Set(SessionHeader, sid.id)
	if p.stream {
		return s.streamCompletion(w, r, a, tenant, c, p)
	}
	out := s.runCompletion(r.Context(), tenant, a, c, p.turn, nil)
	if e := c.turnError(out); e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, c.response(out))
	return nil
}

type sessionChoice struct {
	id    string
	fresh bool
}

// keyedSession is the session of a request with an Idempotency-Key that
// names none: a retransmission must reach the session of its first try,
// where the turn's recorded outcome answers it, so the session is
// derived from the key (it exists on a retry, so it is not fresh).
func keyedSession(key string) sessionChoice {
	sum := sha256.Sum256([]byte(key))
	return sessionChoice{id: "oai-" + hex.EncodeToString(sum[:16])}
}

// completionSession resolves the request's session: the header, else the
// metadata's session_id, else a fresh one.
func completionSession(header, metadata string) (sessionChoice, error) {
	switch {
	case header != "" && !validID(header):
		return sessionChoice{}, badRequest("%s must be 1-128 characters of [A-Za-z0-9._:-]", SessionHeader)
	case header != "" && metadata != "" && header != metadata:
		return sessionChoice{}, badRequest("%s and metadata.session_id name different sessions", SessionHeader)
	case header != "":
		return sessionChoice{id: header}, nil
	case metadata != "":
		return sessionChoice{id: metadata}, nil
	}
	return sessionChoice{id: newSessionID(), fresh: true}, nil
}

// seedSession creates the session with history when it does not exist
// yet. An existing named session keeps its stored history: the request's
// earlier messages are then assumed to be that history and are ignored.
func (s *Server) seedSession(ctx context.Context, tenant, id string, fresh bool, history []llm.Message) error {
	if len(history) == 0 {
		return nil // the turn creates the session
	}
	raw, err := json.Marshal(history)
	if err != nil {
		return badRequest("the messages cannot be stored")
	}
	zero := int64(0)
	_, err = s.cfg.Sessions.Save(ctx, session.SaveRequest{SessionID: storeKey(tenant, id), ExpectedVersion: &zero,
		State: map[string]json.RawMessage{chat.MessagesField: raw}})
	if errors.Is(err, session.ErrWriteConflict) && !fresh {
		return nil
	}
	return err
}

// completion is one chat completion being answered: its identity and
// what the turn's stream reported.
type completion struct {
	id        string
	created   int64
	model     string
	sessionID string
	// messageID is the request's Idempotency-Key ("" for none).
	messageID string
	// tools is the last reported status per tool call id.
	tools map[string]chat.ToolStatus
	// runID is the id of the turn's run, once it ran ("" if none was
	// recorded).
	runID string
}

// runCompletion runs the turn through submit (detached from the
// request, counted for shutdown and metrics, recorded as a run), always
// streamed so that tool statuses are known, and hands every chunk to
// onChunk (when set). The stream is consumed to the end even if
// onChunk's writes fail, so the turn completes and is stored.
func (s *Server) runCompletion(ctx context.Context, tenant string, a *Agent, c *completion, msg llm.Message, onChunk func(chat.Chunk)) chat.Outcome {
	c.tools = map[string]chat.ToolStatus{}
	if c.id != "" {
		// The completion is named after its run, so a retransmission
		// (the same Idempotency-Key) answers the first try's id.
		hooks := hooksOf(ctx)
		started := hooks.started
		hooks.started = func(runID string) {
			c.id = completionID(runID)
			if started != nil {
				started(runID)
			}
		}
		ctx = withTurnHooks(ctx, &hooks)
	}
	resp := s.submit(ctx, tenant, a, c.sessionID, adapter.SubmitRequest{Message: msg, MessageID: c.messageID, OnChunk: func(ch chat.Chunk) {
		if ch.Kind == chat.ChunkTool && ch.Tool != nil {
			c.tools[ch.Tool.CallID] = ch.Tool.Status
		}
		if onChunk != nil {
			onChunk(ch)
		}
	}})
	c.runID = runIDOf(resp.Outcome, resp.RunID)
	replayed := resp.Outcome.Info().Replayed
	if c.runID != "" {
		if c.id != "" {
			c.id = completionID(c.runID)
		}
		if replayed {
			// A retransmission answers when its first try was created.
			if run, err := s.runs.Store().Run(ctx, tenant, c.runID); err == nil {
				c.created = run.StartedAt.Unix()
			}
		}
	}
	return resp.Outcome
}

// completionID is the chat completion id of the turn of run runID.
func completionID(runID string) string { return "chatcmpl-" + runID }

// turnError maps an errored turn to its HTTP failure (nil for other
// outcomes): user_correctable 400, retryable_transient 503 (with
// Retry-After), session_terminating 409. The message is the bucket's
// user-facing reply, the code the error category. A user-correctable
// failure of the server's own upstream (see upstreamFault) is a 502
// saying so instead. A resumed turn that failed, or was cancelled, after
// it took its suspension up (resumedAnything) is final (Error.Final):
// the same decision sent again is refused.
func (c *completion) turnError(out chat.Outcome) *Error {
	o, ok := out.(*chat.Errored)
	if !ok {
		return nil
	}
	e := &Error{Status: http.StatusServiceUnavailable, Code: string(o.Category), Message: o.Reply.Text(), Err: o.Err}
	if o.Category == errcat.InvocationCancelled && !errors.Is(o.Err, chat.ErrSessionBusy) {
		// The run was cancelled (POST /v1/runs/{id}/cancel, or the
		// server stopping), not a failure to retry in a moment.
		e.Message = cancelledReply
	}
	switch o.Bucket {
	case harness.UserCorrectable:
		e.Status = http.StatusBadRequest
	case harness.SessionTerminating:
		e.Status = http.StatusConflict
	}
	if msg, ok := upstreamFault[o.Category]; ok {
		// The harness buckets these user_correctable (harness §7.3, chat
		// §10.3: a person must act), but on this endpoint the client is
		// not that person: its request was fine, the server's
		// configuration or its upstream is not. Not a 400 telling the
		// client to change its request; the cause goes to the log only.
		e.Status, e.Message = http.StatusBadGateway, msg
	}
	if o.Category == errcat.ProviderRateLimit {
		// The upstream's 429 reaches the client as one, with its wait, so
		// that the official SDKs raise their rate-limit error and back off.
		e.Status, e.RetryAfter = http.StatusTooManyRequests, retryAfterSeconds
		if w := upstreamWait(o); w > 0 {
			e.RetryAfter = w
		}
	}
	if o.Resumed && resumedAnything(o) && (e.Status >= 500 || e.Status == http.StatusTooManyRequests) {
		// A resumed turn that failed, or was cancelled, after it took
		// its suspension up cannot be resumed again: its decision took
		// effect (an approved call's result is kept) or its suspension
		// is gone, and the same request is refused. The failure is the
		// server's (its upstream's, its shutdown's), so a 5xx as for any
		// turn, but final: X-Should-Retry: false and no Retry-After, so
		// that the SDKs, which retry a 5xx on their own, do not send the
		// decision again (a 400 would blame the request). An upstream's
		// 429 is a 503 here: a rate-limit error has clients back off and
		// send the same request again. The message names the turn's
		// response, which holds what it did; the client goes on with a
		// new message.
		if e.Status == http.StatusTooManyRequests {
			e.Status = http.StatusServiceUnavailable
		}
		e.RetryAfter, e.Final = 0, true
		e.Message = c.resumedFailure(o)
	}
	if e.Code == "" {
		e.Code = string(o.Bucket)
	}
	if e.Message == "" {
		e.Message = chat.DefaultRetryableTransientReply
	}
	if e.Status == http.StatusServiceUnavailable && !e.Final && !cancelRequested(e) {
		// Retryable (a busy session, an upstream down for now): the
		// client is told when, and the log records a warning, not an
		// error an operator must act on.
		e.RetryAfter = retryAfterSeconds
	}
	return e
}

// resumedFailure is the message of a resumed turn that failed, or was
// cancelled, after it took its suspension up (see turnError): what
// happened, the response (or completion) that holds what the turn did,
// and that the decision cannot be given again.
func (c *completion) resumedFailure(o *chat.Errored) string {
	what := "Your decision took effect, but the turn failed after it, on the server's side: your request was fine"
	if o.Category == errcat.InvocationCancelled {
		what = "The response was cancelled before it finished (a cancel request, or the server's shutdown), after your decision was taken up"
	}
	switch {
	case c.id != "":
		what += " (completion " + c.id + ")"
	case c.runID != "":
		what += " (response " + c.runID + " holds what the turn did)"
	}
	return what + ". The decision cannot be given again: send a new message to go on."
}

// upstreamWait is the wait, in whole seconds (rounded up), that the
// rate-limited upstream of an errored turn asked for (the provider
// bounds it to a day), or 0 when it named none.
func upstreamWait(o *chat.Errored) int {
	var pe *llm.ProviderError
	if o.Category != errcat.ProviderRateLimit || !errors.As(o.Err, &pe) || pe.RetryAfter <= 0 {
		return 0
	}
	return int(math.Ceil(pe.RetryAfter.Seconds()))
}

// cancelledReply is what a client is told of a turn that was cancelled
// while it ran (POST /v1/runs/{id}/cancel, or the server stopping): the
// message of its invocation_cancelled error on the chat completions and
// Responses endpoints, and of a cancelled response's error.
const cancelledReply = "The response was cancelled before it finished."

// upstreamFault holds the categories of a turn that failed for the
// server's own upstream, whatever the request, and the message the
// OpenAI-compatible endpoints answer for them (with 502): the upstream
// refused the server's credentials or configured model, or sent a reply
// the server cannot use (garbage, or one over its size bound). None
// quotes the upstream's text, which may name the server's key.
var upstreamFault = map[errcat.Category]string{
	errcat.ProviderAuthentication: "The model provider refused this server's credentials: the server is misconfigured, your request is fine. " +
		"Contact the server's operator.",
	errcat.ProviderInvalidModel: "The model provider does not serve the model this server is configured with: the server is misconfigured, " +
		"your request is fine. Contact the server's operator.",
	errcat.ProviderInvalidResponse: "The model provider sent a reply this server could not use: a failure on the server's side, " +
		"your request is fine. Try again later.",
}

// --- responses ---

// completionResponse is a chat.completion.
type completionResponse struct {
	ID        string        `json:"id"`
	Object    string        `json:"object"`
	Created   int64         `json:"created"`
	Model     string        `json:"model"`
	Choices   []choiceJSON  `json:"choices"`
	Usage     usageJSON     `json:"usage"`
	XArmature *armatureJSON `json:"x_armature"`
}

type choiceJSON struct {
	Index        int           `json:"index"`
	Message      assistantJSON `json:"message"`
	FinishReason string        `json:"finish_reason"`
	Logprobs     *struct{}     `json:"logprobs"`
}

// assistantJSON is the choice's message. It never carries tool_calls:
// the agent's tool calls ran server-side (see XArmature.ToolCalls).
type assistantJSON struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

// usageJSON is the usage object: the turn's model calls summed
// (chat.Turn.Usage); a counter no call reported is 0, as OpenAI's shape
// has no absent counters.
type usageJSON struct {
	PromptTokens        int                `json:"prompt_tokens"`
	CompletionTokens    int                `json:"completion_tokens"`
	TotalTokens         int                `json:"total_tokens"`
	PromptTokensDetails *promptDetailsJSON `json:"prompt_tokens_details,omitempty"`
}

type promptDetailsJSON struct {
	CachedTokens int `json:"cached_tokens"`
}

// usageOf renders a turn's usage.
func usageOf(out chat.Outcome) usageJSON {
	u := out.Info().Usage
	val := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	j := usageJSON{PromptTokens: val(u.PromptTokens), CompletionTokens: val(u.CompletionTokens), TotalTokens: val(u.TotalTokens)}
	if j.TotalTokens == 0 && (j.PromptTokens > 0 || j.CompletionTokens > 0) {
		j.TotalTokens = j.PromptTokens + j.CompletionTokens
	}
	if u.CachedTokens != nil {
		j.PromptTokensDetails = &promptDetailsJSON{CachedTokens: *u.CachedTokens}
	}
	return j
}

// finishOf is the choice's finish_reason: the last model call's, where
// OpenAI has a name for it (length, content_filter); otherwise stop (a
// turn's tool calls ran server-side, so tool_calls is never the answer).
func finishOf(out chat.Outcome) string {
	switch out.Info().FinishReason {
	case llm.FinishLength:
		return "length"
	case llm.FinishContentFilter:
		return "content_filter"
	}
	return "stop"
}

// armatureJSON is the x_armature extension of a completion (and of a
// stream's final chunk).
type armatureJSON struct {
	SessionID string `json:"session_id"`
	// RunID is the turn's run (GET /v1/runs/{id}).
	RunID        string `json:"run_id,omitempty"`
	InvocationID string `json:"invocation_id,omitempty"`
	// Outcome is "completed" or "suspended" (errored turns are HTTP
	// errors).
	Outcome string `json:"outcome"`
	// ToolCalls are the tool calls the agent made and ran server-side
	// during the turn, with their results.
	ToolCalls []toolCallJSON `json:"tool_calls,omitempty"`
	// Suspended is set when the turn waits for a signal (an approval).
	Suspended *suspendedJSON `json:"suspended,omitempty"`
	// Replayed marks the recorded answer to a retransmission (an
	// Idempotency-Key seen before, also across restarts): no turn ran.
	Replayed bool `json:"replayed,omitempty"`
	// Superseded lists the signal ids of suspended turns this message
	// closed.
	Superseded []string `json:"superseded,omitempty"`
}

type toolCallJSON struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Status is the last reported progress: requested (not run, e.g.
	// awaiting approval), running, completed or failed.
	Status chat.ToolStatus `json:"status"`
	Result string          `json:"result,omitempty"`
}

type suspendedJSON struct {
	SignalID string `json:"signal_id"`
	// InvocationID is the suspended turn's: a signal naming it resumes
	// only that turn, never a later one of the session (deleted and
	// begun again) whose request carries the same signal id.
	InvocationID string         `json:"invocation_id"`
	SessionID    string         `json:"session_id"`
	ResumeURL    string         `json:"resume_url"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// turnMessages are the messages a completed or suspended turn appended.
func turnMessages(out chat.Outcome) []llm.Message {
	switch o := out.(type) {
	case *chat.Completed:
		return o.Replies
	case *chat.Suspended:
		return o.PendingMessages
	}
	return nil
}

// contentOf joins the texts of the turn's assistant messages with blank
// lines: the choice's content.
func contentOf(msgs []llm.Message) string {
	var parts []string
	for _, m := range msgs {
		if t := m.Text(); m.Role == llm.RoleAssistant && t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n")
}

// extension builds x_armature for a completed or suspended outcome.
func (c *completion) extension(out chat.Outcome) *armatureJSON {
	t := out.Info()
	x := &armatureJSON{SessionID: c.sessionID, RunID: c.runID, InvocationID: t.InvocationID, Outcome: outcomeName(out),
		Replayed: t.Replayed, Superseded: t.Superseded}
	msgs := turnMessages(out)
	results := map[string]string{}
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			results[m.ToolCallID] = m.Text()
		}
	}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			res, done := results[tc.ID]
			st, ok := c.tools[tc.ID]
			switch {
			case !ok && done:
				st = chat.ToolCompleted
			case !ok:
				st = chat.ToolRequested
			}
			x.ToolCalls = append(x.ToolCalls, toolCallJSON{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments, Status: st, Result: res})
		}
	}
	if o, ok := out.(*chat.Suspended); ok {
		x.Suspended = &suspendedJSON{SignalID: o.Descriptor.SignalID, InvocationID: o.InvocationID, SessionID: c.sessionID,
			ResumeURL: "/v1/sessions/" + c.sessionID + "/signals", Metadata: o.Descriptor.Metadata}
	}
	return x
}

// response renders a completed or suspended outcome as a chat.completion.
func (c *completion) response(out chat.Outcome) completionResponse {
	return completionResponse{ID: c.id, Object: "chat.completion", Created: c.created, Model: c.model,
		Choices:   []choiceJSON{{Message: assistantJSON{Role: string(llm.RoleAssistant), Content: contentOf(turnMessages(out))}, FinishReason: finishOf(out)}},
		Usage:     usageOf(out),
		XArmature: c.extension(out)}
}

// --- streaming ---

// chunkJSON is a chat.completion.chunk. A tool progress frame is one too
// (with an empty delta), so clients that decode every SSE event as a
// chunk regardless of its event name (the official SDKs do) read it as
// a no-op; ToolCallID, Name and Status carry the progress.
type chunkJSON struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	Created   int64             `json:"created"`
	Model     string            `json:"model"`
	Choices   []chunkChoiceJSON `json:"choices"`
	Usage     *usageJSON        `json:"usage,omitempty"`
	XArmature *armatureJSON     `json:"x_armature,omitempty"`

	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
	Status     chat.ToolStatus `json:"status,omitempty"`
}

type chunkChoiceJSON struct {
	Index        int       `json:"index"`
	Delta        deltaJSON `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
	Logprobs     *struct{} `json:"logprobs"`
}

type deltaJSON struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// streamCompletion answers a stream: true request. Frames: a role chunk,
// content deltas as the model streams, tool progress events, a final
// chunk with finish_reason and x_armature, an optional usage chunk, then
// data: [DONE]. An errored turn that streamed nothing is an HTTP error;
// one that did ends with an event: error frame in the OpenAI error shape,
// as does one whose stream a quiet turn opened (Config.StreamKeepAlive:
// the headers and ": keep-alive" comment lines, before any chunk).
// The frames go through an sseWriter: a client too slow for the turn
// loses its stream, and never holds the turn back.
func (s *Server) streamCompletion(w http.ResponseWriter, r *http.Request, a *Agent, tenant string, c *completion, p *completionPlan) error {
	release, err := s.streams.acquire(r.Context(), tenant)
	if err != nil {
		return err
	}
	defer release()
	sw := newSSEWriter(w)
	defer s.closeStream(r, sw)
	chunk := func(d deltaJSON, finish *string) chunkJSON {
		return chunkJSON{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model,
			Choices: []chunkChoiceJSON{{Delta: d, FinishReason: finish}}}
	}
	begun := false
	begin := func() { // the first frame announces the role
		if !begun {
			begun = true
			sw.json("", chunk(deltaJSON{Role: string(llm.RoleAssistant), Content: new("")}, nil))
		}
	}
	var streamed strings.Builder // the content sent so far
	toolSince := false           // a tool ran since the last text
	text := func(t string) {
		if t == "" {
			return
		}
		begin()
		streamed.WriteString(t)
		sw.json("", chunk(deltaJSON{Content: &t}, nil))
	}
	stopKeepAlive := sw.keepAlive(s.cfg.StreamKeepAlive)
	defer stopKeepAlive()
	out := s.runCompletion(r.Context(), tenant, a, c, p.turn, func(ch chat.Chunk) {
		switch ch.Kind {
		case chat.ChunkText:
			if toolSince && streamed.Len() > 0 && ch.Text != "" {
				ch.Text = "\n\n" + ch.Text
			}
			toolSince = false
			text(ch.Text)
		case chat.ChunkTool:
			toolSince = true
			if ch.Tool == nil {
				return
			}
			switch ch.Tool.Status {
			case chat.ToolRunning, chat.ToolCompleted, chat.ToolFailed:
				begin()
				f := chunk(deltaJSON{}, nil)
				f.ToolCallID, f.Name, f.Status = ch.Tool.CallID, ch.Tool.Name, ch.Tool.Status
				sw.json(ToolProgressEvent, f)
				if n := s.cfg.Narration; n != nil {
					sw.json(NarrationEvent, narrationChunk{chunk(deltaJSON{}, nil), n.toolFrame(ch.Tool)})
				}
			}
		case chat.ChunkEvent:
			if n := s.cfg.Narration; n != nil && ch.Event != nil && ch.Event.Type == runtime.EventArtifactCreated {
				begin()
				sw.json(NarrationEvent, narrationChunk{chunk(deltaJSON{}, nil), n.frame(narrationArtifact, ch.Event.Type)})
			}
		}
	})
	stopKeepAlive()
	behind := sw.afterTurn()
	turnEnded(r)
	if behind {
		sw.json("error", openAIErrorBody{Error: openAIErrorOf(streamDropped(c.runID))})
		return nil
	}
	if e := c.turnError(out); e != nil {
		if !sw.isOpen() {
			return e
		}
		s.log.WarnContext(r.Context(), "server: streamed turn errored", "code", e.Code, "error", e.Err)
		sw.json("error", openAIErrorBody{Error: openAIErrorOf(e)})
		return nil
	}
	// Text the turn appended without streaming it (a provider that does
	// not stream, an approval request) completes the content.
	if rest, ok := strings.CutPrefix(contentOf(turnMessages(out)), streamed.String()); ok {
		text(rest)
	}
	begin()
	if _, done := out.(*chat.Completed); done && s.cfg.Narration != nil {
		// As the run records it, before its end.
		sw.json(NarrationEvent, narrationChunk{chunk(deltaJSON{}, nil), s.cfg.Narration.frame(narrationAnswer, runtime.EventAdapterEvent)})
	}
	final := chunk(deltaJSON{}, new(finishOf(out)))
	final.XArmature = c.extension(out)
	sw.json("", final)
	if p.includeUsage {
		u := chunk(deltaJSON{}, nil)
		usage := usageOf(out)
		u.Choices, u.Usage = []chunkChoiceJSON{}, &usage
		sw.json("", u)
	}
	sw.frame("", []byte("[DONE]"))
	return nil
}
