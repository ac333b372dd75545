package eino_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// mixedStep is a model whose first step calls the given tools at once,
// then answers with the results it got.
type mixedStep []string

func (mixedStep) Ready(context.Context) error { return nil }

func (m mixedStep) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
		var results []string
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleTool {
				results = append(results, msg.ToolCallID+"="+msg.Text())
			}
		}
		return &llm.Response{Message: llm.AssistantText(strings.Join(results, " | ")), FinishReason: llm.FinishStop}, nil
	}
	var calls []llm.ToolCall
	for i, name := range m {
		calls = append(calls, llm.ToolCall{ID: "c" + string(rune('1'+i)) + "_" + name, Name: name, Arguments: json.RawMessage(`{"order":"7","amount":30}`)})
	}
	return &llm.Response{Message: llm.AssistantToolCalls(calls...), FinishReason: llm.FinishToolCalls}, nil
}

// TestAttackMixedStep: one step calling an approval-gated tool with an
// undeclared one and a plain one, in either order: once approved, every
// call of the step has exactly one result in the history, and the model
// got each once.
func TestAttackMixedStep(t *testing.T) {
	ctx := context.Background()
	for _, step := range []mixedStep{
		{"nope", "issue_refund"},
		{"issue_refund", "nope"},
		{"lookup_order", "issue_refund", "nope"},
		{"issue_refund", "nope", "issue_refund"},
	} {
		for _, streaming := range []bool{false, true} {
			t.Run(strings.Join(step, ",")+map[bool]string{false: "", true: "/streaming"}[streaming], func(t *testing.T) {
				ms := eino.NewMemoryStore()
				e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: ms, Model: eino.NewProviderModel(step), Streaming: new(streaming)})
				if err != nil {
					t.Fatal(err)
				}
				h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
					session.NewMemoryStore(session.MemoryConfig{}))
				out, err := h.Send(ctx, "acme/s", llm.UserText("do it"))
				for range 3 {
					s, ok := out.(*chat.Suspended)
					if !ok {
						break
					}
					if out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}); err != nil {
						t.Fatal(err)
					}
				}
				c, ok := out.(*chat.Completed)
				if !ok {
					t.Fatalf("%#v %v", out, err)
				}
				calls, results := map[string]int{}, map[string]int{}
				for _, m := range chat.Messages.Get(c.FinalState) {
					for _, tc := range m.ToolCalls {
						calls[tc.ID]++
					}
					if m.Role == llm.RoleTool {
						results[m.ToolCallID]++
					}
				}
				for id, n := range calls {
					if n != 1 || results[id] != 1 {
						t.Errorf("call %s: %d calls, %d results; answer %q", id, n, results[id], lastText(t, out))
					}
				}
				if len(results) != len(calls) || len(calls) != len(step) {
					t.Errorf("calls %v, results %v", calls, results)
				}
				for i := range step {
					if n := strings.Count(lastText(t, out), "c"+string(rune('1'+i))+"_"); n != 1 {
						t.Errorf("the model got %d results of call %d: %q", n, i+1, lastText(t, out))
					}
				}
			})
		}
	}
}

// TestAttackMixedStepRunsOnce: an ungated call of a step whose other
// calls wait for approvals runs once, however many approvals resume the
// step, across a restart too.
func TestAttackMixedStepRunsOnce(t *testing.T) {
	ctx := context.Background()
	var lookups atomic.Int32
	tools := demo.Tools()
	for i, tl := range tools {
		if tl.Definition.Name == "lookup_order" {
			call := tl.Call
			tools[i].Call = func(ctx context.Context, args json.RawMessage) (string, error) {
				lookups.Add(1)
				return call(ctx, args)
			}
		}
	}
	dir := t.TempDir()
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	cps := checkpoint.NewMemoryStore(nil)
	start := func() *chat.Harness {
		fs, err := eino.NewFileStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Store: fs, Model: eino.NewProviderModel(mixedStep{"lookup_order", "issue_refund", "issue_refund"})})
		if err != nil {
			t.Fatal(err)
		}
		a := &eino.Adapter{Engine: e}
		g, err := adapter.Compile(a, nil, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: tools},
			graph.WithSessions(graph.SessionConfig{Store: sessions}), graph.WithCheckpointStore(cps))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(cps)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := start()
	out, err := h.Send(ctx, "acme/s", llm.UserText("do it"))
	for range 3 {
		s, ok := out.(*chat.Suspended)
		if !ok {
			break
		}
		h = start() // a restart before each approval
		if out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}); err != nil {
			t.Fatal(err)
		}
	}
	if !isCompleted(out) {
		t.Fatalf("%#v %v", out, err)
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("lookup_order ran %d times", n)
	}
}
