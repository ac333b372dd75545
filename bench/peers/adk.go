package peers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"

	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/database"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"
	"google.golang.org/genai"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// ADK application and user the workloads run as.
const (
	adkApp   = "bench"
	adkUser  = "user"
	adkAgent = "assistant"
)

// ADKModel is the scripted model for ADK-Go (see the package doc).
type ADKModel struct{}

var _ model.LLM = ADKModel{}

// Name implements model.LLM.
func (ADKModel) Name() string { return "scripted" }

// GenerateContent implements model.LLM: one complete response, no stream.
func (ADKModel) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(&model.LLMResponse{Content: adkAnswer(req), TurnComplete: true}, nil)
	}
}

func adkAnswer(req *model.LLMRequest) *genai.Content {
	if len(req.Tools) > 0 && !adkLastIsToolResult(req.Contents) {
		for name := range req.Tools {
			return &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{
				ID: ToolCallID, Name: name, Args: map[string]any{"city": ToolCity},
			}}}}
		}
	}
	return genai.NewContentFromText(Reply, genai.RoleModel)
}

func adkLastIsToolResult(contents []*genai.Content) bool {
	if len(contents) == 0 {
		return false
	}
	for _, p := range contents[len(contents)-1].Parts {
		if p.FunctionResponse != nil {
			return true
		}
	}
	return false
}

// WeatherArgs are the arguments of the W3 tool.
type WeatherArgs struct {
	City string `json:"city"`
}

// WeatherResult is the result of the W3 tool.
type WeatherResult struct {
	Forecast string `json:"forecast"`
}

// ADKConfig configures an [ADK] peer.
type ADKConfig struct {
	// Tool offers the model the W3 tool, so each turn is a tool turn.
	Tool bool
	// Path is the SQLite file of the database session service. Empty
	// Path and PostgresURL mean the in-memory session service.
	Path string
	// PostgresURL is the PostgreSQL database of the database session
	// service, a pgx connection string (URL or key=value): GORM's
	// gorm.io/driver/postgres over pgx's database/sql driver, with the
	// server's default durability (synchronous_commit=on). Its tables are
	// created, if missing, in the first schema of the connection's
	// search_path, which the string may set as a runtime parameter
	// ("...&search_path=name"). At most one of Path and PostgresURL may be set.
	PostgresURL string
	// FullSync runs the SQLite file with synchronous=FULL (the WAL
	// fsynced at every commit, as the main module's store at
	// DurabilityFull) instead of NORMAL.
	FullSync bool
}

// ADK is an ADK-Go runner with an LLM agent on the scripted model and a
// session service, in memory, on SQLite or on PostgreSQL.
type ADK struct {
	runner   *runner.Runner
	sessions session.Service
	db       *sql.DB
}

// NewADK builds the runner. The SQLite file runs in WAL mode with
// synchronous=NORMAL (FULL with FullSync) and BEGIN IMMEDIATE on one
// connection (database/sql queues concurrent turns instead of SQLite
// failing them with SQLITE_BUSY or sleeping in its busy handler), on
// the "unix-excl" VFS (one lock for the process,
// the WAL index in memory), as the main module's store does by default.
// PostgreSQL runs untuned, on database/sql's default pool.
func NewADK(cfg ADKConfig) (*ADK, error) {
	a := &ADK{sessions: session.InMemoryService()}
	var (
		db   *sql.DB
		dial gorm.Dialector
	)
	switch {
	case cfg.Path != "" && cfg.PostgresURL != "":
		return nil, errors.New("peers: ADKConfig sets both Path and PostgresURL")
	case cfg.Path != "":
		sync := "NORMAL"
		if cfg.FullSync {
			sync = "FULL"
		}
		var err error
		db, err = sql.Open("sqlite", "file:"+cfg.Path+
			"?vfs=unix-excl&_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")&_pragma=busy_timeout(5000)&_txlock=immediate")
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		dial = sqlite.Dialector{Conn: db}
	case cfg.PostgresURL != "":
		pc, err := pgx.ParseConfig(cfg.PostgresURL)
		if err != nil {
			return nil, err
		}
		db = stdlib.OpenDB(*pc)
		dial = postgres.New(postgres.Config{Conn: db})
	}
	if db != nil {
		svc, err := database.NewSessionService(dial, &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
		if err == nil {
			err = database.AutoMigrate(svc)
		}
		if err != nil {
			return nil, errors.Join(err, db.Close())
		}
		a.sessions, a.db = svc, db
	}
	var tools []tool.Tool
	if cfg.Tool {
		t, err := functiontool.New(functiontool.Config{Name: ToolName, Description: "Looks up the weather forecast for a city."},
			func(_ agent.Context, args WeatherArgs) (WeatherResult, error) {
				return WeatherResult{Forecast: ToolResult}, nil
			})
		if err != nil {
			return nil, errors.Join(err, a.Close())
		}
		tools = append(tools, t)
	}
	ag, err := llmagent.New(llmagent.Config{Name: adkAgent, Model: ADKModel{}, Tools: tools})
	if err != nil {
		return nil, errors.Join(err, a.Close())
	}
	a.runner, err = runner.New(runner.Config{AppName: adkApp, Agent: ag, SessionService: a.sessions, AutoCreateSession: true})
	if err != nil {
		return nil, errors.Join(err, a.Close())
	}
	return a, nil
}

// Close releases the SQLite file or the PostgreSQL connections, if any.
func (a *ADK) Close() error {
	if a.db == nil {
		return nil
	}
	return a.db.Close()
}

// Seed creates session id holding history messages, alternately the user's
// and the assistant's.
func (a *ADK) Seed(ctx context.Context, id string, history int) error {
	resp, err := a.sessions.Create(ctx, &session.CreateRequest{AppName: adkApp, UserID: adkUser, SessionID: id})
	if err != nil {
		return err
	}
	for i := range history {
		ev := session.NewEvent(ctx, "seed")
		ev.Author, ev.Content = adkAgent, genai.NewContentFromText(HistoryText(i), genai.RoleModel)
		if HistoryRole(i) {
			ev.Author, ev.Content = adkUser, genai.NewContentFromText(HistoryText(i), genai.RoleUser)
		}
		if err := a.sessions.AppendEvent(ctx, resp.Session, ev); err != nil {
			return err
		}
	}
	return nil
}

// Send runs one turn: the user's message to session id (created if new),
// through the agent, every event committed by the runner. It returns the
// number of events the turn produced besides the user's message. Send
// is safe for concurrent use on different sessions (W5 drives it so).
func (a *ADK) Send(ctx context.Context, id string) (int, error) {
	n := 0
	for _, err := range a.runner.Run(ctx, adkUser, id, genai.NewContentFromText(UserText, genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Len returns the number of events stored in session id.
func (a *ADK) Len(ctx context.Context, id string) (int, error) {
	resp, err := a.sessions.Get(ctx, &session.GetRequest{AppName: adkApp, UserID: adkUser, SessionID: id})
	if err != nil {
		return 0, fmt.Errorf("peers: get %s: %w", id, err)
	}
	return resp.Session.Events().Len(), nil
}
