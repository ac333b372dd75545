package adk

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/model/gemini"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/database"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"
	gormpostgres "gorm.io/driver/postgres"
	gormsqlite "gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	llmgemini "github.com/armature-go/armature/llm/gemini"
)

// EventKind is the kind of an upstream event normalized by an [Engine].
type EventKind int

// The kinds of [Event].
const (
	// EventDelta is assistant text (agent.output.delta).
	EventDelta EventKind = iota + 1
	// EventToolStart is a function call the model selected
	// (agent.tool.start).
	EventToolStart
	// EventToolResult is a function response (agent.tool.result).
	EventToolResult
	// EventNodeCompleted is an ADK agent finishing its part of the run
	// (agent.node.completed; the node is the agent's name).
	EventNodeCompleted
)

// Event is one upstream ADK-Go event normalized.
type Event struct {
	// Kind says which fields are set.
	Kind EventKind
	// Text is the delta of EventDelta; on the first EventToolStart of a
	// model step, the text the model sent with its calls (it belongs to
	// the assistant message carrying them).
	Text string
	// Tool is the tool's name (EventToolStart, EventToolResult).
	Tool string
	// CallID is the function call's ID (EventToolStart, EventToolResult).
	CallID string
	// Args are the call's arguments (EventToolStart).
	Args json.RawMessage
	// Content is, on the first EventToolStart of a model step, that
	// step's content when it holds more than text (the model's reasoning,
	// signed text: see Result.Content); Text is then its text. It is
	// zero otherwise.
	Content llm.Content
	// Signature is the call's reasoning-continuity token
	// (EventToolStart): Gemini's thoughtSignature, base64-encoded as on
	// the wire (llm.ToolCall.Signature), or empty.
	Signature string
	// Output is the tool's result (EventToolResult).
	Output string
	// Error is the tool's error (EventToolResult), empty on success.
	Error string
	// Node is the agent's name (EventNodeCompleted).
	Node string
}

// Pending is a tool call waiting for a human's confirmation: ADK-Go's
// adk_request_confirmation call for it.
type Pending struct {
	// ConfirmationID is the ID of the adk_request_confirmation call; a
	// resume answers it.
	ConfirmationID string `json:"confirmation_id"`
	// CallID is the ID of the original function call.
	CallID string `json:"call_id"`
	// Tool is the original call's tool.
	Tool string `json:"tool"`
	// Args are the original call's arguments.
	Args json.RawMessage `json:"args,omitempty"`
	// Hint is ADK-Go's explanation of the request.
	Hint string `json:"hint,omitempty"`
}

// Result is what one run of an [Engine] produced.
type Result struct {
	// Text is the final assistant text of the run.
	Text string
	// Content is the final answer's content when it holds more than
	// Text: the model's reasoning (thought parts, as thinking and
	// redacted-thinking blocks) or signed text, in order, which a
	// provider that reasons needs back; zero otherwise.
	Content llm.Content
	// Pending are the confirmations the run ended waiting for, in the
	// order of their calls; empty when the run completed.
	Pending []Pending
}

// Engine is an ADK-Go runner over an llmagent built from a [Config]: the
// upstream half of the adapter, usable without Armature's runtime. It is
// safe for concurrent use on different sessions, as ADK-Go's runner is.
type Engine struct {
	app      string
	runCfg   adkagent.RunConfig
	runner   *runner.Runner
	sessions session.Service
	db       *sql.DB
	driver   string // the session database's driver (SessionSQLite, SessionPostgres), when db is set
	agent    string // the llmagent's name: the author of its events
	// gated names the tools that ask for a confirmation: a call of one
	// starts (agent.tool.start, through the adapter) once a confirmation
	// approves it, not when the model selects it.
	gated map[string]bool
}

