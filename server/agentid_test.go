package server_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// TestAgentIDRefused: an agent id no surface could name, or that run
// records refuse (control characters, invalid UTF-8, over 128 bytes), is
// an invalid config. Before, an agent whose id held a control character
// was served, and every turn of it ran without its run record.
func TestAgentIDRefused(t *testing.T) {
	sessions, h := demoChat(t)
	for _, id := range []string{"bad\nid", "nul\x00", "rtl\u202eid", "bad\xffutf8", strings.Repeat("a", 129)} {
		err := server.Config{Agents: []*server.Agent{{ID: id, Chat: h}}, Sessions: sessions}.Validate()
		if !errors.Is(err, server.ErrInvalidConfig) || !strings.Contains(err.Error(), "agent id") {
			t.Errorf("agent id %q: Validate = %v, want an invalid agent id", id, err)
		}
	}
	if err := (server.Config{Agents: []*server.Agent{{ID: "support-agent.v2", Chat: h}}, Sessions: sessions}).Validate(); err != nil {
		t.Fatalf("a valid agent id: %v", err)
	}
}

// TestTokenSecretForTwoTenants: one secret given for two tenants is an
// invalid config (the first tenant would always match), never printed.
func TestTokenSecretForTwoTenants(t *testing.T) {
	const secret = "a-shared-secret-0123456789"
	sessions, h := demoChat(t)
	err := server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h}}, Sessions: sessions,
		Tokens: []server.Token{{Secret: secret, Tenant: "acme"}, {Secret: secret, Tenant: "globex"}}}.Validate()
	if !errors.Is(err, server.ErrInvalidConfig) || !strings.Contains(err.Error(), "globex") || strings.Contains(err.Error(), secret) {
		t.Fatalf("Validate = %v, want an invalid config naming the tenants and not the secret", err)
	}
}

// demoChat is the demo agent's chat harness over in-memory sessions.
func demoChat(t *testing.T) (session.Store, *chat.Harness) {
	t.Helper()
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	g, err := mustDemo(t).Compile(graph.WithSessions(graph.SessionConfig{Store: sessions}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return sessions, h
}

// TestDirectToolsNameDeclaredTools: direct_tools naming a tool no agent
// declares (a typo) is an invalid config; "*" and a declared tool are
// not. Before, the typo answered every request 404.
func TestDirectToolsNameDeclaredTools(t *testing.T) {
	sessions, h := demoChat(t)
	base := func(tools map[string][]string) server.Config {
		return server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h, Gateway: demo.Tools()}}, Sessions: sessions, DirectTools: tools}
	}
	for _, bad := range []map[string][]string{{"ops": {"lookup_ordr"}}, {"": {"lookup_order"}}} {
		if err := base(bad).Validate(); !errors.Is(err, server.ErrInvalidConfig) {
			t.Errorf("direct_tools %v: Validate = %v, want an invalid config", bad, err)
		}
	}
	for _, good := range []map[string][]string{{"ops": {"lookup_order"}}, {"ops": {"*"}}} {
		if err := base(good).Validate(); err != nil {
			t.Errorf("direct_tools %v: %v", good, err)
		}
	}
}
