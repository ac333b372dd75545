package adk_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
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

// TestLostConfirmation: an approval whose ADK confirmation the upstream
// lost (in-memory sessions across a restart) fails as user-correctable,
// harness_signal_correlation_failed, not as a transient failure whose
// retry could never succeed.
func TestLostConfirmation(t *testing.T) {
	ctx := context.Background()
	newEngine := func() *adk.Engine {
		e, err := adk.NewEngine(ctx, adk.Config{Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := &adk.Adapter{Engine: newEngine()}
	h := adaptertest.Harness(t, a, &adapter.Agent{ID: "x", Backend: adk.Name, Tools: demo.Tools()}, session.NewMemoryStore(session.MemoryConfig{}))
	out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("refund: %#v", out)
	}
	a.Engine = newEngine() // the restart: ADK-Go's in-memory sessions are gone
	out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	e, ok := out.(*chat.Errored)
	if !ok || e.Category != errcat.HarnessSignalCorrelationFailed || e.Bucket != harness.UserCorrectable || !errors.Is(e.Err, adk.ErrNoPending) {
		t.Fatalf("approval of a lost confirmation: %#v", out)
	}
}

// TestImageRefused: a message holding an image fails as user-correctable
// (provider_unsupported_content_block) before the upstream runs: the
// adapter hands it text only, and the model would answer without the
// image. Nothing is stored.
func TestImageRefused(t *testing.T) {
	ctx := context.Background()
	a, err := adk.Factory(ctx, adapter.FactoryRequest{Agent: &adapter.Agent{ID: "x", Backend: adk.Name}})
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	h := adaptertest.Harness(t, a, &adapter.Agent{ID: "x", Backend: adk.Name}, sessions)
	img := llm.Message{Role: llm.RoleUser, Content: llm.Blocks(llm.TextBlock("what is on this?"), llm.ImageURL("https://example.com/a.png"))}
	out, _ := h.Send(ctx, "acme/s", img)
	e, ok := out.(*chat.Errored)
	if !ok || e.Category != errcat.ProviderUnsupportedContentBlock || e.Bucket != harness.UserCorrectable || !errors.Is(e.Err, adapter.ErrTextOnly) {
		t.Fatalf("a message with an image: %#v", out)
	}
	if _, err := sessions.Load(ctx, session.LoadRequest{SessionID: "acme/s"}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("the refused turn stored the session: %v", err)
	}
}
