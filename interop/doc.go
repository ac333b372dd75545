// Package interop drives Armature's three LLM provider mappings against
// a mock server nobody here wrote: aimock (@copilotkit/aimock on npm, MIT,
// pinned), which speaks the OpenAI Chat Completions, Anthropic Messages
// and Gemini generateContent wire formats, atomic and streamed. Its tests
// run in `go test ./...` (the package holds only tests and this
// documentation); aimock is installed from the npm registry on first run
// (see internal/npmtest), and without node or the registry the tests skip
// locally and fail in CI.
//
// Each provider is driven, atomic and streamed, through text, a tool call
// and its result sent back, parallel tool calls, an empty reply, an
// upstream 429 and usage, and streamed through a connection cut mid-way;
// and through the agent, an approval: the model asks for an
// approval-gated tool, the turn suspends, the approval resumes it, and
// the model answers the tool's result; and an empty model reply,
// which is the documented errored turn and stores nothing.
//
// The MCP client (agent.ConnectMCP, agent.DialMCP) is driven against the
// MCP reference servers, pinned and installed the same way:
// @modelcontextprotocol/server-everything, over stdio and streamable
// HTTP (every tool listed offered, valid and invalid arguments, each
// kind of content, errors, a long operation cancelled, 20 calls at once,
// the server killed or restarted, a redirect to another origin, no key
// of the endpoint in an error, and an agent's turn calling its tools),
// and @modelcontextprotocol/server-filesystem over stdio, restricted to
// a temporary directory:
//
//	go test ./interop/ -v
package interop
