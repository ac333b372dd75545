// Package interop drives Armature's three LLM provider mappings against
// a mock server nobody here wrote: aimock (@copilotkit/aimock on npm, MIT,
// pinned), which speaks the OpenAI Chat Completions, Anthropic Messages
// and Gemini generateContent wire formats, atomic and streamed. Its tests
// run in `go test ./...` (the package holds only tests and this
// documentation); aimock is installed from the npm registry on first run
// (see internal/npmtest), and without node or the registry the tests skip
// locally and fail in CI.
//
// Each provider is driven through text, streamed text, a tool call
// (atomic and streamed), a tool result sent back, an upstream 429 and
// usage:
//
//	go test ./interop/ -v
package interop
