package server

import (
	"fmt"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/session"
)

// AdapterAgentConfig configures NewAdapterAgent.
type AdapterAgentConfig struct {
	// Adapter runs the agent's turns (adapter.Registry.Build); Agent is
	// the workspace agent it was built for and Workspace the compiled
	// workspace (optional). Both Adapter and Agent are required.
	Adapter   adapter.Adapter
	Agent     *adapter.Agent
	Workspace *adapter.Workspace
	// Sessions is the session store: the server's Config.Sessions.
	// Required. SessionCache, when set, caches decoded sessions (one
	// cache may serve every agent).
	Sessions     session.Store
	SessionCache *graph.SessionCache
	// Records stores the paused turns, and signals resolve through it:
	// a durable checkpoint.Store (store/sqlite, store/postgres) lets an
	// approval be given after a restart or on another replica. Nil keeps
	// them in memory.
	Records checkpoint.Store
	// Locker serializes a session's turns across processes
	// (chat.Config.Locker); nil when one process owns the store.
	Locker chat.Locker
	// CompileOptions are further graph options (a logger).
	CompileOptions []graph.CompileOption
	// Chat, when set, adjusts the chat harness's configuration (a
	// tracer, graph observers on cfg.Graph) before it is built.
	Chat func(cfg *chat.Config) error
}

// NewAdapterAgent builds the served agent of a backend adapter: its
// chat graph (adapter.Compile) over the stores, its chat harness, and
// the Agent carrying its backend, workflow and tool gateway. armature
// serve builds every agent so, and so may a program of another module
// that serves agents of its own adapters with server.New. The graph is
// named after the agent (graph.WithName; CompileOptions may rename it):
// the agents of a server share the paused records, and a graph resumes
// only the ones it wrote.
func NewAdapterAgent(cfg AdapterAgentConfig) (*Agent, error) {
	if cfg.Adapter == nil || cfg.Agent == nil || cfg.Sessions == nil {
		return nil, fmt.Errorf("%w: an adapter agent needs an Adapter, its Agent and the Sessions store", ErrInvalidConfig)
	}
	ag := cfg.Agent
	// The graph is named after the agent: the agents of a server share
	// the paused records, and a graph resumes only its own (the turn of
	// the agent that suspended it, graph.ErrOtherGraph).
	// Writes are conditional (Optimistic): the chat harness serializes a
	// session's turns (Locker), so a turn whose write finds the session
	// moved on lost its lock meanwhile (its connection to the database
	// dropped, another replica took it): it fails with
	// session_write_conflict rather than write its history over the
	// other turn.
	opts := append([]graph.CompileOption{graph.WithName(ag.ID), graph.WithSessions(graph.SessionConfig{Store: cfg.Sessions, Cache: cfg.SessionCache, Optimistic: true})},
		cfg.CompileOptions...)
	if cfg.Records != nil {
		opts = append(opts, graph.WithCheckpointStore(cfg.Records))
	}
	g, err := adapter.Compile(cfg.Adapter, cfg.Workspace, ag, opts...)
	if err != nil {
		return nil, err
	}
	cc := chat.Config{Graph: g, Locker: cfg.Locker, OnDelete: adapter.OnDelete(cfg.Adapter), OnCancel: adapter.OnCancel(cfg.Adapter, g)}
	if cfg.Records != nil {
		cc.Coordinator = harness.NewStoreCoordinator(cfg.Records)
	}
	if cfg.Chat != nil {
		if err := cfg.Chat(&cc); err != nil {
			return nil, err
		}
	}
	h, err := chat.New(cc)
	if err != nil {
		return nil, err
	}
	return &Agent{ID: ag.ID, Chat: h, Model: ag.Model, Tools: ag.ToolNames(), Backend: cfg.Adapter.Name(),
		Workflow: adapter.WorkflowOf(cfg.Adapter), Gateway: ag.Tools}, nil
}
