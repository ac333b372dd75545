package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/armature-go/armature/agent"
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
func (s *Server) directTool(w http.ResponseWriter, r *http.Request) error {
	tenant, name := tenantOf(r), r.PathValue("tool")
	a, err := s.agentFor(r.PathValue("agent"))
	if err != nil {
		return notFound("agent " + r.PathValue("agent"))
	}
	var req directToolRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if len(req.Arguments) == 0 || string(req.Arguments) == "null" {
		req.Arguments = json.RawMessage(`{}`)
	}
	var args map[string]any
	if json.Unmarshal(req.Arguments, &args) != nil {
		return badRequest("arguments must be a JSON object")
	}
	if req.SessionID == "" {
		req.SessionID = newSessionID()
	} else if !validID(req.SessionID) {
		return badRequest("session_id must be 1-128 bytes of [A-Za-z0-9._:-]")
	}
	i := slices.IndexFunc(a.Gateway, func(t agent.Tool) bool { return t.Definition.Name == name })
	if !s.directToolAllowed(tenant, name) {
		return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: "the tenant may not call " + name + " directly"}
	}
	if i < 0 {
		return notFound("tool " + name + " of agent " + a.ID)
	}
	tool := a.Gateway[i]
	if tool.NeedsApproval {
		return &Error{Status: http.StatusForbidden, Code: CodeApprovalRequired,
			Message: "tool " + name + " needs approval and cannot be called directly: only a turn runs it, once approved"}
	}
	s.inflight.Add(1)
	defer s.inflight.Done()
	ctx := context.WithoutCancel(r.Context())
	turn, tctx, err := s.runs.Begin(ctx, runtime.BeginRequest{Tenant: tenant, SessionID: req.SessionID, AgentID: a.ID,
		CorrelationID: correlationOf(r.Context()), Adapter: a.backend()})
	if err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the run could not be recorded", Err: err}
	}
	_ = turn.Emit(tctx, runtime.EventToolDirectStarted, map[string]any{"toolId": name, "args": json.RawMessage(req.Arguments)})
	resp := directToolResponse{RunID: turn.ID(), SessionID: req.SessionID, Tool: name}
	out, callErr := tool.Call(tctx, req.Arguments)
	done := map[string]any{"toolId": name, "output": out}
	if callErr != nil {
		resp.Error = callErr.Error()
		done = map[string]any{"toolId": name, "output": "", "error": resp.Error}
	}
	resp.Output = out
	_ = turn.Emit(tctx, runtime.EventToolDirectCompleted, done)
	if err := turn.Complete(tctx, map[string]any{"tool": name, "output": out, "error": resp.Error}); err != nil {
		s.log.WarnContext(ctx, "server: recording a run's end failed", "run_id", turn.ID(), "error", err)
	}
	fctx, cancel := context.WithTimeout(ctx, ackFlushWait)
	defer cancel()
	_ = turn.Flush(fctx)
	writeJSON(w, http.StatusOK, resp)
	return nil
}
