package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/runtime"
)

// directToolRequest is the body of POST /v1/agents/{agent}/tools/{tool}.
type directToolRequest struct {
	// Arguments are the tool's arguments (a JSON object; default {}).
	Arguments json.RawMessage `json:"arguments"`
	// SessionID names the session the run is recorded under (minted
	// when empty); the session's history is not touched.
	SessionID string `json:"session_id"`
}

// directToolResponse answers a direct tool request.
type directToolResponse struct {
	RunID     string `json:"run_id"`
	SessionID string `json:"session_id"`
	Tool      string `json:"tool"`
	Output    string `json:"output,omitempty"`
	Error     string `json:"error,omitempty"`
}

// CodeApprovalRequired: a direct tool request named a tool that needs a
// human's approval (agent.Tool.NeedsApproval), which only a turn may run,
// after its approval (403, whatever Config.DirectTools allows).
const CodeApprovalRequired = "approval_required"

// directToolAllowed reports whether Config.DirectTools lets tenant call
// the named tool.
func (s *Server) directToolAllowed(tenant, tool string) bool {
	allowed := s.cfg.DirectTools[tenant]
	return slices.Contains(allowed, "*") || slices.Contains(allowed, tool)
}

// directTool serves POST /v1/agents/{agent}/tools/{tool}: an operator
// invokes one of an agent's declared tools without the model. The call
// is recorded as a run of the agent with runtime.tool.direct.started
// and runtime.tool.direct.completed events; a tool error completes the
// call with an error field (the tool ran). It is authorized per tenant
// (Config.DirectTools): another tool, or a tenant without an entry, is
// 403 forbidden. A tool that needs approval (agent.Tool.NeedsApproval)
// is never called directly, whatever Config.DirectTools says: the
// request is 403 approval_required, and no run is recorded and nothing
// runs (the approval a turn would wait for has no place here, and the
// agent promises such a tool never runs unapproved).
//
// A cancel (POST /v1/runs/{id}/cancel, or a stopping server) cancels the
// tool's context; the call's ending follows what the tool then did. A
// tool that returned an error (its context's, typically) was stopped:
// the run ends cancelled and the answer has the error. A tool that
// returned its output all the same (its effect happened) completed: the
// run ends completed with the output, and the answer has no error.
//
// The agent and tool names come from the URL: an agent name over
// maxAgentName bytes is 400, as on the other surfaces, and the errors
// quote at most maxEchoedName bytes of a name (see echoName).
func (s *Server) directTool(w http.ResponseWriter, r *http.Request) error {
	tenant, name, agentName := tenantOf(r), r.PathValue("tool"), r.PathValue("agent")
	if len(agentName) > maxAgentName {
		return badRequest("agent must not exceed %d bytes", maxAgentName)
	}
	a, err := s.agentFor(agentName)
	if err != nil {
		return notFound("agent " + echoName(agentName))
	}
	var req directToolRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	args, err := directArguments(req.Arguments)
	if err != nil {
		return badRequest("arguments must be a JSON object")
	}
	if req.SessionID == "" {
		req.SessionID = newSessionID()
	} else if !validID(req.SessionID) {
		return badRequest("session_id must be 1-128 bytes of [A-Za-z0-9._:-]")
	}
	i := slices.IndexFunc(a.Gateway, func(t agent.Tool) bool { return t.Definition.Name == name })
	if !s.directToolAllowed(tenant, name) {
		return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: "the tenant may not call " + echoName(name) + " directly"}
	}
	if i < 0 {
		return notFound("tool " + echoName(name) + " of agent " + echoName(a.ID))
	}
	tool := a.Gateway[i]
	if tool.NeedsApproval {
		return &Error{Status: http.StatusForbidden, Code: CodeApprovalRequired,
			Message: "tool " + echoName(name) + " needs approval and cannot be called directly: only a turn runs it, once approved"}
	}
	s.inflight.Add(1)
	defer s.inflight.Done()
	ctx := context.WithoutCancel(r.Context())
	key := storeKey(tenant, req.SessionID)
	call := s.direct.add(key)
	deleted := false
	defer func() {
		if !deleted {
			s.direct.done(key, call)
		}
	}()
	turn, tctx, err := s.runs.Begin(ctx, runtime.BeginRequest{Tenant: tenant, SessionID: req.SessionID, AgentID: a.ID,
		CorrelationID: correlationOf(r.Context()), Adapter: a.backend()})
	if err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the run could not be recorded", Err: err}
	}
	sctx, scancel := context.WithTimeout(ctx, ackFlushWait)
	defer scancel()
	// The call's start is in the store before the tool runs: a process
	// killed while it runs leaves a run (ended run_interrupted at the
	// next start) that says which tool ran, with which arguments.
	_ = turn.Emit(tctx, runtime.EventToolDirectStarted, map[string]any{"toolId": name, "args": args})
	if err := turn.Sync(sctx); err != nil {
		_ = turn.Fail(ctx, runtime.RunError{Bucket: string(harness.RetryableTransient), Category: string(errcat.InvocationCancelled), Message: "the call's start could not be recorded; the tool did not run"})
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the run could not be recorded; the tool did not run", Err: err}
	}
	resp := directToolResponse{RunID: turn.ID(), SessionID: req.SessionID, Tool: name}
	out, callErr := callDirect(tctx, tool.Bounded(a.ToolTimeout, a.MaxToolResultBytes), args)
	done := map[string]any{"toolId": name, "output": out}
	if callErr != nil {
		resp.Error = callErr.Error()
		done = map[string]any{"toolId": name, "output": "", "error": resp.Error}
	}
	resp.Output = out
	_ = turn.Emit(tctx, runtime.EventToolDirectCompleted, done)
	var endErr error
	if callErr != nil && errors.Is(context.Cause(tctx), runtime.ErrCancelled) {
		// POST /v1/runs/{id}/cancel (or a stopping server) stopped the
		// call: the tool gave up with an error. Its run ends cancelled,
		// as a cancelled turn's does.
		endErr = turn.CancelledFor(ctx, runtime.CauseRequested, "cancelled by request")
	} else {
		// The tool returned: whatever a cancel that came meanwhile
		// asked, the call did what it did. A tool that does not consult
		// its context (a payment, a request already sent) completes,
		// and its run says so.
		endErr = turn.Complete(context.WithoutCancel(tctx), map[string]any{"tool": name, "output": out, "error": resp.Error})
	}
	if endErr != nil {
		s.log.WarnContext(ctx, "server: recording a run's end failed", "run_id", turn.ID(), "error", endErr)
	}
	// The flush's wait begins once the tool has ended (a call may run
	// for its whole ToolTimeout, past ackFlushWait).
	fctx, cancel := context.WithTimeout(ctx, ackFlushWait)
	defer cancel()
	_ = turn.Flush(fctx)
	if deleted = s.direct.done(key, call); deleted {
		// The session was deleted while the call ran: the call was of
		// the deleted conversation, and the delete kept its run only
		// because it was still running. It goes now, its end written.
		if _, err := s.runs.PurgeRuns(fctx, tenant, req.SessionID, turn.ID()); err != nil && !errors.Is(err, runtime.ErrInvalidConfig) {
			s.log.WarnContext(ctx, "server: deleting the direct call run of a deleted session failed", "run_id", turn.ID(), "error", err)
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// directArguments returns a direct call's arguments (a JSON object;
// none or null is {}) decoded and encoded again: the tool gets these
// bytes and the run's runtime.tool.direct.started records them, so what
// is recorded is what ran, and it is valid UTF-8 JSON whatever the
// request held (an invalid UTF-8 byte inside a string becomes U+FFFD, as
// decoding it makes it; an escaped lone surrogate too), byte for byte
// as the event records it (compact, < > & as they are). Numbers keep
// their text (json.Number: an id past 2^53 is not rounded); keys come
// sorted, a repeated key once (its last value, as decoding takes it).
// Anything but an object is an error.
func directArguments(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, err
	}
	if args == nil {
		return nil, errors.New("the arguments are not an object")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the tool gets "<b>", not "\u003cb\u003e"
	if err := enc.Encode(args); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// maxEchoedName bounds what an error message quotes of a name a request
// gave (echoName).
const maxEchoedName = 64

// echoName quotes a name a request gave for an error message: at most
// maxEchoedName bytes of it (cut on a character boundary, an ellipsis
// marking the cut), with control characters and invalid UTF-8 escaped,
// so that a long name is not answered back in full.
func echoName(name string) string {
	if len(name) <= maxEchoedName {
		return strconv.Quote(name)
	}
	n := maxEchoedName
	for back := 0; back < utf8.UTFMax-1 && !utf8.RuneStart(name[n]); back++ {
		n-- // a character cut in two; invalid bytes are cut anywhere
	}
	return strconv.Quote(name[:n]) + "…"
}

// callDirect calls tool as the agent calls its tools: a panic is the
// call's error ("the tool failed: ..."), not the request's end.
func callDirect(ctx context.Context, tool agent.Tool, args json.RawMessage) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("the tool failed: %v", p)
		}
	}()
	if tool.Call == nil {
		return "", errors.New("the tool has no implementation")
	}
	return tool.Call(ctx, args)
}

// directCalls are the direct tool calls running in this process, by
// session (storeKey): a session's delete marks those of the session,
// whose runs it keeps while they run, and each call purges its own run
// once ended when marked. The zero value is ready.
type directCalls struct {
	mu sync.Mutex
	m  map[string]map[*directCall]struct{}
}

// directCall is one running direct call.
type directCall struct {
	deleted bool // its session was deleted while it ran; guarded by directCalls.mu
}

// add registers a call on the session key.
func (d *directCalls) add(key string) *directCall {
	c := &directCall{}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = make(map[string]map[*directCall]struct{})
	}
	if d.m[key] == nil {
		d.m[key] = make(map[*directCall]struct{})
	}
	d.m[key][c] = struct{}{}
	return c
}

// done unregisters c and reports whether its session was deleted while
// it ran.
func (d *directCalls) done(key string, c *directCall) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if calls := d.m[key]; calls != nil {
		delete(calls, c)
		if len(calls) == 0 {
			delete(d.m, key)
		}
	}
	return c.deleted
}

// deleted marks the calls running on the session key: the session is
// being deleted.
func (d *directCalls) deleted(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.m[key] {
		c.deleted = true
	}
}
