package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/jsonexact"
	"github.com/armature-go/armature/internal/jsonvalid"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/session"
)

// The OpenAI Responses API (see the package documentation, "The OpenAI
// Responses API", and PROTOCOLS.md §5), over the same chat sessions,
// agents, limits, idempotency and run records as the chat completions
// endpoint. A response is a turn's run: its id is the run id.
//
//	POST /v1/responses        a chat turn (or an approval's resume) as a response object, or as typed response.* SSE events
//	GET  /v1/responses/{id}   the response of a run
func (s *Server) responsesRoutes() {
	e := &responsesEndpoint{s: s}
	s.handleOpenAI("POST /v1/responses", e.create)
	s.handleOpenAI("GET /v1/responses/{id}", e.get)
}

// Wire identifiers of the Responses API.
const (
	// CodePreviousResponseNotFound is the error code of a
	// previous_response_id that names no response the tenant may
	// continue.
	CodePreviousResponseNotFound = "previous_response_not_found"
	// ResponsesServerLabel is the server_label of the mcp_call and
	// mcp_approval_request items: the agent's tools, run server-side.
	ResponsesServerLabel = "armature"
)

// OpenAI's bounds on request metadata: pairs, key and value lengths.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// Response and item statuses.
const (
	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusIncomplete = "incomplete"
	statusFailed     = "failed"
	statusCancelled  = "cancelled"
)

// responsesEndpoint serves the Responses API.
type responsesEndpoint struct {
	s *Server
}

// --- request decoding ---

// responsesRequest is the part of a Responses API request the endpoint
// reads. Sampling parameters, max_output_tokens, reasoning, truncation,
// include and the like are ignored: the agent's configuration governs.
// The fields refused when set are read to refuse them: tool_choice
// other than "auto", max_tool_calls and parallel_tool_calls other than
// true among them, since a client that forbids or bounds tool calls
// must not have the agent's run anyway.
type responsesRequest struct {
	Model              string                     `json:"model"`
	Input              json.RawMessage            `json:"input"`
	Instructions       *string                    `json:"instructions"`
	PreviousResponseID string                     `json:"previous_response_id"`
	Store              *bool                      `json:"store"`
	Metadata           map[string]json.RawMessage `json:"metadata"`
	Stream             bool                       `json:"stream"`
	// Refused when set: client-side tools, structured output, background
	// mode, the Conversations API, prompt templates, and (further down)
	// a tool_choice other than "auto" and max_tool_calls.
	Tools      json.RawMessage `json:"tools"`
	Background bool            `json:"background"`
	Text       *struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"text"`
	Conversation      json.RawMessage `json:"conversation"`
	Prompt            json.RawMessage `json:"prompt"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	MaxToolCalls      json.RawMessage `json:"max_tool_calls"`
	ParallelToolCalls json.RawMessage `json:"parallel_tool_calls"`
}

// responsesShape is a Responses request as jsonexact filters it: the
// request, its input items (a string input is left as it is) with their
// content parts and function call outputs, so that a key naming a field
// only up to case is dropped at every depth in the one pass over the
// body, before the items are decoded one by one.
type responsesShape struct {
	responsesRequest
	Input []struct {
		inputItem
		Content []inputPart `json:"content"`
		Output  []inputPart `json:"output"`
	} `json:"input"`
}

// inputItem is one item of a list input: a message (type "message", or
// no type with a role), a function_call or function_call_output, an
// mcp_call (a server-side tool call of an earlier output), or an
// mcp_approval_response (the decision on an mcp_approval_request).
type inputItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	Error     *string         `json:"error"`
	// mcp_approval_response
	ApprovalRequestID string  `json:"approval_request_id"`
	Approve           *bool   `json:"approve"`
	Reason            *string `json:"reason"`
}

// inputPart is one content part of an input message or function call
// output.
type inputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
}

// approvalInput is an mcp_approval_response: the decision on a
// suspended turn's approval request (the signal id).
type approvalInput struct {
	requestID string
	approve   bool
	reason    string
	// invocationID is the invocation the previous response suspended
	// ("" when it names none): the decision resumes only that turn, not
	// a later one of the session (deleted and begun again under the
	// same id) whose request may carry the same id.
	invocationID string
}

// responsePlan is a decoded, validated Responses request.
type responsePlan struct {
	model        string
	stream       bool
	store        bool
	instructions *string
	metadata     map[string]string
	previousID   string
	// sessionID is metadata.session_id ("" when absent).
	sessionID string
	// history is the input before the turn, converted (system and
	// developer messages dropped); turn is the user message the turn
	// sends. approval, when set, replaces both: the request resumes a
	// suspended turn.
	history  []llm.Message
	turn     llm.Message
	approval *approvalInput
}

// unsupported is the 400 of a parameter or input the endpoint cannot
// honor: the request field param.
func unsupported(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeUnsupportedParameter, Message: fmt.Sprintf(format, args...), Param: param}
}

// present reports whether a raw JSON field was given a value (not
// absent, not null).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// decodeResponses decodes and validates a Responses API request body.
// Every failure is a 400 *Error whose message describes the problem
// without echoing input.
func decodeResponses(body []byte) (*responsePlan, error) {
	var req responsesRequest
	if err := json.Unmarshal(jsonexact.Filter(body, responsesRequestType), &req); err != nil {
		problem, param := jsonProblem(err)
		return nil, badParam(param, "the body is not a valid Responses API request: %s", problem)
	}
	switch {
	case len(req.Model) > maxAgentName:
		return nil, badParam("model", "model must not exceed %d bytes", maxAgentName)
	case !emptyJSONList(req.Tools):
		return nil, unsupported("tools", "client-side tools are not supported: the agent's own tools run server-side")
	case req.Text != nil && req.Text.Format != nil && req.Text.Format.Type != "" && req.Text.Format.Type != "text":
		return nil, unsupported("text.format", "text.format must be text: structured output is part of the agent's configuration, not of a request")
	case req.Background:
		return nil, unsupported("background", "background responses are not supported: stream the response, or read the turn's run (GET /v1/runs/{id})")
	case present(req.Conversation):
		return nil, unsupported("conversation", "conversation is not supported: continue a session with previous_response_id or the %s header", SessionHeader)
	case present(req.Prompt):
		return nil, unsupported("prompt", "prompt templates are not supported: the agent's configuration holds its prompt")
	case !autoToolChoice(req.ToolChoice):
		return nil, unsupported("tool_choice", toolChoiceRefusal, "tool_choice")
	case present(req.MaxToolCalls):
		return nil, unsupported("max_tool_calls", "max_tool_calls is not supported: the agent's configuration bounds its tool calls, which run server-side")
	case !parallelAllowed(req.ParallelToolCalls):
		return nil, unsupported("parallel_tool_calls", parallelRefusal)
	case req.PreviousResponseID != "" && !validID(req.PreviousResponseID):
		return nil, previousNotFound("previous_response_id names no response")
	case req.Instructions != nil && len(*req.Instructions) > maxInstructions:
		return nil, badParam("instructions", "instructions must not exceed %d bytes", maxInstructions)
	}
	p := &responsePlan{model: req.Model, stream: req.Stream, store: req.Store == nil || *req.Store,
		instructions: req.Instructions, previousID: req.PreviousResponseID}
	meta, sid, err := decodeMetadata(req.Metadata)
	if err != nil {
		return nil, err
	}
	p.metadata, p.sessionID = meta, sid
	msgs, src, approval, err := decodeInput(req.Input)
	if err != nil {
		return nil, err
	}
	if approval != nil {
		p.approval = approval
		return p, nil
	}
	if len(msgs) == 0 {
		return nil, badParam("input", "input must hold a user message (system and developer messages do not count: the agent's own instructions apply)")
	}
	last := len(msgs) - 1
	if msgs[last].Role != llm.RoleUser {
		at := fmt.Sprintf("input[%d]", src.item[last])
		if msgs[last].Role == llm.RoleTool {
			return nil, badParam(at, "%s: the last item must be a user message (the turn's input); the agent's tools run server-side, so no function call awaits an output", at)
		}
		return nil, badParam(at, "%s: the last item must be a user message (it is the turn's input)", at)
	}
	if err := llm.ValidateMessages(msgs, nil); err != nil {
		var ve *llm.ValidationError
		if errors.As(err, &ve) && ve.Index >= 0 && ve.Index < len(src.item) {
			return nil, src.invalid(ve, msgs)
		}
		return nil, badParam("input", "invalid input")
	}
	p.history, p.turn = msgs[:last], msgs[last]
	if p.previousID != "" && len(p.history) > 0 {
		return nil, badParam("input", "with previous_response_id, input holds only the new user message: the conversation so far is the previous response's session")
	}
	return p, nil
}