// NewEngine builds the agent with ADK-Go's native constructors
// (llmagent.New, functiontool.New, runner.New) and the session service
// cfg selects.
func NewEngine(ctx context.Context, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	llmModel := cfg.LLM
	if llmModel == nil {
		var err error
		if llmModel, err = newModel(ctx, cfg.Model); err != nil {
			return nil, err
		}
	}
	var adkTools []tool.Tool
	e := &Engine{app: cfg.AppName, agent: cfg.Name}
	for _, t := range cfg.Tools {
		at, err := NewTool(t, false)
		if err != nil {
			return nil, err
		}
		adkTools = append(adkTools, at)
		if t.NeedsApproval {
			if e.gated == nil {
				e.gated = make(map[string]bool)
			}
			e.gated[t.Definition.Name] = true
		}
	}
	if cfg.streams() {
		e.runCfg.StreamingMode = adkagent.StreamingModeSSE
	}
	if err := e.openSessions(ctx, cfg.Session); err != nil {
		return nil, err
	}
	acfg := llmagent.Config{Name: cfg.Name, Description: cfg.Description,
		Instruction: cfg.Instruction, Model: llmModel, Tools: adkTools, GenerateContentConfig: contentConfig(cfg.Sampling)}
	if tc := cfg.Model.Thinking.thinkingConfig(); tc != nil && cfg.LLM == nil && cfg.Model.Provider == ProviderGemini {
		if acfg.GenerateContentConfig == nil {
			acfg.GenerateContentConfig = &genai.GenerateContentConfig{}
		}
		acfg.GenerateContentConfig.ThinkingConfig = tc
	}
	own, literal := cfg.Instruction, false
	if own == "" {
		own, literal = cfg.System, true
	}
	setInstruction(&acfg, own, literal)
	before := []llmagent.BeforeModelCallback{stepLimit(cmp.Or(cfg.MaxLLMCalls, DefaultMaxLLMCalls)), instructions(own)}
	if !cfg.Window.IsZero() {
		before = append(before, newWindow(cfg).callback())
	}
	acfg.BeforeModelCallbacks = []llmagent.BeforeModelCallback{chain(before...)}
	acfg.AfterModelCallbacks = []llmagent.AfterModelCallback{noteCalls}
	ag, err := llmagent.New(acfg)
	if err != nil {
		return nil, errors.Join(err, e.Close())
	}
	e.runner, err = runner.New(runner.Config{AppName: cfg.AppName, Agent: ag, SessionService: e.sessions, AutoCreateSession: true})
	if err != nil {
		return nil, errors.Join(err, e.Close())
	}
	return e, nil
}

// contentConfig is the GenerateContentConfig carrying model settings c
// (nil for none).
func contentConfig(c llm.Config) *genai.GenerateContentConfig {
	if c.MaxTokens == nil && c.Temperature == nil && c.TopP == nil && c.Seed == nil &&
		c.PresencePenalty == nil && c.FrequencyPenalty == nil && len(c.StopSequences) == 0 {
		return nil
	}
	gc := &genai.GenerateContentConfig{StopSequences: c.StopSequences, Temperature: float32Of(c.Temperature), TopP: float32Of(c.TopP),
		PresencePenalty: float32Of(c.PresencePenalty), FrequencyPenalty: float32Of(c.FrequencyPenalty)}
	if c.MaxTokens != nil {
		gc.MaxOutputTokens = int32(min(*c.MaxTokens, math.MaxInt32))
	}
	if c.Seed != nil && *c.Seed >= math.MinInt32 && *c.Seed <= math.MaxInt32 {
		gc.Seed = new(int32(*c.Seed))
	}
	return gc
}

func float32Of(f *float64) *float32 {
	if f == nil {
		return nil
	}
	return new(float32(*f))
}

func newModel(ctx context.Context, cfg ModelConfig) (model.LLM, error) {
	key := ""
	if cfg.APIKeyEnv != "" {
		key = os.Getenv(cfg.APIKeyEnv)
	}
	switch cfg.Provider {
	case ProviderGemini:
		timeout, err := cfg.timeout()
		if err != nil {
			return nil, err
		}
		cc := &genai.ClientConfig{APIKey: key, HTTPOptions: genai.HTTPOptions{BaseURL: cfg.BaseURL, Timeout: &timeout}}
		m, err := gemini.NewModel(ctx, cfg.Name, cc)
		if err != nil {
			return nil, err
		}
		return newGeminiModel(m, key, int64(cmp.Or(cfg.MaxResponseBytes, DefaultMaxResponseBytes))), nil
	}
	return NewProviderModel(demo.ModelName, demo.Model{}), nil
}

