package eino_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestBridge: the workspace's model settings reach every call of the
// bridged model (before, an eino agent on the anthropic provider failed
// every turn: the mapping requires max_tokens, which the bridge never
// set), and a call's failure keeps its category through Eino's
// own wrapping, streamed or not.
func TestBridge(t *testing.T) {
	adaptertest.CheckBridge(t, eino.Name, eino.Factory, `{"streaming":false}`, `{"streaming":true}`)
}

// TestCallOptionsWin: the options of Eino's own call (model.With*)
// win over the workspace's settings, field by field.
func TestCallOptionsWin(t *testing.T) {
	var seen llm.Config
	p := adaptertest.ProviderFunc(func(req *llm.Request) {
		seen = req.Config
	})
	m := eino.NewProviderModelConfig(p, llm.Config{MaxTokens: new(1024), Temperature: new(0.9), TopP: new(0.5)})
	in := []*schema.Message{schema.UserMessage("hi")}
	if _, err := m.Generate(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if seen.MaxTokens == nil || *seen.MaxTokens != 1024 || *seen.Temperature != 0.9 || *seen.TopP != 0.5 {
		t.Fatalf("config sent without options: %+v, want the workspace's", seen)
	}
	if _, err := m.Generate(context.Background(), in, model.WithMaxTokens(64), model.WithTemperature(0.2), model.WithStop([]string{"END"})); err != nil {
		t.Fatal(err)
	}
	if seen.MaxTokens == nil || *seen.MaxTokens != 64 || seen.Temperature == nil || *seen.Temperature != 0.2 ||
		seen.TopP == nil || *seen.TopP != 0.5 || len(seen.StopSequences) != 1 {
		t.Fatalf("config sent: %+v, want max_tokens 64 and temperature 0.2 (the call's), top_p 0.5 (the workspace's), stop END", seen)
	}
}

// TestWindowBoundsModelInput: Eino keeps no history, so the workspace
// agent's window bounds what its model receives: however long the
// session grows, each call carries at most the window's messages.
func TestWindowBoundsModelInput(t *testing.T) {
	var sent []int
	p := adaptertest.ProviderFunc(func(req *llm.Request) { sent = append(sent, len(req.Messages)) })
	ctx := context.Background()
	ag := &adapter.Agent{ID: "x", Backend: eino.Name, Provider: p, Window: agent.Window{MaxMessages: 4}}
	a, err := eino.Factory(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	h := adaptertest.Harness(t, a, ag, session.NewMemoryStore(session.MemoryConfig{}))
	for i := range 12 {
		if out, err := h.Send(ctx, "s", llm.UserText(fmt.Sprintf("message %d", i))); err != nil {
			t.Fatal(err)
		} else if _, ok := out.(*chat.Completed); !ok {
			t.Fatalf("turn %d: %#v", i, out)
		}
	}
	if len(sent) != 12 || slices.Max(sent) > 4 || sent[11] != 3 {
		t.Fatalf("messages per model call: %v, want at most the window's 4 (3 once the session is long: the window ends on the input and starts on a turn)", sent)
	}
}
