package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/session"
)

// The chat REST API (all under authentication, scoped to the caller's
// tenant):
//
//	POST   /v1/sessions                     create a session
//	GET    /v1/sessions                     list sessions
//	GET    /v1/sessions/{id}                read a session with its history (see history.go)
//	DELETE /v1/sessions/{id}                delete a session
//	POST   /v1/sessions/{id}/messages       send a message (synchronous outcome)
//	POST   /v1/sessions/{id}/signals        resume a suspended turn by signal id
//	GET    /v1/sessions/{id}/events         server-sent events (see events.go)
func (s *Server) chatRoutes() {
	s.handle("POST /v1/sessions", s.createSession)
	s.handle("GET /v1/sessions", s.listSessions)
	s.handle("GET /v1/sessions/{id}", s.getSession)
	s.handle("DELETE /v1/sessions/{id}", s.deleteSession)
	s.handle("POST /v1/sessions/{id}/messages", s.sendMessage)
	s.handle("POST /v1/sessions/{id}/signals", s.sendSignal)
}

// sessionID reads and validates the {id} path value.
func sessionID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !validID(id) {
		return "", badRequest("invalid session id: use 1-128 characters of [A-Za-z0-9._:-]")
	}
	return id, nil
}

// maxPageToken bounds a page_token query parameter.
const maxPageToken = 1024

// pageToken is the request's bounded page_token query parameter.
func pageToken(r *http.Request) (string, error) {
	tok := r.URL.Query().Get("page_token")
	if len(tok) > maxPageToken {
		return "", badRequest("page_token must not exceed %d bytes", maxPageToken)
	}
	return tok, nil
}

type createSessionRequest struct {
	SessionID string `json:"session_id"`
}

