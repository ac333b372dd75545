package graph

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/armature-go/armature/errcat"
)

// Sentinel errors. Every error the package returns wraps one of these or
// carries a spec category (see [errcat]).
var (
	// ErrInvalidOption is wrapped by errors from invalid options and API
	// arguments (a negative drain timeout, an empty phase set, a malformed
	// caller-supplied id).
	ErrInvalidOption = errors.New("graph: invalid option")
	// ErrNilGraph is returned when a nil *Graph is used.
	ErrNilGraph = errors.New("graph: nil graph")
	// ErrOtherGraph means a paused record was written by another graph
	// (another [WithName]) than the one asked to resume it. Resume and
	// CheckResume wrap it in a *SuspensionError of category
	// suspension_record_invalid: a graph resumes only its own
	// suspensions, never another's that shares its store.
	ErrOtherGraph = errors.New("graph: the paused record is another graph's")
	// ErrResumeUnderWay means [Graph.Resume] was called for an invocation
	// another Resume of the same graph is still running: the duplicate
	// fails at once, wrapped in a *SuspensionError of category
	// suspension_record_invalid, without running or writing anything.
	ErrResumeUnderWay = errors.New("graph: a resume of the invocation is already under way")
)

// CompileError reports a graph or schema that cannot be compiled. Its
// category is one of the graph-engine §2 compile categories
// (errcat.NoDeclaredEntry, errcat.DanglingEdge, ...) or
// errcat.InvalidGraph for structural mistakes the spec does not name.
type CompileError struct {
	cat errcat.Category
	// Node names the offending node, when there is one.
	Node string
	// Field names the offending state field, when there is one.
	Field string
	msg   string
}

// Category returns the compile-error category.
func (e *CompileError) Category() errcat.Category {
	if e == nil {
		return ""
	}
	return e.cat
}

// Error formats the error with the "graph:" prefix and its category.
func (e *CompileError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return "graph: " + string(e.cat) + ": " + e.msg
}

// Is matches the error's category (see [errcat.Matches]).
func (e *CompileError) Is(target error) bool { return e != nil && errcat.Matches(e.cat, target) }

func compileErr(cat errcat.Category, node, field, format string, args ...any) *CompileError {
	return &CompileError{cat: cat, Node: node, Field: field, msg: fmt.Sprintf(format, args...)}
}

// NodeError reports a run-time failure attributed to a node: the node
// raised (node_exception), its outgoing edge raised (edge_exception) or
// routed nowhere (routing_error), or merging its update failed
// (reducer_error, state_validation_error). The user's error, when there is
// one, is the cause: errors.Is / errors.As see through a NodeError to it.
//
// State is the recoverable state (graph-engine §4) of the graph that owns
// the node: the pre-node state for node_exception, the pre-merge state for
// reducer and validation errors, the post-merge state for edge failures.
type NodeError struct {
	cat errcat.Category
	// Node is the failing node's name in its immediate graph.
	Node string
	// Namespace is the path from the outermost graph to the node.
	Namespace []string
	// Field and Reducer name the field being merged, for reducer_error and
	// state_validation_error.
	Field   string
	Reducer string
	// State is the recoverable state of the node's own graph.
	State State
	// ParentStates are the states of the containing graphs, outermost
	// first, at the moment each entered the subgraph leading to the node.
	ParentStates []State
	// FanOutIndex and BranchName identify the failing fan-out instance or
	// parallel branch when the error is a fan-out or branch carrier.
	FanOutIndex *int
	BranchName  string
	// Err is the cause.
	Err error
}

// Carrier reports whether the error is a node_exception carrier wrapping
// another failure (a node's own error, or a failed fan-out instance or
// branch); cause-chain classification looks through carriers
// (pipeline-utilities §6.4).
func (e *NodeError) Carrier() bool {
	return e != nil && (e.cat == errcat.NodeException || e.cat == errcat.ParallelBranchesBranchFailed)
}

// Message returns the error's own message, without its cause.
func (e *NodeError) Message() string {
	if e == nil {
		return ""
	}
	return fmt.Sprintf("node %q: %s", strings.Join(e.Namespace, "/"), e.cat)
}

// Category returns the run-time error category.
func (e *NodeError) Category() errcat.Category {
	if e == nil {
		return ""
	}
	return e.cat
}

// Error formats the failure with its node path and category.
func (e *NodeError) Error() string {
	if e == nil {
		return "<nil>"
	}
	var b strings.Builder
	b.WriteString("graph: node ")
	b.WriteString(fmt.Sprintf("%q", strings.Join(e.Namespace, "/")))
	b.WriteString(": ")
	b.WriteString(string(e.cat))
	if e.BranchName != "" {
		fmt.Fprintf(&b, " (branch %q)", e.BranchName)
	}
	if e.FanOutIndex != nil {
		fmt.Fprintf(&b, " (fan-out instance %d)", *e.FanOutIndex)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %q, reducer %s)", e.Field, e.Reducer)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *NodeError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Is matches the error's category (see [errcat.Matches]).
func (e *NodeError) Is(target error) bool { return e != nil && errcat.Matches(e.cat, target) }

// OutermostState returns the recoverable state of the outermost graph of
// the invocation.
func (e *NodeError) OutermostState() State {
	if e == nil {
		return State{}
	}
	if len(e.ParentStates) > 0 {
		return e.ParentStates[0]
	}
	return e.State
}

// PanicError is the cause recorded when a node, edge, reducer or observer
// panics: the engine recovers, keeps the stack, and fails the node (or
// isolates the observer) instead of crashing the process.
type PanicError struct {
	Value any
	Stack []byte
}

// Error reports the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

func newPanicError(v any) *PanicError { return &PanicError{Value: v, Stack: debug.Stack()} }

func invalidOption(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
}
