// Package agent is Armature's prebuilt tool-calling chat agent: give it a
// model (an llm.Provider) and tools, and it compiles a chat graph for the
// chat harness.
//
// The graph is a loop: the model node sends the conversation (with the
// system prompt and the tool definitions) to the provider and appends the
// answer; when the answer calls tools, the tool node runs them in order
// and appends their results, and the model is called again; the turn ends
// when the model answers without calling a tool, or after
// Config.MaxSteps model calls. A tool's failure — a Go error, a panic,
// arguments that do not fit its schema, an unknown tool name — is
// reported to the model as the tool's result, never as a failed turn.
// A provider failure fails the turn with its llm-provider category, which
// the chat harness sorts into a bucket (provider_unavailable is
// retryable, provider_invalid_request user-correctable, ...).
//
// Tools are typed Go functions ([NewTool]: the argument schema is derived
// from a struct and enforced before the function runs) or the tools of an
// MCP server ([ConnectMCP], [MCPTools], over stdio or streamable HTTP,
// through the official Go MCP SDK).
//
// # Approvals
//
// A tool marked [Tool.WithApproval] never runs unapproved. When the model
// calls it, the turn appends a pending assistant message naming the call
// ("I need your approval to call send_email with {...}.") and suspends
// with the signal id [SignalPrefix] + the call id and metadata {tool,
// call_id, arguments}. The chat harness returns chat.Suspended; the
// approval arrives as a signal whose payload is [Approve] or [Deny]
// (with a comment), the call runs or is refused — the model is told —
// and the loop goes on; the resumed turn's replies reach the session's
// listeners. Each decision covers one call. The approval request is kept
// in the history for the user but left out of what the model sees, since
// providers require a call's results to follow it directly.
//
// # Streaming
//
// Under chat.Harness.SendStreaming, when the provider implements
// llm.Streamer, the model node streams: text and reasoning deltas become
// chat chunks as they arrive, and tool calls report their progress
// (requested, running, completed or failed).
//
// # Example
//
//	weather := agent.MustTool("get_weather", "Current weather for a city",
//		func(ctx context.Context, a struct{ City string `json:"city"` }) (string, error) {
//			return lookup(ctx, a.City)
//		})
//	a, err := agent.New(agent.Config{
//		Provider: provider, // e.g. openai.New(openai.Config{...})
//		System:   "You are a helpful assistant.",
//		Tools:    []agent.Tool{weather, sendEmail.WithApproval()},
//	})
//	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
//	h, err := chat.New(chat.Config{Graph: g})
//	out, err := h.Send(ctx, "user-42", llm.UserText("Weather in Paris?"))
//
// An Agent is immutable and safe for concurrent use; its graph runs any
// number of turns at once.
package agent
