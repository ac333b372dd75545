package adk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// Name is the adapter's name: the backend: value of a workspace agent,
// the key of its backend-native section, and the adapter field of its
// events. It must not change.
const Name = "adk"

// defaultUser is the ADK user of a turn without a tenant.
const defaultUser = "user"

// Register registers [Factory] under [Name].
func Register(r *adapter.Registry) error { return r.Register(Name, Factory) }

// Factory builds the adapter of a workspace agent with backend: adk: it
// decodes the agent's adk: section into a [Config], takes the tools,
// approvals and system prompt (as the default instruction) from the
// workspace agent, bridges the workspace's model when the section
// selects none, resolves a relative session path against the workspace
// directory, and builds the [Engine].
func Factory(ctx context.Context, req adapter.FactoryRequest) (adapter.Adapter, error) {
	var cfg Config
	if err := req.Agent.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	cfg.Tools = req.Agent.Tools
	cfg.Sampling = req.Agent.Sampling
	// ADK-Go sends the model its own session's events: the window cuts
	// what each call sends (Config.Window), not the history.
	cfg.Window = req.Agent.Window
	if e, ok := req.Agent.Provider.(llm.TokenEstimator); ok {
		cfg.Tokens = e.EstimateTokens
	}
	cfg.System = req.Agent.System // the instruction unless the adk: section has one
	if cfg.Model.Provider == "" && req.Agent.Provider != nil {
		// The settings reach it in every request (cfg.Sampling: the
		// agent's GenerateContentConfig), but for the extras, which
		// GenerateContentConfig has no place for: the bridge adds them.
		cfg.LLM = NewProviderModelConfig(req.Agent.Model, req.Agent.Provider, llm.Config{Extras: req.Agent.Sampling.Extras})
	}
	if cfg.Session.Path != "" && !filepath.IsAbs(cfg.Session.Path) && req.Workspace != nil && req.Workspace.Dir != "" {
		cfg.Session.Path = filepath.Join(req.Workspace.Dir, cfg.Session.Path)
	}
	if cfg.Session.Driver == "" && req.Database != "" {
		// Replicas on one database share ADK-Go's sessions too: in
		// memory, each would hold only the turns it ran.
		schema, err := replicaSchema(req.Database)
		if err != nil {
			return nil, err
		}
		cfg.Session = SessionConfig{Driver: SessionPostgres, URL: req.Database, Schema: schema}
	}
	e, err := NewEngine(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Adapter{Engine: e}, nil
}

// Adapter is the ADK-Go backend adapter: an [Engine] behind Armature's
// adapter contract. A turn is one ADK-Go runner run on the ADK session
// named like the Armature session (the ADK user is the tenant); a tool
// confirmation ADK-Go asks for becomes a Suspension, and its resume a
// function response answering the adk_request_confirmation call.
type Adapter struct {
	// Engine is the upstream half.
	Engine *Engine
}

var (
	_ adapter.SessionDeleter = (*Adapter)(nil)
	_ adapter.Positioner     = (*Adapter)(nil)
)

// Name implements adapter.Adapter.
func (a *Adapter) Name() string { return Name }

// Close releases the engine's session database.
func (a *Adapter) Close() error { return a.Engine.Close() }

// DeleteSession implements adapter.SessionDeleter: the runtime deleted
// the session, so ADK-Go's session (the events it would send the model)
// goes too, and a session created again under the same id starts empty.
func (a *Adapter) DeleteSession(ctx context.Context, tenant, sessionID string) error {
	user := tenant
	if user == "" {
		user = defaultUser
	}
	return a.Engine.DeleteSession(ctx, user, sessionID)
}

// Run implements adapter.Adapter.
func (a *Adapter) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	user := req.Tenant
	if user == "" {
		user = defaultUser
	}
	// Roll back what a turn the runtime did not commit left in ADK-Go's
	// session; give a session ADK-Go never saw the runtime's history.
	var st resumeState
	if r := req.Resume; r != nil {
		if err := json.Unmarshal(r.State, &st); err != nil || len(st.Pending) == 0 || len(st.Decided) >= len(st.Pending) {
			return nil, fmt.Errorf("%w: the resume state of %s is not an ADK confirmation", ErrNoPending, r.SignalID)
		}
	}
	// The turn's per-request instructions, for its model calls (see
	// instructions).
	if req.Instructions != nil {
		ctx = adapter.WithInstructions(ctx, req.Instructions)
	}
	at, known, lastUser := committed(req)
	if err := a.Engine.sync(ctx, user, req.SessionID, at, known, lastUser, req.History, st.Pending); err != nil {
		return nil, err
	}
	// On the in-memory session service the turn's own appends tell
	// where the session stands after it (see appends); a session
	// database is read again, as other replicas write it too.
	var noted *appends
	if a.Engine.db == nil {
		noted = new(appends)
		ctx = noteAppends(ctx, noted)
	}
	t := &transcript{ctx: ctx, emit: emit, gated: a.Engine.gated}
	var (
		res Result
		err error
	)
	if r := req.Resume; r != nil {
		// A state an earlier build stored has no comments: theirs are "".
		for len(st.Comments) < len(st.Decided) {
			st.Comments = append(st.Comments, "")
		}
		st.Decided = append(st.Decided, r.Approved)
		st.Comments = append(st.Comments, r.Comment)
		if len(st.Decided) < len(st.Pending) {
			// ADK-Go takes the answers to one step's confirmations
			// together: ask for the next before answering any (the
			// assistant message carrying the calls is in the history
			// already).
			prev := st.Pending[len(st.Decided)-1]
			note := llm.AssistantText(fmt.Sprintf("Your decision on %s is recorded; it takes effect once the other calls of this step are decided.", prev.Tool))
			return suspend(st, []llm.Message{note})
		}
		decisions := make([]Decision, len(st.Pending))
		for i, p := range st.Pending {
			decisions[i] = Decision{ConfirmationID: p.ConfirmationID, Confirmed: st.Decided[i], Comment: st.Comments[i]}
		}
		// ADK-Go runs an approved call without a new event of it: the
		// call starts once its confirmation request is found, as a
		// native agent's approved call does (a denied one only
		// answers); a confirmation that cannot be found starts nothing.
		// Only the event: the call is in the history already.
		started := func() {
			for i, p := range st.Pending {
				if st.Decided[i] {
					t.emit.Emit(ctx, adapter.Event{Phase: runtime.PhaseToolStart, ToolCall: &llm.ToolCall{ID: p.CallID, Name: p.Tool, Arguments: p.Args}})
				}
			}
		}
		res, err = a.Engine.confirm(ctx, user, req.SessionID, t.event, started, decisions)
	} else if err = a.Engine.closeConfirmations(ctx, user, req.SessionID, req.History); err == nil {
		res, err = a.Engine.SendMessage(ctx, user, req.SessionID, req.Input, t.event)
	}
	if err != nil {
		return nil, err
	}
	// Where ADK-Go's session stands once the turn is in it: the runtime
	// commits it with the turn, and the next Run rewinds to it.
	pos, ok := int64(0), false
	if noted != nil {
		pos, ok = noted.position()
	}
	if !ok {
		if pos, err = a.Engine.Position(ctx, user, req.SessionID); err != nil {
			return nil, err
		}
	}
	var out *adapter.Result
	if len(res.Pending) > 0 {
		if out, err = suspend(resumeState{Pending: res.Pending}, t.msgs); err != nil {
			return nil, err
		}
	} else {
		if res.Text == "" {
			// The model's last step said nothing (a safety filter's
			// withheld answer): as a native agent's turn, it fails
			// rather than storing an empty answer (or, before, the text
			// the model sent with an earlier step's calls).
			return nil, errcat.Wrap(errcat.ProviderInvalidResponse, "the model returned an empty reply", agent.ErrEmptyReply)
		}
		answer := llm.AssistantText(res.Text)
		if !res.Content.IsZero() {
			answer.Content = res.Content // with the model's reasoning
		}
		out = adapter.Completed(res.Text, append(t.msgs, answer))
	}
	out.Cursor = cursor{Position: pos, User: lastUserSum(req)}.json()
	return out, nil
}

