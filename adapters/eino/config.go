package eino

import (
	"fmt"
	"os"

	"github.com/cloudwego/eino/components/model"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
)

// Model providers a [ModelConfig] may name.
const (
	// ProviderScripted is Armature's offline demo script (package
	// internal/demo) behind Eino's ToolCallingChatModel: deterministic,
	// no network. Tests and the offline demo select it.
	ProviderScripted = "scripted"
	// ProviderWorkspace bridges the model the workspace agent declares
	// (provider:, model:, base_url:, api_key_env: — Armature's OpenAI,
	// Anthropic or Gemini client) with [NewProviderModel]: Eino's own
	// model clients live in eino-ext, which this module does not pull
	// in; an embedding program passes one as Config.Model.
	ProviderWorkspace = "workspace"
)

// Checkpoint store drivers a [CheckpointConfig] may name.
const (
	// CheckpointMemory keeps Eino checkpoints in memory: an approval
	// pending when the process exits cannot be resumed.
	CheckpointMemory = "memory"
	// CheckpointFile keeps each checkpoint in a file of a directory
	// ([FileStore]): a pending approval survives a restart.
	CheckpointFile = "file"
	// CheckpointPostgres keeps checkpoints in a PostgreSQL table
	// ([PostgresStore]): a pending approval survives a restart and can be
	// resumed by any replica on the database.
	CheckpointPostgres = "postgres"
)

// Config configures an Eino agent. Its JSON fields are the
// backend-native section of a workspace agent with backend: eino; the
// agent's tools, approvals and system prompt come from the workspace's
// backend-neutral fields. Its zero value is an agent on the scripted
// model (or the workspace's, when it declares one) with no tools and an
// in-memory checkpoint store, streaming.
//
//	agents:
//	  - id: helper
//	    backend: eino
//	    tools: [lookup_order, issue_refund]
//	    approval: [issue_refund]            # Eino interrupt / resume
//	    eino:
//	      instruction: You are a helpful assistant.
//	      max_iterations: 10
//	      checkpoint: {driver: file, dir: eino-checkpoints}
type Config struct {
	// Name is the ChatModelAgent's name; default "assistant".
	Name string `json:"name,omitempty"`
	// Description is the ChatModelAgent's description; default "An
	// Armature agent." (Eino requires one).
	Description string `json:"description,omitempty"`
	// Instruction is the ChatModelAgent's instruction (its system
	// prompt); default the workspace agent's system prompt.
	Instruction string `json:"instruction,omitempty"`
	// MaxIterations bounds the ReAct loop (ChatModelAgentConfig
	// MaxIterations); 0 means Eino's default.
	MaxIterations int `json:"max_iterations,omitempty"`
	// Provider selects the model: ProviderScripted, or
	// ProviderWorkspace. Empty means the workspace's model when the
	// workspace agent declares one, else the scripted model.
	Provider string `json:"provider,omitempty"`
	// Checkpoint selects the Eino checkpoint store.
	Checkpoint CheckpointConfig `json:"checkpoint,omitempty"`
	// Workflow names the agent's Eino graph in run records (the
	// runtime.workflow.* facts, workflowId): unset means the agent's
	// Name, "" none.
	Workflow *string `json:"workflow,omitempty"`
	// Streaming runs the agent with Eino's streaming
	// (RunnerConfig.EnableStreaming): a model that streams yields message
	// streams, each chunk an agent.output.delta, as a native agent's
	// model chunks are. Unset (nil) means true, as Armature's surfaces
	// stream by default; false (streaming: false) runs Eino's default,
	// each model answer one message.
	Streaming *bool `json:"streaming,omitempty"`

	// Tools are the agent's tools (the workspace agent's tools: and
	// approval: lists, resolved by the runtime's tool gateway): each
	// becomes an Eino InvokableTool, and one that needs approval
	// interrupts (tool.Interrupt) until a decision resumes it.
	Tools []agent.Tool `json:"-"`
	// Model, when set, is the model, and Provider is ignored.
	Model model.ToolCallingChatModel `json:"-"`
	// Store, when set, is the checkpoint store, and Checkpoint is
	// ignored.
	Store CheckPointStore `json:"-"`
}