type sessionSummary struct {
	SessionID string    `json:"session_id"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// decodeCreateSession reads a create request (an empty body asks for a
// new id) and returns the session id, minted or checked.
func decodeCreateSession(r *http.Request) (string, error) {
	var req createSessionRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &req); err != nil {
			return "", err
		}
	}
	if req.SessionID == "" {
		return newSessionID(), nil
	}
	if !validID(req.SessionID) {
		return "", badRequest("invalid session id: use 1-128 characters of [A-Za-z0-9._:-]")
	}
	return req.SessionID, nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	id, err := decodeCreateSession(r)
	if err != nil {
		return err
	}
	req := createSessionRequest{SessionID: id}
	key := storeKey(tenantOf(r), req.SessionID)
	zero := int64(0)
	res, err := s.cfg.Sessions.Save(r.Context(), session.SaveRequest{SessionID: key, ExpectedVersion: &zero,
		State: map[string]json.RawMessage{chat.MessagesField: json.RawMessage("[]")}})
	if errors.Is(err, session.ErrWriteConflict) {
		return &Error{Status: http.StatusConflict, Code: "session_exists", Message: "the session already exists"}
	}
	if err != nil {
		return err
	}
	// The first write creates the session: its time is both.
	writeJSON(w, http.StatusCreated, sessionSummary{SessionID: req.SessionID, Version: res.Version, CreatedAt: res.UpdatedAt, UpdatedAt: res.UpdatedAt})
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r)
	prefix := storeKey(tenant, "")
	tok, err := pageToken(r)
	if err != nil {
		return err
	}
	resp, err := s.cfg.Sessions.List(r.Context(), session.ListRequest{IDPrefix: prefix, PageToken: tok, PageSize: 100})
	if err != nil {
		if errors.Is(err, session.ErrInvalidRequest) {
			return badRequest("invalid page token")
		}
		return err
	}
	out := struct {
		Sessions      []sessionSummary `json:"sessions"`
		NextPageToken string           `json:"next_page_token,omitempty"`
	}{Sessions: []sessionSummary{}, NextPageToken: resp.NextPageToken}
	for _, sm := range resp.Sessions {
		out.Sessions = append(out.Sessions, sessionSummary{SessionID: sm.SessionID[len(prefix):], Version: sm.Version,
			CreatedAt: sm.CreatedAt, UpdatedAt: sm.UpdatedAt})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	if err := discardBody(r); err != nil {
		return err
	}
	// The first agent's harness waits for the session's running turn;
	// under the session's lock the session's run records go (unless
	// kept for audit; those of the turns the history records as
	// committed even while started, as a turn another replica ran just
	// before writes its run's end after letting the session go: see
	// committedRuns), then the history, paused records and recorded
	// outcomes in one transaction, then the other agents' state (an
	// upstream's own session). The history goes after the run records:
	// a process killed between the two leaves the session, whose delete
	// then visibly did not finish and is done again, never a deleted
	// session whose runs and events remain readable (and would be
	// listed with a new conversation under its id). An upstream's own
	// session (ADK-Go's, Eino's checkpoints) still goes after the
	// history: a process killed in between leaves it until the session
	// is deleted again. A message sent meanwhile, to any agent, waits
	// and begins a new session.
	tenant := tenantOf(r)
	key := storeKey(tenant, id)
	first, rest := s.cfg.Agents[0].Chat, s.cfg.Agents[1:]
	var later []*chat.Harness // harnesses with locks of their own
	then := func(ctx context.Context) error {
		for _, a := range rest {
			if first.SharesLocks(a.Chat) {
				if err := a.Chat.DeleteLocked(ctx, key); err != nil {
					return err
				}
			} else {
				later = append(later, a.Chat)
			}
		}
		return nil
	}
	purge := func(ctx context.Context) error {
		if s.cfg.KeepRunsOnDelete {
			return nil
		}
		// The direct tool calls running on the session are of the
		// conversation deleted: their runs, which the purge keeps while
		// they run, go once they end.
		s.direct.deleted(key)
		committed, err := s.committedRuns(ctx, key, first, rest)
		if err != nil {
			return err
		}
		_, err = s.runs.PurgeSession(ctx, tenant, id, nil, committed...)
		if errors.Is(err, runtime.ErrInvalidConfig) {
			// A run store that cannot purge: the runs stay until
			// retention.
			s.log.Warn("server: the run store cannot delete a deleted session's runs; they are kept until retention prunes them")
			return nil
		}
		return err
	}
	if err := first.DeleteAround(r.Context(), key, purge, then, s.lockWait); err != nil {
		switch {
		case errors.Is(err, session.ErrNotFound):
			return notFound("session")
		case errors.Is(err, chat.ErrSessionBusy):
			return sessionBusy(err)
		}
		return err
	}
	for _, h := range later {
		if err := h.Delete(r.Context(), key, s.lockWait); err != nil {
			if errors.Is(err, chat.ErrSessionBusy) {
				// The rest was deleted; deleting again deletes this
				// agent's part.
				e := sessionBusy(err)
				e.Message = "the session was deleted, but another agent's state of it was not: a turn held it for longer than the server's session wait; try again"
				return e
			}
			return err
		}
	}
	answerDeadline(w) // the delete waited for the session's turn in flight
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// committedRuns returns the ids of the runs that committed to the
// session key's conversation, as its history records them (the record
// key of every turn, RunRecordKeyPrefix + run id: chat.Harness.
// RecordKeys) in the harnesses that hold it under first's locks: first
// and those of rest that share them. A delete calls it under the
// session's lock, before the history goes, and purges those runs even
// while they are started: a turn another replica ran just before (the
// delete waited for its lock) commits its history before it writes its
// run's end, which then finds the run gone. A store that cannot list
// its marks names none.
func (s *Server) committedRuns(ctx context.Context, key string, first *chat.Harness, rest []*Agent) ([]string, error) {
	var (
		ids  []string
		seen = map[string]bool{}
	)
	add := func(h *chat.Harness) error {
		keys, err := h.RecordKeys(ctx, key)
		if err != nil {
			return err
		}
		for _, k := range keys {
			// runtime.ValidMessageID checks the rules of every id the
			// run store takes: a key that could name no run is skipped.
			if id, ok := strings.CutPrefix(k, RunRecordKeyPrefix); ok && id != "" && runtime.ValidMessageID(id) && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		return nil
	}
	if err := add(first); err != nil {
		return nil, err
	}
	for _, a := range rest {
		if first.SharesLocks(a.Chat) {
			if err := add(a.Chat); err != nil {
				return nil, err
			}
		}
	}
	return ids, nil
}

// sendRequest is the body of POST /v1/sessions/{id}/messages: either
// content (a user text) or a full message.
type sendRequest struct {
	Content   string       `json:"content"`
	Message   *llm.Message `json:"message"`
	MessageID string       `json:"message_id"`
	Agent     string       `json:"agent"`
}

// maxAgentName bounds the agent (or task hint) a request names.
const maxAgentName = 128

// decodeSend reads and bounds a send request: message_id and agent
// within their limits, a message (content or message) to send.
func decodeSend(r *http.Request) (sendRequest, llm.Message, error) {
	var req sendRequest
	if err := decodeJSON(r, &req); err != nil {
		return req, llm.Message{}, err
	}
	var err error
	if req.MessageID, err = idempotencyKey(r, req.MessageID, "message_id"); err != nil {
		return req, llm.Message{}, err
	}
	switch {
	case len(req.MessageID) > chat.MaxIDLength:
		return req, llm.Message{}, badRequest("message_id must not exceed %d bytes", chat.MaxIDLength)
	case len(req.Agent) > maxAgentName:
		return req, llm.Message{}, badRequest("agent must not exceed %d bytes", maxAgentName)
	}
	msg := llm.UserText(req.Content)
	if m := req.Message; m != nil {
		// The agent answers the user: an assistant, system or tool
		// message would make it answer an earlier message again.
		switch {
		case req.Content != "":
			return req, llm.Message{}, badRequest("give content or message, not both")
		case m.Role != llm.RoleUser:
			return req, llm.Message{}, badRequest("message.role must be user (the agent answers the user's message), not %q", m.Role)
		}
		msg = *m
	}
	return req, msg, nil
}

// decodeSignal reads and bounds a signal request.
func decodeSignal(r *http.Request) (signalRequest, error) {
	var req signalRequest
	if err := decodeJSON(r, &req); err != nil {
		return req, err
	}
	var err error
	if req.RequestID, err = idempotencyKey(r, req.RequestID, "request_id"); err != nil {
		return req, err
	}
	switch {
	case req.SignalID == "" && req.InvocationID == "":
		return req, badRequest("signal_id or invocation_id is required")
	case len(req.SignalID) > chat.MaxIDLength:
		return req, badRequest("signal_id must not exceed %d bytes", chat.MaxIDLength)
	case len(req.InvocationID) > chat.MaxIDLength:
		return req, badRequest("invocation_id must not exceed %d bytes", chat.MaxIDLength)
	case len(req.RequestID) > chat.MaxIDLength:
		return req, badRequest("request_id must not exceed %d bytes", chat.MaxIDLength)
	case len(req.Agent) > maxAgentName:
		return req, badRequest("agent must not exceed %d bytes", maxAgentName)
	}
	return req, nil
}

// idempotencyKey returns the id a REST request is recorded under: the
// body's field (named field), else the Idempotency-Key header, as on the
// OpenAI endpoints (a client library that sends the header gets the same
// protection here); the two must agree when both are given.
func idempotencyKey(r *http.Request, fromBody, field string) (string, error) {
	key := r.Header.Get(IdempotencyHeader)
	switch {
	case key == "":
		return fromBody, nil
	case fromBody == "":
		return key, nil
	case fromBody != key:
		return "", badRequest("%s and the %s header differ: send one of them", field, IdempotencyHeader)
	}
	return fromBody, nil
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	req, msg, err := decodeSend(r)
	if err != nil {
		return err
	}
	a, err := s.agentFor(req.Agent)
	if err != nil {
		return err
	}
	resp := s.submit(r.Context(), tenantOf(r), a, id, adapter.SubmitRequest{Message: msg, MessageID: req.MessageID})
	writeJSON(w, http.StatusOK, renderOutcome(id, resp.RunID, resp.Outcome))
	return nil
}

type signalRequest struct {
	SignalID     string         `json:"signal_id"`
	InvocationID string         `json:"invocation_id"`
	Payload      map[string]any `json:"payload"`
	Agent        string         `json:"agent"`
	// RequestID makes the signal idempotent: a retransmission (a retry
	// after a dropped connection, on any replica, before or after a
	// restart) gets the recorded outcome of the turn it resumed.
	RequestID string `json:"request_id"`
}

func (s *Server) sendSignal(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	req, err := decodeSignal(r)
	if err != nil {
		return err
	}
	a, err := s.agentFor(req.Agent)
	if err != nil {
		return err
	}
	resp := s.submit(r.Context(), tenantOf(r), a, id, adapter.SubmitRequest{Agent: req.Agent, Signal: &adapter.Signal{SignalID: req.SignalID,
		InvocationID: req.InvocationID, Payload: req.Payload, RequestID: req.RequestID}})
	out, run := resp.Outcome, resp.RunID
	status := http.StatusOK
	if e, ok := out.(*chat.Errored); ok {
		switch e.Category {
		case errcat.HarnessSignalCorrelationFailed:
			status = http.StatusNotFound // nothing awaits it: superseded, cancelled or deleted
			if tookEffect(out) {
				status = http.StatusConflict // already decided, and the decision took effect
			}
		case errcat.SuspensionResumePayloadInvalid:
			status = http.StatusBadRequest // the approval stays pending
		case errcat.HarnessSignalSubscriptionFailed, errcat.SessionStoreUnavailable:
			status = http.StatusServiceUnavailable // not resolved now: try again
		}
	}
	writeJSON(w, status, renderOutcome(id, run, out))
	return nil
}

func outcomeName(o chat.Outcome) string {
	switch o.(type) {
	case *chat.Completed:
		return "completed"
	case *chat.Suspended:
		return "suspended"
	}
	return "errored"
}

// outcomeJSON is the REST rendering of a chat outcome.
type outcomeJSON struct {
	Outcome         string         `json:"outcome"`
	SessionID       string         `json:"session_id"`
	RunID           string         `json:"run_id,omitempty"`
	InvocationID    string         `json:"invocation_id,omitempty"`
	Resumed         bool           `json:"resumed,omitempty"`
	Replayed        bool           `json:"replayed,omitempty"`
	Superseded      []string       `json:"superseded,omitempty"`
	Usage           map[string]int `json:"usage,omitempty"`
	FinishReason    string         `json:"finish_reason,omitempty"`
	Replies         []llm.Message  `json:"replies,omitempty"`
	PendingMessages []llm.Message  `json:"pending_messages,omitempty"`
	Signal          *signalJSON    `json:"signal,omitempty"`
	Error           *turnErrorJSON `json:"error,omitempty"`
	Reply           *llm.Message   `json:"reply,omitempty"`
}

type signalJSON struct {
	SignalID string         `json:"signal_id"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

type turnErrorJSON struct {
	Bucket    string `json:"bucket"`
	Category  string `json:"category"`
	Retryable bool   `json:"retryable"`
	// RetryAfter is the wait, in seconds, a rate-limited upstream asked
	// for (at most a day), when it named one.
	RetryAfter int `json:"retry_after,omitempty"`
}

// runIDOf is the id of the run that answered with o: run, the run the
// server recorded for the turn, or for a replayed new turn (which ran
// nothing now) the run that recorded it: the run named by the record
// key the outcome was recorded under, or for a new turn recorded
// without one its invocation id (a new turn's run id). "" when no run
// answers for o.
func runIDOf(o chat.Outcome, run string) string {
	t := o.Info()
	if run != "" || !t.Replayed {
		return run
	}
	if id, ok := strings.CutPrefix(t.RecordKey, RunRecordKeyPrefix); ok && id != "" {
		return id
	}
	if !t.Resumed {
		return t.InvocationID
	}
	return ""
}

// renderOutcome renders o for the API with the caller's session id and
// the id of the turn's run.
func renderOutcome(id, run string, o chat.Outcome) outcomeJSON {
	t := o.Info()
	out := outcomeJSON{Outcome: outcomeName(o), SessionID: id, RunID: runIDOf(o, run), InvocationID: t.InvocationID, Resumed: t.Resumed,
		Replayed: t.Replayed, Superseded: t.Superseded, Usage: modelUsage(o), FinishReason: string(t.FinishReason)}
	switch o := o.(type) {
	case *chat.Completed:
		out.Replies = o.Replies
		if out.Replies == nil {
			out.Replies = []llm.Message{}
		}
	case *chat.Suspended:
		out.PendingMessages = o.PendingMessages
		out.Signal = &signalJSON{SignalID: o.Descriptor.SignalID, Metadata: o.Descriptor.Metadata}
	case *chat.Errored:
		out.Error = &turnErrorJSON{Bucket: string(o.Bucket), Category: string(o.Category), Retryable: o.Bucket == "retryable_transient",
			RetryAfter: upstreamWait(o)}
		if o.Category == errcat.HarnessSignalCorrelationFailed {
			out.Resumed = false // the signal resumed nothing
		}
		reply := o.Reply
		out.Reply = &reply
	}
	return out
}
