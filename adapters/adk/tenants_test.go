package adk_test

import (
	"context"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestTenantsKeepApart: a session without a tenant and the same session
// id of tenant "user" share one ADK-Go session (the tenantless turns run
// as ADK user "user"), yet neither's model is sent the other's
// conversation: each turn's committed cursor tells the adapter that
// ADK-Go's session no longer holds its own last turn, and it is given
// the runtime's history again.
func TestTenantsKeepApart(t *testing.T) {
	ctx := context.Background()
	m := adaptertest.NewModel()
	e, err := adk.NewEngine(ctx, adk.Config{LLM: adk.NewProviderModel("scripted", m), Tools: adaptertest.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	h := adaptertest.Harness(t, &adk.Adapter{Engine: e}, &adapter.Agent{ID: "a", Backend: adk.Name, Tools: adaptertest.Tools()},
		session.NewMemoryStore(session.MemoryConfig{}))
	send := func(key, text string) string {
		t.Helper()
		out, err := h.Send(ctx, key, llm.UserText(text))
		if _, ok := out.(*chat.Completed); err != nil || !ok {
			t.Fatalf("%s: %q: %v %+v", key, text, err, out)
		}
		var b strings.Builder
		for _, msg := range m.LastTranscript() {
			b.WriteString(msg.Text() + "\n")
		}
		return b.String()
	}
	send("s", "the anonymous secret")
	if got := send("user/s", "the user tenant's question"); strings.Contains(got, "anonymous secret") {
		t.Errorf("tenant user's model was sent the tenantless session's conversation:\n%s", got)
	}
	got := send("s", "and again")
	if strings.Contains(got, "user tenant's question") || !strings.Contains(got, "anonymous secret") {
		t.Errorf("the tenantless session's model was sent:\n%s", got)
	}
}