// streams reports whether the agent runs with Eino's streaming:
// Streaming, true when unset.
func (c Config) streams() bool { return c.Streaming == nil || *c.Streaming }

// CheckpointConfig selects the Eino checkpoint store.
type CheckpointConfig struct {
	// Driver is CheckpointMemory, CheckpointFile or CheckpointPostgres.
	// Unset, Factory keeps the checkpoints where the runtime keeps its
	// data (adapter.FactoryRequest: on the runtime's PostgreSQL
	// database, or in files under its data directory), and in memory
	// for an embedded runtime; NewEngine keeps them in memory.
	Driver string `json:"driver,omitempty"`
	// Dir is the directory of CheckpointFile, relative to the
	// workspace file's directory.
	Dir string `json:"dir,omitempty"`
	// URLEnv names the environment variable holding the PostgreSQL
	// connection string of CheckpointPostgres (never read from the
	// file); URL is the string itself, for programs that build a Config
	// in code.
	URLEnv string `json:"url_env,omitempty"`
	URL    string `json:"-"`
	// Table is CheckpointPostgres's table; default DefaultTable.
	Table string `json:"table,omitempty"`
}

// Validate reports the first invalid field, wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	switch c.Provider {
	case "", ProviderScripted, ProviderWorkspace:
	default:
		return fmt.Errorf("%w: unknown provider %q (supported: %s, %s)", ErrInvalidConfig, c.Provider, ProviderScripted, ProviderWorkspace)
	}
	if c.MaxIterations < 0 {
		return fmt.Errorf("%w: max_iterations is negative", ErrInvalidConfig)
	}
	if err := adapter.CheckToolNames(c.Tools); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	cc := c.Checkpoint
	pg := cc.URLEnv != "" || cc.URL != "" || cc.Table != ""
	switch cc.Driver {
	case "", CheckpointMemory:
		if cc.Dir != "" || pg {
			return fmt.Errorf("%w: checkpoint.driver %q takes no other field", ErrInvalidConfig, CheckpointMemory)
		}
	case CheckpointFile:
		if cc.Dir == "" || pg {
			return fmt.Errorf("%w: checkpoint.driver %q takes checkpoint.dir (only)", ErrInvalidConfig, CheckpointFile)
		}
	case CheckpointPostgres:
		if (cc.URLEnv == "") == (cc.URL == "") || cc.Dir != "" {
			return fmt.Errorf("%w: checkpoint.driver %q takes checkpoint.url_env and table (only)", ErrInvalidConfig, CheckpointPostgres)
		}
		// Named, so meant: an unset variable would be the empty
		// connection string, with which pgx takes libpq's defaults (PG*
		// variables, the local socket) and the checkpoints would go to
		// whatever database those name. (The value is never printed.)
		if cc.URLEnv != "" && os.Getenv(cc.URLEnv) == "" {
			return fmt.Errorf("%w: checkpoint.url_env names %s, which is not set", ErrInvalidConfig, cc.URLEnv)
		}
		// Refused here, not only by NewPostgresStore when the agent is
		// built (after the runtime opened its store).
		if cc.Table != "" && !tableName.MatchString(cc.Table) {
			return fmt.Errorf("%w: checkpoint.table %q is not a lower-case SQL identifier", ErrInvalidConfig, cc.Table)
		}
	default:
		return fmt.Errorf("%w: unknown checkpoint.driver %q (supported: %s, %s, %s)", ErrInvalidConfig,
			cc.Driver, CheckpointMemory, CheckpointFile, CheckpointPostgres)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "assistant"
	}
	if c.Description == "" {
		c.Description = "An Armature agent."
	}
	return c
}