// previousNotFound is the 404 of a previous_response_id that names no
// response the tenant may continue.
func previousNotFound(msg string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodePreviousResponseNotFound, Message: msg, Param: "previous_response_id"}
}

// maxInstructions bounds a request's instructions.
const maxInstructions = 256 << 10

// decodeMetadata checks metadata against OpenAI's bounds (at most 16
// pairs, keys of 64 bytes, string values of 512 bytes) and reads
// session_id, which names the session as it does for chat completions.
func decodeMetadata(raw map[string]json.RawMessage) (map[string]string, string, error) {
	if len(raw) > maxMetadataPairs {
		return nil, "", badParam("metadata", "metadata must hold at most %d pairs", maxMetadataPairs)
	}
	meta := make(map[string]string, len(raw))
	for k, v := range raw {
		var s string
		if len(k) > maxMetadataKey {
			return nil, "", badParam("metadata", "metadata keys must not exceed %d bytes", maxMetadataKey)
		}
		if err := json.Unmarshal(v, &s); err != nil || len(s) > maxMetadataValue {
			return nil, "", badParam("metadata."+k, "metadata values must be strings of at most %d bytes", maxMetadataValue)
		}
		meta[k] = s
	}
	sid, ok := meta[MetadataSessionID]
	if ok && !validID(sid) {
		return nil, "", badParam("metadata.session_id", "metadata.session_id must be 1-128 characters of [A-Za-z0-9._:-]")
	}
	return meta, sid, nil
}

// decodeInput converts input, a string (one user message) or a list of
// items, to messages; src says which input items msgs came from.
// System and developer messages, reasoning items, tool listings and
// approval requests are dropped; a function_call joins the assistant
// message before it (the calls of one model answer form one message), a
// function_call_output is a tool result, and an mcp_call (an earlier
// output's server-side call, sent back as history) is both. An
// mcp_approval_response is the whole input: approval is then set.
func decodeInput(raw json.RawMessage) (msgs []llm.Message, src inputSource, approval *approvalInput, err error) {
	if !present(raw) {
		return nil, src, nil, badParam("input", "input is required: a string or a list of input items")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		src.add(0, "message")
		return []llm.Message{{Role: llm.RoleUser, Content: llm.Text(text)}}, src, nil, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, src, nil, badParam("input", "input must be a string or a list of input items")
	}
	items := make([]inputItem, len(raws))
	src.kind = make([]string, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &items[i]); err != nil {
			return nil, src, nil, elementError("input", i, "an input item object", err)
		}
	}
	call := func(i int, kind string, tc llm.ToolCall) error {
		if len(tc.Arguments) == 0 {
			tc.Arguments = json.RawMessage("{}")
		}
		if !jsonvalid.Valid(tc.Arguments) {
			return badParam(fmt.Sprintf("input[%d].arguments", i), "input[%d].arguments is not valid JSON", i)
		}
		if n := len(msgs) - 1; n >= 0 && msgs[n].Role == llm.RoleAssistant {
			msgs[n].ToolCalls = append(msgs[n].ToolCalls, tc)
			src.calls[n] = append(src.calls[n], i)
			src.note(i, kind)
			return nil
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{tc}})
		src.add(i, kind)
		src.calls[len(msgs)-1] = append(src.calls[len(msgs)-1], i)
		return nil
	}
	for i, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			m, keep, err := it.message()
			if err != nil {
				return nil, src, nil, itemError(i, err)
			}
			if keep {
				msgs = append(msgs, m)
				src.add(i, typ)
			}
		case "function_call":
			if err := call(i, typ, llm.ToolCall{ID: it.CallID, Name: it.Name, Arguments: json.RawMessage(it.Arguments)}); err != nil {
				return nil, src, nil, err
			}
		case "function_call_output":
			out, err := outputText(it.Output)
			if err != nil {
				return nil, src, nil, itemError(i, err)
			}
			msgs = append(msgs, llm.ToolResult(it.CallID, out))
			src.add(i, typ)
		case "mcp_call":
			id := strings.TrimPrefix(it.ID, mcpCallPrefix)
			if err := call(i, typ, llm.ToolCall{ID: id, Name: it.Name, Arguments: json.RawMessage(it.Arguments)}); err != nil {
				return nil, src, nil, err
			}
			var out string
			if present(it.Output) && json.Unmarshal(it.Output, &out) != nil {
				return nil, src, nil, badParam(fmt.Sprintf("input[%d].output", i), "input[%d].output must be a string", i)
			}
			if it.Error != nil && out == "" {
				out = *it.Error
			}
			msgs = append(msgs, llm.ToolResult(id, out))
			src.add(i, typ)
		case "mcp_approval_response":
			if len(items) != 1 {
				return nil, src, nil, badParam("input", "input[%d]: an mcp_approval_response is the whole input: the decision resumes the suspended turn, which then goes on", i)
			}
			if it.ApprovalRequestID == "" || len(it.ApprovalRequestID) > chat.MaxIDLength {
				return nil, src, nil, badParam(fmt.Sprintf("input[%d].approval_request_id", i), "input[%d].approval_request_id must name the approval request (1-%d bytes)", i, chat.MaxIDLength)
			}
			if it.Approve == nil {
				return nil, src, nil, badParam(fmt.Sprintf("input[%d].approve", i), "input[%d].approve is required: true or false", i)
			}
			ap := &approvalInput{requestID: it.ApprovalRequestID, approve: *it.Approve}
			if it.Reason != nil {
				ap.reason = *it.Reason
			}
			return nil, src, ap, nil
		case "reasoning", "mcp_list_tools", "mcp_approval_request":
			// Another model's reasoning, a tool listing, an approval
			// request already decided or superseded: not history.
		case "item_reference":
			return nil, src, nil, unsupported(fmt.Sprintf("input[%d]", i), "input[%d]: item references are not supported: continue with previous_response_id", i)
		case "":
			return nil, src, nil, badParam(fmt.Sprintf("input[%d].type", i), "input[%d]: an item needs a type or a role", i)
		default:
			return nil, src, nil, unsupported(fmt.Sprintf("input[%d].type", i), "input[%d]: items of this type are not supported (message, function_call, function_call_output, mcp_call and mcp_approval_response are)", i)
		}
	}
	return msgs, src, nil, nil
}

