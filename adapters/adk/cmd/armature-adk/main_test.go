package main

import (
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
)

// TestServeWorkspace: armature-adk serves the workspace beside it; a
// refund suspends, the process is killed, and the approval given to a
// new process completes it.
func TestServeWorkspace(t *testing.T) {
	adaptertest.RunBinary(t, ".", "workspace.yaml")
}
