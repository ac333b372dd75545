package adk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/database"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"
	gormpostgres "gorm.io/driver/postgres"
	gormsqlite "gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/armature-go/armature/llm"
)

// Position returns where ADK session sessionID of user stands: the
// time of its last event, in microseconds since the Unix epoch (the
// precision ADK-Go's database keeps), or 0 when the session holds no
// event or does not exist.
func (e *Engine) Position(ctx context.Context, user, sessionID string) (int64, error) {
	last, err := e.lastEvent(ctx, user, sessionID)
	if err != nil || last == nil {
		return 0, err
	}
	return last.Timestamp.UnixMicro(), nil
}

// Rewind removes the events ADK session sessionID of user holds after
// position at (a [Engine.Position]; 0 removes them all, and the session
// with them) and returns how many it removed. The session's state
// becomes what its remaining events made it (ADK-Go's app: and user:
// state, shared with other sessions, is left as it is). It reads only
// the session's last event when there is nothing to remove.
//
// The runtime rewinds a session to the position its last committed turn
// left (adapter.Result.Cursor), so that a turn ADK-Go recorded but the
// runtime did not (the turn failed or was cancelled, the runtime's
// session write failed, or the process died between the two writes)
// does not reach the model again. On a session database, the events go
// and the state is rewritten in one transaction; on the in-memory
// service, the session is built again from the events kept.
func (e *Engine) Rewind(ctx context.Context, user, sessionID string, at int64) (int, error) {
	last, err := e.lastEvent(ctx, user, sessionID)
	if err != nil || last == nil || last.Timestamp.UnixMicro() <= at {
		return 0, err
	}
	return e.rewind(ctx, user, sessionID, at)
}

// rewind is Rewind once the session's last event is known to be after
// at.
func (e *Engine) rewind(ctx context.Context, user, sessionID string, at int64) (int, error) {
	resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: user, SessionID: sessionID})
	if err != nil {
		return 0, fmt.Errorf("adk: rewind session %q: %w", sessionID, err)
	}
	var kept, dropped []*session.Event
	for ev := range resp.Session.Events().All() {
		if ev.Timestamp.UnixMicro() > at {
			dropped = append(dropped, ev)
		} else {
			kept = append(kept, ev)
		}
	}
	switch {
	case len(dropped) == 0:
		return 0, nil
	case len(kept) == 0:
		err = e.sessions.Delete(ctx, &session.DeleteRequest{AppName: e.app, UserID: user, SessionID: sessionID})
	case e.db != nil:
		err = e.rewindSQL(ctx, user, sessionID, kept, dropped)
	default:
		err = e.rebuild(ctx, user, sessionID, kept)
	}
	if err != nil {
		return 0, fmt.Errorf("adk: rewind session %q: %w", sessionID, err)
	}
	return len(dropped), nil
}

// seededAt returns the position of the last event the session was
// seeded with (see seed), and whether it holds one.
func (e *Engine) seededAt(ctx context.Context, user, sessionID string) (int64, bool, error) {
	resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: user, SessionID: sessionID})
	if err != nil {
		return 0, false, fmt.Errorf("adk: read session %q: %w", sessionID, err)
	}
	var at int64
	found := false
	for ev := range resp.Session.Events().All() {
		if ev.InvocationID == seedInvocation {
			at, found = max(at, ev.Timestamp.UnixMicro()), true
		}
	}
	return at, found, nil
}

// lastEvent returns the session's last event: nil when the session
// holds none or does not exist.
func (e *Engine) lastEvent(ctx context.Context, user, sessionID string) (*session.Event, error) {
	resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: user, SessionID: sessionID, NumRecentEvents: 1})
	if err != nil {
		// The in-memory service fails a Get only for a session it does
		// not hold; the database service wraps GORM's not-found error.
		if e.db == nil || errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("adk: read session %q: %w", sessionID, err)
	}
	var last *session.Event
	for ev := range resp.Session.Events().All() {
		if last == nil || ev.Timestamp.After(last.Timestamp) {
			last = ev
		}
	}
	return last, nil
}

