package chatcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/armature-go/armature/internal/httpurl"
	"github.com/armature-go/armature/llm"
)

// ClientConfig configures a [Client]. Its zero value talks to
// [DefaultServer] without a token over http.DefaultClient.
type ClientConfig struct {
	// Server is the server's base URL; default [DefaultServer].
	Server string
	// Token is the bearer token sent on every request; none when empty.
	Token string
	// HTTPClient sends the requests; default http.DefaultClient. It must
	// not set an overall timeout, which would cut event streams: requests
	// are bounded by their contexts.
	HTTPClient *http.Client
	// ResendWait is how long [Client.SendMessage] waits before it sends a
	// message again, under its message id, whose answer was lost on the
	// way: a proxy or load balancer answered 502, 503 or 504 in the
	// server's place (one that drops a connection idle for 60 s cuts a
	// turn that long), or the connection failed once made (one that
	// could not be made is an error at once). The server runs the
	// message once whatever the number of sends: a resend waits for the
	// turn still running and answers its outcome. The wait doubles after
	// each resend, MaxResends at most. Default DefaultResendWait;
	// negative: never resend.
	ResendWait time.Duration
}

// DefaultResendWait is ClientConfig.ResendWait's default.
const DefaultResendWait = time.Second

// MaxResends bounds how many times [Client.SendMessage] sends a message
// again (see ClientConfig.ResendWait).
const MaxResends = 5

// DefaultServer is the server a [Client] talks to when none is set:
// armature serve's default listen address.
const DefaultServer = "http://127.0.0.1:8080"

// Validate reports whether the configuration can be used.
func (c ClientConfig) Validate() error {
	if c.Server == "" {
		return nil
	}
	if !httpurl.Valid(c.Server) {
		// Named redacted: the URL may carry a password.
		return fmt.Errorf("%w: server %q is not an http(s) URL", ErrInvalidConfig, httpurl.Redact(c.Server))
	}
	return nil
}

// Client is a client of the chat REST API of armature serve. It is safe
// for concurrent use.
type Client struct {
	base       string
	token      string
	http       *http.Client
	resendWait time.Duration
}

// NewClient returns a client for cfg.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{base: strings.TrimRight(cfg.Server, "/"), token: cfg.Token, http: cfg.HTTPClient, resendWait: cfg.ResendWait}
	if c.resendWait == 0 {
		c.resendWait = DefaultResendWait
	}
	if c.base == "" {
		c.base = DefaultServer
	}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	return c, nil
}

// Server returns the server's base URL.
func (c *Client) Server() string { return c.base }

