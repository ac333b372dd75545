// Package peers runs the standard workloads of BENCHMARKS.md (W1-W4) on the
// peer frameworks Armature is compared with: ADK-Go
// (google.golang.org/adk/v2) and Eino (github.com/cloudwego/eino).
//
// Both peers are driven by the same scripted model (no network, no sleep):
// offered no tool, or answering a tool result, it replies with [Reply]; offered
// a tool while the last message is the user's, it calls that tool once. So a
// chat turn adds one assistant message and a tool turn adds three (tool call,
// tool result, answer), on either peer.
//
// The package lives in its own module so that the main module does not depend
// on either peer. The benchmarks are in peers_test.go; cmd/compare runs them
// beside the main module's workloads and prints the side-by-side table.
//
// Nothing here is safe for concurrent use unless said otherwise: a benchmark
// builds its own peer and drives it from one goroutine.
package peers

import "strconv"

// The scripted conversation, shared by both peers and equal to the main
// module's workloads.
const (
	// Reply is the assistant's answer to any turn that needs no tool.
	Reply = "Sure — here is a short answer to your question, about as long as a typical chat reply."
	// UserText is the user message each turn sends.
	UserText = "And what about tomorrow?"
	// ToolName is the tool the model calls in W3.
	ToolName = "lookup_weather"
	// ToolCity is the argument the model passes to [ToolName].
	ToolCity = "Paris"
	// ToolResult is what [ToolName] returns.
	ToolResult = "sunny, 21 degrees"
	// ApprovalToolName is the approval-gated tool the model calls in W4.
	ApprovalToolName = "send_email"
	// ApprovalPayload is the payload the W4 resume carries.
	ApprovalPayload = "approved"
	// ToolCallID is the id of the model's one tool call.
	ToolCallID = "call-1"
)

// HistoryText returns the text of the i-th seeded history message, the same
// text the main module's workloads seed.
func HistoryText(i int) string {
	return "message " + strconv.Itoa(i) + " of the conversation so far"
}

// HistoryRole reports whether the i-th seeded history message is the user's
// (even i) or the assistant's (odd i).
func HistoryRole(i int) (user bool) { return i%2 == 0 }