// openSessions opens the session service: ADK-Go's in-memory one, or its
// database one (GORM) on a SQLite file (WAL, one connection, foreign
// keys enforced: deleting a session deletes its events, as ADK-Go's
// schema declares) or on PostgreSQL (pgx). The SQLite file is opened with modernc.org/sqlite,
// the driver of Armature's own SQLite store (registered as "sqlite"),
// under GORM's SQLite dialector; the dialector's cgo driver
// (mattn/go-sqlite3) is linked but not used.
func (e *Engine) openSessions(ctx context.Context, cfg SessionConfig) error {
	var (
		db     *sql.DB
		dial   gorm.Dialector
		name   string
		schema string // SessionPostgres: the schema of ADK-Go's tables, when the runtime chose it
	)
	switch cfg.Driver {
	case SessionSQLite:
		var err error
		// A file: URI: SQLite decodes %HH escapes in it, so a % of the
		// path is escaped (? and # are refused by Validate), and a path
		// starting with // would read as an authority (filepath.Clean).
		uri := "file:" + strings.ReplaceAll(filepath.Clean(cfg.Path), "%", "%25")
		db, err = sql.Open("sqlite", uri+
			"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_txlock=immediate")
		if err != nil {
			return fmt.Errorf("adk: open %s: %w", cfg.Path, err)
		}
		db.SetMaxOpenConns(1)
		dial, name = gormsqlite.New(gormsqlite.Config{Conn: db}), cfg.Path
	case SessionPostgres:
		url := cfg.URL
		if url == "" {
			url = os.Getenv(cfg.URLEnv) // set: Validate checked it
		}
		pc, err := pgx.ParseConfig(url)
		if err != nil {
			return fmt.Errorf("adk: the PostgreSQL connection string (%s): %w", cfg.URLEnv, err)
		}
		schema = cfg.Schema
		if _, set := pc.RuntimeParams["search_path"]; schema == "" && !set {
			schema = DefaultSessionSchema
		}
		if schema != "" {
			pc.RuntimeParams["search_path"] = schema
		}
		db = stdlib.OpenDB(*pc)
		dial, name = gormpostgres.New(gormpostgres.Config{Conn: db}), "PostgreSQL"
	default:
		e.sessions = ordered{session.InMemoryService()}
		return nil
	}
	svc, err := database.NewSessionService(dial, &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err == nil {
		err = migrate(ctx, db, cfg.Driver, schema, func() error { return database.AutoMigrate(svc) })
	}
	if err != nil {
		return errors.Join(fmt.Errorf("adk: session database %s: %w", name, err), db.Close())
	}
	e.sessions, e.db, e.driver = ordered{svc}, db, cfg.Driver
	if cfg.Driver == SessionPostgres {
		e.sessions = ordered{nulFree{svc}}
	}
	return nil
}

// migrate runs ADK-Go's schema migration. On PostgreSQL it first
// creates schema (when set), and holds a session-level advisory lock
// meanwhile: replicas starting together would otherwise race to create
// the same tables (GORM checks, then creates), and all but one fail to
// start.
func migrate(ctx context.Context, db *sql.DB, driver, schema string, run func() error) error {
	if driver != SessionPostgres {
		return run()
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	const key = "hashtextextended('armature adk session schema', 0)"
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock("+key+")"); err != nil {
		return err
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock("+key+")")
	}()
	if schema != "" {
		if _, err := conn.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
	}
	return run()
}

// Close releases the session database, if any.
func (e *Engine) Close() error {
	if e.db == nil {
		return nil
	}
	db := e.db
	e.db = nil
	return db.Close()
}

// Runner returns the ADK-Go runner, to run the agent directly.
func (e *Engine) Runner() *runner.Runner { return e.runner }

// Send runs one turn: the user's text to ADK session sessionID of user
// (created if new), through ADK-Go's runner, each upstream event
// normalized and given to emit as it arrives.
func (e *Engine) Send(ctx context.Context, user, sessionID, text string, emit func(Event)) (Result, error) {
	return e.run(ctx, user, sessionID, genai.NewContentFromText(text, genai.RoleUser), emit)
}

// SendMessage is Send for a user message of text and images: each image
// reaches ADK-Go as a part of the user's content (an inline image or a
// data: URL as inline data, another URL as file data).
func (e *Engine) SendMessage(ctx context.Context, user, sessionID string, msg llm.Message, emit func(Event)) (Result, error) {
	c, err := userContent(msg)
	if err != nil {
		return Result{}, err
	}
	return e.run(ctx, user, sessionID, c, emit)
}

// DeleteSession deletes ADK session sessionID of user from the session
// service, its events with it; deleting a session the service does not
// hold succeeds.
func (e *Engine) DeleteSession(ctx context.Context, user, sessionID string) error {
	if err := e.sessions.Delete(ctx, &session.DeleteRequest{AppName: e.app, UserID: user, SessionID: sessionID}); err != nil {
		return fmt.Errorf("adk: delete session %q: %w", sessionID, err)
	}
	return nil
}

// Decision answers one pending confirmation.
type Decision struct {
	// ConfirmationID is the adk_request_confirmation call answered.
	ConfirmationID string `json:"confirmation_id"`
	// Confirmed approves the call; otherwise ADK-Go reports it rejected.
	Confirmed bool `json:"confirmed"`
	// Comment is a rejection's reason: the model reads it with the
	// rejection, as the call's result (the confirmation's payload,
	// {CommentKey: Comment}). An approval's is not sent.
	Comment string `json:"comment,omitempty"`
}

// Confirm answers pending confirmations of the session (function
// responses to ADK-Go's adk_request_confirmation calls, in one user
// content, as the ADK web client sends them) and runs the rest of the
// turn: a confirmed call's tool runs, a rejected one is reported rejected
// to the model, with its Comment as the reason. When a model step asked for several confirmations,
// answer them all in one Confirm: ADK-Go answers the unanswered ones
// with their "requires confirmation" error and moves on. It fails with
// [ErrNoPending] when the session holds no such unanswered request.
func (e *Engine) Confirm(ctx context.Context, user, sessionID string, emit func(Event), decisions ...Decision) (Result, error) {
	return e.confirm(ctx, user, sessionID, emit, nil, decisions)
}

// confirm is Confirm, calling found (when set) once every decision's
// confirmation request is found, before the run: the adapter starts the
// approved calls there, so that a confirmation that cannot be found
// starts no call that never runs.
func (e *Engine) confirm(ctx context.Context, user, sessionID string, emit func(Event), found func(), decisions []Decision) (Result, error) {
	if len(decisions) == 0 {
		return Result{}, fmt.Errorf("%w: Confirm without a decision", ErrNoPending)
	}
	if err := e.checkPending(ctx, user, sessionID, decisions); err != nil {
		return Result{}, err
	}
	if found != nil {
		found()
	}
	msg := &genai.Content{Role: genai.RoleUser, Parts: make([]*genai.Part, 0, len(decisions))}
	for _, d := range decisions {
		resp := map[string]any{"confirmed": d.Confirmed}
		if !d.Confirmed && d.Comment != "" {
			resp["payload"] = map[string]any{CommentKey: d.Comment}
		}
		msg.Parts = append(msg.Parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{
			ID: d.ConfirmationID, Name: toolconfirmation.FunctionCallName, Response: resp,
		}})
	}
	// The confirmed calls that ran are recorded even when the run is
	// cancelled before ADK-Go records them (recordLate).
	l := &late{app: e.app, user: user, session: sessionID}
	res, err := e.run(context.WithValue(ctx, lateKey{}, l), user, sessionID, msg, emit)
	if err != nil || ctx.Err() != nil {
		e.recordLate(ctx, user, sessionID, l)
	}
	return res, err
}

