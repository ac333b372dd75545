package adapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/jsonexact"
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
// misspelt key is an error rather than silently ignored. Keys match
// fields exactly, as the workspace file's own keys do: a key that names
// a field only up to case ("Max_Iterations", "MAX_ITERATIONS"), which
// encoding/json would take, is an unknown key too, at any depth (nested
// structs, maps and slices of them), and the error names its path. An
// empty section leaves v as it is. The error wraps ErrInvalidConfig.
func (a *Agent) DecodeConfig(v any) error {
	if len(bytes.TrimSpace(a.Config)) == 0 || string(bytes.TrimSpace(a.Config)) == "null" {
		return nil
	}
	if t := reflect.TypeOf(v); t != nil {
		if path, near, ok := inexactKey(a.Config, t, "", 0); ok {
			hint := ""
			if near != "" {
				hint = fmt.Sprintf(" (keys are case-sensitive: the field is %q)", near)
			}
			return fmt.Errorf("%w: agent %s: %s section: unknown key %q%s", ErrInvalidConfig, a.ID, a.Backend, path, hint)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(a.Config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: agent %s: %s section: %w", ErrInvalidConfig, a.ID, a.Backend, err)
	}
	return nil
}

// maxKeyDepth bounds inexactKey's walk; deeper data is left to the
// decoder, which bounds nesting too.
const maxKeyDepth = 1000

// inexactKey returns the path (from the section's root, as "a.b[2].c")
// of the first object key in data, decoded as t, that is not exactly the
// JSON name of a field of the struct it decodes into, and the name of
// the field it names up to case, if any (encoding/json's folding, which
// would have taken it). Data that is not
// JSON, or that t does not describe (a value that decodes itself, an
// interface, a map's keys), is left to the decoder.
func inexactKey(data []byte, t reflect.Type, path string, depth int) (at, near string, bad bool) {
	if depth > maxKeyDepth {
		return "", "", false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if jsonexact.Custom(t) {
		return "", "", false
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "", "", false
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if data[0] != '{' {
			return "", "", false
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return "", "", false
		}
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = jsonexact.Fields(t)
		}
		for dec.More() {
			tok, err := dec.Token()
			key, ok := tok.(string)
			if err != nil || !ok {
				return "", "", false
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return "", "", false
			}
			var (
				kpath string
				vt    reflect.Type
			)
			if fields != nil {
				kpath = joinKey(path, key)
				if vt, ok = fields[key]; !ok {
					for n := range fields {
						if strings.EqualFold(n, key) && (near == "" || n < near) {
							near = n
						}
					}
					return kpath, near, true
				}
			} else {
				kpath, vt = path+"["+strconv.Quote(key)+"]", t.Elem() // a map's value
			}
			if p, n, bad := inexactKey(raw, vt, kpath, depth+1); bad {
				return p, n, true
			}
		}
	case reflect.Slice, reflect.Array:
		if data[0] != '[' {
			return "", "", false
		}
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return "", "", false
		}
		for i, it := range items {
			if p, n, bad := inexactKey(it, t.Elem(), path+"["+strconv.Itoa(i)+"]", depth+1); bad {
				return p, n, true
			}
		}
	}
	return "", "", false
}

// joinKey appends an object key to a path: a plain key after a dot, one
// that would not read as such quoted.
func joinKey(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if r != '_' && r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			plain = false
			break
		}
	}
	if !plain {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
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