// rewindSQL deletes the dropped events of a session on a session
// database and sets its state to what the kept events made it, in one
// transaction (ADK-Go's tables, as its GORM schema names them).
func (e *Engine) rewindSQL(ctx context.Context, user, sessionID string, kept, dropped []*session.Event) error {
	state, err := json.Marshal(sessionState(kept))
	if err != nil {
		return err
	}
	ph := func(i int) string {
		if e.driver == SessionPostgres {
			return "$" + strconv.Itoa(i)
		}
		return "?"
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	del := "DELETE FROM events WHERE app_name = " + ph(1) + " AND user_id = " + ph(2) + " AND session_id = " + ph(3) + " AND id = " + ph(4)
	for _, ev := range dropped {
		if _, err := tx.ExecContext(ctx, del, e.app, user, sessionID, ev.ID); err != nil {
			return err
		}
	}
	upd := "UPDATE sessions SET state = " + ph(1) + " WHERE app_name = " + ph(2) + " AND user_id = " + ph(3) + " AND id = " + ph(4)
	if _, err := tx.ExecContext(ctx, upd, string(state), e.app, user, sessionID); err != nil {
		return err
	}
	return tx.Commit()
}

// rebuild replaces a session of a service without transactions (the
// in-memory one) with a session holding only the kept events.
func (e *Engine) rebuild(ctx context.Context, user, sessionID string, kept []*session.Event) error {
	if err := e.sessions.Delete(ctx, &session.DeleteRequest{AppName: e.app, UserID: user, SessionID: sessionID}); err != nil {
		return err
	}
	created, err := e.sessions.Create(ctx, &session.CreateRequest{AppName: e.app, UserID: user, SessionID: sessionID})
	if err != nil {
		return err
	}
	for _, ev := range kept {
		if err := e.unordered().AppendEvent(ctx, created.Session, ev); err != nil {
			return err
		}
	}
	return nil
}

// sessionState is the session-scoped state events leave, as ADK-Go's
// services apply their state deltas: app:, user: and temp: keys are not
// the session's.
func sessionState(events []*session.Event) map[string]any {
	state := map[string]any{}
	for _, ev := range events {
		for k, v := range ev.Actions.StateDelta {
			if strings.HasPrefix(k, session.KeyPrefixApp) || strings.HasPrefix(k, session.KeyPrefixUser) || strings.HasPrefix(k, session.KeyPrefixTemp) {
				continue
			}
			state[k] = v
		}
	}
	return state
}

// Seed gives ADK session sessionID of user the conversation history
// (the runtime's history of the session) when the session holds no
// event, and returns how many events it appended: none when the session
// holds events already. Each user message becomes a user event, each
// assistant message (its text and tool calls) an event of the agent,
// each tool result the agent's function response; system messages are
// left out (the agent's instruction is ADK-Go's). Nothing is run: the
// events are the model's context for the session's next turns. A seed
// that fails part way removes what it appended.
//
// The runtime's history reaches ADK-Go this way when ADK-Go's session
// never saw it: a conversation a client of the OpenAI-compatible
// endpoint sends whole, or a session the in-memory service lost in a
// restart.
func (e *Engine) Seed(ctx context.Context, user, sessionID string, history []llm.Message) (int, error) {
	last, err := e.lastEvent(ctx, user, sessionID)
	if err != nil || last != nil {
		return 0, err
	}
	return e.seed(ctx, user, sessionID, history, nil)
}

// seed is Seed once the session is known to hold no event. With pending
// confirmations (a resume of a turn whose ADK session was lost), the
// history is seeded up to the assistant message holding the first
// pending call (what follows it is the runtime's approval prompt, which
// ADK-Go never held), and then ADK-Go's own events of the pending
// confirmations: the tool's "requires confirmation" response and the
// adk_request_confirmation calls, under their original ids, so that the
// resume answers them as it would have before the loss.
func (e *Engine) seed(ctx context.Context, user, sessionID string, history []llm.Message, pending []Pending) (int, error) {
	var step *llm.Message // the assistant message holding the pending calls
	var ran []llm.Message // the results of its calls that ran
	if len(pending) > 0 {
		k, ids := pendingCalls(history, pending)
		if k < 0 {
			pending = nil // not this session's history: the resume fails with ErrNoPending
		} else {
			pending = slices.Clone(pending)
			for i := range pending {
				pending[i].CallID = ids[i]
			}
			step, ran = &history[k], stepResults(history[k], history[k+1:], pending)
			history = history[:k+1]
		}
	}
	contents, authors, err := e.seedContents(history)
	if err != nil || len(contents) == 0 {
		return 0, err
	}
	events := make([]*session.Event, len(contents), len(contents)+2)
	for i, c := range contents {
		events[i] = session.NewEvent(ctx, seedInvocation)
		events[i].Author = authors[i]
		events[i].LLMResponse = model.LLMResponse{Content: c}
	}
	if len(pending) > 0 {
		if events, err = e.pendingEvents(ctx, events, step, ran, pending); err != nil {
			return 0, err
		}
	}
	if e.db != nil {
		err = e.seedSQL(ctx, user, sessionID, events)
	} else if err = appendSeed(ctx, e.unordered(), e.app, user, sessionID, events); err != nil {
		// All or nothing: a session seeded in part would keep that part
		// (it holds events: the next turn does not seed it).
		err = errors.Join(err, e.sessions.Delete(context.WithoutCancel(ctx), &session.DeleteRequest{AppName: e.app, UserID: user, SessionID: sessionID}))
	}
	if err != nil {
		return 0, fmt.Errorf("adk: seed session %q: %w", sessionID, err)
	}
	return len(events), nil
}

// pendingCalls finds the assistant message of history holding the
// pending calls (the last one holding the first of them) and the ids the
// history stores them under: the upstream's, or the fresh id the runtime
// gave a call whose id the history held already (the upstream's id, an
// underscore and more; see adapter.Compile). k is -1 when no message
// holds them all.
func pendingCalls(history []llm.Message, pending []Pending) (k int, ids []string) {
	for k = len(history) - 1; k >= 0; k-- {
		m := &history[k]
		if !slices.ContainsFunc(m.ToolCalls, func(tc llm.ToolCall) bool { return storedAs(tc.ID, pending[0].CallID) }) {
			continue
		}
		ids = make([]string, len(pending))
		for i, p := range pending {
			j := slices.IndexFunc(m.ToolCalls, func(tc llm.ToolCall) bool { return tc.ID == p.CallID })
			if j < 0 {
				j = slices.IndexFunc(m.ToolCalls, func(tc llm.ToolCall) bool { return storedAs(tc.ID, p.CallID) && tc.Name == p.Tool })
			}
			if j < 0 {
				return -1, nil
			}
			ids[i] = m.ToolCalls[j].ID
		}
		return k, ids
	}
	return -1, nil
}

// storedAs reports whether a call the history stores under stored is
// the upstream's call id: under that id, or under the fresh id the
// runtime gave a call whose id the history held already (the upstream's
// id, an underscore and more; see adapter.Compile).
func storedAs(stored, id string) bool {
	return stored == id || strings.HasPrefix(stored, id+"_")
}

// stepResults returns the results, among the messages after the
// assistant message step, of step's calls that ran: those not pending.
// ADK-Go runs the calls of one model step together, the ones needing no
// confirmation at once, and records their responses in one event with
// the confirmation requests.
func stepResults(step llm.Message, after []llm.Message, pending []Pending) []llm.Message {
	var ran []llm.Message
	for _, m := range after {
		if m.Role != llm.RoleTool {
			continue
		}
		ours := slices.ContainsFunc(step.ToolCalls, func(tc llm.ToolCall) bool { return tc.ID == m.ToolCallID })
		if ours && !slices.ContainsFunc(pending, func(p Pending) bool { return p.CallID == m.ToolCallID }) {
			ran = append(ran, m)
		}
	}
	return ran
}

// pendingEvents appends to events the two events ADK-Go records when a
// tool call needs confirmation: the function responses of the model
// step's calls (step's, in its order: the results of those that ran, ran,
// and each pending tool's "requires confirmation" error, the requested
// confirmations in the event's actions) and the adk_request_confirmation
// calls, long-running, each carrying its original call.
func (e *Engine) pendingEvents(ctx context.Context, events []*session.Event, step *llm.Message, ran []llm.Message, pending []Pending) ([]*session.Event, error) {
	resp := session.NewEvent(ctx, seedInvocation)
	resp.Author = e.agent
	resp.Actions.RequestedToolConfirmations = make(map[string]toolconfirmation.ToolConfirmation, len(pending))
	req := session.NewEvent(ctx, seedInvocation)
	req.Author = e.agent
	var rparts, qparts []*genai.Part
	for _, p := range pending {
		var args map[string]any
		if len(p.Args) > 0 {
			if err := json.Unmarshal(p.Args, &args); err != nil {
				return nil, fmt.Errorf("%w: the arguments of call %q: %w", ErrNoPending, p.CallID, err)
			}
		}
		conf := toolconfirmation.ToolConfirmation{Hint: p.Hint}
		resp.Actions.RequestedToolConfirmations[p.CallID] = conf
		qparts = append(qparts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: p.ConfirmationID, Name: toolconfirmation.FunctionCallName,
			Args: map[string]any{"originalFunctionCall": map[string]any{"id": p.CallID, "name": p.Tool, "args": args}, "toolConfirmation": conf}}})
		req.LongRunningToolIDs = append(req.LongRunningToolIDs, p.ConfirmationID)
	}
	for _, tc := range step.ToolCalls {
		if i := slices.IndexFunc(pending, func(p Pending) bool { return p.CallID == tc.ID }); i >= 0 {
			p := pending[i]
			rparts = append(rparts, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: p.CallID, Name: p.Tool,
				Response: map[string]any{"error": fmt.Sprintf("error tool %q %v", p.Tool, tool.ErrConfirmationRequired)}}})
		} else if j := slices.IndexFunc(ran, func(m llm.Message) bool { return m.ToolCallID == tc.ID }); j >= 0 {
			rparts = append(rparts, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: tc.ID, Name: tc.Name,
				Response: map[string]any{"result": ran[j].Text()}}})
		}
	}
	resp.LLMResponse = model.LLMResponse{Content: &genai.Content{Role: genai.RoleUser, Parts: rparts}}
	req.LLMResponse = model.LLMResponse{Content: &genai.Content{Role: genai.RoleModel, Parts: qparts}}
	return append(events, resp, req), nil
}