// checkPending checks that the session holds an unanswered
// adk_request_confirmation call for each decision, reading the session
// once.
func (e *Engine) checkPending(ctx context.Context, user, sessionID string, decisions []Decision) error {
	resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: user, SessionID: sessionID})
	if err != nil {
		return fmt.Errorf("%w %q in session %q: %w", ErrNoPending, decisions[0].ConfirmationID, sessionID, err)
	}
	pending := make(map[string]bool, len(decisions))
	for _, d := range decisions {
		pending[d.ConfirmationID] = false
	}
	for ev := range resp.Session.Events().All() {
		if ev.Content == nil {
			continue
		}
		for _, p := range ev.Content.Parts {
			switch {
			case p.FunctionCall != nil && p.FunctionCall.Name == toolconfirmation.FunctionCallName:
				if _, asked := pending[p.FunctionCall.ID]; asked {
					pending[p.FunctionCall.ID] = true
				}
			case p.FunctionResponse != nil:
				if _, asked := pending[p.FunctionResponse.ID]; asked {
					pending[p.FunctionResponse.ID] = false
				}
			}
		}
	}
	for _, d := range decisions {
		if !pending[d.ConfirmationID] {
			return fmt.Errorf("%w %q in session %q", ErrNoPending, d.ConfirmationID, sessionID)
		}
	}
	return nil
}

