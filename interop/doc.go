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
// which is the documented errored turn and stores nothing:
//
//	go test ./interop/ -v
package interop
