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
// through the official Go MCP SDK: a call's arguments are checked
// against the tool's input schema, and a dotted name such as
// "github.create_issue" is offered as "github_create_issue"). Every
// call is bounded in time
// ([Config.ToolTimeout]) and its result in size
// ([Config.MaxToolResultBytes]); an MCP server's responses are read up to
// [MaxMCPResponseBytes]. [DialMCP] returns an [MCPClient] whose tools
// connect again when the server closed the connection (a stdio server's
// child that exited).
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
// # What a model call sends
//
// Every model call sends the system prompt (Config.System, or the
// turn's [WithInstructions]) in llm.Request.System, the tool
// definitions, and the session's history as it is stored: the slice the
// session state holds, not a copy, so a call costs in proportion to the
// turn, not to the history (only the provider's wire encoder walks the
// messages, once). The approval requests standing inside tool-call
// groups stay in the slice; the wire mappings leave them out
// (llm.AsideFilter).
//
// With a managed system prompt ([Config.SystemPrompt], a
// [ManagedPrompt]) each call fetches and renders it, and the prompt's
// sampling (prompt-management §3: temperature, max_tokens, ...) applies
// over [Config.Model] field by field: a field the prompt sets replaces
// the agent's, a field it leaves unset keeps the agent's, and extras
// merge key by key, the prompt's winning — the prompt, versioned with
// its text, is the more specific configuration, and Config.Model the
// defaults under it. The call runs with the rendered prompt active
// (prompt.Activate), so its events and spans carry the prompt's
// identity, its Langfuse link and its token budget. A turn whose
// [WithInstructions] replace the system prompt uses neither, and the
// compaction summary's call uses Config.Model alone.
//
// # Context window
//
// [Config.Window] bounds what a call sends of the history, by messages
// ([Window.MaxMessages]), by estimated input tokens ([Window.MaxTokens]),
// or both; the zero value sends the whole history. The window is the
// longest suffix of the history that starts at a turn boundary (a user
// message outside every tool-call group, or the history's first message)
// and fits both bounds, so it
//
//   - always keeps the system prompt, which counts against MaxTokens but
//     not MaxMessages;
//   - never starts with a tool result, and never splits a tool call from
//     its results or from the approval request between them;
//   - always holds the turn in progress, even over budget: the model must
//     see what it is answering;
//   - is chosen anew on every call and changes nothing stored: the
//     session keeps the whole history, and widening the window later
//     brings the older turns back.
//
// Tokens are estimated per message by the provider (llm.TokenEstimator:
// each mapping states the bytes a token, the framing a message and the
// cost of an image of its wire format; llm.EstimateTokens otherwise) and
// corrected by usage: after each call the agent compares the prompt
// tokens the provider reports with its estimate of what it sent, and
// divides the token bound by the running ratio (clamped to [1/4, 4]), so
// a tokenizer that counts more than the estimate shrinks the window from
// the next call on. The selection walks the history backwards from its
// end and stops at the first message past the bounds, so it costs in
// proportion to the window, never to the history.
//
// With MaxMessages set, the agent also loads no more of the history than
// a window can need: its graph declares a tail ([Window.TailMax]:
// MaxMessages and 8 more, graph.WithSessionTail), so a turn on a
// session outside the engine's cache reads the last messages from the
// store, not the whole history (with a session.Appender store; the hint
// is ignored otherwise). The window, the compaction summary's index and
// the history the session keeps are the same as with a whole load; a
// turn whose window the tail cannot decide (a walk that reaches the
// tail's first message before its bound, a summary older than it) reads
// the history whole. A
// window bounded by MaxTokens alone loads the whole history: no message
// count bounds what it can need.
//
// Compared with the usual tools: LangChain's trim_messages (strategy
// "last") needs start_on="human" and end_on settings to keep tool calls
// with their results, counts tokens with a caller-supplied counter it
// never corrects, and walks the whole list; OpenAI Responses'
// truncation "auto" drops items server-side only once the model's limit
// is hit, with no bound of the caller's own and for one provider;
// ADK's context compaction summarizes by invocation count, not by size.
// Window is provider-independent, bounded by the caller in messages and
// tokens, group-safe by construction (the fuzz test FuzzWindowStart
// checks it against a brute-force selection on random histories), and
// self-correcting from the usage every provider reports.
//
// # Compaction
//
// With [Config.Compaction] (which needs a Window bound), the messages a
// window is about to leave out are summarized with the model instead of
// only dropped. After a turn's final answer, the agent works out the
// window of the next turn's first call (the history as it stands, and
// room for a user message the size of this turn's): when that window
// would leave out a message that came after the latest summary, it asks
// the model (system prompt [Compaction.Prompt], default
// [DefaultCompactionPrompt]) to summarize the latest summary and every
// message since, and appends the answer to the history as an assistant
// message starting with [SummaryPrefix]. The summary is part of the turn:
// durable, stored with it in the session, returned among its replies and
// visible in the history like any message; the [SummaryField] state field
// records its index. A summary covers every message before it.
//
// A model call then sends the latest summary where the model can read it
// in order: in place, when the window holds the summary message; after
// the system prompt, when the window starts past it. The window never
// leaves out a message that came after the latest summary — were a
// summarizing call to fail (it is best effort: the turn still completes,
// and the next turn tries again), the window would keep those messages,
// over its bound, rather than lose them. A summary is made about once
// every window's worth of messages (with MaxMessages 40, about every 40
// messages), each summarizing call reading one summary and about one
// window of messages: its cost, like the window's, never grows with the
// history. ADK's compaction summarizes every N invocations whatever their
// size; here the bound that shapes the window also paces the summaries,
// and at every call the model sees every message the window leaves out
// through the summary that covers it.
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
// An Agent is safe for concurrent use; its graph runs any number of turns
// at once. Its configuration is immutable; the one thing it learns is the
// token-estimate correction of its Window, shared by all its sessions.
package agent