func (e *Engine) run(ctx context.Context, user, sessionID string, msg *genai.Content, emit func(Event)) (Result, error) {
	// The loop's state is one value: the body of a range over a function
	// is a closure, and each variable it shares with the function would
	// be an allocation of its own.
	var st struct {
		res      Result
		lastNode string
		streamed bool // partial text was emitted for the message under way
		err      error
		calls    modelCalls // the model calls made, not reported yet
	}
	// Each model call is reported as the turn's once ADK-Go made it
	// (noteCalls), from this goroutine: before the event of its
	// response, and whatever the response (usage reported or not, calls
	// or an answer, cut or whole).
	runCtx := withModelCalls(ctx, &st.calls)
	defer st.calls.report(ctx)
events:
	for ev, err := range e.runner.Run(runCtx, user, sessionID, msg, e.runCfg) {
		st.calls.report(ctx)
		if err != nil {
			st.err = err
			break
		}
		if ev == nil {
			continue
		}
		if st.lastNode != "" && ev.Author != st.lastNode {
			emit(Event{Kind: EventNodeCompleted, Node: st.lastNode})
		}
		st.lastNode = ev.Author
		if ev.Content == nil {
			continue
		}
		if ev.Partial {
			if t := contentText(ev.Content); t != "" {
				st.streamed = true
				emit(Event{Kind: EventDelta, Text: t})
			}
			continue
		}
		var withCalls string       // the text of a step that calls tools
		var withCallsC llm.Content // and its content, when more than text
		var rich llm.Content
		if ev.Content.Role == genai.RoleModel {
			rich = reasoningContent(ev.Content)
		}
		if t := contentText(ev.Content); ev.Content.Role == genai.RoleModel && (t != "" || !rich.IsZero()) {
			if !st.streamed && t != "" {
				emit(Event{Kind: EventDelta, Text: t})
			}
			if slices.ContainsFunc(ev.Content.Parts, isCall) {
				withCalls, withCallsC = t, rich
			} else {
				st.res.Text, st.res.Content = t, rich
			}
		}
		if ev.Content.Role == genai.RoleModel && slices.ContainsFunc(ev.Content.Parts, isCall) {
			// The answer, if any, comes after the calls: text before them
			// is their step's, not the turn's answer.
			st.res.Text, st.res.Content = "", llm.Content{}
		}
		st.streamed = false
		for _, p := range ev.Content.Parts {
			switch {
			case p.FunctionCall != nil && p.FunctionCall.Name == toolconfirmation.FunctionCallName && slices.Contains(ev.LongRunningToolIDs, p.FunctionCall.ID):
				// ADK-Go's own confirmation request (long-running), not a
				// model's call of a tool so named.
				pd, err := pendingFrom(p.FunctionCall)
				if err != nil {
					st.err = err
					break events
				}
				st.res.Pending = append(st.res.Pending, pd)
			case p.FunctionCall != nil:
				args, _ := argsJSON(p.FunctionCall.Args)
				emit(Event{Kind: EventToolStart, Tool: p.FunctionCall.Name, CallID: p.FunctionCall.ID, Args: args, Text: withCalls,
					Content: withCallsC, Signature: signatureOf(p)})
				withCalls, withCallsC = "", llm.Content{}
			case p.FunctionResponse != nil:
				if _, asking := ev.Actions.RequestedToolConfirmations[p.FunctionResponse.ID]; asking {
					continue // not a result: ADK-Go asks for a confirmation first
				}
				emit(toolResult(p.FunctionResponse))
			}
		}
	}
	if st.err != nil {
		if err := ctx.Err(); err != nil {
			// The run failed because it was cancelled (or its deadline
			// passed): that is its error. ADK-Go v2.2.0's scheduler
			// reports a node it cancelled mid-step as "panicked:
			// range function continued iteration" (its dynamic node
			// yields the cancellation after its consumer stopped).
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
				return st.res, fmt.Errorf("adk: the run was stopped: %w: %w", err, cause)
			}
			return st.res, fmt.Errorf("adk: the run was stopped: %w", err)
		}
		return st.res, modelError(st.err)
	}
	if st.lastNode != "" && st.lastNode != "user" {
		emit(Event{Kind: EventNodeCompleted, Node: st.lastNode})
	}
	if err := ctx.Err(); err != nil {
		return st.res, err
	}
	return st.res, nil
}

