package adapter

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/graph"
)

// NativeAdapter is Armature's own backend as an adapter: the prebuilt
// tool-calling agent graph (package agent) served by the chat harness,
// with no behaviour change. It is a GraphAdapter: Compile returns the
// agent's graph, which runs its turns natively (model and tool nodes,
// approval suspensions).
type NativeAdapter struct {
	agent *agent.Agent
}

var _ GraphAdapter = (*NativeAdapter)(nil)

// NewNative returns the native adapter of a.
func NewNative(a *agent.Agent) *NativeAdapter { return &NativeAdapter{agent: a} }

// Name returns Native.
func (n *NativeAdapter) Name() string { return Native }

// Agent returns the adapted agent.
func (n *NativeAdapter) Agent() *agent.Agent { return n.agent }

// Compile builds the agent's chat graph (agent.Agent.Compile).
func (n *NativeAdapter) Compile(opts ...graph.CompileOption) (*graph.Graph, error) {
	return n.agent.Compile(opts...)
}

// Run is not used by the runtime for the native backend, whose turns run
// as the graph Compile returns; it fails with ErrGraphOnly.
func (n *NativeAdapter) Run(context.Context, *Request, Emitter) (*Result, error) {
	return nil, fmt.Errorf("%w: the native backend runs its turns as a graph (Compile)", ErrGraphOnly)
}

// NativeFactory builds the native adapter of a workspace agent: an
// agent.Agent over the agent's Provider, System prompt and Tools. Its
// native section, when present, is NativeConfig. armature serve
// registers its own native factory, which also reads the workspace's
// windows, compaction and managed prompts.
func NativeFactory(_ context.Context, req FactoryRequest) (Adapter, error) {
	var cfg NativeConfig
	if err := req.Agent.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	a, err := agent.New(agent.Config{Provider: req.Agent.Provider, System: req.Agent.System, Tools: req.Agent.Tools, MaxSteps: cfg.MaxSteps})
	if err != nil {
		return nil, err
	}
	return NewNative(a), nil
}

// NativeConfig is the native backend's section (armature:) of a
// workspace agent, for NativeFactory.
type NativeConfig struct {
	// MaxSteps bounds the model calls of one turn (agent.Config.MaxSteps).
	MaxSteps int `json:"max_steps,omitempty"`
}
