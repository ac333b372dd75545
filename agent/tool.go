package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/armature-go/armature/llm"
)

// Tool is a function the model may call. Definition is what the model
// sees (name, description, the JSON Schema of the arguments); Call runs
// the tool on the model's arguments and returns its textual result.
//
// A tool's error is not a failure of the turn: the agent reports it to
// the model as the tool's result ("error: ...") and the loop goes on.
type Tool struct {
	// Definition is sent to the model.
	Definition llm.Tool
	// Call runs the tool. args is the model's JSON object, already
	// validated against Definition.Parameters when the tool was built by
	// NewTool. ctx carries the call's identity (ToolCallOf), whose
	// IdempotencyKey is the same each time the call runs: an approved
	// call runs again when its resumed turn is retried after a crash.
	Call func(ctx context.Context, args json.RawMessage) (string, error)
	// NeedsApproval makes every call of the tool wait for a human's
	// approval: the turn suspends with a pending message naming the call
	// and resumes on approve or deny (see Approve, Deny).
	NeedsApproval bool
	// Risk is the tool's declared risk. An approval of its call carries
	// it in the suspension's metadata (MetadataRiskTier), where a Shell
	// reads how careful the human should be (the OpenHarness
	// request_approval directive's risk_tier). Empty means RiskCaution.
	Risk Risk
}

// Risk is a tool's declared risk tier, with the OpenHarness risk_tier
// values.
type Risk string

// The risk tiers.
const (
	// RiskSafe: no side effect a human would regret (a lookup).
	RiskSafe Risk = "safe"
	// RiskCaution: a side effect that can be undone (the default).
	RiskCaution Risk = "caution"
	// RiskDangerous: a side effect that cannot be undone (money, data
	// loss).
	RiskDangerous Risk = "dangerous"
)

// ParseRisk returns the Risk named s ("" is RiskCaution), or an error
// wrapping ErrInvalidTool.
func ParseRisk(s string) (Risk, error) {
	switch r := Risk(s); r {
	case "":
		return RiskCaution, nil
	case RiskSafe, RiskCaution, RiskDangerous:
		return r, nil
	}
	return "", fmt.Errorf("%w: risk %q is not one of safe, caution, dangerous", ErrInvalidTool, s)
}

// WithApproval returns t with NeedsApproval set.
func (t Tool) WithApproval() Tool {
	t.NeedsApproval = true
	return t
}

// WithRisk returns t with its declared Risk.
func (t Tool) WithRisk(r Risk) Tool {
	t.Risk = r
	return t
}

// ErrInvalidTool is wrapped by tool construction errors.
var ErrInvalidTool = errors.New("agent: invalid tool")

// ArgumentsError reports arguments that do not fit the tool's schema. The
// agent hands its message to the model, which may correct itself.
type ArgumentsError struct {
	Tool string
	Err  error
}

// Error formats the failure.
func (e *ArgumentsError) Error() string {
	return fmt.Sprintf("agent: tool %s: invalid arguments: %v", e.Tool, e.Err)
}

// Unwrap returns the cause.
func (e *ArgumentsError) Unwrap() error { return e.Err }

// NewTool builds a typed tool: the arguments' JSON Schema is derived from
// In (a struct: exported fields by their JSON names, fields without
// omitempty required, `jsonschema:"..."` tags as descriptions), the
// model's arguments are validated against it and decoded into an In, and
// fn's result is the tool's result.
//
//	type weatherArgs struct {
//		City string `json:"city" jsonschema:"the city to look up"`
//	}
//	weather, err := agent.NewTool("get_weather", "Current weather for a city",
//		func(ctx context.Context, a weatherArgs) (string, error) { return lookup(ctx, a.City) })
func NewTool[In any](name, description string, fn func(ctx context.Context, args In) (string, error)) (Tool, error) {
	if name == "" || fn == nil {
		return Tool{}, fmt.Errorf("%w: a tool needs a name and a function", ErrInvalidTool)
	}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		return Tool{}, fmt.Errorf("%w: %s: deriving the argument schema: %v", ErrInvalidTool, name, err)
	}
	if schema.Type != "object" {
		return Tool{}, fmt.Errorf("%w: %s: the arguments must be a struct (a JSON object), not %s", ErrInvalidTool, name, schema.Type)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return Tool{}, fmt.Errorf("%w: %s: %v", ErrInvalidTool, name, err)
	}
	params, err := json.Marshal(schema)
	if err != nil {
		return Tool{}, fmt.Errorf("%w: %s: %v", ErrInvalidTool, name, err)
	}
	def := llm.Tool{Name: name, Description: description, Parameters: params}
	if err := def.Validate(); err != nil {
		return Tool{}, fmt.Errorf("%w: %s: %v", ErrInvalidTool, name, err)
	}
	return Tool{
		Definition: def,
		Call: func(ctx context.Context, raw json.RawMessage) (string, error) {
			if len(raw) == 0 || string(raw) == "null" {
				raw = json.RawMessage(`{}`)
			}
			var generic any
			if err := json.Unmarshal(raw, &generic); err != nil {
				return "", &ArgumentsError{Tool: name, Err: err}
			}
			if err := resolved.Validate(generic); err != nil {
				return "", &ArgumentsError{Tool: name, Err: err}
			}
			var args In
			if err := json.Unmarshal(raw, &args); err != nil {
				return "", &ArgumentsError{Tool: name, Err: err}
			}
			return fn(ctx, args)
		},
	}, nil
}

// MustTool is NewTool that panics on a construction error, for tools
// declared at package level with static types.
func MustTool[In any](name, description string, fn func(ctx context.Context, args In) (string, error)) Tool {
	t, err := NewTool(name, description, fn)
	if err != nil {
		panic(err)
	}
	return t
}
