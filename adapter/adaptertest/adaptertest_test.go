package adaptertest_test

import (
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
)

func TestNative(t *testing.T) {
	adaptertest.Run(t, adaptertest.Config{Backend: adapter.Native})
}
