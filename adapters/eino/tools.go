package eino

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
)

// ApprovalRequest is the interrupt info of a tool call waiting for a
// human's approval: what tool.Interrupt records in Eino's checkpoint and
// reports in the run's InterruptInfo. It is registered with Eino's
// serialization as ApprovalRequestName.
type ApprovalRequest struct {
	// Tool, CallID and Arguments identify the call.
	Tool      string
	CallID    string
	Arguments string
}

// Decision is the resume data of an interrupted approval: what
// Runner.ResumeWithParams hands the interrupted tool.
type Decision struct {
	// Approved runs the tool; otherwise the tool answers that the user
	// denied the call, with Comment as the reason.
	Approved bool
	Comment  string
}

// ApprovalRequestName is the name ApprovalRequest is registered under in
// Eino's checkpoint serialization. It is stored in checkpoints and must
// not change.
const ApprovalRequestName = "armature.eino.ApprovalRequest"

func init() {
	schema.RegisterName[*ApprovalRequest](ApprovalRequestName)
}

// resumeReachedKey carries the *atomic.Bool a resume sets once it
// reached the call it targets (Engine.resume).
type resumeReachedKey struct{}

// invokable is an Armature tool as an Eino InvokableTool.
type invokable struct {
	t    agent.Tool
	info *schema.ToolInfo
}

// NewTool returns t as an Eino InvokableTool. A call runs t.Call, bounded
// as Armature's own agent bounds its calls (agent.Tool.Bounded with the
// defaults: a call past agent.DefaultToolTimeout fails, a result past
// agent.DefaultMaxToolResultBytes is cut); a tool's error is reported to
// the model as its result ("error: ..."), as Armature's own agent does. When t needs approval, a call first
// interrupts with an [ApprovalRequest] (Eino's tool.Interrupt: the run
// stops, its checkpoint is saved), and runs only when the run is resumed
// with an approving [Decision] targeted at it; a denying decision
// answers the model that the user denied the call.
func NewTool(t agent.Tool) (tool.InvokableTool, error) {
	info := &schema.ToolInfo{Name: t.Definition.Name, Desc: t.Definition.Description}
	if len(t.Definition.Parameters) > 0 {
		s := new(jsonschema.Schema)
		if err := json.Unmarshal(t.Definition.Parameters, s); err != nil {
			return nil, fmt.Errorf("eino: the schema of tool %q: %w", t.Definition.Name, err)
		}
		info.ParamsOneOf = schema.NewParamsOneOfByJSONSchema(s)
	}
	return &invokable{t: t.Bounded(0, 0), info: info}, nil
}

// Info implements tool.BaseTool.
func (i *invokable) Info(context.Context) (*schema.ToolInfo, error) { return i.info, nil }

// InvokableRun implements tool.InvokableTool. A tool that panics
// answers the model "error: the tool failed: ...", as Armature's own
// agent answers it, rather than failing the turn.
func (i *invokable) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (result string, err error) {
	if i.t.NeedsApproval {
		req := &ApprovalRequest{Tool: i.t.Definition.Name, CallID: compose.GetToolCallID(ctx), Arguments: args}
		if interrupted, _, _ := tool.GetInterruptState[any](ctx); !interrupted {
			return "", tool.Interrupt(ctx, req)
		}
		target, hasData, d := tool.GetResumeContext[*Decision](ctx)
		if !target {
			return "", tool.Interrupt(ctx, req) // a sibling call was resumed, not this one
		}
		if r, ok := ctx.Value(resumeReachedKey{}).(*atomic.Bool); ok {
			r.Store(true) // the decision takes effect: Engine.resume
		}
		if !hasData || d == nil || !d.Approved {
			var reason string
			if hasData && d != nil {
				reason = d.Comment
			}
			text := agent.DeniedResult(reason)
			failed(ctx, text)
			return text, nil
		}
	}
	defer func() {
		if p := recover(); p != nil {
			result, err = fmt.Sprintf("error: the tool failed: %v", p), nil
			failed(ctx, result)
			adapter.ToolReturned(ctx, compose.GetToolCallID(ctx), result, "")
		}
	}()
	id := compose.GetToolCallID(ctx)
	out, err := i.t.Call(agent.WithToolCall(ctx, id, i.t.Definition.Name), json.RawMessage(args))
	if err != nil {
		text := "error: " + err.Error()
		failed(ctx, text)
		adapter.ToolReturned(ctx, id, text, "")
		return text, nil
	}
	adapter.ToolReturned(ctx, id, out, "")
	return out, nil
}

// failed records, for the run's agent.tool.result event, that the
// current call failed or was denied with text (the model reads text as
// the call's result either way).
func failed(ctx context.Context, text string) {
	s, _ := ctx.Value(strayKey{}).(*strayResults)
	s.fail(compose.GetToolCallID(ctx), text)
}
