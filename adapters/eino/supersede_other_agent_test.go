package eino_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestSupersededCheckpointDeletedByOtherAgent: a superseded suspension's
// checkpoint is deleted once the turn that superseded it is committed
// (README: "One whose suspended turn is superseded by a new message is
// deleted too"), whichever agent took that turn. In a workspace of two
// Eino agents sharing a session, each with its own checkpoint directory
// (eino-checkpoints/<agent>), agent "shop" suspends for an approval and
// the user's next messages go to "shop2". The superseded suspension is
// handed to shop2's adapter (adapter.Discarder), so deleting it from
// shop2's own store alone would leave shop's checkpoint (the whole
// interrupted run, the conversation with it) on disk for as long as the
// session lives, though nothing can resume it any more.
func TestSupersededCheckpointDeletedByOtherAgent(t *testing.T) {
	ctx := context.Background()
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	paused := checkpoint.NewMemoryStore(nil)
	dataDir := t.TempDir()
	build := func(id string) *chat.Harness {
		ag := &adapter.Agent{ID: id, Backend: eino.Name, Tools: demo.Tools(), Config: json.RawMessage(`{"provider":"scripted"}`)}
		// As armature serve builds each agent of a workspace: the
		// factory with the runtime's data directory (checkpoints in
		// files under it), server.NewAdapterAgent's graph and harness.
		a, err := eino.Factory(ctx, adapter.FactoryRequest{Agent: ag, DataDir: dataDir})
		if err != nil {
			t.Fatal(err)
		}
		g, err := adapter.Compile(a, nil, ag, graph.WithName(id), graph.WithSessions(graph.SessionConfig{Store: sessions, Optimistic: true}),
			graph.WithCheckpointStore(paused))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, OnDelete: adapter.OnDelete(a), OnCancel: adapter.OnCancel(a, g),
			Coordinator: harness.NewStoreCoordinator(paused)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	checkpoints := func() []string {
		files, _ := filepath.Glob(filepath.Join(dataDir, "eino-checkpoints", "*", "*.ckpt"))
		more, _ := filepath.Glob(filepath.Join(dataDir, "eino-checkpoints", "*.ckpt"))
		return append(files, more...)
	}
	shop := build("shop")
	shop2 := build("shop2")
	out, err := shop.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	if _, ok := out.(*chat.Suspended); !ok {
		t.Fatalf("want a suspension, got %#v %v", out, err)
	}
	for _, text := range []string{"hello", "where is order 3?", "thanks"} {
		out, err = shop2.Send(ctx, "acme/s", llm.UserText(text))
		if _, ok := out.(*chat.Completed); !ok {
			t.Fatalf("%q: %#v %v", text, out, err)
		}
	}
	if files := checkpoints(); len(files) != 0 {
		t.Errorf("checkpoints after three committed turns superseding the approval: %q, want none", files)
	}
}