// modelError is err with the provider category of a failed call of
// ADK-Go's own Gemini client (a genai.APIError in its chain): the
// Gemini API's HTTP status decides, as Armature's own Gemini mapping
// (llm/gemini) decides it, so a wrong key, an unknown model, a refused
// request or a rate limit reach the user as they do on a native agent,
// not as a transient node failure a client retries in vain. Another
// error is returned as it is.
func modelError(err error) error {
	if pe, ok := apiError(err); ok {
		return pe
	}
	return err
}

// apiError is the provider error of a genai.APIError in err's chain, if
// err is not categorized already (geminiModel).
func apiError(err error) (*llm.ProviderError, bool) {
	if _, ok := errors.AsType[*llm.ProviderError](err); ok {
		return nil, false
	}
	var ae genai.APIError
	if !errors.As(err, &ae) {
		var pae *genai.APIError
		if !errors.As(err, &pae) || pae == nil {
			return nil, false
		}
		ae = *pae
	}
	if ae.Code < 400 {
		return nil, false
	}
	// The native mapping decides, from the same envelope: a 400 whose
	// ErrorInfo reason is API_KEY_INVALID (Gemini's answer to a wrong
	// key) is provider_authentication, a refused content part
	// provider_unsupported_content_block, and so on.
	// The message of an error answer that is not JSON is its whole body
	// (a proxy's HTML page): it is cut short, and so is the cause's.
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": ae.Code, "message": causeText(ae.Message), "status": ae.Status, "details": ae.Details}})
	pe := llmgemini.ParseError(ae.Code, nil, body)
	// RetryAfter comes from the RetryInfo detail: genai.APIError keeps no
	// headers.
	pe.Op, pe.Err = "complete", &redacted{msg: causeText(err.Error()), err: err}
	return pe, true
}

// isCall reports whether p is a model's function call (not ADK-Go's
// confirmation request).
func isCall(p *genai.Part) bool {
	return p != nil && p.FunctionCall != nil && p.FunctionCall.Name != toolconfirmation.FunctionCallName
}

func toolResult(fr *genai.FunctionResponse) Event {
	ev := Event{Kind: EventToolResult, Tool: fr.Name, CallID: fr.ID}
	if e, ok := fr.Response["error"]; ok {
		ev.Error = fmt.Sprint(e)
		return ev
	}
	ev.Output, _ = responseText(fr.Response)
	return ev
}

func pendingFrom(fc *genai.FunctionCall) (Pending, error) {
	orig, err := toolconfirmation.OriginalCallFrom(fc)
	if err != nil {
		return Pending{}, fmt.Errorf("adk: a confirmation request: %w", err)
	}
	args, err := argsJSON(orig.Args)
	if err != nil {
		return Pending{}, fmt.Errorf("adk: a confirmation request: %w", err)
	}
	pd := Pending{ConfirmationID: fc.ID, CallID: orig.ID, Tool: orig.Name, Args: args}
	switch tc := fc.Args["toolConfirmation"].(type) {
	case toolconfirmation.ToolConfirmation:
		pd.Hint = tc.Hint
	case *toolconfirmation.ToolConfirmation:
		pd.Hint = tc.Hint
	case map[string]any:
		pd.Hint, _ = tc["hint"].(string)
	}
	return pd, nil
}