// seedSQL seeds a session on a session database in one transaction:
// ADK-Go's database service, run on the transaction, appends the events
// (one transaction each on its own: a long history took most of a
// millisecond per message on SQLite), and a failure leaves nothing.
func (e *Engine) seedSQL(ctx context.Context, user, sessionID string, events []*session.Event) error {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var dial gorm.Dialector = gormsqlite.New(gormsqlite.Config{Conn: tx})
	if e.driver == SessionPostgres {
		dial = gormpostgres.New(gormpostgres.Config{Conn: tx})
	}
	// The service's own transactions run as part of tx (GORM nests none
	// in a transaction it was handed).
	svc, err := database.NewSessionService(dial, &gorm.Config{Logger: logger.Default.LogMode(logger.Silent),
		DisableNestedTransaction: true, SkipDefaultTransaction: true, DisableAutomaticPing: true})
	if err != nil {
		return err
	}
	if e.driver == SessionPostgres {
		svc = nulFree{svc}
	}
	if err := appendSeed(ctx, svc, e.app, user, sessionID, events); err != nil {
		return err
	}
	return tx.Commit()
}

// appendSeed appends the seeded events to the session of svc (creating
// it when it does not exist), one microsecond apart (the database's
// precision) and all before the turn about to run: ADK-Go orders a
// session's events by time.
func appendSeed(ctx context.Context, svc session.Service, app, user, sessionID string, events []*session.Event) error {
	resp, err := svc.Get(ctx, &session.GetRequest{AppName: app, UserID: user, SessionID: sessionID, NumRecentEvents: 1})
	var sess session.Session
	if err == nil {
		sess = resp.Session
	} else {
		created, err := svc.Create(ctx, &session.CreateRequest{AppName: app, UserID: user, SessionID: sessionID})
		if err != nil {
			return err
		}
		sess = created.Session
	}
	start := time.Now().Add(-time.Duration(len(events)+1) * time.Microsecond).Truncate(time.Microsecond)
	for i, ev := range events {
		ev.Timestamp = start.Add(time.Duration(i) * time.Microsecond)
		if err := svc.AppendEvent(ctx, sess, ev); err != nil {
			return err
		}
	}
	return nil
}

