// Command armature-eino serves an Eino agent with Armature's runtime:
// chat REST + SSE, OpenHarness, the OpenAI-compatible endpoints, the web
// page (armature chat connects to it), run records, approvals from any
// surface, cancellation, durable restart. See package
// internal/adapterserve for its flags; --config names a YAML file with
// the agent's eino: section (see eino.Config and eino.yaml beside this
// file).
//
//	go run ./cmd/armature-eino --config cmd/armature-eino/eino.yaml
package main

import (
	"os"

	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/internal/adapterserve"
)

func main() { os.Exit(adapterserve.Main(eino.Name, eino.Factory)) }
