package adaptertest_test

import (
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
)

func TestNative(t *testing.T) {
	adaptertest.Run(t, adaptertest.Config{Backend: adapter.Native})
}

// TestNativeRandomTurns: the native backend under the random operations
// every upstream adapter passes.
func TestNativeRandomTurns(t *testing.T) {
	adaptertest.CheckRandomTurns(t, adaptertest.RandomConfig{Backend: adapter.Native, Factory: adapter.NativeFactory, Restart: true, Durable: true})
}

// TestNativeRandomRuns: the native backend under the random operations
// through the RuntimeClient.
func TestNativeRandomRuns(t *testing.T) {
	adaptertest.CheckRandomRuns(t, adaptertest.RandomConfig{Backend: adapter.Native, Factory: adapter.NativeFactory, Restart: true, Durable: true})
}

// TestNativeUsage: the native backend reports its model calls' usage as
// every upstream adapter must.
func TestNativeUsage(t *testing.T) {
	adaptertest.CheckUsage(t, adapter.Native, adapter.NativeFactory)
}

// TestNativeToolCallKey: the native agent runs its tools with the call's
// identity, as every upstream adapter must.
func TestNativeToolCallKey(t *testing.T) {
	adaptertest.CheckToolCallKey(t, adapter.Native, adapter.NativeFactory)
}

// TestNativeRunaway: the native agent, the reference the adapters
// follow, ends a runaway model's turn at max_steps (default 10).
func TestNativeRunaway(t *testing.T) {
	adaptertest.CheckRunaway(t, adapter.Native, adapter.NativeFactory, "", 10)
}

// TestNativeRollback: the rollback script on the native agent, the
// reference the adapters follow.
func TestNativeRollback(t *testing.T) {
	adaptertest.CheckRollback(t, adapter.Native, adapter.NativeFactory, "", false)
}

// TestNativeClosedCalls: the native agent, the reference the adapters
// follow, tells the model a superseded or cancelled call was not run.
func TestNativeClosedCalls(t *testing.T) {
	adaptertest.CheckClosedCalls(t, adapter.Native, adapter.NativeFactory)
}

func TestNativeSignalOwner(t *testing.T) {
	adaptertest.CheckSignalOwner(t, adapter.Native, nil, "")
}

// TestNativeSoak: deleted conversations of a native agent leave nothing
// in the process (adaptertest.Soak).
func TestNativeSoak(t *testing.T) {
	adaptertest.Soak(t, adaptertest.Config{Backend: adapter.Native}, 100, 400)
}
