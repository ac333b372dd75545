package adapter_test

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// echo is an adapter standing for an upstream framework.
type echo struct{}

func (echo) Name() string { return "echo" }

func (echo) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	return adapter.Text(fmt.Sprintf("you said %q (history: %d messages)", req.Input.Text(), len(req.History))), nil
}

// An embedded caller registers its adapter's factory under the backend
// name its workspace agents use, builds the agent's adapter, and serves
// it through a chat harness: the runtime keeps the session's history.
func Example() {
	ctx := context.Background()
	reg := &adapter.Registry{}
	if err := reg.Register("echo", func(context.Context, adapter.FactoryRequest) (adapter.Adapter, error) { return echo{}, nil }); err != nil {
		fmt.Println(err)
		return
	}
	ag := &adapter.Agent{ID: "helper", Backend: "echo"}
	a, err := reg.Build(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, text := range []string{"hi", "again"} {
		out, err := h.Send(ctx, "session-1", llm.UserText(text))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(out.(*chat.Completed).Replies[0].Text())
	}
	// Output:
	// you said "hi" (history: 0 messages)
	// you said "again" (history: 2 messages)
}