// inputSource says which input items the messages decodeInput
// converted came from, so that a problem with a message is reported
// about the item, in its own fields (inputSource.invalid).
type inputSource struct {
	// item[m] is the input item message m came from: for an assistant
	// message of function calls, the item that opened it.
	item []int
	// calls[m][k] is the input item of message m's k-th tool call.
	calls [][]int
	// kind[i] is the type of input item i (message, function_call,
	// function_call_output, mcp_call) once it gave a message or a call.
	kind []string
}

// add records that the next message came from input item i of type kind.
func (src *inputSource) add(i int, kind string) {
	src.item, src.calls = append(src.item, i), append(src.calls, nil)
	src.note(i, kind)
}

// note records the type of input item i.
func (src *inputSource) note(i int, kind string) {
	if i >= len(src.kind) {
		src.kind = append(src.kind, make([]string, i+1-len(src.kind))...)
	}
	src.kind[i] = kind
}

// invalid is the 400 of ve, a problem llm.ValidateMessages found with
// a converted message, in the Responses API's terms: param names the
// input item and the field it has (a function call's own item and its
// call_id, a function_call_output's call_id and output; the item itself
// for a rule about its place, such as a function_call that opens the
// input), and the message speaks of items, not chat messages.
func (src *inputSource) invalid(ve *llm.ValidationError, msgs []llm.Message) error {
	m := ve.Index
	item := src.item[m]
	kind := src.kind[item]
	field := ve.Field[strings.IndexByte(ve.Field, ']')+1:] // ".tool_calls[1].id", ".content[0].text", ".role"
	idField := func(kind string) string {
		if kind == "mcp_call" {
			return ".id"
		}
		return ".call_id"
	}
	reason := responsesReason.Replace(ve.Reason)
	switch {
	case strings.HasPrefix(field, ".tool_calls["):
		// The call's own item (a function_call, or an mcp_call).
		rest := field[len(".tool_calls["):]
		if k, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, ']'), 0)]); err == nil && k < len(src.calls[m]) {
			item = src.calls[m][k]
		}
		field = rest[strings.IndexByte(rest, ']')+1:]
		if field == ".id" {
			field = idField(src.kind[item])
		}
	case field == ".tool_call_id":
		field = idField(kind)
		if id := msgs[m].ToolCallID; id != "" && utf8.ValidString(id) {
			// A well-formed id, refused: it answers no earlier call.
			reason = "answers no function call: no function_call item before it has this call_id"
		}
	case field == ".role" && m == 0 && msgs[0].Role == llm.RoleAssistant:
		// The one rule about a converted message's role: the input
		// begins with a user message. A function call's item is what
		// is out of place (it has no role).
		reason = "the input must begin with a user message (system and developer messages are left out: the agent's own instructions apply)"
		if kind != "message" {
			field, reason = "", "the input must begin with a user message: a function_call item comes after the message it answers"
		}
	case field == ".role" && kind != "message":
		field = ""
	case (field == ".content" || strings.HasPrefix(field, ".content[")) && (kind == "function_call_output" || kind == "mcp_call"):
		field = ".output"
	case strings.HasPrefix(field, ".content[") && (strings.Contains(field, "].source") || strings.HasSuffix(field, "].media_type")):
		// An input_image's URL (or data: URL) became the block's source.
		field = field[:strings.IndexByte(field, ']')+1] + ".image_url"
	}
	at := fmt.Sprintf("input[%d]%s", item, field)
	return badParam(at, "%s: %s", at, reason)
}

// responsesReason rewords llm.ValidateMessages' reasons, written for
// chat messages, in the Responses API's terms.
var responsesReason = strings.NewReplacer(
	"tool_call_id", "call_id",
	"tool calls", "function calls",
	"tool call", "function call",
	"tool message", "function_call_output",
	"the message list", "the input",
)

// itemError places err, from converting input item i, in a 400.
func itemError(i int, err error) error {
	at := fmt.Sprintf("input[%d]", i)
	var ae *Error
	if errors.As(err, &ae) {
		e := *ae
		e.Message = at + "." + ae.Message
		e.Param = at
		if ae.Param != "" {
			e.Param = at + "." + ae.Param
		}
		return &e
	}
	return badParam(at, "%s.%s", at, err.Error())
}

// message converts a message item; keep is false for system and
// developer messages, which the agent's own instructions (or the
// request's instructions) replace.
func (it inputItem) message() (llm.Message, bool, error) {
	switch it.Role {
	case "system", "developer":
		return llm.Message{}, false, nil
	case string(llm.RoleUser):
		c, err := inputContent(it.Content, true)
		return llm.Message{Role: llm.RoleUser, Content: c}, true, err
	case string(llm.RoleAssistant):
		c, err := inputContent(it.Content, false)
		return llm.Message{Role: llm.RoleAssistant, Content: c}, true, err
	}
	return llm.Message{}, false, errors.New("role must be user, assistant, system or developer")
}

// inputContent reads a message's content: a string or a list of parts
// (input_text, and input_image by URL for users; output_text and refusal
// for assistants).
func inputContent(raw json.RawMessage, user bool) (llm.Content, error) {
	text, parts, err := textOrParts[inputPart](raw)
	switch {
	case err != nil:
		return llm.Content{}, err
	case text != nil:
		return llm.Text(*text), nil
	}
	blocks := make([]llm.Block, 0, len(parts))
	for j, p := range parts {
		switch {
		case p.Type == "input_text" || p.Type == "output_text" && !user:
			blocks = append(blocks, llm.TextBlock(p.Text))
		case p.Type == "refusal" && !user:
			blocks = append(blocks, llm.TextBlock(p.Refusal))
		case p.Type == "input_image" && user && p.ImageURL != "":
			b, err := imageBlock(p.ImageURL)
			if err != nil {
				return llm.Content{}, fmt.Errorf("content[%d].image_url: %w", j, err)
			}
			if p.Detail != "" {
				b = b.WithDetail(llm.Detail(p.Detail))
			}
			blocks = append(blocks, b)
		case p.Type == "input_image" && user:
			return llm.Content{}, unsupported(fmt.Sprintf("content[%d]", j), "content[%d]: images are supported by image_url only", j)
		case p.Type == "input_file" || p.Type == "input_audio":
			return llm.Content{}, unsupported(fmt.Sprintf("content[%d]", j), "content[%d]: file and audio inputs are not supported", j)
		default:
			return llm.Content{}, fmt.Errorf("content[%d]: unsupported content part type", j)
		}
	}
	return llm.Blocks(blocks...), nil
}

