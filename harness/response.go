package harness

import (
	"errors"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// Shape is the kind of outbound response a turn produces (harness §5):
// completion, error, or suspended acknowledgment. Shapes are wire
// identifiers and must not change.
type Shape string

// Outbound shapes.
const (
	ShapeCompletion Shape = "completion_response"
	ShapeError      Shape = "error_response"
	ShapeSuspended  Shape = "suspended_acknowledgment"
)

// Response is a transport-neutral rendering of an Outcome: what an HTTP
// handler, an event publisher or a CLI prints.
type Response struct {
	Shape        Shape  `json:"shape"`
	Path         Path   `json:"dispatch_path,omitempty"`
	SessionID    string `json:"session_id,omitempty"`
	InvocationID string `json:"invocation_id,omitempty"`
	// Payload is the final state's fields (completion); category,
	// bucket, diagnostic_message and the retry_safe /
	// intervention_required / user_action_required flags (error); or
	// signal_id and metadata (suspended acknowledgment).
	Payload map[string]any `json:"payload"`
}

// Response renders the outcome. A diagnostic is included only for
// user-correctable errors, whose purpose is to tell the caller what to
// fix; other buckets carry the category alone, so no internal detail
// leaks to the transport.
func (o *Outcome) Response() Response {
	r := Response{Path: o.Path, SessionID: o.SessionID, InvocationID: o.InvocationID}
	switch o.Status {
	case graph.Completed:
		r.Shape, r.Payload = ShapeCompletion, o.State().Map()
	case graph.Suspended:
		r.Shape = ShapeSuspended
		r.Payload = map[string]any{"signal_id": o.Suspension.Descriptor.SignalID}
		if md := o.Suspension.Descriptor.Metadata; md != nil {
			r.Payload["metadata"] = md
		}
	default:
		r.Shape = ShapeError
		r.Payload = map[string]any{
			"category":              string(o.Category),
			"bucket":                string(o.Bucket),
			"retry_safe":            o.Bucket == RetryableTransient && RetrySafe(o.Category),
			"intervention_required": o.Bucket == SessionTerminating,
			"user_action_required":  o.Bucket == UserCorrectable,
		}
		if o.Bucket == UserCorrectable {
			r.Payload["diagnostic_message"] = Diagnostic(o.Err)
		}
	}
	return r
}

// Diagnostic returns the message of err's derived category — the
// innermost meaningful failure, e.g. a provider's "model 'x' not found"
// rather than the node_exception carrying it — falling back to the
// error's text. When the error of that category is an
// [errcat.Diagnoser] (an llm.ProviderError), its Diagnostic is used: the
// provider's message, not "llm: openai complete: … (HTTP 400): " and the
// rest of the text meant for logs.
func Diagnostic(err error) string {
	if err == nil {
		return ""
	}
	cat, msg := errcat.Derived(err)
	if d, ok := errors.AsType[errcat.Diagnoser](err); ok && cat != "" {
		if c, ok := d.(errcat.Categorized); ok && c.Category() == cat {
			if s := d.Diagnostic(); s != "" {
				return s
			}
		}
	}
	if msg != "" {
		return msg
	}
	return err.Error()
}