// SessionSummary describes a session without its history.
type SessionSummary struct {
	SessionID string    `json:"session_id"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Session is a session with its history.
type Session struct {
	SessionSummary
	Messages []llm.Message `json:"messages"`
	// MessageOffset is the index in the history of Messages[0], and
	// MessageCount the history's length: a page of it
	// ([Client.SessionPage]) holds Messages from MessageOffset on.
	MessageOffset int `json:"message_offset"`
	MessageCount  int `json:"message_count"`
}

// Outcome is a turn's outcome as the server reports it: one of
// "completed" (Replies), "suspended" (Signal, PendingMessages) or
// "errored" (Error, Reply).
type Outcome struct {
	Outcome      string `json:"outcome"`
	SessionID    string `json:"session_id"`
	RunID        string `json:"run_id,omitempty"`
	InvocationID string `json:"invocation_id,omitempty"`
	Resumed      bool   `json:"resumed,omitempty"`
	// Replayed marks the recorded answer to a retransmission.
	Replayed bool `json:"replayed,omitempty"`
	// Superseded lists the signals of suspended turns this message
	// closed (their tool calls were not run).
	Superseded []string `json:"superseded,omitempty"`
	// Usage is the token usage of the turn's model calls
	// (prompt_tokens, completion_tokens, total_tokens, cached_tokens,
	// model_calls), and FinishReason the last call's finish reason.
	Usage           map[string]int `json:"usage,omitempty"`
	FinishReason    string         `json:"finish_reason,omitempty"`
	Replies         []llm.Message  `json:"replies,omitempty"`
	PendingMessages []llm.Message  `json:"pending_messages,omitempty"`
	Signal          *Signal        `json:"signal,omitempty"`
	Error           *TurnError     `json:"error,omitempty"`
	Reply           *llm.Message   `json:"reply,omitempty"`

	// tookEffect marks a signal refused with 409 (see
	// [Outcome.DecisionTookEffect]).
	tookEffect bool
}

// DecisionTookEffect reports whether the outcome is a signal's refused
// because its approval was already decided and that decision took effect
// (409, harness_signal_correlation_failed): an earlier answer — this
// client's before its connection dropped, or another client's — ran or
// refused the call, and answering again changes nothing. Otherwise a
// harness_signal_correlation_failed outcome (404) means nothing awaits
// the signal: a newer message, a cancel or a delete closed the turn.
func (o *Outcome) DecisionTookEffect() bool { return o != nil && o.tookEffect }

// Error categories the client acts on (TurnError.Category).
const (
	// CategoryCancelled: the turn was cancelled (Ctrl-C, another
	// client's cancel, the server's shutdown).
	CategoryCancelled = "invocation_cancelled"
	// CategorySignalCorrelationFailed: nothing awaits the signal.
	CategorySignalCorrelationFailed = "harness_signal_correlation_failed"
	// CategoryResumePayloadInvalid: the answer does not fit; the turn
	// stays suspended.
	CategoryResumePayloadInvalid = "suspension_resume_payload_invalid"
)

// The outcome names of [Outcome.Outcome]. They are wire identifiers and
// must not change.
const (
	OutcomeCompleted = "completed"
	OutcomeSuspended = "suspended"
	OutcomeErrored   = "errored"
)

// Signal is what a suspended turn awaits. An approval request's metadata
// names the tool ("tool"), its call ("call_id") and its "arguments".
type Signal struct {
	SignalID string         `json:"signal_id"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// InvocationID is the suspended turn's invocation (the outcome's
	// invocation_id, a runtime.request.suspended event's invocationId;
	// "" when not known). An answer naming it resumes only that turn:
	// not a later one of the session (deleted and begun again under the
	// same id) whose request carries the same signal id.
	InvocationID string `json:"invocation_id,omitempty"`
}

// bound returns o's signal with the invocation it suspends (nil when o
// carries none).
func (o *Outcome) bound() *Signal {
	if o.Signal == nil {
		return nil
	}
	sig := *o.Signal
	if sig.InvocationID == "" {
		sig.InvocationID = o.InvocationID
	}
	return &sig
}

// TurnError describes an errored turn: the harness error bucket and
// category.
type TurnError struct {
	Bucket    string `json:"bucket"`
	Category  string `json:"category"`
	Retryable bool   `json:"retryable"`
}

// Messages returns the assistant-visible messages of the outcome: the
// replies of a completed turn, the pending messages of a suspended one,
// the reply of an errored one.
func (o *Outcome) Messages() []llm.Message {
	switch o.Outcome {
	case OutcomeCompleted:
		return o.Replies
	case OutcomeSuspended:
		return o.PendingMessages
	}
	if o.Reply != nil {
		return []llm.Message{*o.Reply}
	}
	return nil
}

// CreateSession creates a session; id "" lets the server mint one.
func (c *Client) CreateSession(ctx context.Context, id string) (*SessionSummary, error) {
	var body any = struct{}{}
	if id != "" {
		if _, err := sessionPath(id); err != nil {
			return nil, err
		}
		body = map[string]string{"session_id": id}
	}
	var out SessionSummary
	if err := c.do(ctx, http.MethodPost, "/v1/sessions", body, &out); err != nil {
		return nil, err
	}
	if _, err := sessionPath(out.SessionID); err != nil {
		// A server that answered without a usable id (not armature
		// serve, or a proxy's page): nothing can be sent to it.
		return nil, fmt.Errorf("chatcli: the server created no usable session: %w", err)
	}
	return &out, nil
}

