package adk

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"google.golang.org/genai"

	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"
	"google.golang.org/adk/v2/tool/toolutils"

	"github.com/armature-go/armature/agent"
)

// NewTool returns t as an ADK-Go function tool built by ADK-Go's own
// constructor (functiontool.New): the model sees t's name, description
// and JSON Schema; a call runs t.Call on the model's arguments, bounded
// as Armature's own agent bounds its calls (agent.Tool.Bounded with the
// defaults), and answers {"result": text}, or ADK-Go's {"error": ...}
// when t fails.
// With confirm (or t.NeedsApproval) set, every call first asks for a
// confirmation through ADK-Go's tool-confirmation mechanism
// (RequireConfirmation): the run ends with an adk_request_confirmation
// call, and the tool runs only once a function response confirms it. A
// response rejecting it answers the call with ADK-Go's rejection error,
// followed by the denial's reason when the response carries one
// ([Decision.Comment]), as the native agent's denied call does: the
// model reads why.
func NewTool(t agent.Tool, confirm bool) (tool.Tool, error) {
	var schema *jsonschema.Schema
	if len(t.Definition.Parameters) > 0 {
		schema = new(jsonschema.Schema)
		if err := json.Unmarshal(t.Definition.Parameters, schema); err != nil {
			return nil, fmt.Errorf("adk: the schema of tool %q: %w", t.Definition.Name, err)
		}
	}
	call := t.Bounded(0, 0).Call
	confirm = confirm || t.NeedsApproval
	ft, err := functiontool.New(functiontool.Config{
		Name:                t.Definition.Name,
		Description:         t.Definition.Description,
		InputSchema:         schema,
		RequireConfirmation: confirm,
	}, func(ctx adkagent.Context, args map[string]any) (map[string]any, error) {
		raw, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		out, err := call(agent.WithToolCall(ctx, ctx.FunctionCallID(), t.Definition.Name), raw)
		if err != nil {
			noteLate(ctx, t.Definition.Name, "", err)
			return nil, err
		}
		noteLate(ctx, t.Definition.Name, out, nil)
		return map[string]any{"result": out}, nil
	})
	if err != nil || !confirm {
		return ft, err
	}
	inner, ok := ft.(functionTool)
	if !ok {
		return nil, fmt.Errorf("adk: ADK-Go's function tool %q does not run as a function tool", t.Definition.Name)
	}
	return &deniable{functionTool: inner}, nil
}

// functionTool is what ADK-Go's flow runs a function tool through (its
// internal toolinternal.FunctionTool) and how the tool declares itself
// to the model.
type functionTool interface {
	tool.Tool
	Declaration() *genai.FunctionDeclaration
	Run(ctx adkagent.Context, args any) (map[string]any, error)
}

// CommentKey is the key of a rejecting confirmation's payload
// (ToolConfirmation.Payload, in the function response answering
// adk_request_confirmation) that holds the denial's reason. It is
// stored in ADK-Go's sessions and must not change.
const CommentKey = "comment"

// deniable wraps a function tool that asks for a confirmation, as ADK-Go's
// own confirmation wrapper (tool.WithConfirmation) wraps one: a call
// whose confirmation rejects it with a reason is answered with the
// rejection and the reason; everything else is the wrapped tool's.
type deniable struct {
	functionTool
}

// ProcessRequest declares the tool to the model (as the wrapped tool
// does), so that ADK-Go runs the call through the wrapper.
func (d *deniable) ProcessRequest(_ adkagent.Context, req *model.LLMRequest) error {
	return toolutils.PackTool(req, d)
}

// Run answers a call that a confirmation rejected with ADK-Go's
// rejection error (tool.ErrConfirmationRejected, as errors.Is tells),
// saying that the user denied it, as the native agent says it
// (agent.DeniedResult), with the reason when the denial gave one;
// otherwise it runs the wrapped tool.
func (d *deniable) Run(ctx adkagent.Context, args any) (map[string]any, error) {
	if c := ctx.ToolConfirmation(); c != nil && !c.Confirmed {
		err := fmt.Errorf("error tool %q %w. %s", d.Name(), tool.ErrConfirmationRejected, agent.DeniedResult(denialComment(c.Payload)))
		noteLate(ctx, d.Name(), "", err)
		return nil, err
	}
	return d.functionTool.Run(ctx, args)
}

// denialComment is the reason in a rejecting confirmation's payload:
// {"comment": text} (as the adapter sends it, or as ADK-Go's session
// store gives it back), or "".
func denialComment(payload any) string {
	switch p := payload.(type) {
	case map[string]any:
		s, _ := p[CommentKey].(string)
		return s
	case map[string]string:
		return p[CommentKey]
	}
	return ""
}