// seedInvocation is the invocation id of seeded events.
const seedInvocation = "armature-history"

// seedContents converts a history into ADK-Go contents and their
// authors.
func (e *Engine) seedContents(history []llm.Message) ([]*genai.Content, []string, error) {
	names := map[string]string{} // tool call id → tool name
	contents := make([]*genai.Content, 0, len(history))
	authors := make([]string, 0, len(history))
	var asides llm.AsideFilter
	var ids callIDs
	for _, m := range history {
		if asides.Aside(&m) {
			// An approval request standing inside a tool-call group: the
			// runtime's, never the model's (nor sent to it).
			continue
		}
		var c *genai.Content
		author := e.agent
		switch m.Role {
		case llm.RoleUser:
			var err error
			if c, err = userContent(m); err != nil {
				return nil, nil, err
			}
			author = "user"
		case llm.RoleAssistant:
			m.ToolCalls = ids.calls(history, m.ToolCalls)
			var err error
			if c, err = fromLLMMessage(m); err != nil {
				return nil, nil, err
			}
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
			}
		case llm.RoleTool:
			id := ids.result(m.ToolCallID)
			c = &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{
				ID: id, Name: names[id], Response: map[string]any{"result": m.Text()}}}}}
		}
		if c == nil || len(c.Parts) == 0 {
			continue
		}
		contents, authors = append(contents, c), append(authors, author)
	}
	return contents, authors, nil
}

