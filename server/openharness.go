package server

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// The OpenHarness v1 endpoint (PROTOCOLS.md §1-§2):
//
//	POST /v1/openharness   an OpenHarness request message → a response message
//
// Its wire identifiers follow. They are part of the published mapping and
// must not change.
const (
	// ohVersion is the wire format version every response carries, and
	// the only entry of supported_protocol_versions. Requests of any 1.x.y
	// version are accepted.
	ohVersion = "1.0.0"
	// ohNamespace keys Armature's extensions: request.context.extensions,
	// response.extensions and directive extensions.
	ohNamespace = "dev.armature"
	// Action types this engine emits.
	ohRenderMessage   = "render_message"
	ohRequestApproval = "request_approval"
	ohToolCall        = ohNamespace + ".tool_call"
	ohToolResult      = ohNamespace + ".tool_result"
	// Protocol-level error codes (turn errors carry the error category).
	ohCodeVersionUnsupported = "protocol_version_unsupported"
	ohCodeInvalidRequest     = "invalid_request"
	ohCodeBodyTooLarge       = "body_too_large"
	// ohCodeCapabilityRequired answers a request whose turn needs a
	// capability the Shell declared false (see approvalUnsupported).
	ohCodeCapabilityRequired = "capability_required"
	// ohCapApproval is the capability of showing request_approval.
	ohCapApproval = "openharness.ui.approval"
	// ohTaskHintAgent is the namespaced task_hint key naming an agent (or
	// a Config.TaskHints route) explicitly.
	ohTaskHintAgent = ohNamespace + ".agent"
	// ohTokenPrefix starts every continuation token this engine issues.
	ohTokenPrefix = "oh1."
)

// ohMemoCapacity and ohMemoBytes bound each of the endpoint's two
// in-memory caches (request ids and spent continuation tokens): entries,
// and the encoded size of the remembered responses.
const (
	ohMemoCapacity = 4096
	ohMemoBytes    = 32 << 20
)

// ohMaxRequestID bounds a request_id (it is kept as a cache key).
const ohMaxRequestID = 256

// Capability keys the endpoint understands (PROTOCOL.md §5.3). Every one
// a request names is answered, in supported_capabilities or in
// capability_denials; other keys are ignored.
var ohCapabilities = map[string]ohDenial{
	"openharness.attachments.upload": {Code: "not_supported",
		Message: "this engine has no upload store: attachments are resolved by uri only (http(s) image references); ref_id and asset_id are not"},
	ohCapApproval: {},
	"openharness.streaming": {Code: "not_supported",
		Message: "no OpenHarness streaming profile is published yet; use the chat SSE or the OpenAI-compatible endpoint"},
	"openharness.actions.parallel": {Code: "not_supported", Message: "this engine emits sequential directives only"},
	"openharness.ui.rich_cards":    {Code: "not_supported", Message: "this engine emits plain messages, no rich cards"},
}

// ---- wire types -----------------------------------------------------

// ohRequest is an OpenHarness request message. Unknown fields are
// ignored at every level; the fields below are the schema's, so a parsed
// request re-encodes without losing any field the schema names. Open
// objects (capabilities, extensions) are kept as raw JSON.
type ohRequest struct {
	ProtocolVersion string                     `json:"protocol_version"`
	RequestID       string                     `json:"request_id,omitempty"`
	CorrelationID   string                     `json:"correlation_id,omitempty"`
	Capabilities    map[string]json.RawMessage `json:"capabilities,omitzero"`
	Request         *ohRequestPayload          `json:"request,omitempty"`
}

type ohRequestPayload struct {
	Auth       *ohAuth                    `json:"auth,omitempty"`
	Context    *ohContext                 `json:"context,omitempty"`
	Extensions map[string]json.RawMessage `json:"extensions,omitzero"`
}

type ohAuth struct {
	TenantID      string `json:"tenant_id,omitempty"`
	CredentialRef string `json:"credential_ref,omitempty"`
	SessionID     string `json:"session_id,omitempty"`
}

type ohContext struct {
	SessionID        string                     `json:"session_id,omitempty"`
	ConversationID   string                     `json:"conversation_id,omitempty"`
	UserIntent       string                     `json:"user_intent,omitempty"`
	TaskHint         map[string]json.RawMessage `json:"task_hint,omitzero"`
	Continuation     *ohContinuation            `json:"continuation,omitempty"`
	EnvironmentState *ohEnvironment             `json:"environment_state,omitempty"`
	Attachments      []ohAttachment             `json:"attachments,omitzero"`
	Shell            *ohShell                   `json:"shell,omitempty"`
	Extensions       map[string]json.RawMessage `json:"extensions,omitzero"`
}

type ohContinuation struct {
	RunID             string `json:"run_id,omitempty"`
	SOPID             string `json:"sop_id,omitempty"`
	ContinuationToken string `json:"continuation_token,omitempty"`
}

type ohEnvironment struct {
	PrivacyTier  string `json:"privacy_tier,omitempty"`
	OS           string `json:"os,omitempty"`
	ActiveWindow string `json:"active_window,omitempty"`
	ScreenHash   string `json:"screen_hash,omitempty"`
}

type ohAttachment struct {
	RefID     string `json:"ref_id,omitempty"`
	URI       string `json:"uri,omitempty"`
	AssetID   string `json:"asset_id,omitempty"`
	MimeType  string `json:"mime_type,omitempty"`
	Filename  string `json:"filename,omitempty"`
	SizeBytes *int64 `json:"size_bytes,omitempty"`
}

type ohShell struct {
	ShellKind    string `json:"shell_kind,omitempty"`
	ShellVersion string `json:"shell_version,omitempty"`
	Locale       string `json:"locale,omitempty"`
	Timezone     string `json:"timezone,omitempty"`
}

// ohResponse is an OpenHarness response message.
type ohResponse struct {
	ProtocolVersion           string                     `json:"protocol_version"`
	RequestID                 string                     `json:"request_id,omitempty"`
	CorrelationID             string                     `json:"correlation_id,omitempty"`
	SupportedProtocolVersions []string                   `json:"supported_protocol_versions,omitzero"`
	SupportedCapabilities     map[string]json.RawMessage `json:"supported_capabilities,omitzero"`
	CapabilityDenials         []ohDenial                 `json:"capability_denials,omitzero"`
	Response                  ohResponsePayload          `json:"response"`

	// replayed marks the answer to a retransmission: the recorded
	// response, or one rebuilt from the recorded outcome (the
	// Idempotent-Replayed header).
	replayed bool
	// retryAfter is the wait, in seconds, a rate-limited upstream asked
	// for (0 for none): the Retry-After header, as on the other routes.
	retryAfter int
	// raw is the response's encoding once the memo measured it (settle),
	// written as is rather than encoded again.
	raw json.RawMessage
	// recorded marks a response rendered from a turn the store records
	// (one that ran under a run, or the recorded outcome of one): only
	// such a response may answer the request_id's retransmissions from
	// memory. A refusal that ran nothing (a malformed message or
	// payload) records nothing: its request_id's corrected request runs,
	// as it does once the memory is gone (a restart, another replica).
	recorded bool
}

// ohGeneration names one generation of a session: its store key and
// when it was created (zero: it did not exist). A session deleted and
// written again is another generation, created later.
type ohGeneration struct {
	key     string
	created time.Time
}

type ohDenial struct {
	Capability string `json:"capability"`
	Code       string `json:"code,omitempty"`
	Message    string `json:"message,omitempty"`
}

type ohResponsePayload struct {
	Status           string                     `json:"status"`
	EngineLatencyMS  *float64                   `json:"engine_latency_ms,omitempty"`
	ActionDirectives []ohDirective              `json:"action_directives,omitzero"`
	Error            *ohError                   `json:"error,omitempty"`
	Extensions       map[string]json.RawMessage `json:"extensions,omitzero"`
}

type ohDirective struct {
	ActionType           string                     `json:"action_type"`
	Priority             string                     `json:"priority,omitempty"`
	Execution            string                     `json:"execution,omitempty"`
	RiskTier             string                     `json:"risk_tier,omitempty"`
	RequiresUserApproval *bool                      `json:"requires_user_approval,omitempty"`
	DeadlineMS           *int64                     `json:"deadline_ms,omitempty"`
	Payload              json.RawMessage            `json:"payload,omitempty"`
	Extensions           map[string]json.RawMessage `json:"extensions,omitzero"`
}

type ohError struct {
	Code      string          `json:"code"`
	Message   string          `json:"message,omitempty"`
	Retryable *bool           `json:"retryable,omitempty"`
	Details   json.RawMessage `json:"details,omitempty"`
}

// ohExtension is response.extensions["dev.armature"].
type ohExtension struct {
	// SessionID is the session the request ran in: the caller's, or the
	// one minted for a request that named none.
	SessionID string `json:"session_id"`
	Agent     string `json:"agent,omitempty"`
	// Outcome is completed, suspended or errored.
	Outcome string `json:"outcome"`
	// RunID is the id of the run that answered: GET /v1/runs/{id}. For a
	// new turn it is also the turn's invocation id; a resumed turn is a
	// new run, whose parent is the suspended one.
	RunID string `json:"run_id,omitempty"`
	// InvocationID is the graph invocation the turn belongs to (a
	// resumed turn continues its suspended invocation).
	InvocationID string `json:"invocation_id,omitempty"`
	// ConversationID echoes context.conversation_id (recorded on the
	// run; it does not split the session's history).
	ConversationID string `json:"conversation_id,omitempty"`
	Resumed        bool   `json:"resumed,omitempty"`
	// Replayed marks the recorded answer to a retransmission (a
	// request_id or continuation token seen before, also across
	// restarts): no turn ran.
	Replayed bool `json:"replayed,omitempty"`
	// Superseded lists the signal ids of suspended turns this message
	// closed (their continuations no longer resume anything).
	Superseded []string `json:"superseded,omitempty"`
	// Usage is the token usage the turn's model calls reported, summed
	// (prompt_tokens, completion_tokens, total_tokens, cached_tokens,
	// model_calls), and FinishReason the last call's finish reason.
	Usage        map[string]int `json:"usage,omitempty"`
	FinishReason string         `json:"finish_reason,omitempty"`
	// Continuation resumes a suspended turn (also in the
	// request_approval directive).
	Continuation *ohContinuation `json:"continuation,omitempty"`
	// UnusedAttachments are the indexes of attachments that did not
	// become content (only image references with an http(s) uri do).
	UnusedAttachments []int `json:"unused_attachments,omitempty"`
}