// outputText reads a function_call_output's output: a string or a list
// of input_text parts.
func outputText(raw json.RawMessage) (string, error) {
	text, parts, err := textOrParts[inputPart](raw)
	switch {
	case err != nil:
		return "", errors.New("output must be a string or a list of content parts")
	case text != nil:
		return *text, nil
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "input_text" {
			return "", fmt.Errorf("output[%d]: only input_text parts are supported in a function call output", j)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// --- the response object ---

// responseJSON is a Responses API response object. Sampling fields are
// null: the agent's configuration governs them.
type responseJSON struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Error              *responseErrorJSON `json:"error"`
	IncompleteDetails  *incompleteJSON    `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []outputItemJSON   `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	Text               textConfigJSON     `json:"text"`
	ToolChoice         string             `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	TopP               *float64           `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *responseUsageJSON `json:"usage"`
	Metadata           map[string]string  `json:"metadata"`
	// XArmature is the x_armature extension of chat completions: the
	// session, the run, the outcome, the server-side tool calls, a
	// suspension.
	XArmature *armatureJSON `json:"x_armature,omitempty"`
}

type responseErrorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteJSON struct {
	Reason string `json:"reason"`
}

type textConfigJSON struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

// outputItemJSON is an output item: a message, an mcp_call (a tool the
// agent ran server-side: never a function_call, which would ask the
// client to run it) or an mcp_approval_request (a suspended turn's
// approval).
type outputItemJSON struct {
	Type    string           `json:"type"`
	ID      string           `json:"id"`
	Status  string           `json:"status,omitempty"`
	Role    string           `json:"role,omitempty"`
	Content []outputTextJSON `json:"content,omitzero"`
	// mcp_call and mcp_approval_request
	ServerLabel string  `json:"server_label,omitempty"`
	Name        string  `json:"name,omitempty"`
	Arguments   *string `json:"arguments,omitempty"`
	// mcp_call
	Output *string `json:"output,omitempty"`
	Error  *string `json:"error,omitempty"`
	// ApprovalRequestID, on an mcp_call that ran once approved, is the
	// approval request it waited on.
	ApprovalRequestID string `json:"approval_request_id,omitempty"`
}

type outputTextJSON struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

func outputTextPart(text string) outputTextJSON {
	return outputTextJSON{Type: "output_text", Text: text, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}}
}

// mcpCallPrefix starts an mcp_call item's id: the prefix and the tool
// call id.
const mcpCallPrefix = "mcp_"

// messageItemID is the id of a response's output message at index i:
// derived from the run and the index, so that GET rebuilds the same ids.
func messageItemID(runID string, i int) string {
	return "msg_" + runID + "_" + strconv.Itoa(i)
}

// responseUsageJSON is the Responses usage object, from the chat
// completion usage of the turn.
type responseUsageJSON struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

func responseUsage(u usageJSON) *responseUsageJSON {
	r := &responseUsageJSON{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if u.PromptTokensDetails != nil {
		r.InputTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	return r
}

// responseMeta is what a response echoes of its request, recorded with
// its run (the agent.handoff event's "responses" field) so that GET
// answers it too.
type responseMeta struct {
	Store        bool              `json:"store"`
	Instructions *string           `json:"instructions,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Previous     string            `json:"previous_response_id,omitempty"`
}

// object returns a response object of run id in status, without output.
func (m *responseMeta) object(id, model string, created int64, status string) *responseJSON {
	r := &responseJSON{ID: id, Object: "response", CreatedAt: created, Status: status, Instructions: m.Instructions,
		Model: model, Output: []outputItemJSON{}, ParallelToolCalls: true, Store: m.Store, ToolChoice: "auto",
		Tools: []json.RawMessage{}, Truncation: "disabled", Metadata: m.Metadata}
	r.Text.Format.Type = "text"
	if m.Previous != "" {
		r.PreviousResponseID = &m.Previous
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	return r
}

// outputItems maps a turn's messages to output items: each assistant
// text a message, each tool call that ran an mcp_call with its result
// (a result answering a call of an earlier turn, as a resumed turn's
// does, takes its name and arguments from prior), and a suspended
// turn's approval an mcp_approval_request last (its call, not run, has
// no mcp_call). failed reports the calls whose tool failed.
func outputItems(runID string, msgs []llm.Message, susp *chat.Suspended, failed func(callID string) bool,
	prior func(callID string) (llm.ToolCall, bool)) []outputItemJSON {
	results := map[string]string{}
	calls := map[string]bool{}
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			results[m.ToolCallID] = m.Text()
		}
		for _, tc := range m.ToolCalls {
			calls[tc.ID] = true
		}
	}
	items := []outputItemJSON{}
	mcpCall := func(tc llm.ToolCall, result string) {
		args := string(tc.Arguments)
		it := outputItemJSON{Type: "mcp_call", ID: mcpCallPrefix + tc.ID, Status: statusCompleted, ServerLabel: ResponsesServerLabel,
			Name: tc.Name, Arguments: &args}
		if failed != nil && failed(tc.ID) {
			it.Status, it.Error = statusFailed, &result
		} else {
			it.Output = &result
		}
		items = append(items, it)
	}
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			if t := m.Text(); t != "" {
				items = append(items, outputItemJSON{Type: "message", ID: messageItemID(runID, len(items)), Status: statusCompleted,
					Role: string(llm.RoleAssistant), Content: []outputTextJSON{outputTextPart(t)}})
			}
			for _, tc := range m.ToolCalls {
				if res, ok := results[tc.ID]; ok {
					mcpCall(tc, res)
				}
			}
		case llm.RoleTool:
			if calls[m.ToolCallID] {
				continue // placed with its call
			}
			tc := llm.ToolCall{ID: m.ToolCallID, Arguments: json.RawMessage("{}")}
			if prior != nil {
				if p, ok := prior(m.ToolCallID); ok {
					tc = p
				}
			}
			mcpCall(tc, m.Text())
			// The agent answers an earlier turn's call only once its
			// approval decided it.
			items[len(items)-1].ApprovalRequestID = agent.SignalPrefix + m.ToolCallID
		}
	}
	if susp != nil && strings.HasPrefix(susp.Descriptor.SignalID, agent.SignalPrefix) {
		md := susp.Descriptor.Metadata
		name, _ := md[agent.MetadataTool].(string)
		args := "{}"
		if v, ok := md[agent.MetadataArguments]; ok {
			if raw, err := json.Marshal(v); err == nil {
				args = string(raw)
			}
		}
		items = append(items, outputItemJSON{Type: "mcp_approval_request", ID: susp.Descriptor.SignalID,
			ServerLabel: ResponsesServerLabel, Name: name, Arguments: &args})
	}
	return items
}

// priorCalls returns a lookup of the tool calls of the session's history
// (read once, on first use): a resumed turn's results answer calls of
// the turn before it.
func priorCalls(ctx context.Context, a *Agent, key string, o chat.Outcome) func(string) (llm.ToolCall, bool) {
	var msgs []llm.Message
	loaded, whole := false, false
	wholeHistory := func() {
		whole = true
		if st, err := a.Chat.Harness().Graph().SessionState(ctx, key); err == nil && !st.IsZero() {
			msgs = chat.Messages.Get(st)
		}
	}
	find := func(callID string) (llm.ToolCall, bool) {
		for i := len(msgs) - 1; i >= 0; i-- {
			for _, tc := range msgs[i].ToolCalls {
				if tc.ID == callID {
					return tc, true
				}
			}
		}
		return llm.ToolCall{}, false
	}
	return func(callID string) (llm.ToolCall, bool) {
		if !loaded {
			loaded = true
			if c, ok := o.(*chat.Completed); ok && !c.FinalState.IsZero() {
				msgs = chat.Messages.Get(c.FinalState)
			} else {
				wholeHistory()
			}
		}
		tc, ok := find(callID)
		if !ok && !whole {
			// The final state may hold only the history's tail
			// (graph.SessionConfig.Tail): look in the whole history.
			wholeHistory()
			tc, ok = find(callID)
		}
		return tc, ok
	}
}

// final renders a completed or suspended outcome of run id: status
// completed (a suspended turn too: it answered, with an approval
// request), or incomplete when the last model call stopped at its token
// limit or a content filter.
func final(ctx context.Context, a *Agent, tenant string, c *completion, m *responseMeta, created int64, out chat.Outcome) *responseJSON {
	r := m.object(c.runID, c.model, created, statusCompleted)
	switch finishOf(out) {
	case "length":
		r.Status, r.IncompleteDetails = statusIncomplete, &incompleteJSON{Reason: "max_output_tokens"}
	case "content_filter":
		r.Status, r.IncompleteDetails = statusIncomplete, &incompleteJSON{Reason: "content_filter"}
	}
	susp, _ := out.(*chat.Suspended)
	failed := func(id string) bool { return c.tools[id] == chat.ToolFailed }
	r.Output = outputItems(c.runID, turnMessages(out), susp, failed, priorCalls(ctx, a, storeKey(tenant, c.sessionID), out))
	r.Usage = responseUsage(usageOf(out))
	r.XArmature = c.extension(out)
	return r
}

// --- POST /v1/responses ---

// create serves POST /v1/responses.
func (e *responsesEndpoint) create(w http.ResponseWriter, r *http.Request) error {
	s := e.s
	body, err := readBody(r)
	if err != nil {
		return err
	}
	p, err := decodeResponses(body)
	if err != nil {
		return err
	}
	a, key, err := s.openAITurn(r, &p.model)
	if err != nil {
		return err
	}
	tenant := tenantOf(r)
	sid, err := e.session(r.Context(), tenant, r.Header.Get(SessionHeader), p)
	if err != nil {
		return err
	}
	if p.approval != nil && sid.fresh {
		return badParam("previous_response_id", "an mcp_approval_response answers a response's approval request: send it with that response's id as previous_response_id")
	}
	implicit := false
	if key == "" {
		key = s.retryKey(r, tenant, body)
		implicit = key != ""
	}
	if sid.fresh && key != "" {
		sid = keyedSession(key)
	}
	if p.approval == nil {
		if err := s.seedSession(r.Context(), tenant, sid.id, sid.fresh, p.history); err != nil {
			return err
		}
	}
	meta := &responseMeta{Store: p.store, Instructions: p.instructions, Metadata: p.metadata, Previous: p.previousID}
	c := &completion{created: time.Now().Unix(), model: p.model, sessionID: sid.id, messageID: key}
	w.Header().Set(SessionHeader, sid.id)
	rt := &responseTurn{e: e, a: a, tenant: tenant, c: c, meta: meta, plan: p, key: key, implicit: implicit}
	if p.stream {
		return rt.stream(w, r)
	}
	out := rt.run(r.Context(), nil, nil)
	if te := rt.turnError(r.Context(), out); te != nil {
		return te
	}
	writeJSON(w, http.StatusOK, final(r.Context(), a, tenant, c, rt.echoed(r.Context(), out), c.created, out))
	return nil
}

// echoed is what the response to out echoes of its request: the
// request's own fields, or, for a retransmission answered with the
// recorded response (out replayed), the first request's, as recorded
// with its run (a retry sent with another store, metadata or
// instructions does not change what was stored).
func (rt *responseTurn) echoed(ctx context.Context, out chat.Outcome) *responseMeta {
	if !out.Info().Replayed || rt.c.runID == "" {
		return rt.meta
	}
	if run, m, err := rt.e.lookup(ctx, rt.tenant, rt.c.runID); err == nil && run != nil && m != nil {
		return m
	}
	return rt.meta
}

// responseTurn is one POST /v1/responses being answered.
type responseTurn struct {
	e      *responsesEndpoint
	a      *Agent
	tenant string
	c      *completion
	meta   *responseMeta
	plan   *responsePlan
	key    string
	// implicit is set when key is not the request's Idempotency-Key but
	// the one clientRetries gave it: no other request (a message for a
	// decision, or a decision for a message) can have used it, so it
	// needs no checking.
	implicit bool
}

// run runs the request's turn, or resumes the suspended turn its
// approval decides, handing the new turn's chunks to onChunk (nil:
// none); started (nil: none) is called with the run id once the run is
// begun. c.runID is set when it returns.
func (rt *responseTurn) run(ctx context.Context, started func(string), onChunk func(chat.Chunk)) chat.Outcome {
	hooks := &turnHooks{started: started, handoff: map[string]any{"responses": rt.meta}}
	ctx = withTurnHooks(ctx, hooks)
	if rt.meta.Instructions != nil {
		ctx = agent.WithInstructions(ctx, *rt.meta.Instructions)
	}
	if ap := rt.plan.approval; ap != nil {
		payload := agent.Deny(ap.reason)
		if ap.approve {
			payload = agent.Approve(ap.reason)
		}
		sig := &adapter.Signal{SignalID: ap.requestID, InvocationID: ap.invocationID, Payload: payload}
		rt.c.tools = map[string]chat.ToolStatus{}
		if rt.key != "" {
			sig.RequestID = approvalRequestID(rt.key)
		}
		if rt.key != "" && !rt.implicit {
			if out := rt.keyUsedBy(ctx, false); out != nil {
				return out
			}
			hooks.refusedByMessage = rt.key // and again under the session's lock
		}
		resp := rt.e.s.submit(ctx, rt.tenant, rt.a, rt.c.sessionID, adapter.SubmitRequest{Agent: rt.a.ID, Signal: sig})
		if e, ok := resp.Outcome.(*chat.Errored); ok && rt.key != "" && !rt.implicit && e.Category == errcat.HarnessSignalCorrelationFailed {
			// Nothing awaited the decision: a message sent with the same
			// key may have superseded it meanwhile (its key is recorded
			// with the write that did), which refuses the decision as
			// under the session's lock.
			if out := rt.keyUsedBy(ctx, false); out != nil {
				return out
			}
		}
		rt.c.runID = runIDOf(resp.Outcome, resp.RunID)
		if rt.c.runID != "" && resp.Outcome.Info().Replayed {
			// A retransmission answers when its first try was created,
			// as a message's does (runCompletion) and GET answers.
			if run, err := rt.e.s.runs.Store().Run(ctx, rt.tenant, rt.c.runID); err == nil {
				rt.c.created = run.StartedAt.Unix()
			}
		}
		if rt.c.runID != "" {
			// A resume streams no chunks (submit's signal path takes no
			// OnChunk): its failed and denied calls are read from the
			// run's events, as GET reads them.
			if tools, err := rt.e.failedTools(ctx, rt.tenant, rt.c.runID); err == nil {
				rt.c.tools = tools
			}
		}
		return resp.Outcome
	}
	if rt.key != "" && !rt.implicit {
		if out := rt.keyUsedBy(ctx, true); out != nil {
			rt.c.tools = map[string]chat.ToolStatus{}
			return out
		}
		hooks.refusedBySignal = approvalRequestID(rt.key) // and again under the session's lock
	}
	return rt.e.s.runCompletion(ctx, rt.tenant, rt.a, rt.c, rt.plan.turn, onChunk)
}

// approvalRequestID is the signal request id of a decision sent with
// Idempotency-Key key.
func approvalRequestID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "resp-approval:" + hex.EncodeToString(sum[:])
}

// keyUsedBy refuses (the errored outcome, message_id_reused) a request
// whose Idempotency-Key the session already recorded for the other kind
// of request: a decision's key for a message (message true), or a
// message's for a decision. The same key names one request: a message
// and a decision are recorded under different ids (the decision's is
// approvalRequestID), so without this each would run under a key that
// already answered the other. nil when the key is free.
func (rt *responseTurn) keyUsedBy(ctx context.Context, message bool) chat.Outcome {
	key := storeKey(rt.tenant, rt.c.sessionID)
	var err error
	if message {
		_, err = rt.a.Chat.ReplaySignal(ctx, chat.Signal{SessionID: key, RequestID: approvalRequestID(rt.key)})
	} else {
		_, err = rt.a.Chat.Replay(ctx, key, rt.key)
	}
	if err != nil && !errors.Is(err, chat.ErrMessageIDReused) {
		return nil // not recorded (or unreadable: the turn itself reads it again)
	}
	other := "a message"
	if message {
		other = "an approval decision"
	}
	return rt.a.Chat.ErroredOutcome(chat.Turn{SessionID: key}, fmt.Errorf("%w: the Idempotency-Key was given with %s in this session", chat.ErrMessageIDReused, other))
}

// turnError maps an errored turn to its HTTP failure (nil for other
// outcomes), as for chat completions, except for a decision that
// resumed nothing (harness_signal_correlation_failed): 409 when the
// approval was answered already (by a concurrent decision, or an
// earlier one), else 400 (a new message superseded it, or it was
// cancelled), each saying so rather than the user-correctable reply.
func (rt *responseTurn) turnError(ctx context.Context, out chat.Outcome) *Error {
	te := rt.c.turnError(out)
	ap := rt.plan.approval
	if te == nil || ap == nil || te.Code != string(errcat.HarnessSignalCorrelationFailed) {
		return te
	}
	e := &Error{Status: http.StatusBadRequest, Code: te.Code, Param: "input[0].approval_request_id", Err: te.Err,
		Message: "no turn awaits this approval: a new message superseded it, or it was cancelled"}
	if o, ok := out.(*chat.Errored); ok && errors.Is(o.Err, chat.ErrSuperseded) {
		// A message superseded it while this decision waited: no
		// decision took effect, whatever other runs are still open.
		e.Message = "no turn awaits this approval: a new message superseded it"
		return e
	}
	if tookEffect(out) || rt.e.answered(ctx, rt.tenant, rt.c.sessionID, rt.plan.previousID, rt.c.runID) {
		e.Status = http.StatusConflict
		e.Message = "this approval was already answered (by another decision, on this or another surface, or by this one in a request that was interrupted): the decision that took effect stands, and a new message continues the conversation"
	}
	return e
}

// answeredPages bounds how many pages of the suspended response's
// children answered reads (runtime.ListRunsRequest.ParentID; a store
// that ignores the filter has the session's runs read, newest first).
const answeredPages = 4

// answered reports whether a decision answered the approval of prev, a
// suspended response of the tenant's session: a run other than own
// resumed it (a run whose parent it is) and was neither refused
// (resumedSomething) nor cancelled (POST /v1/runs/{id}/cancel closes a
// suspension with a cancelled child run).
func (e *responsesEndpoint) answered(ctx context.Context, tenant, sessionID, prev, own string) bool {
	req := runtime.ListRunsRequest{Tenant: tenant, SessionID: sessionID, ParentID: prev, PageSize: runtime.MaxPageSize}
	for range answeredPages {
		page, err := e.s.runs.Store().ListRuns(ctx, req)
		if err != nil {
			return false
		}
		for _, r := range page.Runs {
			switch {
			case r.ID == prev:
				return false // newest first: no run after it resumed it
			case r.ParentID != prev || r.ID == own || r.Status == runtime.StatusCancelled:
			case r.Error != nil && !resumedSomething(errcat.Category(r.Error.Category)):
				// a decision that resumed nothing: it correlated with no
				// turn, its payload or the suspension record was refused,
				// or it never got the session
			default:
				return true
			}
		}
		if page.NextPageToken == "" {
			return false
		}
		req.PageToken = page.NextPageToken
	}
	return false
}

// session resolves the request's session: the X-Armature-Session-Id
// header, metadata.session_id and the previous response's session, which
// must agree; else a fresh one.
func (e *responsesEndpoint) session(ctx context.Context, tenant, header string, p *responsePlan) (sessionChoice, error) {
	sid, err := completionSession(header, p.sessionID)
	if err != nil || p.previousID == "" {
		return sid, err
	}
	run, meta, err := e.lookup(ctx, tenant, p.previousID)
	if err != nil {
		return sessionChoice{}, err
	}
	if run == nil || !meta.Store {
		return sessionChoice{}, previousNotFound("previous_response_id names no stored response (unknown, or stored with store: false)")
	}
	if !sid.fresh && sid.id != run.SessionID {
		return sessionChoice{}, badParam("previous_response_id", "previous_response_id continues another session than %s or metadata.session_id names", SessionHeader)
	}
	if ok, err := e.sameConversation(ctx, tenant, run); err != nil {
		return sessionChoice{}, err
	} else if !ok {
		return sessionChoice{}, previousNotFound("previous_response_id names a response whose session was deleted")
	}
	if p.approval != nil {
		if run.Status != runtime.StatusSuspended || run.InvocationID == "" {
			// Only the response that asked for an approval can answer it:
			// any other would leave the decision bound to no turn, and
			// it could resume a later one asking under the same id.
			return sessionChoice{}, &Error{Status: http.StatusBadRequest, Code: string(errcat.HarnessSignalCorrelationFailed), Param: "previous_response_id",
				Message: "previous_response_id names a response that awaits no approval: answer an mcp_approval_request with the id of the response that holds it"}
		}
		p.approval.invocationID = run.InvocationID
	}
	return sessionChoice{id: run.SessionID}, nil
}

// sameConversation reports whether the session of run (a response
// previous_response_id names) is still the conversation the response
// belonged to. A session deleted since is not: its run records may
// outlive it (--keep-runs-on-delete, or a crash between the delete and
// the purge of its runs), and the same id may already hold a new
// conversation, which a stale previous_response_id must not continue or
// answer an approval in. A response that wrote its session (completed
// or suspended) needs the session to exist, begun no later than the
// response ended. One that did not (failed, cancelled) tells nothing
// about the conversation: its turn left no trace, and the session may
// well have been begun after it by the client's next message, so it
// continues whatever the session holds.
func (e *responsesEndpoint) sameConversation(ctx context.Context, tenant string, run *runtime.Run) (bool, error) {
	if run.Status != runtime.StatusCompleted && run.Status != runtime.StatusSuspended {
		return true, nil
	}
	created, err := e.s.sessionCreated(ctx, storeKey(tenant, run.SessionID))
	switch {
	case errors.Is(err, session.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return run.EndedAt.IsZero() || !created.After(run.EndedAt), nil
}

// responseOutcome is the outcome of a completed or suspended run's turn,
// as GET /v1/responses/{id} shows it: the one the turn recorded with its
// session write, or, once that expired (the session store's mark
// retention, a day by default, while run records are kept for weeks),
// one rebuilt from the run record, as long as the run's session is
// still its conversation (sameConversation). The error wraps
// chat.ErrNotRecorded when there is neither.
func (e *responsesEndpoint) responseOutcome(ctx context.Context, a *Agent, tenant string, run *runtime.Run) (chat.Outcome, error) {
	key := storeKey(tenant, run.SessionID)
	out, err := a.Chat.Recorded(ctx, key, runRecordKey(run.ID))
	if !errors.Is(err, chat.ErrNotRecorded) {
		return out, err
	}
	if ok, cerr := e.sameConversation(ctx, tenant, run); cerr != nil {
		return nil, cerr
	} else if !ok {
		return nil, err
	}
	t := chat.Turn{SessionID: key, InvocationID: run.ID, Resumed: run.ParentID != "", Replayed: true}
	if t.Resumed {
		// A resume's turn is its suspended invocation's.
		if parent, perr := e.s.runs.Store().Run(ctx, tenant, run.ParentID); perr == nil && parent.InvocationID != "" {
			t.InvocationID = parent.InvocationID
		}
	}
	switch run.Status {
	case runtime.StatusCompleted:
		var o struct {
			Replies      []llm.Message    `json:"replies"`
			FinishReason llm.FinishReason `json:"finish_reason"`
		}
		if len(run.Output) == 0 || json.Unmarshal(run.Output, &o) != nil {
			return nil, err
		}
		t.FinishReason = o.FinishReason
		if o.Replies == nil {
			o.Replies = []llm.Message{}
		}
		return &chat.Completed{Turn: t, Replies: o.Replies}, nil
	case runtime.StatusSuspended:
		t.InvocationID = run.InvocationID
		return e.suspendedOfRun(ctx, tenant, run, t, err)
	}
	return nil, err
}

// suspendedOfRun rebuilds a suspended run's outcome from its last events
// (runtime.request.suspended: the signal; runtime.approval.requested:
// the pending messages); notRecorded when they are not found.
func (e *responsesEndpoint) suspendedOfRun(ctx context.Context, tenant string, run *runtime.Run, t chat.Turn, notRecorded error) (chat.Outcome, error) {
	var (
		sig struct {
			Signal *graph.SignalDescriptor `json:"signal"`
		}
		appr struct {
			Approval struct {
				PendingMessages []llm.Message `json:"pending_messages"`
			} `json:"approval"`
		}
	)
	err := e.eachRunEvent(ctx, tenant, run.ID, func(ev *runtime.Event) {
		switch ev.Type {
		case runtime.EventRequestSuspended:
			_ = json.Unmarshal(ev.Data, &sig)
		case runtime.EventApprovalRequested:
			_ = json.Unmarshal(ev.Data, &appr)
		}
	})
	if err != nil {
		return nil, err
	}
	if sig.Signal == nil || sig.Signal.SignalID == "" {
		return nil, notRecorded
	}
	pending := appr.Approval.PendingMessages
	if pending == nil {
		pending = []llm.Message{}
	}
	return &chat.Suspended{Turn: t, Descriptor: *sig.Signal, PendingMessages: pending}, nil
}

// lookup reads the tenant's run id and what its response echoes (nil,
// nil when there is no such run). A run of another surface is a stored
// response with nothing to echo.
func (e *responsesEndpoint) lookup(ctx context.Context, tenant, id string) (*runtime.Run, *responseMeta, error) {
	if !validID(id) {
		return nil, nil, nil
	}
	run, err := e.s.runs.Store().Run(ctx, tenant, id)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	}
	meta := &responseMeta{Store: true}
	evs, err := e.s.runs.Store().Events(ctx, runtime.EventsRequest{Tenant: tenant, RunID: id, Limit: 8})
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return nil, nil, nil // deleted with its session since the read above
	case err != nil:
		return nil, nil, err
	}
	for _, ev := range evs {
		if ev.Type != runtime.EventAdapterEvent {
			continue
		}
		var d struct {
			Event struct {
				Phase     string        `json:"phase"`
				Responses *responseMeta `json:"responses"`
			} `json:"event"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.Event.Phase == runtime.PhaseHandoff {
			if d.Event.Responses != nil {
				meta = d.Event.Responses
			}
			break
		}
	}
	return run, meta, nil
}

// --- GET /v1/responses/{id} ---

// get serves GET /v1/responses/{id}: the response of a run of the
// tenant, rebuilt from the run record and the outcome its turn recorded
// with its session write.
func (e *responsesEndpoint) get(w http.ResponseWriter, r *http.Request) error {
	notFound := &Error{Status: http.StatusNotFound, Code: CodeNotFound,
		Message: "no stored response has this id (unknown, stored with store: false, or its session was deleted)"}
	err := e.getResponse(w, r, notFound)
	if errors.Is(err, runtime.ErrNotFound) {
		// The run was deleted with its session between two reads.
		return notFound
	}
	return err
}

// getResponse serves get; the run's records may go (its session
// deleted) between its reads: runtime.ErrNotFound then.
func (e *responsesEndpoint) getResponse(w http.ResponseWriter, r *http.Request, notFound *Error) error {
	ctx, tenant := r.Context(), tenantOf(r)
	run, meta, err := e.lookup(ctx, tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	if run == nil || !meta.Store {
		return notFound
	}
	a := e.s.agents[run.AgentID]
	if a == nil {
		return notFound
	}
	created := run.StartedAt.Unix()
	switch run.Status {
	case runtime.StatusStarted:
		writeJSON(w, http.StatusOK, meta.object(run.ID, a.ID, created, statusInProgress))
		return nil
	case runtime.StatusCancelled, runtime.StatusFailed:
		// As the stream ended it: the status and error of endedResponse,
		// and the output the turn produced before it ended.
		status, rerr := endedResponse(run)
		resp := meta.object(run.ID, a.ID, created, status)
		resp.Error = rerr
		if resp.Output, err = e.partialOutput(ctx, tenant, run.ID); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
	out, err := e.responseOutcome(ctx, a, tenant, run)
	switch {
	case errors.Is(err, chat.ErrNotRecorded):
		return notFound
	case err != nil:
		return err
	}
	tools, err := e.failedTools(ctx, tenant, run.ID)
	if err != nil {
		return err
	}
	c := &completion{model: a.ID, sessionID: run.SessionID, runID: run.ID, tools: tools}
	resp := final(ctx, a, tenant, c, meta, created, out)
	var recorded struct {
		Usage        map[string]int   `json:"usage"`
		FinishReason llm.FinishReason `json:"finish_reason"`
	}
	if len(run.Output) > 0 && json.Unmarshal(run.Output, &recorded) == nil {
		u := recorded.Usage
		resp.Usage = responseUsage(usageJSON{PromptTokens: u["prompt_tokens"], CompletionTokens: u["completion_tokens"], TotalTokens: u["total_tokens"]})
		if resp.Usage.TotalTokens == 0 {
			resp.Usage.TotalTokens = resp.Usage.InputTokens + resp.Usage.OutputTokens
		}
		resp.Usage.InputTokensDetails.CachedTokens = u["cached_tokens"]
		switch recorded.FinishReason {
		case llm.FinishLength:
			resp.Status, resp.IncompleteDetails = statusIncomplete, &incompleteJSON{Reason: "max_output_tokens"}
		case llm.FinishContentFilter:
			resp.Status, resp.IncompleteDetails = statusIncomplete, &incompleteJSON{Reason: "content_filter"}
		}
	}
	resp.XArmature.Replayed = false
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// endedResponse is the status and error of the response of a run that
// failed or was cancelled, as its stream's response.failed event and
// GET /v1/responses/{id} both report it. A cancelled run (POST
// /v1/runs/{id}/cancel, or a server stopping) is status cancelled with
// error invocation_cancelled and cancelledReply; a failed one is status
// failed with the run's error: its category as code (its bucket when it
// has none) and the message the client was given (upstreamFault's for
// the server's own upstream).
func endedResponse(run *runtime.Run) (string, *responseErrorJSON) {
	if run.Status == runtime.StatusCancelled {
		return statusCancelled, &responseErrorJSON{Code: string(errcat.InvocationCancelled), Message: cancelledReply}
	}
	e := &responseErrorJSON{Code: string(harness.RetryableTransient), Message: "The response failed."}
	if re := run.Error; re != nil {
		switch {
		case re.Category != "":
			e.Code = re.Category
		case re.Bucket != "":
			e.Code = re.Bucket
		}
		if re.Message != "" {
			e.Message = re.Message
		}
		if msg, ok := upstreamFault[errcat.Category(re.Category)]; ok {
			e.Message = msg
		}
	}
	return statusFailed, e
}

// partialOutput rebuilds the output of a run that failed or was
// cancelled from its events, as its stream built it from the turn's
// chunks: the text it streamed as messages (the last one, cut short,
// incomplete) and its tool calls as mcp_call items (in progress when
// the turn ended before their result).
func (e *responsesEndpoint) partialOutput(ctx context.Context, tenant, runID string) ([]outputItemJSON, error) {
	st := &streamState{rs: &responseStream{}, runID: runID, openMsg: -1}
	err := e.eachRunEvent(ctx, tenant, runID, func(ev *runtime.Event) {
		if ev.Type != runtime.EventAdapterEvent {
			return
		}
		var d struct {
			Event struct {
				Phase  string          `json:"phase"`
				Text   string          `json:"text"`
				ToolID string          `json:"toolId"`
				Name   string          `json:"name"`
				Args   json.RawMessage `json:"args"`
				Output *string         `json:"output"`
				Error  *string         `json:"error"`
			} `json:"event"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			return
		}
		switch x := d.Event; x.Phase {
		case runtime.PhaseOutputDelta:
			st.delta(x.Text)
		case runtime.PhaseToolStart:
			st.tool(&chat.ToolProgress{CallID: x.ToolID, Name: x.Name, Status: chat.ToolRunning, Arguments: x.Args})
		case runtime.PhaseToolResult:
			p := &chat.ToolProgress{CallID: x.ToolID, Name: x.Name, Status: chat.ToolCompleted}
			switch {
			case x.Error != nil:
				p.Status, p.Result = chat.ToolFailed, *x.Error
			case x.Output != nil:
				p.Result = *x.Output
			}
			st.tool(p)
		}
	})
	if err != nil {
		return nil, err
	}
	if st.openMsg >= 0 {
		st.closeMessage(st.text.String(), statusIncomplete)
	}
	if st.items == nil {
		return []outputItemJSON{}, nil
	}
	return st.items, nil
}

// failedTools reads the tool calls of run id whose result its events
// record as an error (agent.tool.result with an error), as the POST
// that answered the run knew them from the turn's stream: their
// mcp_call items are failed.
func (e *responsesEndpoint) failedTools(ctx context.Context, tenant, id string) (map[string]chat.ToolStatus, error) {
	tools := map[string]chat.ToolStatus{}
	err := e.eachRunEvent(ctx, tenant, id, func(ev *runtime.Event) {
		if ev.Type != runtime.EventAdapterEvent {
			return
		}
		var d struct {
			Event struct {
				Phase  string `json:"phase"`
				ToolID string `json:"toolId"`
				Error  string `json:"error"`
			} `json:"event"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.Event.Phase == runtime.PhaseToolResult && d.Event.Error != "" {
			tools[d.Event.ToolID] = chat.ToolFailed
		}
	})
	if err != nil {
		return nil, err
	}
	return tools, nil
}

// eachRunEvent calls fn with each of the tenant's run id's events, in
// order, reading them a page at a time.
func (e *responsesEndpoint) eachRunEvent(ctx context.Context, tenant, id string, fn func(*runtime.Event)) error {
	req := runtime.EventsRequest{Tenant: tenant, RunID: id, Limit: runtime.MaxEventsLimit}
	for {
		evs, err := e.s.runs.Store().Events(ctx, req)
		if err != nil {
			return err
		}
		for i := range evs {
			fn(&evs[i])
		}
		if len(evs) < req.Limit {
			return nil
		}
		req.AfterID = evs[len(evs)-1].ID
	}
}