// callIDs gives the calls of a seeded history ids unique in it. ADK-Go
// answers each call with the last response of its id, so a history a
// client sends whole in which two calls share an id (a model numbering
// its calls alike, call_0 each turn) would tell the model the later
// call's result for both. A call repeating an earlier call's id is
// seeded under a fresh one (the id, an underscore and a number, as
// adapter.Compile renames such a call), and the results after it that
// answer its id answer it.
type callIDs struct {
	all     map[string]bool   // every call id of the history, and those given
	current map[string]string // a repeated id → the id its latest call was given
}

// calls returns an assistant message's calls with ids unique in the
// seeded history (tcs itself when none repeats).
func (c *callIDs) calls(history []llm.Message, tcs []llm.ToolCall) []llm.ToolCall {
	out := tcs
	for i, tc := range tcs {
		if c.all == nil {
			c.all, c.current = map[string]bool{}, map[string]string{}
			for _, m := range history {
				for _, tc := range m.ToolCalls {
					c.all[tc.ID] = true
				}
			}
		}
		if _, repeated := c.current[tc.ID]; !repeated {
			c.current[tc.ID] = tc.ID
			continue
		}
		fresh := tc.ID
		for n := 2; c.all[fresh]; n++ {
			fresh = tc.ID + "_" + strconv.Itoa(n)
		}
		c.all[fresh], c.current[tc.ID] = true, fresh
		if &out[0] == &tcs[0] {
			out = slices.Clone(tcs)
		}
		out[i].ID = fresh
	}
	return out
}

// result returns the id the call a result of id answers was seeded
// under.
func (c *callIDs) result(id string) string {
	if fresh, ok := c.current[id]; ok {
		return fresh
	}
	return id
}