// ohContextExtension is request.context.extensions["dev.armature"]: the
// typed answer to a suspension. SignalPayload is the resume payload
// itself; Option names one of the request_approval directive's options,
// whose signal_payload is the resume payload. Without either, a
// continuation's payload is {"user_reply": user_intent}, for the graph to
// interpret: the endpoint never decides from the user's prose.
type ohContextExtension struct {
	SignalPayload json.RawMessage `json:"signal_payload"`
	Option        *string         `json:"option"`
}

// ---- parsing --------------------------------------------------------

// ohFailure is a request the endpoint answers without running a turn:
// an HTTP status (200 for protocol-level errors), a code, a safe message
// and the offending field.
type ohFailure struct {
	status  int
	code    string
	message string
	field   string
}

var ohSemver = regexp.MustCompile(`^(\d+)\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// parseOHRequest parses and validates a request body. The request is
// non-nil whenever the body is a JSON object, carrying at least the
// request_id and correlation_id (when they are strings) so that even an
// error response echoes them.
func parseOHRequest(body []byte) (*ohRequest, *ohFailure) {
	if !jsonvalid.Valid(body) {
		if ohTooDeep(body) {
			return nil, &ohFailure{status: http.StatusBadRequest, code: ohCodeInvalidRequest,
				message: fmt.Sprintf("the body nests arrays and objects more than %d levels deep", ohMaxDepth)}
		}
		return nil, &ohFailure{status: http.StatusBadRequest, code: ohCodeInvalidRequest, message: "the body is not valid JSON"}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, &ohFailure{status: http.StatusBadRequest, code: ohCodeInvalidRequest, message: "the body is not a JSON object"}
	}
	req := &ohRequest{}
	_ = json.Unmarshal(top["request_id"], &req.RequestID)
	_ = json.Unmarshal(top["correlation_id"], &req.CorrelationID)
	if err := json.Unmarshal(top["protocol_version"], &req.ProtocolVersion); err != nil {
		req.ProtocolVersion = ""
	}
	if m := ohSemver.FindStringSubmatch(req.ProtocolVersion); m == nil || m[1] != "1" {
		return req, &ohFailure{status: http.StatusOK, code: ohCodeVersionUnsupported,
			message: "this engine accepts the 1.x wire format only", field: "protocol_version"}
	}
	full := &ohRequest{}
	if err := json.Unmarshal(jsonexact.Filter(body, ohRequestType), full); err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		}
		msg := "a field has the wrong type"
		if field != "" {
			msg = fmt.Sprintf("%s has the wrong type", field)
		}
		return req, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, message: msg, field: field}
	}
	req = full
	if len(req.CorrelationID) > ohMaxRequestID {
		return req, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: "correlation_id",
			message: fmt.Sprintf("correlation_id must not exceed %d bytes", ohMaxRequestID)}
	}
	if !ohText(req.CorrelationID) {
		// It is recorded on the turn's run: an id the run store refuses
		// would leave the turn without its run, and one with C1 or
		// format characters would read as another in logs.
		return req, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: "correlation_id",
			message: "correlation_id must be UTF-8 without control or format characters"}
	}
	if len(req.RequestID) > ohMaxRequestID {
		req.RequestID = ""
		return req, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: "request_id",
			message: fmt.Sprintf("request_id must not exceed %d bytes", ohMaxRequestID)}
	}
	if !ohText(req.RequestID) {
		// It is the turn's message id, stored with the turn and logged.
		return req, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: "request_id",
			message: "request_id must be UTF-8 without control or format characters"}
	}
	if f := req.validate(); f != nil {
		return req, f
	}
	return req, nil
}

// ohText reports whether s can be an id the endpoint records and logs
// (correlation_id, conversation_id, request_id): valid UTF-8 without
// control characters (C0, DEL and C1, U+0080-U+009F) or format
// characters (bidi overrides, zero-width ones), as agent ids are checked
// (controlOrFormat).
func ohText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, controlOrFormat)
}

// ohMaxDepth is the deepest nesting of arrays and objects a body may
// have: encoding/json's limit, past which it is refused as invalid.
const ohMaxDepth = jsonvalid.MaxDepth

// ohTooDeep reports whether body nests arrays and objects more than
// ohMaxDepth levels deep, counting brackets outside strings, so that a
// body jsonvalid refuses for its depth is refused for what it is rather
// than as "not JSON".
func ohTooDeep(body []byte) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range body {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > ohMaxDepth {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

// validate checks what the schema constrains beyond types: required
// objects, closed enums and bounds.
func (r *ohRequest) validate() *ohFailure {
	bad := func(field, msg string) *ohFailure {
		return &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, message: msg, field: field}
	}
	if r.Request == nil {
		return bad("request", "request is required")
	}
	c := r.Request.Context
	if c == nil {
		return nil
	}
	if len(c.ConversationID) > ohMaxRequestID || !ohText(c.ConversationID) {
		return bad("request.context.conversation_id",
			fmt.Sprintf("conversation_id must be at most %d bytes of UTF-8 without control or format characters", ohMaxRequestID))
	}
	if e := c.EnvironmentState; e != nil && e.PrivacyTier != "" {
		switch e.PrivacyTier {
		case "public", "restricted", "secret":
		default:
			return bad("request.context.environment_state.privacy_tier", "privacy_tier must be public, restricted or secret")
		}
	}
	for i, a := range c.Attachments {
		if a.SizeBytes != nil && *a.SizeBytes < 0 {
			return bad(fmt.Sprintf("request.context.attachments[%d].size_bytes", i), "size_bytes must not be negative")
		}
	}
	return nil
}

// ---- the endpoint ---------------------------------------------------

// ohEndpoint serves POST /v1/openharness. Its two caches are in memory
// and per Server, for the latest ohMemoCapacity entries within
// ohMemoBytes: they make a retransmission that races its original wait
// for it, and answer repeats with one read of the session's record
// rather than of its outcomes. What makes idempotency durable, and what
// every replica answers alike, is the store: request ids are chat
// message ids and spent tokens chat signal request ids, recorded with
// their turns. A remembered answer is only a fast path: it answers
// while its session is the one it answered in (same creation time,
// see current); once the session is deleted, here or on another
// replica (and maybe begun again by a retransmission another replica
// ran), the entry is dropped and the store answers, as for REST
// message_id and the OpenAI Idempotency-Key.
//
// A request_id names one request. The same request_id (for the same
// tenant and session as sent) with the same request is a retransmission,
// answered with the recorded answer; with another request it is refused,
// errored with code message_id_reused (user_correctable, not retryable,
// details.field request_id), and runs nothing. "The same request" is
// compared canonically on what determines the turn (see
// ohRequest.fingerprint): in the cache, all of it; from the store (after
// a restart, or past the cache), the user message, as the chat harness
// recorded it, and the agent of the first run. A continuation's
// request_id is recorded with its turn too (chat.Signal.RequestAlias):
// from the store, a message sent with it is refused, and a continuation
// sent with a message's (or another continuation's) request_id; the
// continuation itself (its token or run_id) is what resumes once,
// durably, and its retransmission answers the recorded outcome.
//
// A continuation resumes its suspension once. Any later continuation of
// the same suspension (a retransmission, the same token under another
// request_id, the run_id after the token or the token after the run_id,
// the token of a replayed suspension) answers the recorded outcome of
// the turn that resumed it, marked replayed, before or after a restart
// (recordedResume); it never applies its decision to a later suspension
// of the same invocation (a second approval), which awaits its own.
type ohEndpoint struct {
	s *Server
	// requests: (tenant, session_id as sent, request_id) → response.
	requests *ohMemo
	// tokens: (tenant, continuation_token) → the resumed turn's response.
	tokens *ohMemo
}

// openHarness returns the POST /v1/openharness handler.
func (s *Server) openHarness() handlerFunc {
	e := &ohEndpoint{s: s, requests: newOHMemo(ohMemoCapacity, ohMemoBytes), tokens: newOHMemo(ohMemoCapacity, ohMemoBytes)}
	return e.serve
}

func (e *ohEndpoint) serve(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	body, err := readBody(r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			e.writeFailure(w, nil, &ohFailure{status: http.StatusRequestEntityTooLarge, code: ohCodeBodyTooLarge,
				message: fmt.Sprintf("the request body exceeds %d bytes", mbe.Limit)})
			return nil
		}
		fail := &ohFailure{status: http.StatusBadRequest, code: ohCodeInvalidRequest, message: "the body could not be read"}
		var ae *Error
		if errors.As(err, &ae) && ae.Status == http.StatusRequestTimeout { // a body sent too slowly
			fail.status, fail.code, fail.message = ae.Status, ae.Code, ae.Message
		}
		e.writeFailure(w, nil, fail)
		return nil
	}
	req, fail := parseOHRequest(body)
	if fail != nil {
		e.writeFailure(w, req, fail)
		return nil
	}
	ctx := r.Context()
	if req.RequestID == "" {
		// The HTTP profile's idempotency header stands for request_id.
		// One it cannot take is refused, not ignored: ignored, a
		// retransmission would run the turn again.
		if rid := r.Header.Get("X-Request-ID"); rid != "" {
			if !ohHeaderSafe(rid) {
				e.writeFailure(w, req, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: "X-Request-ID",
					message: "the X-Request-ID header must be 1 to 128 visible ASCII characters (or send request_id)"})
				return nil
			}
			req.RequestID = rid
		}
	}
	if c := req.Request.Context; c != nil {
		ctx = withConversation(ctx, c.ConversationID) // recorded on the turn's run
	}
	if cid := req.correlationID(r); cid != "" {
		ctx = withCorrelation(ctx, cid) // recorded on the turn's run
		if ohHeaderSafe(cid) {
			w.Header().Set("X-Correlation-ID", cid)
		}
	}
	resp, fail := e.answer(ctx, tenantOf(r), req, r, start)
	if fail != nil {
		e.writeFailure(w, req, fail)
		return nil
	}
	if resp == nil { // the client left while waiting for a retransmitted original
		return nil
	}
	if resp.replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if resp.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(resp.retryAfter))
	}
	raw := resp.raw
	if raw == nil {
		raw = resp.encode()
	}
	writeRawJSON(w, http.StatusOK, raw)
	return nil
}

// correlationID is the request's correlation id: the body's, else the
// X-Correlation-ID header's.
func (r *ohRequest) correlationID(hr *http.Request) string {
	if r.CorrelationID != "" {
		return r.CorrelationID
	}
	if h := hr.Header.Get("X-Correlation-ID"); h != "" && ohHeaderSafe(h) {
		return h
	}
	return ""
}

// ohHeaderSafe reports whether s can be a header value: 1-128 visible
// ASCII characters.
func ohHeaderSafe(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// answer runs the request: the idempotency check, then a continuation
// (signal resume) or a new turn (send). A nil response with a nil
// failure means ctx ended while waiting for the original of a
// retransmission.
func (e *ohEndpoint) answer(ctx context.Context, tenant string, req *ohRequest, hr *http.Request, start time.Time) (*ohResponse, *ohFailure) {
	c := req.Request.Context
	if c == nil {
		c = &ohContext{}
	}
	sessionGiven, sessionField := c.SessionID, "request.context.session_id"
	if auth := req.Request.Auth; auth != nil && auth.SessionID != "" {
		switch {
		case sessionGiven == "":
			sessionGiven, sessionField = auth.SessionID, "request.auth.session_id"
		case auth.SessionID != sessionGiven:
			// Which one the Shell meant is a guess: the turn would run
			// in one of two conversations.
			return nil, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: "request.auth.session_id",
				message: "auth.session_id and context.session_id name different sessions"}
		}
	}
	if sessionGiven != "" && !validID(sessionGiven) {
		return nil, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: sessionField,
			message: "session_id must be 1-128 characters of [A-Za-z0-9._:-]"}
	}
	choice, fail := c.choice()
	if fail != nil {
		return nil, fail
	}
	var a *Agent
	cont := c.Continuation
	if cont != nil && cont.RunID == "" && cont.ContinuationToken == "" {
		cont = nil // nothing to resume
	}
	if cont == nil {
		if choice.signal != nil || choice.option != "" {
			// A decision without the suspension it decides: running it
			// as a new message would supersede the very suspension.
			return nil, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: "request.context.continuation",
				message: "signal_payload and option answer a suspended turn: send them with context.continuation (its run_id or continuation_token)"}
		}
		if a, fail = e.route(c.TaskHint); fail != nil {
			return nil, fail
		}
	}
	// run answers the request; the response is complete (latency set)
	// before the caches publish it to waiting retransmissions.
	run := func() (resp *ohResponse, keep bool) {
		if cont != nil {
			resp, keep = e.resume(ctx, tenant, req, hr, sessionGiven, cont, choice, start)
			// A continuation answered with the resume another one made
			// (a spent token) is not this request_id's own request: the
			// id's first request may be another (the other decision, on
			// another replica), whose retransmissions it must not refuse.
			// A retryable failure (a busy session, a caller that left
			// before its signal was resolved) resumed nothing: its retry
			// must run again, as a send's does.
			// Nor does a refusal of the request_id's reuse: it must not
			// stand for the id's first request (a message's).
			keep = keep && resp != nil && !resp.replayed && resp.memorable()
		} else {
			resp = e.sendTurn(ctx, tenant, a, req, hr, sessionGiven)
			// A refused reuse of the request_id (found in the store)
			// must not stand for the id's first request here.
			keep = resp.memorable()
		}
		setLatency(resp, start)
		return resp, keep && resp != nil
	}
	if req.RequestID == "" {
		resp, _ := run()
		return resp, nil
	}
	keySession := sessionGiven
	if cont != nil && keySession == "" {
		keySession = e.continuationSession(ctx, tenant, cont)
	}
	key := ohKey(tenant, keySession, req.RequestID)
	fp := req.fingerprint(a, cont, choice)
	ent, owner := e.requests.claimFor(key, fp)
	for !owner {
		checked := ent.settled()
		if checked && !e.current(ctx, ent) {
			// The remembered answer is of a session deleted since (here
			// or on another replica), or deleted and begun again: the
			// store, not this memory, answers the request_id now.
			e.requests.forget(key, ent)
			ent, owner = e.requests.claimFor(key, fp)
			continue
		}
		if ent.fp != fp {
			// The id names another request: refused, nothing runs, the
			// first request's answer stays recorded.
			resp := e.requestIDReused(req, hr, sessionGiven, a, cont != nil)
			setLatency(resp, start)
			return resp, nil
		}
		if rec := ent.wait(ctx); rec != nil {
			if !checked && !e.current(ctx, ent) { // (a settled one was checked above)
				e.requests.forget(key, ent)
				ent, owner = e.requests.claimFor(key, fp)
				continue
			}
			return rec.reenvelope(req, hr), nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		// The original's client left before it had an answer (the entry
		// is forgotten): this retransmission answers itself.
		ent, owner = e.requests.claimFor(key, fp)
	}
	var (
		resp *ohResponse
		gen  *ohGeneration
	)
	keep := false
	defer func() {
		ent.gen = gen // the owner's, read once settled
		e.requests.settle(key, ent, resp, keep)
	}()
	resp, keep = run()
	if keep {
		gen, keep = e.stamp(ctx, tenant, resp)
	}
	return resp, nil
}

// requestIDReused answers a request whose request_id an earlier request
// of the tenant's session (as sent) used with other contents: errored,
// code message_id_reused (user_correctable, not retryable, details.field
// request_id), as the chat harness answers the same reuse when it finds
// it in the store (after a restart, or once the cache evicted the
// first). Nothing runs.
func (e *ohEndpoint) requestIDReused(req *ohRequest, hr *http.Request, sessionGiven string, a *Agent, continuation bool) *ohResponse {
	ext := &ohExtension{SessionID: sessionGiven}
	if req.Request.Context != nil {
		ext.ConversationID = req.Request.Context.ConversationID
	}
	if !continuation {
		ext.Agent = a.ID
		if ext.SessionID == "" {
			ext.SessionID = ohRequestSession(req.RequestID)
		}
	}
	ext.Resumed = continuation
	return e.userError(req, hr, ext, errcat.MessageIDReused,
		"this request_id was already used for another request; send a new request_id for a new request")
}

// fingerprint is the digest of what determines the request's turn, to
// tell a retransmission (the same request_id with the same fingerprint:
// the recorded answer) from a reuse of the request_id for another request
// (refused: message_id_reused). It compares the request canonically, not
// byte for byte: white space, key order and the fields that do not make
// the turn do not count. For a new turn: the agent it routes to (so an
// agent id and a task_hint alias of it are the same request), the
// user_intent exactly, and the attachments (every field, in order). For a
// continuation: the run_id and continuation_token, and the answer (the
// signal_payload as JSON with sorted keys, or the option, or else the
// user_intent). Not counted: correlation_id (a retry may carry a new
// trace), capabilities (answered per request), shell, environment_state,
// conversation_id, auth.credential_ref and extensions other than
// dev.armature's answer. The session is part of the request_id's key.
func (r *ohRequest) fingerprint(a *Agent, cont *ohContinuation, choice ohChoice) string {
	c := r.Request.Context
	if c == nil {
		c = &ohContext{}
	}
	var f struct {
		Agent       string         `json:"agent,omitempty"`
		Intent      *string        `json:"intent,omitempty"`
		Attachments []ohAttachment `json:"attachments,omitempty"`
		RunID       string         `json:"run_id,omitempty"`
		Token       string         `json:"token,omitempty"`
		Signal      graph.Update   `json:"signal,omitempty"`
		Option      string         `json:"option,omitempty"`
		Resume      bool           `json:"resume,omitempty"`
	}
	switch {
	case cont == nil:
		if a != nil {
			f.Agent = a.ID
		}
		f.Intent, f.Attachments = &c.UserIntent, c.Attachments
	default:
		f.Resume, f.RunID, f.Token = true, cont.RunID, cont.ContinuationToken
		f.Signal, f.Option = choice.signal, choice.option
		if f.Signal == nil && f.Option == "" {
			f.Intent = &c.UserIntent
		}
	}
	sum := sha256.Sum256(ohJSON(f))
	return string(sum[:])
}

// setLatency sets a response's engine_latency_ms, unless set, to the
// time since start. A response is complete before a memo publishes it
// (settle), as waiting retransmissions then read it.
func setLatency(resp *ohResponse, start time.Time) {
	if resp != nil && resp.Response.EngineLatencyMS == nil {
		ms := float64(time.Since(start).Milliseconds())
		resp.Response.EngineLatencyMS = &ms
	}
}

// route selects the agent: task_hint["dev.armature.agent"] names one
// (an agent id or a Config.TaskHints key) and must resolve;
// task_hint.sop_id is a hint that routes when it matches an agent id or
// a TaskHints key and otherwise leaves the default agent.
func (e *ohEndpoint) route(hint map[string]json.RawMessage) (*Agent, *ohFailure) {
	if raw, ok := hint[ohTaskHintAgent]; ok {
		var id string
		if json.Unmarshal(raw, &id) != nil || id == "" {
			return nil, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: "request.context.task_hint." + ohTaskHintAgent,
				message: ohTaskHintAgent + " must be a non-empty string"}
		}
		a, err := e.s.agentFor(id)
		if err != nil {
			return nil, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: "request.context.task_hint." + ohTaskHintAgent,
				message: "no agent serves this task hint"}
		}
		return a, nil
	}
	var sop string
	if raw, ok := hint["sop_id"]; ok && json.Unmarshal(raw, &sop) != nil {
		return nil, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: "request.context.task_hint.sop_id",
			message: "sop_id must be a string"}
	}
	if a, err := e.s.agentFor(sop); err == nil {
		return a, nil
	}
	return e.s.def, nil
}

// ohChoice is a continuation's typed answer, from
// context.extensions["dev.armature"]: a signal_payload, or the id of one
// of the request_approval directive's options (neither: the user's
// reply).
type ohChoice struct {
	signal graph.Update
	option string
}

// choice reads context.extensions["dev.armature"] (the zero ohChoice
// when absent). signal_payload must be a JSON object, option a non-empty
// string, and not both.
func (c *ohContext) choice() (ohChoice, *ohFailure) {
	raw, ok := c.Extensions[ohNamespace]
	if !ok {
		return ohChoice{}, nil
	}
	field := "request.context.extensions." + ohNamespace
	bad := func(field, msg string) (ohChoice, *ohFailure) {
		return ohChoice{}, &ohFailure{status: http.StatusOK, code: ohCodeInvalidRequest, field: field, message: msg}
	}
	var ext ohContextExtension
	if json.Unmarshal(raw, &ext) != nil {
		return bad(field, "the "+ohNamespace+" extension must be an object with signal_payload an object and option a string")
	}
	var ch ohChoice
	if len(ext.SignalPayload) > 0 && string(ext.SignalPayload) != "null" {
		var p map[string]any
		if json.Unmarshal(ext.SignalPayload, &p) != nil || p == nil {
			return bad(field+".signal_payload", "signal_payload must be a JSON object")
		}
		ch.signal = graph.Update(p)
	}
	if ext.Option != nil {
		if *ext.Option == "" {
			return bad(field+".option", "option must name one of the request_approval directive's options")
		}
		if ch.signal != nil {
			return bad(field, "send signal_payload or option, not both")
		}
		ch.option = *ext.Option
	}
	return ch, nil
}

// payload is the resume payload of the choice for a suspension awaiting
// signalID: the signal_payload, the chosen option's, or
// {"user_reply": intent} (PROTOCOLS.md §1), which the graph accepts or
// refuses (suspension_resume_payload_invalid). A non-empty fail is why an
// option does not apply.
func (ch ohChoice) payload(signalID, intent string) (p graph.Update, fail string) {
	switch {
	case ch.signal != nil:
		return ch.signal, ""
	case ch.option != "":
		opts := ohOptions(signalID)
		ids := make([]string, len(opts))
		for i, o := range opts {
			if o.ID == ch.option {
				return o.SignalPayload, ""
			}
			ids[i] = o.ID
		}
		if len(ids) == 0 {
			return nil, fmt.Sprintf("option %q: this suspension offers no options; reply in user_intent or send signal_payload", ch.option)
		}
		return nil, fmt.Sprintf("option %q is not one of the approval's options (%s)", ch.option, strings.Join(ids, ", "))
	}
	return graph.Update{"user_reply": intent}, ""
}

// sendTurn runs a new turn: the user message from user_intent and the
// image attachments, in the given session or a minted one.
func (e *ohEndpoint) sendTurn(ctx context.Context, tenant string, a *Agent, req *ohRequest, hr *http.Request, sessionID string) *ohResponse {
	c := req.Request.Context
	if c == nil {
		c = &ohContext{}
	}
	switch {
	case sessionID != "":
	case req.RequestID != "":
		sessionID = ohRequestSession(req.RequestID)
	default:
		sessionID = newSessionID()
	}
	ext := &ohExtension{SessionID: sessionID, Agent: a.ID, ConversationID: c.ConversationID}
	var blocks []llm.Block
	for i, at := range c.Attachments {
		if ohInline(at) {
			return e.userError(req, hr, ext, errcat.ChatMessageShapeInvalid,
				fmt.Sprintf("attachment %d embeds its data; send a reference (uri, ref_id or asset_id) instead", i))
		}
		if url, ok := ohImageURL(at); ok {
			blocks = append(blocks, llm.ImageURL(url))
			continue
		}
		ext.UnusedAttachments = append(ext.UnusedAttachments, i)
	}
	if strings.TrimSpace(c.UserIntent) == "" {
		return e.userError(req, hr, ext, errcat.ChatMessageShapeInvalid, "context.user_intent is required")
	}
	msg := llm.UserText(c.UserIntent)
	if len(blocks) > 0 {
		msg = llm.UserBlocks(append([]llm.Block{llm.TextBlock(c.UserIntent)}, blocks...)...)
	}
	sub := adapter.SubmitRequest{Message: msg, MessageID: req.RequestID}
	if req.RequestID != "" {
		// A continuation that used the request_id refuses it (its
		// record is durable: see resume): checked now, so that no run
		// opens, and again under the session's lock.
		if ohContinuationUsed(ctx, a, storeKey(tenant, sessionID), req.RequestID) {
			return e.requestIDReused(req, hr, sessionID, a, false)
		}
		ctx = withTurnHooks(ctx, &turnHooks{refusedBySignal: ohRequestAlias(req.RequestID)})
	}
	if cid := req.correlationID(hr); validID(cid) {
		sub.CorrelationID = cid
	}
	resp := e.s.submit(ctx, tenant, a, sessionID, sub)
	runID := runIDOf(resp.Outcome, resp.RunID)
	return e.render(req, hr, ext, a, tenant, sessionID, runID, resp.Outcome)
}

// resume runs the signal-resume path of a continuation. The token (which
// this engine issued with a request_approval directive) names the agent,
// session, run and signal; run_id and session_id, when sent, must agree
// with it. A continuation without a token names the suspended run by
// run_id alone (PROTOCOLS.md §1: run_id is the suspended turn's id),
// resolved within the caller's tenant and, when sent, session. A
// continuation resumes once: a repeat gets the recorded response, also
// one that names the suspension another way than the continuation that
// resumed it (by run_id after its token, or by a token issued for a
// replayed suspension): recordedResume. The boolean reports whether the
// response may be remembered.
func (e *ohEndpoint) resume(ctx context.Context, tenant string, req *ohRequest, hr *http.Request, sessionGiven string, cont *ohContinuation, choice ohChoice, start time.Time) (*ohResponse, bool) {
	c := req.Request.Context
	ext := &ohExtension{SessionID: sessionGiven, Resumed: true, ConversationID: c.ConversationID}
	refuse := func(diagnostic string) (*ohResponse, bool) {
		return e.userError(req, hr, ext, errcat.HarnessSignalCorrelationFailed, diagnostic), true
	}
	mismatch := func() (*ohResponse, bool) {
		return refuse("the continuation does not match a suspended turn of this session")
	}
	var (
		tok       ohToken
		memoKey   string
		requestID string
	)
	if cont.ContinuationToken != "" {
		var ok bool
		if tok, ok = parseOHToken(cont.ContinuationToken); !ok {
			// Tokens are not credentials (see ohToken): a malformed one
			// is refused as such, a well-formed one by what it names.
			return refuse("the continuation_token is malformed: send it as the request_approval directive gave it")
		}
		if cont.RunID != "" && cont.RunID != tok.RunRecord && cont.RunID != tok.Run {
			return mismatch()
		}
		memoKey, requestID = ohKey(tenant, "token", cont.ContinuationToken), ohTokenRequestID(cont.ContinuationToken)
	} else {
		var (
			run   runtime.Run
			found bool
		)
		tok, run, found = e.runToken(ctx, tenant, sessionGiven, cont.RunID)
		switch {
		case !found:
			return mismatch()
		case run.Status != runtime.StatusSuspended:
			return refuse(fmt.Sprintf("the run is %s, not suspended: there is nothing to continue", run.Status))
		}
		memoKey, requestID = ohKey(tenant, "run", cont.RunID), ohRunRequestID(cont.RunID)
	}
	if (sessionGiven != "" && sessionGiven != tok.Session) || e.s.agents[tok.Agent] == nil {
		return mismatch()
	}
	a := e.s.agents[tok.Agent]
	ext.SessionID, ext.Agent = tok.Session, a.ID
	ent, owner := e.tokens.claim(memoKey)
	for !owner {
		if rec := ent.wait(ctx); rec != nil && ent.kept {
			if !e.current(ctx, ent) {
				// Its session was deleted since: the store answers.
				e.tokens.forget(memoKey, ent)
				ent, owner = e.tokens.claim(memoKey)
				continue
			}
			return rec.reenvelope(req, hr), true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		// The continuation under way resumed nothing (its payload was
		// refused, its client left): it does not answer this one, which
		// may carry another payload; this one answers itself.
		ent, owner = e.tokens.claim(memoKey)
	}
	var resp *ohResponse
	keep := false
	defer func() {
		setLatency(resp, start) // before the memo publishes it
		var gen *ohGeneration
		if keep && resp != nil {
			gen, keep = e.stamp(ctx, tenant, resp)
		}
		ent.gen = gen // the owner's, read once settled
		e.tokens.settle(memoKey, ent, resp, keep)
	}()
	if tok.RunRecord != "" {
		// A suspension a turn already resumed answers that turn's
		// outcome, whatever the invocation awaits now: a turn that
		// suspended again (in the same invocation, maybe on the same
		// signal id) awaits another decision, which this continuation
		// never saw.
		if resp = e.recordedResume(ctx, tenant, req, hr, ext, tok.Session, tok.RunRecord, tok.Signal == ""); resp != nil {
			keep = true
			return resp, true
		}
	}
	if tok.Signal == "" {
		// A run_id whose invocation awaits nothing, and no resume is
		// recorded: a later message superseded it, or the record is gone.
		resp, _ = refuse("the run no longer awaits a decision (a later message may have superseded it)")
		return resp, true
	}
	payload, fail := choice.payload(tok.Signal, c.UserIntent)
	if fail != "" {
		resp = e.userError(req, hr, ext, errcat.SuspensionResumePayloadInvalid, fail)
		return resp, true
	}
	// The resumed run keeps the correlation id it was started with
	// (graph.Resume restores it from the paused record).
	// The server resolves the signal within the caller's tenant and the
	// token's session, so a token of another tenant or session resumes
	// nothing; the request id makes it resume once, durably: a spent
	// continuation, before or after a restart, gets the recorded outcome.
	if req.RequestID != "" {
		// The request_id names this request, durably: a message that
		// used it is refused (checked now, so that no run opens, and
		// again under the session's lock), and it refuses a message (or
		// another continuation) sent with it later, also after a
		// restart or once the cache forgot it.
		key := storeKey(tenant, tok.Session)
		if _, err := a.Chat.Replay(ctx, key, req.RequestID); err == nil || errors.Is(err, chat.ErrMessageIDReused) {
			resp = e.requestIDReused(req, hr, sessionGiven, a, true)
			return resp, false
		}
		if _, err := a.Chat.ReplaySignal(ctx, chat.Signal{SessionID: key, RequestID: requestID}); err != nil && ohContinuationUsed(ctx, a, key, req.RequestID) {
			// Another continuation's request_id (this one's own
			// retransmission found its resume recorded above).
			resp = e.requestIDReused(req, hr, sessionGiven, a, true)
			return resp, false
		}
		ctx = withTurnHooks(ctx, &turnHooks{requestAlias: ohRequestAlias(req.RequestID), refusedByMessage: req.RequestID})
	}
	sr := e.s.submit(ctx, tenant, a, tok.Session, adapter.SubmitRequest{Agent: a.ID, Signal: &adapter.Signal{SignalID: tok.Signal,
		InvocationID: tok.Run, Payload: payload, RequestID: requestID}})
	out, run := sr.Outcome, sr.RunID
	if o, ok := out.(*chat.Errored); ok && o.Category == errcat.HarnessSignalCorrelationFailed && !resumedNodeFailed(o) {
		// Not this continuation's resume: another one's (the suspension
		// named another way, or this token's own before an upgrade that
		// lost its mark) answers, when one resumed the run.
		if tok.RunRecord != "" {
			if resp = e.recordedResume(ctx, tenant, req, hr, ext, tok.Session, tok.RunRecord, true); resp != nil {
				keep = true
				return resp, true
			}
		}
		if errors.Is(o.Err, chat.ErrDecisionTookEffect) {
			// A resume took the decision up and did not finish (it
			// failed, or its process died): the call it decided ran or
			// was answered, and the turn's answer was never written.
			resp, _ = refuse(ohTookEffect)
			return resp, true
		}
		resp, _ = refuse("the continuation matches no suspended turn of this session (a later message may have superseded it)")
		return resp, true
	}
	resp = e.render(req, hr, ext, a, tenant, tok.Session, runIDOf(out, run), out)
	keep = ohSpent(out)
	return resp, true
}

// stamp reads the generation of the session resp answered in (its
// extension's session_id), once the response's turn ended: a memo hit
// is answered from memory only while the session is still that
// generation (current). nil for a response of no session. ok is false
// when the store cannot tell: the response is then not remembered.
func (e *ohEndpoint) stamp(ctx context.Context, tenant string, resp *ohResponse) (gen *ohGeneration, ok bool) {
	if resp == nil {
		return nil, false
	}
	var ext struct {
		SessionID string `json:"session_id"`
	}
	if raw, found := resp.Response.Extensions[ohNamespace]; !found || json.Unmarshal(raw, &ext) != nil || ext.SessionID == "" {
		return nil, true
	}
	g, ok := e.generation(context.WithoutCancel(ctx), storeKey(tenant, ext.SessionID))
	if !ok {
		return nil, false
	}
	return &g, true
}

// generation reads the session's generation from the store (its
// creation time; zero when there is no such session).
func (e *ohEndpoint) generation(ctx context.Context, key string) (ohGeneration, bool) {
	created, err := e.s.sessionCreated(ctx, key)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return ohGeneration{key: key}, true
	case err != nil:
		return ohGeneration{}, false
	}
	return ohGeneration{key: key, created: created}, true
}

// current reports whether a settled memo entry may answer: it was not
// kept (a response under way answers the retransmissions that waited
// for it), answers without a session, or its session is still the
// generation it answered in. A session deleted since, on this replica
// or another, or deleted and begun again (a retransmission another
// replica ran anew), is not: the store answers then, as it does for
// REST message_id and the OpenAI Idempotency-Key, so every replica
// gives the same answer and nothing of a deleted conversation is
// served. A store that cannot tell does not confirm the entry either.
func (e *ohEndpoint) current(ctx context.Context, ent *ohMemoEntry) bool {
	if !ent.kept || ent.gen == nil {
		return true
	}
	g, ok := e.generation(ctx, ent.gen.key)
	return ok && g.created.Equal(ent.gen.created)
}

// ohResumeScan bounds recordedResume's search: pages of the suspended
// run's children (runtime.ListRunsRequest.ParentID: the built-in stores
// list only those, however many runs of the session came after; a
// store that ignores the filter has the session's runs read, newest
// first, until the suspended run).
const (
	ohResumeScanPages = 20
	ohResumeScanPage  = 50
)

// recordedResume answers a continuation of a suspension that a turn
// already resumed, whichever continuation (token, run_id, another
// surface's signal) did: the outcome recorded for the run that resumed
// the tenant's run suspended (its child: parentRequestId suspended),
// marked replayed. failed also takes a resume that errored after it
// resumed the turn (its run tells; it recorded no outcome): only for a
// suspension known to await nothing any more, as an errored turn may
// leave it pending. It returns nil when no such run is recorded: nothing
// resumed the suspension (a message superseded it), or the records are
// gone.
func (e *ohEndpoint) recordedResume(ctx context.Context, tenant string, req *ohRequest, hr *http.Request, ext *ohExtension, sessionID, suspended string, failed bool) *ohResponse {
	parent, err := e.s.runs.Store().Run(ctx, tenant, suspended)
	if err != nil || parent == nil || parent.SessionID != sessionID || parent.Status != runtime.StatusSuspended {
		return nil // not a suspended run of this session: no scan
	}
	token := ""
	for range ohResumeScanPages {
		page, err := e.s.runs.Store().ListRuns(ctx, runtime.ListRunsRequest{Tenant: tenant, SessionID: sessionID, ParentID: suspended,
			PageSize: ohResumeScanPage, PageToken: token})
		if err != nil {
			return nil
		}
		for _, r := range page.Runs {
			if r.ID == suspended {
				return nil // the runs from here on are older: no child
			}
			if r.ParentID != suspended {
				continue
			}
			a := e.s.agents[r.AgentID]
			if a == nil {
				continue
			}
			out, err := a.Chat.Recorded(ctx, storeKey(tenant, sessionID), runRecordKey(r.ID))
			if err == nil {
				ext.SessionID, ext.Agent = sessionID, a.ID
				return e.render(req, hr, ext, a, tenant, sessionID, runIDOf(out, ""), out)
			}
			if failed && r.Status == runtime.StatusFailed && r.Error != nil && r.Error.Category != "" && resumedSomething(errcat.Category(r.Error.Category)) &&
				harness.Bucket(r.Error.Bucket) != harness.RetryableTransient {
				// An errored resume records no outcome: its run tells.
				// (A run that lost a race for the suspension, or whose
				// payload was refused, resumed nothing: not this one.
				// Nor is one that failed retryably, interrupted by a
				// crash (run_interrupted) or an upstream's outage: its
				// suspension is gone, so retrying the continuation can
				// never run it again; the caller is told the decision
				// took effect, or that nothing awaits it.)
				ext.SessionID, ext.Agent, ext.RunID, ext.Replayed = sessionID, a.ID, r.ID, true
				bucket := harness.Bucket(r.Error.Bucket)
				reply := llm.SystemText(r.Error.Message)
				if r.Error.Message == "" {
					reply = llm.SystemText("The earlier attempt to continue failed.")
				}
				resp := e.erroredResponse(req, hr, ext, r.Error.Category, bucket, reply)
				resp.replayed = true
				return resp
			}
			if failed && (r.Status == runtime.StatusFailed || r.Status == runtime.StatusCancelled) && e.s.resumeTookUp(ctx, tenant, r.ID) {
				// A resume that took the suspension up, then failed
				// retryably or was cancelled: its decision took effect
				// (an approved call ran) and nothing awaits another; no
				// later message superseded it.
				ext.SessionID, ext.Agent = sessionID, a.ID
				return e.userError(req, hr, ext, errcat.HarnessSignalCorrelationFailed, ohTookEffect)
			}
		}
		if token = page.NextPageToken; token == "" {
			return nil
		}
	}
	return nil
}

// ohTookEffect is the diagnostic of a continuation whose suspension a
// resume took up, that then failed or was cancelled before its answer.
const ohTookEffect = "the decision on this turn was already given and took effect (an approved call ran); the turn was interrupted before its answer: send a new message to go on"

// runToken resolves a continuation that names its suspended run by
// run_id alone: the tenant's run record, of sessionGiven when set. found
// reports whether there is such a run; tok carries what a token would,
// its Signal empty unless the run suspended and its invocation still
// awaits a signal.
func (e *ohEndpoint) runToken(ctx context.Context, tenant, sessionGiven, runID string) (tok ohToken, run runtime.Run, found bool) {
	if runID == "" || len(runID) > ohMaxRequestID {
		return ohToken{}, run, false
	}
	r, err := e.s.runs.Store().Run(ctx, tenant, runID)
	if err != nil || r == nil || (sessionGiven != "" && r.SessionID != sessionGiven) {
		return ohToken{}, run, false
	}
	run = *r
	a := e.s.agents[run.AgentID]
	if a == nil {
		return ohToken{}, run, false
	}
	tok = ohToken{Agent: a.ID, Session: run.SessionID, Run: run.InvocationID, RunRecord: run.ID}
	if run.Status != runtime.StatusSuspended || run.InvocationID == "" {
		return tok, run, true
	}
	sub, err := a.Chat.Harness().Resolve(ctx, harness.SignalRef{InvocationID: run.InvocationID, SessionID: storeKey(tenant, run.SessionID)})
	if err == nil {
		tok.Signal = sub.SignalID
	}
	return tok, run, true
}

// continuationSession is the session a continuation sent without a
// session_id names: its token's, or its run's (read from the store); ""
// when it names none (resume refuses it). A request_id names a request
// of one session (PROTOCOLS.md §1), so two sessions' continuations sent
// under one request_id are two requests, in memory as in the store.
func (e *ohEndpoint) continuationSession(ctx context.Context, tenant string, cont *ohContinuation) string {
	if cont.ContinuationToken != "" {
		tok, _ := parseOHToken(cont.ContinuationToken)
		return tok.Session
	}
	if cont.RunID == "" || len(cont.RunID) > ohMaxRequestID {
		return ""
	}
	if r, err := e.s.runs.Store().Run(ctx, tenant, cont.RunID); err == nil && r != nil {
		return r.SessionID
	}
	return ""
}

// ohRunRequestID is the chat signal request id of a continuation by
// run_id: one per suspended run, so that it resumes once.
func ohRunRequestID(runID string) string {
	sum := sha256.Sum256([]byte(runID))
	return "oh-run:" + hex.EncodeToString(sum[:])
}

// ohTokenRequestID is the chat signal request id of a continuation
// token: a digest, so that a token of any length fits chat.MaxIDLength.
func ohTokenRequestID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "oh-cont:" + hex.EncodeToString(sum[:])
}

// ohContinuationUsed reports whether the session (key) recorded a
// continuation under requestID (see ohRequestAlias).
func ohContinuationUsed(ctx context.Context, a *Agent, key, requestID string) bool {
	_, err := a.Chat.ReplaySignal(ctx, chat.Signal{SessionID: key, RequestID: ohRequestAlias(requestID)})
	return err == nil || errors.Is(err, chat.ErrMessageIDReused)
}

// ohRequestAlias is the signal request id a continuation's request_id
// is recorded under (chat.Signal.RequestAlias), apart from the ids of
// what resumes (ohTokenRequestID, ohRunRequestID).
func ohRequestAlias(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return "oh-request:" + hex.EncodeToString(sum[:])
}

// ohRequestSession is the session of a new-turn request that names none
// but carries a request_id: derived from it, so that a retransmission
// reaches the same session, where the turn's recorded outcome answers it
// (durably: chat.WithMessageID), before or after a restart.
func ohRequestSession(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return "oh-" + hex.EncodeToString(sum[:16])
}

// ohSpent reports whether a resume outcome used up its continuation:
// a completed or suspended turn, or one that errored after the resume
// took its suspension up (resumedAnything). One that errored before it
// ran (no matching turn, a payload the graph refused, a wait cancelled,
// a session lock or store that failed first) left the turn awaiting the
// decision: the continuation sent again resumes it.
func ohSpent(out chat.Outcome) bool {
	o, ok := out.(*chat.Errored)
	return !ok || resumedAnything(o)
}

// ohOption is one entry of a request_approval directive's options: a
// decision the Shell may offer. Echoing its id in
// context.extensions["dev.armature"].option with the continuation (or
// its signal_payload as signal_payload) picks it.
type ohOption struct {
	ID            string       `json:"id"`
	Label         string       `json:"label"`
	SignalPayload graph.Update `json:"signal_payload"`
}

// ohOptions are the options of a suspension: approve and deny for agent
// approvals, none (a free-form reply) otherwise.
func ohOptions(signalID string) []ohOption {
	if !strings.HasPrefix(signalID, agent.SignalPrefix) {
		return []ohOption{}
	}
	return []ohOption{
		{ID: "approve", Label: "Approve", SignalPayload: agent.Approve("")},
		{ID: "deny", Label: "Deny", SignalPayload: agent.Deny("")},
	}
}

// ---- rendering ------------------------------------------------------

// base starts a response to req: version, echoed ids and the capability
// answers.
func (e *ohEndpoint) base(req *ohRequest, hr *http.Request) *ohResponse {
	resp := &ohResponse{ProtocolVersion: ohVersion, SupportedProtocolVersions: []string{ohVersion}}
	if req == nil {
		return resp
	}
	resp.RequestID = req.RequestID
	if hr != nil {
		resp.CorrelationID = req.correlationID(hr)
	} else {
		resp.CorrelationID = req.CorrelationID
	}
	resp.SupportedCapabilities, resp.CapabilityDenials = ohNegotiate(req.Capabilities)
	return resp
}

// ohNegotiate answers every capability key the endpoint understands.
// A key the Shell declares false (or null) is a capability it does not
// have, not one it asks for: it is answered in supported_capabilities
// when the engine offers it, and never denied (capability_denials rejects
// what a Shell asked for, PROTOCOL.md §5.3).
func ohNegotiate(asked map[string]json.RawMessage) (map[string]json.RawMessage, []ohDenial) {
	supported := map[string]json.RawMessage{}
	denials := []ohDenial{}
	for _, k := range slices.Sorted(maps.Keys(asked)) {
		d, known := ohCapabilities[k]
		switch {
		case !known:
		case d.Code == "":
			supported[k] = json.RawMessage("true")
		case ohDeclined(asked[k]):
		default:
			d.Capability = k
			denials = append(denials, d)
		}
	}
	return supported, denials
}

// ohDeclined reports whether a capability value declares the capability
// absent: false or null (JSON, with any white space around it).
func ohDeclined(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return string(v) == "false" || string(v) == "null"
}

// declines reports whether the Shell declared capability absent
// (ohDeclined): a key it left out is not declined.
func (r *ohRequest) declines(capability string) bool {
	v, ok := r.Capabilities[capability]
	return ok && ohDeclined(v)
}

// writeFailure writes a response the endpoint gives without a turn.
func (e *ohEndpoint) writeFailure(w http.ResponseWriter, req *ohRequest, f *ohFailure) {
	resp := e.base(req, nil)
	resp.SupportedCapabilities, resp.CapabilityDenials = nil, nil
	resp.Response = ohResponsePayload{Status: "error", Error: &ohError{Code: f.code, Message: f.message, Retryable: ohBool(false)}}
	if f.field != "" {
		resp.Response.Error.Details = ohJSON(map[string]string{"field": f.field})
	}
	if resp.CorrelationID != "" && ohHeaderSafe(resp.CorrelationID) {
		w.Header().Set("X-Correlation-ID", resp.CorrelationID)
	}
	writeRawJSON(w, f.status, resp.encode())
}

// writeOHError renders a failure answered before the endpoint reads the
// request (authentication, the tenant's fair share, the body's media
// type, a wrong method, a server failure) as an OpenHarness error
// envelope, so that a Shell parses every answer of the endpoint: the
// same HTTP status and Retry-After as on the other routes, the error's
// code, retryable for a 429 or 503.
func (s *Server) writeOHError(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.apiError(r, err)
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
	}
	retryable := ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable
	resp := &ohResponse{ProtocolVersion: ohVersion, SupportedProtocolVersions: []string{ohVersion},
		Response: ohResponsePayload{Status: "error", Error: &ohError{Code: ae.Code, Message: ae.Message, Retryable: ohBool(retryable)}}}
	writeRawJSON(w, ae.Status, resp.encode())
}

// userError is an errored, user-correctable response the endpoint builds
// without running a turn (the reply text is the chat harness's default).
func (e *ohEndpoint) userError(req *ohRequest, hr *http.Request, ext *ohExtension, cat errcat.Category, diagnostic string) *ohResponse {
	reply := llm.SystemText(strings.ReplaceAll(chat.DefaultUserCorrectableReply, "{diagnostic}", diagnostic))
	return e.erroredResponse(req, hr, ext, string(cat), harness.UserCorrectable, reply)
}

func (e *ohEndpoint) erroredResponse(req *ohRequest, hr *http.Request, ext *ohExtension, code string, bucket harness.Bucket, reply llm.Message) *ohResponse {
	resp := e.base(req, hr)
	ext.Outcome = "errored"
	if bucket == "" {
		bucket = harness.UserCorrectable
	}
	if code == "" {
		code = string(bucket)
	}
	details := map[string]string{"error_bucket": string(bucket)}
	if code == string(errcat.MessageIDReused) {
		details["field"] = "request_id"
	}
	resp.Response = ohResponsePayload{
		Status: "error",
		Error: &ohError{Code: code, Message: reply.Text(), Retryable: ohBool(bucket == harness.RetryableTransient),
			Details: ohJSON(details)},
		ActionDirectives: ohMessages([]llm.Message{reply}, nil),
		Extensions:       map[string]json.RawMessage{ohNamespace: ext.encode()},
	}
	return resp
}

// render maps a chat outcome onto a response (PROTOCOLS.md §2). runID
// is the run that answered ("" for none: a refused signal, a replayed
// resume).
func (e *ohEndpoint) render(req *ohRequest, hr *http.Request, ext *ohExtension, a *Agent, tenant, sessionID, runID string, out chat.Outcome) (resp *ohResponse) {
	t := out.Info()
	defer func() {
		if resp != nil {
			resp.recorded = runID != "" || t.Replayed
		}
	}()
	ext.SessionID, ext.RunID, ext.InvocationID = sessionID, runID, t.InvocationID
	ext.Resumed = ext.Resumed || t.Resumed
	ext.Replayed, ext.Superseded = t.Replayed, t.Superseded
	ext.Usage, ext.FinishReason = modelUsage(out), string(t.FinishReason)
	switch o := out.(type) {
	case *chat.Completed:
		resp := e.base(req, hr)
		ext.Outcome = "completed"
		var names func(string) string
		if t.Resumed {
			// The calls a resumed turn's tool results answer are in the
			// turn before it.
			names = callNames(a, storeKey(tenant, sessionID), o)
		}
		resp.Response = ohResponsePayload{Status: "success", ActionDirectives: ohMessages(o.Replies, names),
			Extensions: map[string]json.RawMessage{ohNamespace: ext.encode()}}
		resp.replayed = t.Replayed
		return resp
	case *chat.Suspended:
		resp := e.base(req, hr)
		ext.Outcome = "suspended"
		run := runID
		if run == "" {
			run = t.InvocationID
		}
		tok := ohToken{Agent: a.ID, Session: sessionID, Run: t.InvocationID, RunRecord: run, Signal: o.Descriptor.SignalID, Nonce: rand.Text()}
		ext.Continuation = &ohContinuation{RunID: run, ContinuationToken: tok.String()}
		directives := ohMessages(o.PendingMessages, nil)
		if req != nil && req.declines(ohCapApproval) {
			return e.approvalUnsupported(resp, ext, directives, t.Replayed)
		}
		directives = append(directives, ohApproval(o, ext.Continuation, time.Now()))
		resp.Response = ohResponsePayload{Status: "success", ActionDirectives: directives,
			Extensions: map[string]json.RawMessage{ohNamespace: ext.encode()}}
		resp.replayed = t.Replayed
		return resp
	case *chat.Errored:
		if t.Resumed && resumedAnything(o) && o.Bucket == harness.RetryableTransient {
			// The resume took its suspension up (an approved call ran)
			// and then failed on the server's side, or was cancelled:
			// the continuation is spent (ohSpent), so the Shell must
			// not be told to retry it, which would only answer this
			// again. Final, as on the OpenAI endpoints (Error.Final).
			what := "Your decision took effect, but the turn failed after it, on the server's side"
			if o.Category == errcat.InvocationCancelled {
				what = "The turn was cancelled (a cancel request, or the server's shutdown) after your decision was taken up"
			}
			// Bucketed user_correctable, as the continuation sent again
			// is refused: the user goes on with a new message, and the
			// error's retryable stays its bucket's (PROTOCOLS.md §2).
			return e.erroredResponse(req, hr, ext, string(o.Category), harness.UserCorrectable,
				llm.SystemText(what+". The decision cannot be given again: send a new message to go on."))
		}
		resp := e.erroredResponse(req, hr, ext, string(o.Category), o.Bucket, o.Reply)
		if wait := upstreamWait(o); wait > 0 {
			// The upstream's wait, as REST's retry_after and the OpenAI
			// endpoints' Retry-After give it.
			resp.retryAfter = wait
			resp.Response.Error.Details = ohJSON(map[string]any{"error_bucket": string(o.Bucket), "retry_after_seconds": wait})
		}
		return resp
	}
	panic(fmt.Sprintf("server: unknown chat outcome %T", out))
}

// approvalUnsupported answers a turn that suspended for a decision when
// the Shell declared openharness.ui.approval false: it cannot show the
// request_approval directive, so the engine cannot satisfy the request
// as asked (PROTOCOL.md §3 and §5.3: status error with a code, never a
// silent half-feature). The response is status error, code
// capability_required (not retryable, details {capability,
// error_bucket}), with the pending messages and the reason as
// render_message directives. The turn stays suspended: the extension
// reports outcome suspended and the continuation, which a Shell (or
// another client of the session) able to ask for the decision may still
// use; a new message supersedes it.
func (e *ohEndpoint) approvalUnsupported(resp *ohResponse, ext *ohExtension, directives []ohDirective, replayed bool) *ohResponse {
	msg := "This request needs a decision (an approval) that this client cannot show. " +
		"Answer it from a client that supports approvals, or send a new message to move on."
	directives = append(directives, ohMessages([]llm.Message{llm.SystemText(msg)}, nil)...)
	resp.Response = ohResponsePayload{Status: "error",
		Error: &ohError{Code: ohCodeCapabilityRequired, Message: msg, Retryable: ohBool(false),
			Details: ohJSON(map[string]string{"capability": ohCapApproval, "error_bucket": string(harness.UserCorrectable)})},
		ActionDirectives: directives,
		Extensions:       map[string]json.RawMessage{ohNamespace: ext.encode()}}
	resp.replayed = replayed
	return resp
}

// ohApproval is the request_approval directive of a suspension, at
// priority high. Its risk_tier is the suspension metadata's risk_tier
// (agent.MetadataRiskTier: the tool's declared agent.Risk) when valid,
// else caution; deadline_ms is what remains of the metadata's
// timeout_hint (suspension §4: an ISO-8601 duration, or a deadline as an
// RFC 3339 timestamp) at now, when present.
func ohApproval(o *chat.Suspended, cont *ohContinuation, now time.Time) ohDirective {
	message := "Your approval is required to continue."
	for i := len(o.PendingMessages) - 1; i >= 0; i-- {
		if m := o.PendingMessages[i]; m.Role == llm.RoleAssistant && m.Text() != "" {
			message = m.Text()
			break
		}
	}
	d := ohDirective{ActionType: ohRequestApproval, Priority: "high", Execution: "sequential", RiskTier: "caution",
		RequiresUserApproval: ohBool(true)}
	md := o.Descriptor.Metadata
	if tier, _ := md[agent.MetadataRiskTier].(string); tier == "safe" || tier == "caution" || tier == "dangerous" {
		d.RiskTier = tier
	}
	if hint, ok := md["timeout_hint"].(string); ok {
		if ms, ok := timeoutHintMS(hint, now); ok {
			d.DeadlineMS = &ms
		}
	}
	d.Payload = ohJSON(struct {
		Message           string     `json:"message"`
		SignalID          string     `json:"signal_id"`
		RunID             string     `json:"run_id"`
		ContinuationToken string     `json:"continuation_token"`
		Options           []ohOption `json:"options"`
	}{message, o.Descriptor.SignalID, cont.RunID, cont.ContinuationToken, ohOptions(o.Descriptor.SignalID)})
	if len(md) > 0 {
		d.Extensions = map[string]json.RawMessage{ohNamespace: ohJSON(map[string]any{"metadata": md})}
	}
	return d
}

// timeoutHintMS reads a suspension's timeout_hint as milliseconds from
// now: an ISO-8601 duration (PnDTnHnMnS, fractional seconds allowed; no
// years or months, whose length varies) or an RFC 3339 deadline (0 once
// past). ok is false for anything else.
func timeoutHintMS(hint string, now time.Time) (int64, bool) {
	if t, err := time.Parse(time.RFC3339Nano, hint); err == nil {
		return max(0, t.Sub(now).Milliseconds()), true
	}
	d, ok := parseISODuration(hint)
	if !ok {
		return 0, false
	}
	return d.Milliseconds(), true
}

// parseISODuration parses the day-time subset of ISO-8601 durations:
// P[nW][nD][T[nH][nM][n[.f]S]].
func parseISODuration(s string) (time.Duration, bool) {
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "P")
	if !ok || rest == "" || len(s) > 64 {
		return 0, false
	}
	var total float64
	inTime, any := false, false
	for rest != "" {
		if rest[0] == 'T' {
			if inTime || len(rest) == 1 {
				return 0, false
			}
			inTime, rest = true, rest[1:]
			continue
		}
		end := strings.IndexFunc(rest, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if end <= 0 {
			return 0, false
		}
		n, err := strconv.ParseFloat(rest[:end], 64)
		if err != nil {
			return 0, false
		}
		var unit float64
		switch u := rest[end]; {
		case !inTime && u == 'W':
			unit = 7 * 24 * 3600
		case !inTime && u == 'D':
			unit = 24 * 3600
		case inTime && u == 'H':
			unit = 3600
		case inTime && u == 'M':
			unit = 60
		case inTime && u == 'S':
			unit = 1
		default:
			return 0, false
		}
		total += n * unit
		any, rest = true, rest[end+1:]
	}
	if !any || total*1e9 > float64(1<<62) {
		return 0, false
	}
	return time.Duration(total * float64(time.Second)), true
}

// callNames returns the tool names of the calls a resumed turn's tool
// results answer: from the turn's final state, or for a replayed turn
// (which has none) from the session stored under key.
func callNames(a *Agent, key string, o *chat.Completed) func(string) string {
	prior := priorCalls(context.Background(), a, key, o)
	return func(callID string) string {
		tc, _ := prior(callID)
		return tc.Name
	}
}

// ohMessages renders messages as directives, in order (execution
// sequential, priority normal): assistant (and system) text as
// render_message {text, message}, assistant tool calls as
// dev.armature.tool_call and tool results as dev.armature.tool_result,
// each with a fallback_message for Shells that do not know the type.
// earlier names the calls of tool results whose call is not among msgs
// (nil: none).
func ohMessages(msgs []llm.Message, earlier func(callID string) string) []ohDirective {
	out := []ohDirective{}
	names := map[string]string{}
	directive := func(typ string, payload map[string]any) ohDirective {
		return ohDirective{ActionType: typ, Priority: "normal", Execution: "sequential", Payload: ohJSON(payload)}
	}
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			name, ok := names[m.ToolCallID]
			if !ok && earlier != nil {
				name = earlier(m.ToolCallID)
			}
			shown := name
			if shown == "" {
				shown = "a tool"
			}
			out = append(out, directive(ohToolResult, map[string]any{
				"call_id": m.ToolCallID, "name": name, "content": m.Text(),
				"fallback_message": "Used " + shown + "."}))
			continue
		}
		if text := m.Text(); text != "" {
			out = append(out, ohDirective{ActionType: ohRenderMessage, Priority: "normal", Execution: "sequential",
				Payload: renderMessagePayload(m, text)})
		}
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Name
			var args any = json.RawMessage("null")
			if len(tc.Arguments) > 0 {
				args = tc.Arguments
				if !jsonvalid.Valid(tc.Arguments) {
					args = string(tc.Arguments)
				}
			}
			out = append(out, directive(ohToolCall, map[string]any{
				"call_id": tc.ID, "name": tc.Name, "arguments": args,
				"fallback_message": "Calling " + tc.Name + "…"}))
		}
	}
	return out
}

// retryable reports whether the response is a retryable error, which the
// idempotency cache does not keep (a retry should run again).
func (r *ohResponse) retryable() bool {
	return r.Response.Error != nil && r.Response.Error.Retryable != nil && *r.Response.Error.Retryable
}

// memorable reports whether the response may answer its request_id's
// retransmissions from memory, as the store would answer them: it was
// rendered from a recorded turn (see recorded), is not retryable (its
// retry runs again), does not refuse the request_id's reuse (it must not
// stand for the id's first request), and does not depend on the
// capabilities the request declared (capability_required: a
// retransmission declaring the capability gets the recorded outcome
// rendered for it, as from the store).
func (r *ohResponse) memorable() bool {
	return r.recorded && !r.retryable() && !r.reused() &&
		(r.Response.Error == nil || r.Response.Error.Code != ohCodeCapabilityRequired)
}

// reused reports whether the response refuses a reuse of its request_id
// (message_id_reused).
func (r *ohResponse) reused() bool {
	return r.Response.Error != nil && r.Response.Error.Code == string(errcat.MessageIDReused)
}

// reenvelope returns a recorded response answering req, a
// retransmission: the same response payload (byte for byte) with req's
// ids and capability answers, sent with the Idempotent-Replayed header.
func (r *ohResponse) reenvelope(req *ohRequest, hr *http.Request) *ohResponse {
	out := *r
	out.raw = nil // the envelope changes
	out.RequestID = req.RequestID
	out.CorrelationID = req.correlationID(hr)
	out.SupportedCapabilities, out.CapabilityDenials = ohNegotiate(req.Capabilities)
	out.replayed = true
	return &out
}

// ohInline reports whether an attachment embeds its data (a data: URI),
// which the protocol forbids.
func ohInline(a ohAttachment) bool {
	return len(a.URI) >= 5 && strings.EqualFold(a.URI[:5], "data:")
}

// ohImageURL returns the URL of an image reference: an http(s) uri with
// an image/* mime_type (or, without one, an image file extension).
func ohImageURL(a ohAttachment) (string, bool) {
	u := strings.ToLower(a.URI)
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return "", false
	}
	if a.MimeType != "" {
		return a.URI, strings.HasPrefix(strings.ToLower(a.MimeType), "image/")
	}
	path, _, _ := strings.Cut(u, "?")
	for _, ext := range []string{".png", ".jpg", ".jpeg", ".gif", ".webp"} {
		if strings.HasSuffix(path, ext) {
			return a.URI, true
		}
	}
	return "", false
}

func ohBool(b bool) *bool { return &b }

// ohJSON encodes v, which the endpoint builds from JSON-safe values.
func ohJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("server: encoding %T: %v", v, err))
	}
	return b
}

// ---- continuation tokens --------------------------------------------

// ohToken is what a continuation token carries: the agent, the caller's
// session id, the suspended run (invocation), the signal it awaits and a
// random nonce, so that a run suspending again for the same signal gets a
// new token.
// Tokens are opaque to Shells, and they are not credentials: they are
// not signed, and nothing tells a token this engine issued from one
// built to the same format. None is needed. A token only ever resumes a
// turn of the caller's own tenant (resolution is scoped to
// storeKey(tenant, session), and the bearer token decides the tenant),
// only the signal it names, and only while that signal is awaited:
// exactly what a continuation by run_id alone, which carries no token,
// may do. A secret would add nothing but a shared configuration every
// replica needs to accept the others' tokens. A token that does not
// decode is refused as malformed; a well-formed one that names no
// awaited suspension as matching none (harness_signal_correlation_failed
// either way).
type ohToken struct {
	Agent   string `json:"a"`
	Session string `json:"s"`
	// Run is the suspended invocation, RunRecord the run that suspended
	// (the continuation's run_id).
	Run       string `json:"r"`
	RunRecord string `json:"i,omitempty"`
	Signal    string `json:"g"`
	Nonce     string `json:"n"`
}

// String encodes the token.
func (t ohToken) String() string {
	return ohTokenPrefix + base64.RawURLEncoding.EncodeToString(ohJSON(t))
}

// parseOHToken decodes a continuation token of the format this engine
// issues (decoding proves nothing about who built it: see ohToken).
func parseOHToken(s string) (ohToken, bool) {
	var t ohToken
	rest, ok := strings.CutPrefix(s, ohTokenPrefix)
	if !ok || len(rest) > 2048 {
		return t, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return t, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if dec.Decode(&t) != nil {
		return t, false
	}
	return t, t.Agent != "" && validID(t.Session) && t.Run != "" && t.Signal != ""
}

// ---- the caches -----------------------------------------------------

// ohKey joins the parts of a cache key.
func ohKey(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// ohMemo remembers responses by key, evicting the oldest beyond its
// capacity in entries or bytes (the key plus the encoded response). A key
// being answered is claimed: later claimants wait for the owner's response
// instead of running the request again.
type ohMemo struct {
	mu       sync.Mutex
	cap      int
	maxBytes int
	bytes    int
	m        map[string]*list.Element
	order    *list.List // of *ohMemoEntry, oldest first
}

type ohMemoEntry struct {
	key string
	// fp is the fingerprint of the request that claimed the key (set
	// once, at the claim), to tell a retransmission from a reuse.
	fp   string
	done chan struct{}
	resp *ohResponse
	// kept reports, once done, whether the memo keeps resp (a response
	// not kept, a waiter may run again rather than take).
	kept bool
	// gen, once done, is the generation of the session the kept
	// response answered in (nil: none), read when its turn ended and
	// set by the owner before it settles the entry: what a hit is
	// checked against (ohEndpoint.current), so that a session deleted
	// since, here or on another replica, or deleted and begun again, is
	// not answered from memory.
	gen  *ohGeneration
	size int // counted in ohMemo.bytes once settled
}

func newOHMemo(capacity, maxBytes int) *ohMemo {
	return &ohMemo{cap: capacity, maxBytes: maxBytes, m: map[string]*list.Element{}, order: list.New()}
}

// evictLocked drops the oldest entries while the memo is over a bound.
func (c *ohMemo) evictLocked() {
	for c.order.Len() > 0 && (c.order.Len() > c.cap || c.bytes > c.maxBytes) {
		c.removeLocked(c.order.Front())
	}
}

func (c *ohMemo) removeLocked(el *list.Element) {
	old := c.order.Remove(el).(*ohMemoEntry)
	delete(c.m, old.key)
	c.bytes -= old.size
	old.size = 0
}

// claim returns the key's entry and whether the caller owns it (and must
// settle it).
func (c *ohMemo) claim(key string) (*ohMemoEntry, bool) {
	return c.claimFor(key, "")
}

// claimFor is claim for a request with fingerprint fp: an entry the
// caller does not own carries the fingerprint of the request that owns
// it (ohMemoEntry.fp), for the caller to compare.
func (c *ohMemo) claimFor(key, fp string) (*ohMemoEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		return el.Value.(*ohMemoEntry), false
	}
	ent := &ohMemoEntry{key: key, fp: fp, done: make(chan struct{})}
	c.m[key] = c.order.PushBack(ent)
	c.evictLocked()
	return ent, true
}

// settle records the owner's response and wakes the waiters; an entry
// that is not kept is forgotten, so the next claimant runs again. A kept
// response is measured by its encoding, which it keeps (raw) for the
// owner to write: resp must be complete.
func (c *ohMemo) settle(key string, ent *ohMemoEntry, resp *ohResponse, keep bool) {
	size := len(key) + len(ent.fp)
	if keep && resp != nil {
		if resp.raw == nil {
			resp.raw = resp.encode() // the memo's measure, and what the owner writes
		}
		size += len(resp.raw)
	}
	c.mu.Lock()
	ent.resp, ent.kept = resp, keep && resp != nil
	if el, ok := c.m[key]; ok && el.Value.(*ohMemoEntry) == ent {
		if keep {
			ent.size = size
			c.bytes += size
			c.evictLocked()
		} else {
			c.removeLocked(el)
		}
	}
	c.mu.Unlock()
	close(ent.done)
}

// settled reports whether the entry's owner settled it.
func (ent *ohMemoEntry) settled() bool {
	select {
	case <-ent.done:
		return true
	default:
		return false
	}
}

// forget drops the key's entry when it is still ent (an entry found
// stale: current), so that the next claimant runs the request.
func (c *ohMemo) forget(key string, ent *ohMemoEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok && el.Value.(*ohMemoEntry) == ent {
		c.removeLocked(el)
	}
}

// wait returns the entry's response once settled (nil if ctx ends first).
func (ent *ohMemoEntry) wait(ctx context.Context) *ohResponse {
	select {
	case <-ent.done:
		return ent.resp
	case <-ctx.Done():
		return nil
	}
}