// Position implements adapter.Positioner: the cursor of where ADK-Go's
// session stands now, during a turn.
func (a *Adapter) Position(ctx context.Context, req *adapter.Request) (json.RawMessage, error) {
	user := req.Tenant
	if user == "" {
		user = defaultUser
	}
	pos, err := a.Engine.Position(ctx, user, req.SessionID)
	if err != nil {
		return nil, err
	}
	return cursor{Position: pos, User: lastUserSum(req)}.json(), nil
}

// cursor is the adapter's adapter.Result.Cursor: the ADK session's
// Position once the turn is in it, and the sum (userSum) of the last
// user message of the history the turn committed, which is the last one
// ADK-Go's session holds after it: a later turn whose history ends with
// another user message knows another agent ran the turns between
// (Engine.sync) without reading ADK-Go's session.
type cursor struct {
	Position int64  `json:"adk_position"`
	User     string `json:"adk_user,omitempty"`
}

func (c cursor) json() json.RawMessage {
	b := strconv.AppendInt([]byte(`{"adk_position":`), c.Position, 10)
	if c.User != "" {
		b = strconv.AppendQuote(append(b, `,"adk_user":`...), c.User) // hex: no escapes
	}
	return append(b, '}')
}

// committed returns the position ADK-Go's session had when the runtime
// last committed a turn of the session, and whether it is known: from
// the turn's cursor, or 0 for a session without history (its first
// turn). A session an earlier build wrote has neither, and is left as
// it is. lastUser is the cursor's user sum ("" when it has none).
func committed(req *adapter.Request) (at int64, known bool, lastUser string) {
	if req.Cursor == nil {
		return 0, len(req.History) == 0 && req.Resume == nil, ""
	}
	var c struct {
		Position *int64 `json:"adk_position"`
		User     string `json:"adk_user"`
	}
	if json.Unmarshal(req.Cursor, &c) != nil || c.Position == nil {
		// Not this adapter's cursor: nothing is known.
		return 0, false, ""
	}
	return *c.Position, true, c.User
}

