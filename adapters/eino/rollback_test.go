package eino_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
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

// TestLostCheckpoint: an approval whose Eino checkpoint the store lost
// (in-memory checkpoints across a restart) fails as user-correctable,
// harness_signal_correlation_failed, not as a transient failure whose
// retry could never succeed.
func TestLostCheckpoint(t *testing.T) {
	ctx := context.Background()
	newEngine := func() *eino.Engine {
		e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := &eino.Adapter{Engine: newEngine()}
	h := adaptertest.Harness(t, a, &adapter.Agent{ID: "x", Backend: eino.Name, Tools: demo.Tools()}, session.NewMemoryStore(session.MemoryConfig{}))
	out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("refund: %#v", out)
	}
	a.Engine = newEngine() // the restart: the in-memory checkpoints are gone
	out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	e, ok := out.(*chat.Errored)
	if !ok || e.Category != errcat.HarnessSignalCorrelationFailed || e.Bucket != harness.UserCorrectable || !errors.Is(e.Err, eino.ErrNoCheckpoint) {
		t.Fatalf("approval of a lost checkpoint: %#v", out)
	}
}

// TestImageRefused: a message holding an image fails as user-correctable
// (provider_unsupported_content_block) before the upstream runs: the
// adapter hands it text only, and the model would answer without the
// image. Nothing is stored.
func TestImageRefused(t *testing.T) {
	ctx := context.Background()
	a, err := eino.Factory(ctx, adapter.FactoryRequest{Agent: &adapter.Agent{ID: "x", Backend: eino.Name}})
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	h := adaptertest.Harness(t, a, &adapter.Agent{ID: "x", Backend: eino.Name}, sessions)
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
