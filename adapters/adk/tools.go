package adk

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"

	"github.com/armature-go/armature/agent"
)

// NewTool returns t as an ADK-Go function tool built by ADK-Go's own
// constructor (functiontool.New): the model sees t's name, description
// and JSON Schema; a call runs t.Call on the model's arguments and
// answers {"result": text}, or ADK-Go's {"error": ...} when t fails.
// With confirm (or t.NeedsApproval) set, every call first asks for a
// confirmation through ADK-Go's tool-confirmation mechanism
// (RequireConfirmation): the run ends with an adk_request_confirmation
// call, and the tool runs only once a function response confirms it.
func NewTool(t agent.Tool, confirm bool) (tool.Tool, error) {
	var schema *jsonschema.Schema
	if len(t.Definition.Parameters) > 0 {
		schema = new(jsonschema.Schema)
		if err := json.Unmarshal(t.Definition.Parameters, schema); err != nil {
			return nil, fmt.Errorf("adk: the schema of tool %q: %w", t.Definition.Name, err)
		}
	}
	call := t.Call
	return functiontool.New(functiontool.Config{
		Name:                t.Definition.Name,
		Description:         t.Definition.Description,
		InputSchema:         schema,
		RequireConfirmation: confirm || t.NeedsApproval,
	}, func(ctx adkagent.Context, args map[string]any) (map[string]any, error) {
		raw, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		out, err := call(agent.WithToolCall(ctx, ctx.FunctionCallID(), t.Definition.Name), raw)
		if err != nil {
			return nil, err
		}
		return map[string]any{"result": out}, nil
	})
}
