package adk_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// TestSessionSharedWithNativeAgent: one session served in turn by the
// ADK-Go agent and a native agent of the same workspace (one store,
// as armature serve runs them): the ADK-Go agent's model is sent the
// turns the native agent ran in between, on each ADK-Go session
// service.
func TestSessionSharedWithNativeAgent(t *testing.T) {
	for _, driver := range []string{"memory", "sqlite"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "armature.db")})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close(ctx)
			section := `{}`
			if driver == "sqlite" {
				section = `{"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
			}
			m := &orderScript{}
			counter := &refundCounter{runs: map[string]int{}}
			tools := []agent.Tool{counter.tool()}
			ws := &adapter.Workspace{Agents: []*adapter.Agent{
				{ID: "up", Backend: adk.Name, Model: "script", Provider: m, Tools: tools, Config: []byte(section)},
				{ID: "nat", Backend: adapter.Native, Model: "script", Provider: m, Tools: tools},
			}}
			reg := &adapter.Registry{}
			if err := adk.Register(reg); err != nil {
				t.Fatal(err)
			}
			if err := reg.Register(adapter.Native, adapter.NativeFactory); err != nil {
				t.Fatal(err)
			}
			hs := map[string]*chat.Harness{}
			for _, ag := range ws.Agents {
				a, err := reg.Build(ctx, adapter.FactoryRequest{Workspace: ws, Agent: ag})
				if err != nil {
					t.Fatal(err)
				}
				if c, ok := a.(interface{ Close() error }); ok {
					defer c.Close()
				}
				sa, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: ag, Workspace: ws, Sessions: store,
					Records: store.Checkpoints(), Locker: store.SessionLocker(sqlite.LockerConfig{})})
				if err != nil {
					t.Fatal(err)
				}
				hs[ag.ID] = sa.Chat
			}
			for i, id := range []string{"up", "nat", "up", "nat", "up"} {
				out, err := hs[id].Send(ctx, "default/s", llm.UserText(fmt.Sprintf("hello %d", i)))
				if _, ok := out.(*chat.Completed); err != nil || !ok {
					t.Fatalf("turn %d on %s: %T %v", i, id, out, err)
				}
				reqs := m.requests()
				var users []string
				for _, msg := range reqs[len(reqs)-1] {
					if msg.Role == llm.RoleUser {
						users = append(users, msg.Text())
					}
				}
				var want []string
				for j := 0; j <= i; j++ {
					want = append(want, fmt.Sprintf("hello %d", j))
				}
				if strings.Join(users, "|") != strings.Join(want, "|") {
					t.Fatalf("turn %d on %s: the model was sent the user messages %q, want %q", i, id, users, want)
				}
			}
		})
	}
}
