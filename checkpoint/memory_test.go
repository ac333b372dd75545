package checkpoint_test

import (
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/checkpoint/checkpointtest"
)

func TestMemoryStore(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Store { return checkpoint.NewMemoryStore(nil) })
}
