package eino_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/internal/demo"
)

// TestRollback: an Eino agent's model is sent exactly the conversation
// the runtime committed after a failed turn, a turn whose session write
// failed and a failed resume, with its checkpoints in memory and in
// files across a restart.
func TestRollback(t *testing.T) {
	t.Run("memory", func(t *testing.T) { adaptertest.CheckRollback(t, eino.Name, eino.Factory, "", false) })
	t.Run("file", func(t *testing.T) {
		adaptertest.CheckRollback(t, eino.Name, eino.Factory, `{"checkpoint":{"driver":"file","dir":`+strconv.Quote(t.TempDir())+`}}`, true)
	})
}

// TestRandomTurns: random failed, cancelled, suspended, resumed and
// superseded turns and restarts on one session; the model is sent the
// committed conversation at every call (the seed is logged).
func TestRandomTurns(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		adaptertest.CheckRandomTurns(t, adaptertest.RandomConfig{Backend: eino.Name, Factory: eino.Factory, Restart: true})
	})
	t.Run("file", func(t *testing.T) {
		adaptertest.CheckRandomTurns(t, adaptertest.RandomConfig{Backend: eino.Name, Factory: eino.Factory,
			Section: `{"checkpoint":{"driver":"file","dir":` + strconv.Quote(t.TempDir()) + `}}`, Restart: true, Durable: true})
	})
	t.Run("postgres", func(t *testing.T) {
		url, table := postgresTable(t)
		t.Setenv("EINO_TEST_DATABASE_URL", url)
		adaptertest.CheckRandomTurns(t, adaptertest.RandomConfig{Backend: eino.Name, Factory: eino.Factory,
			Section: `{"checkpoint":{"driver":"postgres","url_env":"EINO_TEST_DATABASE_URL","table":` + strconv.Quote(table) + `}}`,
			Restart: true, Durable: true})
	})
}

// TestLostCheckpoint: an approval whose checkpoint the upstream lost (its
// in-memory state, across a restart) fails as user-correctable
// (harness_signal_correlation_failed), not as a transient failure.
func TestLostCheckpoint(t *testing.T) {
	newEngine := func() *eino.Engine {
		e, err := eino.NewEngine(context.Background(), eino.Config{Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := &eino.Adapter{Engine: newEngine()}
	adaptertest.CheckLostApproval(t, a, func() { a.Engine = newEngine() }, eino.ErrNoCheckpoint)
}

// TestImages: a user's images reach the model through Eino, on their
// turn and as history after.
func TestImages(t *testing.T) { adaptertest.CheckImages(t, eino.Name, eino.Factory) }

// TestRandomRuns: the random operations through the RuntimeClient; each
// turn's run record ends in the status its outcome says.
func TestRandomRuns(t *testing.T) {
	adaptertest.CheckRandomRuns(t, adaptertest.RandomConfig{Backend: eino.Name, Factory: eino.Factory, Restart: true})
}

// TestUsage: each model call's usage (the bridge's, carried by Eino's
// response metadata) is the turn's, streamed or not.
func TestUsage(t *testing.T) {
	adaptertest.CheckUsage(t, eino.Name, eino.Factory, `{"streaming":false}`, `{"streaming":true}`)
}

// TestToolCallKey: the bridged Armature tools run with the call's
// identity (agent.ToolCallOf), the approved one's the same as the
// approval named.
func TestToolCallKey(t *testing.T) { adaptertest.CheckToolCallKey(t, eino.Name, eino.Factory) }

// TestSignalOwner: beside a native agent, an approval resumes the turn of
// the agent that suspended it (adaptertest.CheckSignalOwner).
func TestSignalOwner(t *testing.T) { adaptertest.CheckSignalOwner(t, eino.Name, eino.Factory, "") }
