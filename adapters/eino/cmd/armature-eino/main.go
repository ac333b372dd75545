// Command armature-eino is armature serve with the Eino backend adapter
// registered: a workspace agent with backend: eino (and its eino: section,
// see eino.Config) runs on Eino with Armature's runtime — chat REST + SSE,
// OpenHarness, the OpenAI-compatible endpoints, the web page, run
// records, approvals from any surface, cancellation, durable restarts —
// beside native agents. Every flag of armature serve applies.
//
//	go run ./cmd/armature-eino serve --workspace cmd/armature-eino/workspace.yaml
package main

import (
	"os"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Options{Adapters: map[string]adapter.Factory{eino.Name: eino.Factory}}))
}
