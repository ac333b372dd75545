package adk_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/internal/demo"
)

// TestInstructionPlaceholderRefusedAtStartup: an adk: section whose
// instruction names an ADK-Go session-state key ("Greet {user_name}":
// ADK-Go's templating fills it from the session state, which Armature
// gives no way to set) is refused when the agent is built (the adapter
// factory, at armature serve's startup), with an error naming the
// placeholder and saying how to write an optional one ({user_name?})
// and literal braces. An optional placeholder and braces around what is
// not a state name are accepted, as ADK-Go accepts them. Before, the
// server started and every turn failed as a retryable node_exception:
// the OpenAI endpoint answered 503 with Retry-After and "Try again in a
// moment", so SDK clients retried a request that could never succeed.
func TestInstructionPlaceholderRefusedAtStartup(t *testing.T) {
	build := func(instruction string) error {
		section, _ := json.Marshal(map[string]string{"instruction": instruction})
		ag := &adapter.Agent{ID: "helper", Backend: adk.Name, Model: "m", Provider: &chunkedModel{}, Tools: demo.Tools(), Config: section}
		reg := &adapter.Registry{}
		if err := adk.Register(reg); err != nil {
			t.Fatal(err)
		}
		a, err := reg.Build(context.Background(), adapter.FactoryRequest{Workspace: &adapter.Workspace{Agents: []*adapter.Agent{ag}}, Agent: ag})
		if err == nil {
			_ = a.(*adk.Adapter).Close()
		}
		return err
	}
	for _, s := range []string{"Greet {user_name}", "Greet {{user_name}}", "Greet { user_name }", "{user:name}", "{app:name}", "{temp:name}", "{artifact.notes}", "{artifact.notes?}"} {
		err := build(s)
		if !errors.Is(err, adk.ErrInvalidConfig) {
			t.Errorf("instruction %q: built (%v)", s, err)
			continue
		}
		if name := strings.TrimSpace(strings.Trim(s[strings.Index(s, "{"):], "{}")); !strings.Contains(err.Error(), name) {
			t.Errorf("instruction %q: the error does not name the placeholder: %v", s, err)
		}
	}
	if err := build("Greet {user_name}"); err == nil || !strings.Contains(err.Error(), "{user_name?}") || !strings.Contains(err.Error(), "literal braces") {
		t.Errorf("the error does not say how to write an optional placeholder or literal braces: %v", err)
	}
	for _, s := range []string{"Greet {user_name?}", "{user:name?}", "Answer as {\"answer\": \"...\"}", "{user name}", "{user-name}", "{other:key}", "{}"} {
		if err := build(s); err != nil {
			t.Errorf("instruction %q, which ADK-Go fills, refused: %v", s, err)
		}
	}
	// The served agent, optional placeholder unset: the turn runs.
	ts := sectionServer(t, &chunkedModel{}, `{"instruction":"Greet {user_name?}"}`)
	if out := postJSON(t, ts.URL+"/v1/sessions/s/messages", `{"content":"hello"}`); out["error"] != nil {
		t.Errorf("the turn failed: %v", out["error"])
	}
}

// postJSON posts body to url and decodes the JSON answer.
func postJSON(t *testing.T, url, body string) map[string]any {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s: %d: %v", url, resp.StatusCode, err)
	}
	return out
}