// lastUserSum is the userSum of the last user message of the history a
// turn of req commits: its input, or the history's last (a resume).
func lastUserSum(req *adapter.Request) string {
	if req.Input.Role == llm.RoleUser {
		return userSum(req.Input)
	}
	return historyUserSum(req.History)
}

// historyUserSum is the userSum of history's last user message ("" when
// it has none).
func historyUserSum(history []llm.Message) string {
	key, ok := lastUserKey(history)
	return keySum(key, ok)
}

// userSum is a digest of a user message's text as ADK-Go's session
// keeps it (userKey), in hex ("" for a message this agent could not
// have been sent).
func userSum(m llm.Message) string {
	key, ok := userKeyOf(m)
	return keySum(key, ok)
}

// keySum is the hex digest of a userKey ("" when !ok).
func keySum(key string, ok bool) string {
	if !ok {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:12])
}

// lastUserKey is the userKey of history's last user message, and
// whether it has one this agent could have been sent.
func lastUserKey(history []llm.Message) (string, bool) {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == llm.RoleUser {
			return userKeyOf(history[i])
		}
	}
	return "", false
}

// userKeyOf is the userKey of user message m's text, and whether m is a
// message this agent could have been sent.
func userKeyOf(m llm.Message) (string, bool) {
	c, err := userContent(m)
	if err != nil {
		return "", false
	}
	return userKey(contentText(c)), true
}

// resumeState is a suspension's resume state: the confirmations one
// model step asked for, and the decisions given so far, in order, with
// their comments (a denial's reason reaches the model).
type resumeState struct {
	Pending  []Pending `json:"pending"`
	Decided  []bool    `json:"decided,omitempty"`
	Comments []string  `json:"comments,omitempty"`
}

