package adapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// historian is an upstream that keeps no history: it is handed the
// session's (Request.History) and records what it was handed. A turn
// whose input starts with "tool" makes a tool call, its result and an
// answer; any other turn answers with a text of the input's length.
type historian struct {
	handed [][]llm.Message
	inputs []llm.Message
	turns  int
}

func (h *historian) Name() string { return "historian" }

func (h *historian) Run(_ context.Context, req *adapter.Request, _ adapter.Emitter) (*adapter.Result, error) {
	h.handed = append(h.handed, slices.Clone(req.History))
	h.inputs = append(h.inputs, req.Input)
	h.turns++
	text := req.Input.Text()
	if strings.HasPrefix(text, "tool") {
		tc := llm.ToolCall{ID: fmt.Sprintf("call-%d", h.turns), Name: "lookup", Arguments: json.RawMessage(`{}`)}
		return adapter.Completed("done", []llm.Message{llm.AssistantToolCalls(tc), llm.ToolResult(tc.ID, strings.Repeat("r", len(text))),
			llm.AssistantText("done")}), nil
	}
	return adapter.Text(strings.Repeat("a", len(text))), nil
}

// TestWindowCutsHistory: an adapter is handed only the part of the
// history the agent's window sends, bounded by messages and by estimated
// tokens (system prompt and tool definitions counted), never splitting
// a tool call from its result; without a window it is handed it all.
// Turns are random (seeded: the seed is logged).
func TestWindowCutsHistory(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	const system = "You are terse."
	tools := []agent.Tool{{Definition: llm.Tool{Name: "lookup", Description: "Looks up.", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	for _, w := range []agent.Window{{}, {MaxMessages: 5}, {MaxMessages: 1}, {MaxTokens: 400}, {MaxMessages: 7, MaxTokens: 300}} {
		t.Run(fmt.Sprintf("%+v", w), func(t *testing.T) {
			ctx := context.Background()
			up := &historian{}
			store := session.NewMemoryStore(session.MemoryConfig{})
			h := adaptertest.Harness(t, up, &adapter.Agent{ID: "a", Backend: up.Name(), System: system, Tools: tools, Window: w}, store)
			fixed := 0
			if w.MaxTokens > 0 {
				sys := llm.SystemText(system)
				fixed = llm.EstimateTokens(&sys) + llm.DefaultTokenRates().EstimateText(len("lookup")+len("Looks up.")+len(`{"type":"object"}`))
			}
			var all []llm.Message // the session's history, as the turns left it
			for turn := range 40 {
				text := strings.Repeat("x", 1+rng.IntN(300))
				if rng.IntN(3) == 0 {
					text = "tool " + text
				}
				out, err := h.Send(ctx, "s", llm.UserText(text))
				if err != nil {
					t.Fatal(err)
				}
				c, ok := out.(*chat.Completed)
				if !ok {
					t.Fatalf("turn %d: %#v", turn, out)
				}
				got := up.handed[turn]
				if len(got) > len(all) || !slices.EqualFunc(got, all[len(all)-len(got):], sameMessage) {
					t.Fatalf("turn %d: handed %d messages that are not the end of the %d-message history", turn, len(got), len(all))
				}
				sent := append(slices.Clone(got), up.inputs[turn])
				if err := llm.CheckHistory(nil, sent); err != nil {
					t.Fatalf("turn %d: the window splits the history: %v", turn, err)
				}
				switch {
				case w.IsZero() && len(got) != len(all):
					t.Fatalf("turn %d: no window, handed %d of %d messages", turn, len(got), len(all))
				case w.MaxMessages > 0 && len(sent) > w.MaxMessages && len(got) > 0:
					t.Fatalf("turn %d: %d messages sent, over the window's %d", turn, len(sent), w.MaxMessages)
				case w.MaxTokens > 0 && len(got) > 0:
					cost := fixed
					for i := range sent {
						cost += llm.EstimateTokens(&sent[i])
					}
					if cost > w.MaxTokens {
						t.Fatalf("turn %d: an estimated %d tokens sent, over the window's %d", turn, cost, w.MaxTokens)
					}
				}
				if !w.IsZero() && turn == 39 && len(got) == len(all) {
					t.Fatalf("a window never cut a 40-turn history (%d messages handed)", len(got))
				}
				all = append(all, llm.UserText(text))
				all = append(all, c.Replies...)
			}
		})
	}
}

func sameMessage(a, b llm.Message) bool {
	return a.Role == b.Role && a.Text() == b.Text() && a.ToolCallID == b.ToolCallID && len(a.ToolCalls) == len(b.ToolCalls)
}

// TestWindowRefusesNegativeBounds: Compile refuses a window with a
// negative bound.
func TestWindowRefusesNegativeBounds(t *testing.T) {
	_, err := adapter.Compile(&historian{}, nil, &adapter.Agent{ID: "a", Window: agent.Window{MaxMessages: -1}})
	if !errors.Is(err, adapter.ErrInvalidConfig) {
		t.Fatalf("a negative window bound: %v, want ErrInvalidConfig", err)
	}
}

// TestFloat64: an upstream's float32 setting keeps its decimal value.
func TestFloat64(t *testing.T) {
	if adapter.Float64(nil) != nil {
		t.Error("nil did not stay nil")
	}
	for _, f := range []float32{0, 0.2, 0.7, 1, 1.5, 2} {
		if got := *adapter.Float64(&f); fmt.Sprint(got) != fmt.Sprint(f) {
			t.Errorf("Float64(%v) = %v", f, got)
		}
	}
}
