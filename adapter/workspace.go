package adapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/llm"
)

// Workspace is the compiled workspace an adapter receives: the agents it
// declares, as the runtime resolved them. It is read-only once built.
type Workspace struct {
	// Agents are the workspace's agents, in declaration order.
	Agents []*Agent
	// DefaultAgent is the id of the agent that serves requests naming
	// none ("" = the first).
	DefaultAgent string
	// Dir is the directory of the workspace file, for relative paths in
	// backend-native sections ("" for a workspace built in code).
	Dir string
}

// Agent is one agent of a workspace, as an adapter receives it: the
// backend-neutral inventory (model, system prompt, tools) and the
// backend-native section.
type Agent struct {
	// ID names the agent in routes, run records and events.
	ID string
	// Backend is the adapter's name (Native when the workspace names
	// none).
	Backend string
	// Model names the model (agent.handoff's modelRef).
	Model string
	// System is the system prompt.
	System string
	// Provider is the model the workspace declares (provider, model,
	// base_url, api_key_env), built by the runtime: an adapter may bridge
	// it to its upstream's model interface, or build its own model from
	// its native config (passthrough). Nil when the workspace declares no
	// provider for a non-native backend.
	Provider llm.Provider
	// Sampling is the workspace agent's model settings (max_tokens,
	// temperature; a max_tokens of 1024 when the provider is anthropic
	// and the workspace sets none, as the native agent has): an adapter
	// that bridges Provider applies them to every call, under the
	// settings its upstream gives the call itself (llm.Config.Merge).
	Sampling llm.Config
	// Window is the workspace agent's history window (window:): the
	// runtime hands an adapter only the part of the history the window
	// sends (Request.History), bounded by messages and by estimated
	// tokens (agent.Window.Start, the system prompt and tool definitions
	// counted). An adapter whose upstream keeps a history of its own
	// applies the Window to what the upstream sends its model (the
	// ADK-Go adapter, through a model callback), or refuses it in its
	// factory.
	Window agent.Window
	// Tools are the agent's tools from the runtime's tool gateway, with
	// their approval and risk declarations (Tool.NeedsApproval,
	// Tool.Risk): an adapter hands them to its upstream as upstream tools
	// and maps the upstream's approval request onto a Suspension.
	Tools []agent.Tool
	// Config is the agent's backend-native section (the workspace key
	// named by the backend, e.g. adk: or eino:) as JSON, or empty. Decode
	// it into the adapter's typed config with DecodeConfig.
	Config json.RawMessage
}

// ToolNames returns the names of the agent's tools, in order.
func (a *Agent) ToolNames() []string {
	out := make([]string, len(a.Tools))
	for i, t := range a.Tools {
		out[i] = t.Definition.Name
	}
	return out
}

// CheckToolNames reports a tool that tools name twice: an agent's tools
// are called by name, so a second one of a name is refused (as agent.New
// refuses it on the native backend) when the agent is built, at startup,
// rather than by the upstream at every turn. An adapter's config
// validation calls it on the agent's tools.
func CheckToolNames(tools []agent.Tool) error {
	for i := range tools {
		for j := range i {
			if tools[j].Definition.Name == tools[i].Definition.Name {
				return fmt.Errorf("tool %q is named twice (tools %d and %d)", tools[i].Definition.Name, j, i)
			}
		}
	}
	return nil
}

// Tool returns the agent's tool named name.
func (a *Agent) Tool(name string) (agent.Tool, bool) {
	for _, t := range a.Tools {
		if t.Definition.Name == name {
			return t, true
		}
	}
	return agent.Tool{}, false
}

// DecodeConfig decodes the agent's backend-native section into v (a
// pointer to the adapter's typed config), refusing unknown fields so a
// misspelt key is an error rather than silently ignored. An empty
// section leaves v as it is. The error wraps ErrInvalidConfig.
func (a *Agent) DecodeConfig(v any) error {
	if len(bytes.TrimSpace(a.Config)) == 0 || string(bytes.TrimSpace(a.Config)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(a.Config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: agent %s: %s section: %w", ErrInvalidConfig, a.ID, a.Backend, err)
	}
	return nil
}

// Float64 converts an upstream's float32 model setting (ADK-Go's and
// Eino's temperature and top_p) to the float64 of llm.Config through its
// shortest decimal form, so that 0.2 stays 0.2 rather than becoming
// 0.20000000298023224; nil stays nil.
func Float64(f *float32) *float64 {
	if f == nil {
		return nil
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(*f), 'g', -1, 32), 64)
	return &v
}
