package adk

import (
	"context"
	"fmt"

	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"

	"github.com/armature-go/armature/llm"
)

// closeInvocation is the invocation id of the events that answer, in
// ADK-Go's session, calls whose confirmation nobody gave.
const closeInvocation = "armature-closed"

// closeConfirmations gives ADK-Go's session the runtime's answer to each
// call whose confirmation its last event still asks for, before a new
// message: the turn that asked was superseded by that message, or
// cancelled, and the runtime's history closed each call with a result
// saying it was not run (chat.DefaultSupersededResult,
// chat.DefaultCancelledResult). Without it ADK-Go would send the model
// the tool's "requires confirmation, please approve or reject" for the
// call, and the model would ask again. The answer is a function
// response of the agent for the original call, which ADK-Go's contents
// builder puts in place of the earlier one; ADK-Go's confirmation flow
// reads only the user's responses to its adk_request_confirmation calls,
// so nothing runs.
//
// Only a history ending in tool results (the runtime's closing ones)
// can have any: other turns do not read the session.
func (e *Engine) closeConfirmations(ctx context.Context, user, sessionID string, history []llm.Message) error {
	if n := len(history); n == 0 || history[n-1].Role != llm.RoleTool {
		return nil
	}
	last, err := e.lastEvent(ctx, user, sessionID)
	if err != nil || last == nil || last.Content == nil {
		return err
	}
	var parts []*genai.Part
	for _, p := range last.Content.Parts {
		if p.FunctionCall == nil || p.FunctionCall.Name != toolconfirmation.FunctionCallName {
			continue
		}
		orig, err := toolconfirmation.OriginalCallFrom(p.FunctionCall)
		if err != nil {
			continue // not a confirmation request ADK-Go could resume either
		}
		if text, ok := closingResult(history, orig.ID); ok {
			parts = append(parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: orig.ID, Name: orig.Name,
				Response: map[string]any{"result": text}}})
		}
	}
	if len(parts) == 0 {
		return nil
	}
	resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: user, SessionID: sessionID, NumRecentEvents: 1})
	if err != nil {
		return fmt.Errorf("adk: read session %q: %w", sessionID, err)
	}
	ev := session.NewEvent(ctx, closeInvocation)
	ev.Author = e.agent
	ev.LLMResponse = model.LLMResponse{Content: &genai.Content{Role: genai.RoleUser, Parts: parts}}
	if err := e.sessions.AppendEvent(ctx, resp.Session, ev); err != nil {
		return fmt.Errorf("adk: answer the unconfirmed calls of session %q: %w", sessionID, err)
	}
	return nil
}

// closingResult returns the text of the history's last result of call
// id (see storedAs).
func closingResult(history []llm.Message, id string) (string, bool) {
	for i := len(history) - 1; i >= 0; i-- {
		m := &history[i]
		if m.Role == llm.RoleTool && storedAs(m.ToolCallID, id) {
			return m.Text(), true
		}
	}
	return "", false
}
