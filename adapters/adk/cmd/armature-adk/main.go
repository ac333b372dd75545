// Command armature-adk serves an ADK-Go agent with Armature's runtime:
// chat REST + SSE, OpenHarness, the OpenAI-compatible endpoints, the web
// page (armature chat connects to it), run records, approvals from any
// surface, cancellation, durable restart. See package
// internal/adapterserve for its flags; --config names a YAML file with
// the agent's adk: section (see adk.Config and adk.yaml beside this
// file).
//
//	go run ./cmd/armature-adk --config cmd/armature-adk/adk.yaml
package main

import (
	"os"

	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/internal/adapterserve"
)

func main() { os.Exit(adapterserve.Main(adk.Name, adk.Factory)) }
