package adk

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestReplicasWithoutSharedSessions: two replicas on one runtime store,
// each with ADK-Go sessions in memory (not shared), take turns of one
// session: a replica whose ADK-Go session misses the turns the other ran
// gives it the runtime's history again, so the model is always sent the
// whole conversation. Before, it was sent its own replica's turns only.
func TestReplicasWithoutSharedSessions(t *testing.T) {
	ctx := context.Background()
	m := adaptertest.NewModel()
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	ag := &adapter.Agent{ID: "x", Backend: Name, Tools: demo.Tools()}
	replica := func() func(string) {
		e, err := NewEngine(ctx, Config{Tools: demo.Tools(), LLM: NewProviderModel("m", m)})
		if err != nil {
			t.Fatal(err)
		}
		h := adaptertest.Harness(t, &Adapter{Engine: e}, ag, sessions)
		return func(text string) {
			if out, _ := h.Send(ctx, "acme/s", llm.UserText(text)); !isCompleted(out) {
				t.Fatalf("%q: %#v", text, out)
			}
		}
	}
	a, b := replica(), replica()
	for i, send := range []func(string){a, b, a, a, b} {
		send(fmt.Sprint("message ", i))
		var users []string
		for _, msg := range m.LastTranscript() {
			if msg.Role == llm.RoleUser {
				users = append(users, msg.Text())
			}
		}
		var want []string
		for j := range i + 1 {
			want = append(want, fmt.Sprint("message ", j))
		}
		if !slices.Equal(users, want) {
			t.Fatalf("turn %d: the model was sent %q, want %q", i, users, want)
		}
	}
}

// TestFactorySharesSessionsOnTheRuntimesDatabase: with no session store
// named, an adapter built for a runtime serving from PostgreSQL keeps
// ADK-Go's sessions on that database (in a schema of their own), so the
// replicas share them.
func TestFactorySharesSessionsOnTheRuntimesDatabase(t *testing.T) {
	url := os.Getenv("ARMATURE_POSTGRES_URL")
	if url == "" {
		t.Skip("ARMATURE_POSTGRES_URL is not set")
	}
	ctx := context.Background()
	runtimeSchema := fmt.Sprintf("armature_rt_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+runtimeSchema+"_adk CASCADE")
			_ = conn.Close(ctx)
		}
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	req := adapter.FactoryRequest{Agent: &adapter.Agent{ID: "x", Backend: Name, Tools: demo.Tools()}, Database: url + sep + "search_path=" + runtimeSchema}
	build := func() *Adapter {
		a, err := Factory(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.(*Adapter).Close() })
		return a.(*Adapter)
	}
	a, b := build(), build()
	if a.Engine.driver != SessionPostgres {
		t.Fatalf("driver %q, want the runtime's database", a.Engine.driver)
	}
	if _, err := a.Engine.Send(ctx, "u", "s", "hello", func(Event) {}); err != nil {
		t.Fatal(err)
	}
	if pos, err := b.Engine.Position(ctx, "u", "s"); err != nil || pos == 0 {
		t.Fatalf("the other replica sees the session at %d (%v)", pos, err)
	}
}

// TestReplicaSchema: ADK-Go's tables go in the runtime's schema's own
// companion, or in adk.
func TestReplicaSchema(t *testing.T) {
	base := "postgres://u@h/db"
	for _, c := range []struct{ url, want string }{
		{base, DefaultSessionSchema},
		{base + "?search_path=rt", "rt_adk"},
		{base + "?search_path=%22%24user%22,public", "public_adk"},
		{base + "?search_path=%24user", DefaultSessionSchema},
	} {
		if got, err := replicaSchema(c.url); err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.url, got, err, c.want)
		}
	}
}

// TestSeedSkipsApprovalPrompts: the runtime's approval request inside a
// tool-call group is not seeded: ADK-Go never held it, and the model is
// never sent it.
func TestSeedSkipsApprovalPrompts(t *testing.T) {
	e := &Engine{agent: "assistant"}
	tc := llm.ToolCall{ID: "c1", Name: "issue_refund", Arguments: []byte(`{"order":"7"}`)}
	history := []llm.Message{llm.UserText("refund 7"), llm.AssistantToolCalls(tc), llm.AssistantText("I need your approval to call issue_refund."),
		llm.ToolResult("c1", "refunded"), llm.AssistantText("Refunded.")}
	contents, _, err := e.seedContents(history)
	if err != nil || len(contents) != 4 {
		t.Fatalf("%d contents, %v; want the user message, the call, its result and the answer", len(contents), err)
	}
	for _, c := range contents {
		if strings.Contains(contentText(c), "approval") {
			t.Fatalf("the approval request was seeded: %+v", c)
		}
	}
}
