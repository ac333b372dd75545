package adk_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/internal/demo"
)

// TestRollback: ADK-Go's session holds exactly the conversation the
// runtime committed after a failed turn, a turn whose session write
// failed (the process dying between ADK-Go's write and the runtime's is
// the same for ADK-Go) and a failed resume, across a restart: on SQLite
// and PostgreSQL, and in memory, where the restart loses ADK-Go's
// session and the runtime's history is seeded in its place. Before the
// adapter kept a cursor, a turn sent again after a 429 reached the model
// twice, an uncommitted turn stayed in the model's context, and after a
// failed resume the model was told the tool's result, which the
// runtime's history lacks.
func TestRollback(t *testing.T) {
	t.Run("memory", func(t *testing.T) { adaptertest.CheckRollback(t, adk.Name, adk.Factory, "", true) })
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "adk.db")
		adaptertest.CheckRollback(t, adk.Name, adk.Factory, `{"session":{"driver":"sqlite","path":`+strconv.Quote(path)+`}}`, true)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Setenv("ADK_TEST_DATABASE_URL", postgresURL(t))
		adaptertest.CheckRollback(t, adk.Name, adk.Factory, `{"session":{"driver":"postgres","url_env":"ADK_TEST_DATABASE_URL"}}`, true)
	})
}

// TestRandomTurns: random failed, cancelled, suspended, resumed and
// superseded turns and restarts on one session; the model is sent the
// committed conversation at every call (the seed is logged).
func TestRandomTurns(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		adaptertest.CheckRandomTurns(t, adaptertest.RandomConfig{Backend: adk.Name, Factory: adk.Factory, Restart: true})
	})
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "adk.db")
		adaptertest.CheckRandomTurns(t, adaptertest.RandomConfig{Backend: adk.Name, Factory: adk.Factory,
			Section: `{"session":{"driver":"sqlite","path":` + strconv.Quote(path) + `}}`, Restart: true, Durable: true})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Setenv("ADK_TEST_DATABASE_URL", postgresURL(t))
		adaptertest.CheckRandomTurns(t, adaptertest.RandomConfig{Backend: adk.Name, Factory: adk.Factory,
			Section: `{"session":{"driver":"postgres","url_env":"ADK_TEST_DATABASE_URL"}}`, Restart: true, Durable: true})
	})
}

// TestLostConfirmation: an approval whose confirmation the upstream lost (its
// in-memory state, across a restart) fails as user-correctable
// (harness_signal_correlation_failed), not as a transient failure.
func TestLostConfirmation(t *testing.T) {
	newEngine := func() *adk.Engine {
		e, err := adk.NewEngine(context.Background(), adk.Config{Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := &adk.Adapter{Engine: newEngine()}
	adaptertest.CheckLostApproval(t, a, func() { a.Engine = newEngine() }, adk.ErrNoPending)
}

// TestImages: a user's images reach the model through ADK-Go, on their
// turn and from ADK-Go's session after.
func TestImages(t *testing.T) { adaptertest.CheckImages(t, adk.Name, adk.Factory) }

// TestRandomRuns: the random operations through the RuntimeClient; each
// turn's run record ends in the status its outcome says.
func TestRandomRuns(t *testing.T) {
	adaptertest.CheckRandomRuns(t, adaptertest.RandomConfig{Backend: adk.Name, Factory: adk.Factory, Restart: true})
}
