package adk

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/bytesize"
	"github.com/armature-go/armature/llm"
	llmgemini "github.com/armature-go/armature/llm/gemini"
)

// Model providers a [Config] may name.
const (
	// ProviderScripted is Armature's offline demo script (package
	// internal/demo) behind ADK-Go's model.LLM: deterministic, no
	// network. Tests and the offline demo select it.
	ProviderScripted = "scripted"
	// ProviderGemini is ADK-Go's own Gemini client (model/gemini).
	ProviderGemini = "gemini"
)

// Session drivers a [SessionConfig] may name.
const (
	// SessionMemory is ADK-Go's in-memory session service: sessions and
	// pending confirmations are lost when the process exits.
	SessionMemory = "memory"
	// SessionSQLite is ADK-Go's database session service (GORM) on a
	// SQLite file: sessions and pending confirmations survive a restart.
	SessionSQLite = "sqlite"
	// SessionPostgres is ADK-Go's database session service (GORM) on
	// PostgreSQL: sessions and pending confirmations survive a restart
	// and are shared by every replica on the database.
	SessionPostgres = "postgres"
)

// Config configures an ADK-Go agent. Its JSON fields are the
// backend-native section of a workspace agent with backend: adk; the
// agent's tools, approvals and system prompt come from the workspace's
// backend-neutral fields. Its zero value is an agent on the scripted
// model with no tools and the in-memory session service, streaming.
//
//	agents:
//	  - id: helper
//	    backend: adk
//	    tools: [lookup_order, issue_refund]
//	    approval: [issue_refund]            # ADK-Go tool confirmation
//	    adk:
//	      model: {provider: gemini, name: gemini-2.5-flash, api_key_env: GOOGLE_API_KEY}
//	      instruction: You are a helpful assistant.
//	      session: {driver: sqlite, path: adk-sessions.db}
type Config struct {
	// Name is the ADK agent's name (llmagent.Config.Name); default
	// "assistant". It must be a valid ADK agent name (an identifier).
	Name string `json:"name,omitempty"`
	// Description is the ADK agent's description.
	Description string `json:"description,omitempty"`
	// Instruction is the ADK agent's instruction (its system prompt,
	// with ADK-Go's own {state} templating). Armature sets no session
	// state and gives the agent no artifact service, so Validate refuses
	// a placeholder ADK-Go would fail every turn on: a required state
	// key ({key}, {app:key}, {user:key}, {temp:key}; {{key}} too, ADK-Go
	// has no escape) and an artifact ({artifact.name}, optional or not).
	// An optional one ({key?}: the value when the session state has it,
	// nothing otherwise) and braces around anything but a state name
	// ({a b}, {x-y}, JSON) are accepted and, for the latter, sent as
	// written. Text that must reach the model as written, braces and
	// all, belongs in System (the workspace's system: prompt).
	Instruction string `json:"instruction,omitempty"`
	// System is the instruction when Instruction is empty, sent as
	// written: no templating, so braces in it ("answer in the form
	// {answer}") are text. Factory sets it to the workspace agent's
	// system: prompt, which means the same on every backend.
	System string `json:"-"`
	// AppName is the ADK application the sessions belong to; default
	// "armature".
	AppName string `json:"app_name,omitempty"`
	// Model selects the model.
	Model ModelConfig `json:"model,omitempty"`
	// Tools are the agent's tools (the workspace agent's tools: and
	// approval: lists, resolved by the runtime's tool gateway): each
	// becomes an ADK function tool, and one that needs approval asks
	// for a confirmation (functiontool RequireConfirmation).
	Tools []agent.Tool `json:"-"`
	// LLM, when set, is the model, and Model is ignored: an embedding
	// program's own model.LLM, or the workspace's provider bridged by
	// [NewProviderModel].
	LLM model.LLM `json:"-"`
	// Sampling are model settings for every call (the workspace agent's
	// max_tokens and temperature, adapter.Agent.Sampling): the agent's
	// GenerateContentConfig (MaxOutputTokens, Temperature, TopP, Seed,
	// penalties, StopSequences), so that they reach whichever model runs
	// it, ADK-Go's own Gemini client as much as a bridged one.
	Sampling llm.Config `json:"-"`
	// Session selects the ADK session service.
	Session SessionConfig `json:"session,omitempty"`
	// Window bounds what each model call sends of ADK-Go's session (the
	// workspace agent's window:, adapter.Agent.Window): a
	// BeforeModelCallback cuts the request's contents to the most
	// recent turns that fit both bounds, starting at a turn boundary (a
	// user message outside every tool-call group), as a native agent's
	// window does. ADK-Go's session keeps every event. The zero value
	// sends the whole session.
	Window agent.Window `json:"-"`
	// Tokens estimates a message's tokens for Window.MaxTokens (the
	// workspace model's llm.TokenEstimator); nil is llm.EstimateTokens.
	Tokens func(*llm.Message) int `json:"-"`
	// MaxLLMCalls bounds the model calls of one turn (ADK-Go's loop
	// calls the model for as long as it asks for tools); a turn that
	// reaches it ends with an assistant message saying so, as a native
	// agent's at max_steps. 0 means DefaultMaxLLMCalls.
	MaxLLMCalls int `json:"max_llm_calls,omitempty"`
	// Streaming runs the agent with ADK-Go's SSE streaming mode
	// (agent.StreamingModeSSE): a model that streams yields partial
	// events, each an agent.output.delta, as a native agent's model
	// chunks are. Unset (nil) means true, as Armature's surfaces stream
	// by default; false (streaming: false) runs ADK-Go's default,
	// non-streaming mode, each model answer one event.
	Streaming *bool `json:"streaming,omitempty"`
}

