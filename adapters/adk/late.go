package adk

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/genai"

	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool/toolconfirmation"

	"github.com/armature-go/armature/adapter"
)

// lateKey is the context key of a confirmation's run's *late.
type lateKey struct{}

// late notes, during the run of a confirmation (Engine.confirm), the
// response of each call of the confirmed step as its tool answers it
// (noteLate), so that the calls that ran are recorded even when the run
// is cancelled before ADK-Go records them (Engine.recordLate).
type late struct {
	app, user, session string // the run's session: a nested run's tools are not its
	mu                 sync.Mutex
	noted              []lateResponse
}

// lateResponse is a noted call's function response and the result text
// the runtime saves for it (output, or errText for a failed call).
type lateResponse struct {
	id, name        string
	inv, branch     string // the run's invocation and branch
	resp            map[string]any
	output, errText string
}

// noteLate notes, in a confirmation's run, the response of the call ctx
// runs: its tool answered output, or failed with err (a denial too).
// Anywhere else it does nothing.
func noteLate(ctx adkagent.Context, name, output string, err error) {
	l, ok := ctx.Value(lateKey{}).(*late)
	if !ok || ctx.SessionID() != l.session || ctx.UserID() != l.user || ctx.AppName() != l.app {
		return
	}
	r := lateResponse{id: ctx.FunctionCallID(), name: name, inv: ctx.InvocationID(), branch: ctx.Branch(),
		resp: map[string]any{"result": output}, output: output}
	if err != nil {
		r.resp, r.output, r.errText = map[string]any{"error": err.Error()}, "", err.Error()
	}
	l.mu.Lock()
	l.noted = append(l.noted, r)
	l.mu.Unlock()
}

// recordLate records, after the run of a confirmation that was
// cancelled or failed, the calls of the confirmed step whose tools
// answered (noteLate) but whose responses ADK-Go did not record: ADK-Go
// stops recording once its context is cancelled, whether the cancel came
// while a tool ran or just after it returned. The missing responses are
// appended to the ADK session as one event, as ADK-Go's flow records a
// step's responses, and every noted call the session answers is
// reported to the runtime (adapter.ToolReturned), which saves its result
// with the session's position after it: the calls ran, and the model, reading either
// history, is told what they answered (or that they were denied), not
// that they still await a confirmation. It runs before the adapter's Run
// returns, while the turn holds its session.
func (e *Engine) recordLate(ctx context.Context, user, sessionID string, l *late) {
	l.mu.Lock()
	noted := l.noted
	l.noted = nil
	l.mu.Unlock()
	if len(noted) == 0 {
		return
	}
	wctx := context.WithoutCancel(ctx)
	got, err := e.sessions.Get(wctx, &session.GetRequest{AppName: e.app, UserID: user, SessionID: sessionID})
	if err != nil {
		return
	}
	// The responses recorded since the confirmation's message (the last
	// event answering adk_request_confirmation).
	recorded := map[string]bool{}
	events := got.Session.Events()
	for i := events.Len() - 1; i >= 0; i-- {
		ev := events.At(i)
		if ev.Content == nil {
			continue
		}
		confirmation := false
		for _, p := range ev.Content.Parts {
			if fr := p.FunctionResponse; fr != nil {
				confirmation = confirmation || fr.Name == toolconfirmation.FunctionCallName
				recorded[fr.ID] = true
			}
		}
		if confirmation {
			break
		}
	}
	var missing []lateResponse
	var parts []*genai.Part
	for _, r := range noted {
		if !recorded[r.id] {
			recorded[r.id] = true // a call noted twice is recorded once
			missing = append(missing, r)
			parts = append(parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: r.id, Name: r.name, Response: r.resp}})
		}
	}
	if len(missing) > 0 {
		ev := session.NewEvent(wctx, missing[0].inv)
		ev.LLMResponse = model.LLMResponse{Content: &genai.Content{Role: genai.RoleUser, Parts: parts}}
		ev.Author, ev.Branch = e.agent, missing[0].branch
		if e.sessions.AppendEvent(wctx, got.Session, ev) != nil {
			// Not recorded: the runtime's history and ADK-Go's session
			// both leave these calls unanswered, and agree.
			noted = slices.DeleteFunc(noted, func(r lateResponse) bool {
				return slices.ContainsFunc(missing, func(m lateResponse) bool { return m.id == r.id })
			})
		}
	}
	// Every call ADK-Go's session now answers is reported, those ADK-Go
	// recorded itself included: a cancel landing while ADK-Go wrote a
	// response (its write committed, its context cancelled) leaves it
	// in the session but never reported. The runtime saves each once
	// (a call it saved already is no longer open).
	for _, r := range noted {
		adapter.ToolReturned(ctx, r.id, r.output, r.errText)
	}
}
