package adk

import (
	"fmt"
	"slices"
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
)

// Config is the backend-native section of a workspace agent with
// backend: adk. Its zero value is an agent on the scripted model with no
// tools and the in-memory session service.
//
//	agents:
//	  - id: helper
//	    backend: adk
//	    adk:
//	      model: {provider: gemini, name: gemini-2.5-flash, api_key_env: GOOGLE_API_KEY}
//	      instruction: You are a helpful assistant.
//	      tools: [lookup_order, issue_refund]
//	      approval: [issue_refund]          # functiontool RequireConfirmation
//	      session: {driver: sqlite, path: adk-sessions.db}
type Config struct {
	// Name is the ADK agent's name (llmagent.Config.Name); default
	// "assistant". It must be a valid ADK agent name (an identifier).
	Name string `yaml:"name"`
	// Description is the ADK agent's description.
	Description string `yaml:"description"`
	// Instruction is the ADK agent's instruction (its system prompt,
	// with ADK-Go's own {state} templating).
	Instruction string `yaml:"instruction"`
	// AppName is the ADK application the sessions belong to; default
	// "armature".
	AppName string `yaml:"app_name"`
	// Model selects the model.
	Model ModelConfig `yaml:"model"`
	// Tools names the tools, among those the host offers, the agent
	// gets as ADK function tools.
	Tools []string `yaml:"tools"`
	// Approval names tools, among Tools, whose every call asks for a
	// confirmation (functiontool.Config.RequireConfirmation); a tool the
	// host declares as needing approval asks for one too.
	Approval []string `yaml:"approval"`
	// Session selects the ADK session service.
	Session SessionConfig `yaml:"session"`
}

// ModelConfig selects the model of an ADK agent.
type ModelConfig struct {
	// Provider is ProviderScripted (the default) or ProviderGemini.
	// (ADK-Go's model/openaimodel does not build against the OpenAI SDK
	// version the main module requires, so it is not offered.)
	Provider string `yaml:"provider"`
	// Name is the model name given to the provider.
	Name string `yaml:"name"`
	// BaseURL is the API root of the Gemini API; empty means the
	// default.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the API key; the
	// key is never read from the file.
	APIKeyEnv string `yaml:"api_key_env"`
}

// SessionConfig selects the ADK session service.
type SessionConfig struct {
	// Driver is SessionMemory (the default) or SessionSQLite.
	Driver string `yaml:"driver"`
	// Path is the SQLite file of SessionSQLite, relative to the
	// workspace file's directory when the host resolves it.
	Path string `yaml:"path"`
}

// Validate reports the first invalid field, wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	switch c.Model.Provider {
	case "", ProviderScripted:
	case ProviderGemini:
		if c.Model.Name == "" {
			return fmt.Errorf("%w: model.name is required for provider %q", ErrInvalidConfig, c.Model.Provider)
		}
	default:
		return fmt.Errorf("%w: unknown model.provider %q (supported: %s, %s)", ErrInvalidConfig,
			c.Model.Provider, ProviderScripted, ProviderGemini)
	}
	switch c.Session.Driver {
	case "", SessionMemory:
		if c.Session.Path != "" {
			return fmt.Errorf("%w: session.path is set but session.driver is %q", ErrInvalidConfig, SessionMemory)
		}
	case SessionSQLite:
		if c.Session.Path == "" {
			return fmt.Errorf("%w: session.path is required for driver %q", ErrInvalidConfig, SessionSQLite)
		}
	default:
		return fmt.Errorf("%w: unknown session.driver %q (supported: %s, %s)", ErrInvalidConfig,
			c.Session.Driver, SessionMemory, SessionSQLite)
	}
	for _, name := range c.Approval {
		if !slices.Contains(c.Tools, name) {
			return fmt.Errorf("%w: approval names %q, which is not among the tools", ErrInvalidConfig, name)
		}
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