// CancelRun asks the server to cancel a run (POST /v1/runs/{id}/cancel):
// a running turn ends errored (invocation_cancelled), a suspended one is
// closed. It reports whether the server cancelled it (false: the run had
// ended).
func (c *Client) CancelRun(ctx context.Context, runID string) (bool, error) {
	var out struct {
		Cancelled bool `json:"cancelled"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/cancel", struct{}{}, &out)
	return out.Cancelled, err
}

// StartedRuns returns the ids of the session's runs still running (the
// newest page of its runs).
func (c *Client) StartedRuns(ctx context.Context, id string) ([]string, error) {
	return c.StartedRunsOf(ctx, id, "", "")
}

// StartedRunsOf is StartedRuns keeping only the runs of one turn: the
// run answering the message sent with messageID, when it is not empty,
// or the runs resuming the run parentID (a signal's), when it is not.
// A turn waiting for its session behind another's has a run but no
// event yet: this finds it, and not the other turn's.
func (c *Client) StartedRunsOf(ctx context.Context, id, messageID, parentID string) ([]string, error) {
	var page struct {
		Runs json.RawMessage `json:"runs"`
	}
	path, err := sessionPath(id)
	if err != nil {
		return nil, err
	}
	if err := c.do(ctx, http.MethodGet, path+"/runs", nil, &page); err != nil {
		return nil, err
	}
	runs, err := decodeList[struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		MessageID string `json:"messageId"`
		ParentID  string `json:"parentRequestId"`
	}](page.Runs, MaxRuns, "the page of runs", "runs")
	if err != nil {
		return nil, withOp(err, "GET "+path+"/runs")
	}
	var ids []string
	for _, r := range runs {
		if r.Status == "started" && (messageID == "" || r.MessageID == messageID) && (parentID == "" || r.ParentID == parentID) {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

// ListSessions lists the caller's sessions, all pages. More than
// [MaxSessions] sessions, or pages past the thousandth, are a
// [*TooLargeError].
func (c *Client) ListSessions(ctx context.Context) ([]SessionSummary, error) {
	var all []SessionSummary
	token := ""
	for pages := 0; ; pages++ {
		if pages == maxSessionPages {
			return nil, &TooLargeError{Op: "GET /v1/sessions", What: "the session list", Limit: maxSessionPages, Unit: "pages"}
		}
		var page struct {
			Sessions      json.RawMessage `json:"sessions"`
			NextPageToken string          `json:"next_page_token"`
		}
		path := "/v1/sessions"
		if token != "" {
			path += "?page_token=" + url.QueryEscape(token)
		}
		if err := c.do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return nil, err
		}
		sessions, err := decodeList[SessionSummary](page.Sessions, MaxSessions-len(all), "the session list", "sessions")
		var tl *TooLargeError
		if errors.As(err, &tl) {
			tl.Op, tl.Limit = "GET /v1/sessions", MaxSessions
		}
		if err != nil {
			return nil, withOp(err, "GET "+path)
		}
		all = append(all, sessions...)
		if page.NextPageToken == "" || page.NextPageToken == token {
			return all, nil
		}
		token = page.NextPageToken
	}
}

// GetSession reads a session with its history. A session that does not
// exist is an [*APIError] with status 404 (errors.Is [ErrNotFound]); a
// history larger than [MaxHistoryBytes] or [MaxHistoryMessages] is a
// [*TooLargeError].
func (c *Client) GetSession(ctx context.Context, id string) (*Session, error) {
	return c.readSession(ctx, id, "")
}

// SessionPage reads a session with a page of its history: its newest
// limit messages (1–10000) before the message at index before, or the
// newest when before is negative. The answer's MessageOffset is the
// index of its first message: the page before it is SessionPage(ctx,
// id, limit, MessageOffset). A server that does not page answers the
// whole history. Errors as [Client.GetSession]'s.
func (c *Client) SessionPage(ctx context.Context, id string, limit, before int) (*Session, error) {
	if limit < 1 || limit > MaxHistoryPage {
		return nil, fmt.Errorf("%w: a page of %d messages (from 1 to %d)", ErrInvalidPage, limit, MaxHistoryPage)
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if before >= 0 {
		q.Set("before", strconv.Itoa(before))
	}
	return c.readSession(ctx, id, "?"+q.Encode())
}

// MaxHistoryPage is the most messages [Client.SessionPage] asks for at a
// time (the server's most).
const MaxHistoryPage = 10000

// readSession reads the session id with its history, or the page query
// names.
func (c *Client) readSession(ctx context.Context, id, query string) (*Session, error) {
	path, err := sessionPath(id)
	if err != nil {
		return nil, err
	}
	var wire struct {
		SessionSummary
		Messages      json.RawMessage `json:"messages"`
		MessageOffset int             `json:"message_offset"`
		MessageCount  int             `json:"message_count"`
	}
	if err := c.doBounded(ctx, http.MethodGet, path+query, nil, &wire, MaxHistoryBytes, "the session's history"); err != nil {
		return nil, err
	}
	out := &Session{SessionSummary: wire.SessionSummary, MessageOffset: wire.MessageOffset, MessageCount: wire.MessageCount}
	if out.Messages, err = decodeList[llm.Message](wire.Messages, MaxHistoryMessages, "the session's history", "messages"); err != nil {
		return nil, withOp(err, "GET "+path)
	}
	if out.MessageOffset < 0 || out.MessageCount < out.MessageOffset+len(out.Messages) {
		// A server that does not page (or says nothing sensible of
		// where its messages stand): they are the whole history.
		out.MessageOffset, out.MessageCount = 0, len(out.Messages)
	}
	return out, nil
}

// Send sends a user text to the session and returns the turn's outcome.
// It blocks until the turn ends (completes, suspends or errors).
func (c *Client) Send(ctx context.Context, id, text string) (*Outcome, error) {
	return c.SendMessage(ctx, id, text, "")
}

// SendMessage is Send with the message's id (message_id, its
// idempotency key; none when empty): the turn's run carries it
// (messageId), which StartedRunsOf finds. With an id, a message whose
// answer was lost on the way (a proxy's 502, 503 or 504, or a failed
// connection) is sent again under it (see ClientConfig.ResendWait): the
// server runs it once and answers the turn's outcome.
func (c *Client) SendMessage(ctx context.Context, id, text, messageID string) (*Outcome, error) {
	path, err := sessionPath(id)
	if err != nil {
		return nil, err
	}
	body := map[string]string{"content": text}
	if messageID != "" {
		body["message_id"] = messageID
	}
	wait := c.resendWait
	for resends := 0; ; resends++ {
		var out Outcome
		err := c.do(ctx, http.MethodPost, path+"/messages", body, &out)
		if err == nil {
			return &out, nil
		}
		if messageID == "" || wait < 0 || resends == MaxResends || !lostAnswer(ctx, err) {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait *= 2
	}
}

// lostAnswer reports whether err, a request's failure, says its answer
// was lost on the way rather than given by the server: a gateway's 502,
// 503 or 504 (an answer that is not the server's JSON), or a connection
// that failed once made (reset, cut short), while ctx still runs. A
// connection that could not be made is not: the server never got the
// message, and the user learns it at once.
func lostAnswer(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return ae.Code == "" && ae.outcome == nil
		}
		return false
	}
	if oe := (*net.OpError)(nil); errors.As(err, &oe) && oe.Op == "dial" {
		return false // it never reached the server: said at once
	}
	var ue *url.Error
	return errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// Approval is the payload of an approval signal.
type Approval struct {
	Approved bool   `json:"approved"`
	Comment  string `json:"comment,omitempty"`
}

// Approve answers the approval request sig of the session's suspended
// turn and returns the resumed turn's outcome.
func (c *Client) Approve(ctx context.Context, id string, sig Signal, a Approval) (*Outcome, error) {
	return c.Signal(ctx, id, sig, map[string]any{"approval": a})
}

// Signal resumes the session's turn suspended on signalID with payload
// and returns the resumed turn's outcome.
//
// A signal the server refuses without running a turn still answers an
// errored outcome, returned with a nil error: nothing awaits the signal
// any more (404, category harness_signal_correlation_failed: a newer
// message superseded the turn, or the session was deleted; 409 with that
// category when it was already answered and the answer took effect,
// which [Outcome.DecisionTookEffect] reports), or the payload does not
// fit (400, suspension_resume_payload_invalid: the turn stays
// suspended).
func (c *Client) Signal(ctx context.Context, id string, sig Signal, payload map[string]any) (*Outcome, error) {
	path, err := sessionPath(id)
	if err != nil {
		return nil, err
	}
	var out Outcome
	body := map[string]any{"signal_id": sig.SignalID, "payload": payload}
	if sig.InvocationID != "" {
		body["invocation_id"] = sig.InvocationID
	}
	err = c.do(ctx, http.MethodPost, path+"/signals", body, &out)
	var ae *APIError
	if errors.As(err, &ae) && ae.outcome != nil {
		ae.outcome.tookEffect = ae.Status == http.StatusConflict && ae.outcome.Error.Category == CategorySignalCorrelationFailed
		return ae.outcome, nil
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// sessionPath returns the URL path of session id. An empty id, "." and
// ".." are [ErrInvalidSessionID]: no URL path carries them (a server
// cleans "/v1/sessions/.." to "/v1" and redirects "/v1/sessions/." to
// the session list), so the requests would reach another resource.
// Before, --session . "continued" a session by reading the session list,
// and --session .. created a session no request could reach.
func sessionPath(id string) (string, error) {
	switch id {
	case "", ".", "..":
		return "", fmt.Errorf("%w %q: a session id must not be empty, \".\" or \"..\"", ErrInvalidSessionID, id)
	}
	return "/v1/sessions/" + url.PathEscape(id), nil
}

// newRequest builds an authenticated request.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("chatcli: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends a JSON request and decodes a JSON answer of at most
// [MaxAnswerBytes] into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.doBounded(ctx, method, path, in, out, MaxAnswerBytes, "the answer")
}

// withOp names the request op in err when it is a [*TooLargeError]
// that does not name one yet, and adds the package prefix otherwise.
func withOp(err error, op string) error {
	var tl *TooLargeError
	if errors.As(err, &tl) {
		if tl.Op == "" {
			tl.Op = op
		}
		return err
	}
	return fmt.Errorf("chatcli: %s: %w", op, err)
}

// doBounded is do with an answer of at most limit bytes, what past it
// (a [*TooLargeError]): the rest of the answer is not read.
func (c *Client) doBounded(ctx context.Context, method, path string, in, out any, limit int64, what string) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("chatcli: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("chatcli: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return responseError(resp)
	}
	if out == nil {
		return nil
	}
	// The answer is read whole (up to the bound) before it is decoded,
	// as a decoder would hold it anyway: one past the bound costs no
	// decoding.
	b, err := io.ReadAll(&boundedReader{r: resp.Body, n: limit,
		err: &TooLargeError{Op: method + " " + path, What: what, Limit: limit, Unit: "bytes"}})
	var tl *TooLargeError
	if errors.As(err, &tl) {
		return tl
	}
	if err != nil {
		return fmt.Errorf("chatcli: %s %s: reading the answer: %w", method, path, err)
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(out); err != nil {
		return fmt.Errorf("chatcli: %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// responseError reads an error answer, at most [MaxErrorBytes] of it:
// the JSON error envelope {"error": {"code", "message"}}, else the
// body's first line (marked cut when the answer went on past the
// bound).
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBytes+1))
	cut := len(b) > MaxErrorBytes
	b = b[:min(len(b), MaxErrorBytes)]
	e := &APIError{Status: resp.StatusCode}
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error.Message != "" {
		e.Code, e.Message = env.Error.Code, env.Error.Message
		return e
	}
	var out Outcome
	if json.Unmarshal(b, &out) == nil && out.Outcome == OutcomeErrored && out.Error != nil {
		e.Code, e.outcome = out.Error.Category, &out
		if out.Reply != nil {
			e.Message = out.Reply.Text()
		}
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return e
	}
	msg, _, more := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if cut && !more {
		msg += " … (cut: the answer exceeds " + byteSize(MaxErrorBytes) + ")"
	}
	// Text decoded from JSON is valid UTF-8; this line is made so too:
	// a byte of an 8-bit C1 control in it (0x9b is CSI, 0x9d OSC to a
	// terminal not in UTF-8 mode) would reach the terminal as it is.
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e.Message = msg
	return e
}