// sync brings ADK session sessionID of user in line with the runtime's
// session before a turn, reading its last event once: it rolls back
// what followed the committed position at (when known is false, what
// followed the events the session was seeded with, if any: no turn
// committed since; a session an earlier build wrote, which carries no
// position, is left as it is), and gives
// a session without events, or one missing turns the runtime committed,
// the runtime's history (and, for a resume, the pending confirmations it
// answers).
//
// lastUser, the committed cursor's sum of its history's last user
// message (see cursor), spares the read of ADK-Go's recent events that
// tells another agent's turns (syncForeign) when the history still ends
// with that message.
func (e *Engine) sync(ctx context.Context, user, sessionID string, at int64, known bool, lastUser string, history []llm.Message, pending []Pending) error {
	foreign := func() error {
		if lastUser != "" && lastUser == historyUserSum(history) {
			return nil // the history's last user message is the one this agent's last turn committed
		}
		return e.syncForeign(ctx, user, sessionID, history, pending)
	}
	last, err := e.lastEvent(ctx, user, sessionID)
	switch {
	case err != nil:
		return err
	case last == nil:
		_, err = e.seed(ctx, user, sessionID, history, pending)
	case last.Author != "user" && last.Author != e.agent:
		// The session was written under another agent name (the adk:
		// section's name changed: a restart, or replicas of two
		// workspaces): ADK-Go reads another agent's events as quoted
		// context, so a pending confirmation would not be found once
		// its tool ran. Give it the runtime's history again, under
		// this agent's name.
		if err = e.DeleteSession(ctx, user, sessionID); err == nil {
			_, err = e.seed(ctx, user, sessionID, history, pending)
		}
	case known && last.Timestamp.UnixMicro() < at:
		// The session lacks turns the runtime committed: they ran on
		// another replica whose ADK-Go sessions this one does not share
		// (in-memory sessions behind a load balancer), or the session
		// store was restored from an older copy. Give it the runtime's
		// history again.
		if err = e.DeleteSession(ctx, user, sessionID); err == nil {
			_, err = e.seed(ctx, user, sessionID, history, pending)
		}
	case !known && len(history) > 0 && len(pending) == 0:
		// The runtime holds a history but no committed position: the
		// session was seeded with that history (a conversation sent
		// whole to the OpenAI endpoint) and no turn committed since
		// (each stores its position), so what follows the seeded events
		// is a turn the runtime did not commit: a retried message would
		// reach the model twice. A session an earlier build wrote holds
		// no seeded events and is left as it is.
		if at, known, err = e.seededAt(ctx, user, sessionID); err == nil && known && last.Timestamp.UnixMicro() > at {
			_, err = e.rewind(ctx, user, sessionID, at)
		}
	case known && last.Timestamp.UnixMicro() > at:
		var n int
		if n, err = e.rewind(ctx, user, sessionID, at); err == nil && n > 0 && len(history) > 0 {
			// A rollback that left nothing (a cursor of 0) seeds the
			// history in its place.
			if last, err = e.lastEvent(ctx, user, sessionID); err == nil && last == nil {
				_, err = e.seed(ctx, user, sessionID, history, pending)
				return err
			}
		}
		if err == nil {
			err = foreign()
		}
	case known:
		err = foreign()
	}
	return err
}

// recentEvents is how many of a session's last events syncForeign reads
// first: a turn's events (its user message, model calls and tool
// responses) are fewer unless it ran many steps.
const recentEvents = 64

// syncForeign gives ADK session sessionID of user the runtime's history
// again when its last user message is not the history's: another agent
// of the workspace (a native one, or another backend's) ran the
// session's last turns, which the runtime committed while ADK-Go's
// session, and the cursor the runtime keeps for it, stayed where this
// agent's last turn left them. A resume continues this agent's own
// suspended turn (a message to any agent supersedes it) and is not
// checked. A user message repeated word for word by a turn of another
// agent is not told apart.
func (e *Engine) syncForeign(ctx context.Context, user, sessionID string, history []llm.Message, pending []Pending) error {
	if len(pending) > 0 {
		return nil
	}
	want, ok := lastUserKey(history)
	if !ok {
		return nil // none, or not a message this agent could have been sent either
	}
	got, found, err := e.lastUserText(ctx, user, sessionID, recentEvents)
	if err == nil && !found {
		got, found, err = e.lastUserText(ctx, user, sessionID, 0)
	}
	if err != nil || (found && got == want) {
		return err
	}
	if err = e.DeleteSession(ctx, user, sessionID); err == nil {
		_, err = e.seed(ctx, user, sessionID, history, nil)
	}
	return err
}

// lastUserText returns the text of the last user message ADK session
// sessionID of user holds among its n last events (all for 0), as
// userKey makes it, and whether there is one.
func (e *Engine) lastUserText(ctx context.Context, user, sessionID string, n int) (string, bool, error) {
	resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: user, SessionID: sessionID, NumRecentEvents: n})
	if err != nil {
		return "", false, fmt.Errorf("adk: read session %q: %w", sessionID, err)
	}
	var (
		text  string
		found bool
	)
	for ev := range resp.Session.Events().All() {
		if ev.Author != "user" || ev.Content == nil || !slices.ContainsFunc(ev.Content.Parts, func(p *genai.Part) bool {
			return p != nil && p.FunctionResponse == nil && p.FunctionCall == nil
		}) {
			continue // a confirmation's answer, or not the user's
		}
		text, found = userKey(contentText(ev.Content)), true
	}
	return text, found, nil
}

// userKey is a user message's text as any session service keeps it:
// valid UTF-8 (ADK-Go's database stores JSON), U+0000 as U+FFFD (the
// PostgreSQL service's nulFree).
func userKey(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, replacement), nul, replacement)
}