// timeout is the bound of a call of the Gemini client.
func (m ModelConfig) timeout() (time.Duration, error) {
	if m.Timeout == "" {
		return DefaultModelTimeout, nil
	}
	d, err := time.ParseDuration(m.Timeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: model.timeout %q: a positive duration such as 90s or 5m", ErrInvalidConfig, m.Timeout)
	}
	return d, nil
}

// streams reports whether the agent runs in ADK-Go's streaming mode:
// Streaming, true when unset.
func (c Config) streams() bool { return c.Streaming == nil || *c.Streaming }

// ModelConfig selects the model of an ADK agent.
type ModelConfig struct {
	// Provider is ProviderScripted (the default) or ProviderGemini.
	// (ADK-Go's model/openaimodel does not build against the OpenAI SDK
	// version the main module requires, so it is not offered.)
	Provider string `json:"provider,omitempty"`
	// Name is the model name given to the provider.
	Name string `json:"name,omitempty"`
	// BaseURL is the API root of the Gemini API; empty means the
	// default.
	BaseURL string `json:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding the API key; the
	// key is never read from the file.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// Timeout bounds each call of ProviderGemini's client, the whole
	// stream included (a Go duration, "90s", "5m"); empty means
	// DefaultModelTimeout, as Armature's own clients. A call past it
	// fails the turn in provider_unavailable.
	Timeout string `json:"timeout,omitempty"`
	// MaxResponseBytes bounds what each call of ProviderGemini's client
	// reads of the upstream's reply (a whole stream included); 0 means
	// DefaultMaxResponseBytes, as Armature's own clients. A reply past
	// it fails the turn in provider_invalid_response, and no more of it
	// is read. An error answer's body is read up to 64 KiB.
	MaxResponseBytes Size `json:"max_response_bytes,omitempty"`
	// Thinking is the thinking of ProviderGemini's model
	// (genai.ThinkingConfig); nil leaves it to the model. A bridged
	// workspace model takes the workspace agent's extras instead.
	Thinking *ThinkingConfig `json:"thinking,omitempty"`
}

// ThinkingConfig is a Gemini model's thinking, as ADK-Go's Gemini client
// sends it (generationConfig.thinkingConfig).
type ThinkingConfig struct {
	// Budget is the thinking budget in tokens (thinkingBudget): 0 turns
	// thinking off where the model allows it, -1 lets the model decide;
	// unset, the model's default. Budget and Level exclude each other.
	Budget *int32 `json:"budget,omitempty"`
	// Level is a Gemini 3 model's thinking level (thinkingLevel):
	// "minimal", "low", "medium" or "high", in any case; unset, the
	// model's default.
	Level string `json:"level,omitempty"`
	// IncludeThoughts asks for the model's thought summaries
	// (includeThoughts). They are never the answer: the runtime's history
	// keeps them as thinking blocks, with their signatures.
	IncludeThoughts bool `json:"include_thoughts,omitempty"`
}

// thinkingConfig is the thinking as genai's config (nil for none); t
// has been validated.
func (t *ThinkingConfig) thinkingConfig() *genai.ThinkingConfig {
	if t == nil {
		return nil
	}
	return &genai.ThinkingConfig{ThinkingBudget: t.Budget, ThinkingLevel: genai.ThinkingLevel(strings.ToUpper(t.Level)), IncludeThoughts: t.IncludeThoughts}
}

// validate refuses what the Gemini API would refuse on every call.
func (t *ThinkingConfig) validate() error {
	if t == nil {
		return nil
	}
	if t.Budget != nil && *t.Budget < -1 {
		return fmt.Errorf("%w: model.thinking.budget must be -1 (the model decides), 0 (off) or a number of tokens, not %d", ErrInvalidConfig, *t.Budget)
	}
	switch strings.ToLower(t.Level) {
	case "", "minimal", "low", "medium", "high":
	default:
		return fmt.Errorf("%w: model.thinking.level %q is unknown (minimal, low, medium, high)", ErrInvalidConfig, t.Level)
	}
	if t.Budget != nil && t.Level != "" {
		return fmt.Errorf("%w: model.thinking takes a budget or a level, not both", ErrInvalidConfig)
	}
	return nil
}

// The bounds of a call of ADK-Go's own Gemini client when ModelConfig
// sets none: those of Armature's own Gemini client (llm/gemini).
const (
	DefaultModelTimeout     = llmgemini.DefaultTimeout
	DefaultMaxResponseBytes = llmgemini.DefaultMaxResponseBytes
)

// Size is a number of bytes. In a workspace it is a number or a string
// with an optional KiB, MiB or GiB suffix ("32MiB").
type Size int64

// UnmarshalJSON decodes a number of bytes or a size string.
func (s *Size) UnmarshalJSON(b []byte) error {
	var v string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
	} else {
		v = string(b)
	}
	n, err := bytesize.Parse(v)
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// SessionConfig selects the ADK session service.
type SessionConfig struct {
	// Driver is SessionMemory (the default), SessionSQLite or
	// SessionPostgres.
	Driver string `json:"driver,omitempty"`
	// Path is the SQLite file of SessionSQLite, relative to the
	// workspace file's directory when the host resolves it.
	Path string `json:"path,omitempty"`
	// URLEnv names the environment variable holding the PostgreSQL
	// connection string of SessionPostgres (a pgx URL or key=value
	// string). The string is never read from the file.
	URLEnv string `json:"url_env,omitempty"`
	// URL is the connection string itself, for programs that build a
	// Config in code; a workspace uses URLEnv.
	URL string `json:"-"`
	// Schema is the PostgreSQL schema of ADK-Go's tables
	// (SessionPostgres), created if missing: ADK-Go names them sessions
	// and events, as Armature's own store names its own, so they cannot
	// share a schema. Default DefaultSessionSchema, unless the connection
	// string sets search_path, which then decides.
	Schema string `json:"schema,omitempty"`
}

// DefaultSessionSchema is the PostgreSQL schema of ADK-Go's tables when
// neither SessionConfig.Schema nor the connection string's search_path
// names one.
const DefaultSessionSchema = "adk"

// schemaName is a lower-case SQL identifier.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Validate reports the first invalid field, wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	if c.Name == "user" {
		// ADK-Go reserves it for the end user's events.
		return fmt.Errorf("%w: name %q is reserved for the user's events", ErrInvalidConfig, c.Name)
	}
	if c.MaxLLMCalls < 0 {
		return fmt.Errorf("%w: max_llm_calls must not be negative", ErrInvalidConfig)
	}
	if err := adapter.CheckToolNames(c.Tools); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := checkInstruction(c.Instruction); err != nil {
		return err
	}
	switch c.Model.Provider {
	case "", ProviderScripted:
		// The bounds are those of ADK-Go's Gemini client: the scripted
		// model makes no call, and a bridged workspace model takes the
		// workspace agent's timeout: and max_response_bytes:.
		if c.Model.Timeout != "" || c.Model.MaxResponseBytes != 0 {
			return fmt.Errorf("%w: model.timeout and model.max_response_bytes bound the calls of provider %q; a bridged workspace model takes the workspace agent's timeout and max_response_bytes",
				ErrInvalidConfig, ProviderGemini)
		}
		if c.Model.Thinking != nil {
			return fmt.Errorf("%w: model.thinking sets the thinking of provider %q; a bridged workspace model takes the workspace agent's extras",
				ErrInvalidConfig, ProviderGemini)
		}
	case ProviderGemini:
		if c.Model.Name == "" {
			return fmt.Errorf("%w: model.name is required for provider %q", ErrInvalidConfig, c.Model.Provider)
		}
		// Named, so meant: without it ADK-Go's client is refused when
		// the agent is built, after the runtime opened its store, or
		// takes another variable's key. (The value is never printed.)
		if c.Model.APIKeyEnv != "" && os.Getenv(c.Model.APIKeyEnv) == "" {
			return fmt.Errorf("%w: model.api_key_env names %s, which is not set", ErrInvalidConfig, c.Model.APIKeyEnv)
		}
		if _, err := c.Model.timeout(); err != nil {
			return err
		}
		if c.Model.MaxResponseBytes < 0 {
			return fmt.Errorf("%w: model.max_response_bytes must not be negative", ErrInvalidConfig)
		}
		if err := c.Model.Thinking.validate(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown model.provider %q (supported: %s, %s)", ErrInvalidConfig,
			c.Model.Provider, ProviderScripted, ProviderGemini)
	}
	sc := c.Session
	switch sc.Driver {
	case "", SessionMemory:
		if sc.Path != "" || sc.URLEnv != "" || sc.URL != "" || sc.Schema != "" {
			return fmt.Errorf("%w: session.path, url_env or schema is set but session.driver is %q", ErrInvalidConfig, SessionMemory)
		}
	case SessionSQLite:
		if sc.Path == "" || sc.URLEnv != "" || sc.URL != "" || sc.Schema != "" {
			return fmt.Errorf("%w: driver %q takes session.path (only)", ErrInvalidConfig, SessionSQLite)
		}
		// The file is opened as a file: URI, where ? starts parameters
		// and # a fragment: the rest of the path would be read as either.
		if strings.ContainsAny(sc.Path, "?#") || strings.ContainsRune(sc.Path, 0) {
			return fmt.Errorf("%w: session.path %q must not hold ?, # or NUL", ErrInvalidConfig, sc.Path)
		}
	case SessionPostgres:
		if (sc.URLEnv == "") == (sc.URL == "") || sc.Path != "" {
			return fmt.Errorf("%w: driver %q takes session.url_env (only)", ErrInvalidConfig, SessionPostgres)
		}
		// Named, so meant: an unset variable would be the empty
		// connection string, with which pgx takes libpq's defaults (PG*
		// variables, the local socket) and ADK-Go's sessions would go
		// to whatever database those name. (The value is never printed.)
		if sc.URLEnv != "" && os.Getenv(sc.URLEnv) == "" {
			return fmt.Errorf("%w: session.url_env names %s, which is not set", ErrInvalidConfig, sc.URLEnv)
		}
		if sc.Schema != "" && !schemaName.MatchString(sc.Schema) {
			return fmt.Errorf("%w: session.schema %q is not a lower-case SQL identifier", ErrInvalidConfig, sc.Schema)
		}
	default:
		return fmt.Errorf("%w: unknown session.driver %q (supported: %s, %s, %s)", ErrInvalidConfig,
			sc.Driver, SessionMemory, SessionSQLite, SessionPostgres)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "assistant"
	}
	if c.AppName == "" {
		c.AppName = "armature"
	}
	if c.Model.Provider == "" {
		c.Model.Provider = ProviderScripted
	}
	if c.Session.Driver == "" {
		c.Session.Driver = SessionMemory
	}
	return c
}