// suspend asks for the first undecided confirmation of st.
func suspend(st resumeState, msgs []llm.Message) (*adapter.Result, error) {
	p := st.Pending[len(st.Decided)]
	state, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return &adapter.Result{Suspension: &adapter.Suspension{
		ToolCall: llm.ToolCall{ID: p.CallID, Name: p.Tool, Arguments: p.Args},
		Messages: msgs,
		State:    state,
		Metadata: map[string]any{"adk_confirmation_id": p.ConfirmationID},
	}}, nil
}

// transcript forwards an engine's events to the runtime's emitter and
// builds the messages the turn adds to the Armature session: the
// assistant's tool calls and the tools' results, in the upstream's order.
type transcript struct {
	ctx  context.Context
	emit adapter.Emitter
	msgs []llm.Message
	// gated are the tools that ask for a confirmation: the model's call
	// of one is in the transcript, and starts only once approved (the
	// resume's own start, as a native agent's approved call), so that a
	// suspended run shows no start of a call that never ran.
	gated map[string]bool
}

func (t *transcript) event(e Event) {
	switch e.Kind {
	case EventDelta:
		t.emit.Emit(t.ctx, adapter.Event{Phase: runtime.PhaseOutputDelta, Text: e.Text})
	case EventToolStart:
		tc := llm.ToolCall{ID: e.CallID, Name: e.Tool, Arguments: e.Args, Signature: e.Signature}
		if n := len(t.msgs); n > 0 && t.msgs[n-1].Role == llm.RoleAssistant && len(t.msgs[n-1].ToolCalls) > 0 {
			t.msgs[n-1].ToolCalls = append(t.msgs[n-1].ToolCalls, tc)
		} else {
			if t.msgs == nil {
				// A tool turn adds at least the call, its result and the
				// answer.
				t.msgs = make([]llm.Message, 0, 4)
			}
			m := llm.AssistantToolCalls(tc)
			if !e.Content.IsZero() {
				m.Content = e.Content // what the model thought and said with its calls
			} else if e.Text != "" {
				m.Content = llm.Text(e.Text) // what the model said with its calls
			}
			t.msgs = append(t.msgs, m)
		}
		if !t.gated[e.Tool] {
			t.emit.Emit(t.ctx, adapter.Event{Phase: runtime.PhaseToolStart, ToolCall: &tc})
		}
	case EventToolResult:
		tc := llm.ToolCall{ID: e.CallID, Name: e.Tool}
		out := e.Output
		if e.Error != "" {
			out = "error: " + e.Error
		}
		t.msgs = append(t.msgs, llm.ToolResult(e.CallID, out))
		t.emit.Emit(t.ctx, adapter.Event{Phase: runtime.PhaseToolResult, ToolCall: &tc, Output: e.Output, Error: e.Error})
	case EventNodeCompleted:
		t.emit.Emit(t.ctx, adapter.Event{Phase: runtime.PhaseNodeCompleted, Node: e.Node})
	}
}

// replicaSchema is the schema of ADK-Go's tables on the runtime's
// database: DefaultSessionSchema, or, when the connection string puts
// the runtime in a schema of its own (search_path), that schema's name
// and "_adk", so that deployments in different schemas keep apart.
func replicaSchema(url string) (string, error) {
	pc, err := pgx.ParseConfig(url)
	if err != nil {
		return "", fmt.Errorf("%w: the runtime's database connection string: %w", ErrInvalidConfig, err)
	}
	for s := range strings.SplitSeq(pc.RuntimeParams["search_path"], ",") {
		// The first schema named ($user names none of its own).
		if s = strings.Trim(strings.TrimSpace(s), `"`); s != "" && !strings.HasPrefix(s, "$") {
			// In lower case, as PostgreSQL folds an unquoted name (and as
			// SessionConfig.Schema must be).
			return strings.ToLower(s) + "_" + DefaultSessionSchema, nil
		}
	}
	return DefaultSessionSchema, nil
}
