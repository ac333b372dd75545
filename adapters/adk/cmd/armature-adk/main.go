// Command armature-adk is armature serve with the ADK-Go backend adapter
// registered: a workspace agent with backend: adk (and its adk: section,
// see adk.Config) runs on ADK-Go with Armature's runtime — chat REST + SSE,
// OpenHarness, the OpenAI-compatible endpoints, the web page, run
// records, approvals from any surface, cancellation, durable restarts —
// beside native agents. Every flag of armature serve applies.
//
//	go run ./cmd/armature-adk serve --workspace cmd/armature-adk/workspace.yaml
package main

import (
	"os"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Options{Adapters: map[string]adapter.Factory{adk.Name: adk.Factory}}))
}
