package runtime_test

import (
	"testing"

	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/runtime/runtimetest"
)

func TestMemoryStore(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) runtime.Store { return runtime.NewMemoryStore(runtime.MemoryConfig{}) })
}

func BenchmarkTurnMemory(b *testing.B) {
	runtimetest.BenchmarkTurn(b, runtime.NewMemoryStore(runtime.MemoryConfig{}))
}

func BenchmarkTurnConcurrentMemory(b *testing.B) {
	runtimetest.BenchmarkTurnConcurrent(b, runtime.NewMemoryStore(runtime.MemoryConfig{}))
}
