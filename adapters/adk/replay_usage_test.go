package adk_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// att55aUsageModel answers every request "hi" and reports 7+5 tokens.
type att55aUsageModel struct{}

func (att55aUsageModel) Ready(context.Context) error { return nil }
func (att55aUsageModel) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	p, c, tot := 7, 5, 12
	return &llm.Response{Message: llm.AssistantText("hi"), FinishReason: llm.FinishStop,
		Usage: llm.Usage{PromptTokens: &p, CompletionTokens: &c, TotalTokens: &tot}}, nil
}

func att55aServer(t *testing.T, p llm.Provider) *httptest.Server {
	return att55aServerCfg(t, p, `{}`)
}

func att55aServerCfg(t *testing.T, p llm.Provider, section string) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	ag := &adapter.Agent{ID: "helper", Backend: adk.Name, Model: "m", Provider: p, Tools: demo.Tools(), Config: json.RawMessage(section)}
	ws := &adapter.Workspace{Agents: []*adapter.Agent{ag}}
	reg := &adapter.Registry{}
	if err := adk.Register(reg); err != nil {
		t.Fatal(err)
	}
	a, err := reg.Build(ctx, adapter.FactoryRequest{Workspace: ws, Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: ag, Workspace: ws, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runtime.NewMemoryStore(runtime.MemoryConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{served}, Sessions: sessions, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); _ = srv.Stop(ctx); _ = rec.Close(ctx) })
	return ts
}

func att55aPost(t *testing.T, url, body string, hdr map[string]string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return out
}

// TestReplayKeepsUsage: a request retried with the same Idempotency-Key
// (OpenAI chat completion, Responses) or message_id (REST) to an agent
// on backend adk answers the first try's turn, its usage included: the
// turn's model usage is recorded with its outcome, and a replay carries
// it. Before, the replay answered the first try's id and text but with
// usage 0/0/0 (OpenAI, Responses) or no usage at all (REST), though the
// run record (GET /v1/runs/{id}) kept 12 tokens: a client that bills or
// counts from the retried answer undercounted to zero.
func TestReplayKeepsUsage(t *testing.T) {
	ts := att55aServer(t, att55aUsageModel{})
	usage := func(m map[string]any) string {
		b, _ := json.Marshal(m["usage"])
		return string(b)
	}
	for _, c := range []struct{ name, path, body, key string }{
		{"openai", "/v1/chat/completions", `{"model":"helper","messages":[{"role":"user","content":"hello"}]}`, "k-oai"},
		{"responses", "/v1/responses", `{"model":"helper","input":"hello"}`, "k-resp"},
		{"rest", "/v1/sessions/s-rest/messages", `{"content":"hello","message_id":"k-rest"}`, ""},
	} {
		hdr := map[string]string{"X-Armature-Session-Id": "s-" + c.name}
		if c.key != "" {
			hdr["Idempotency-Key"] = c.key
		}
		first := att55aPost(t, ts.URL+c.path, c.body, hdr)
		again := att55aPost(t, ts.URL+c.path, c.body, hdr)
		if usage(first) != usage(again) {
			t.Errorf("%s: first answer's usage %s, the replay's %s", c.name, usage(first), usage(again))
		}
	}
}
