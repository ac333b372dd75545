package adk_test

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// chunkedModel answers "one two three", in three chunks when streamed;
// it counts its streamed and its whole calls.
type chunkedModel struct{ streamed, whole atomic.Int32 }

func (*chunkedModel) Ready(context.Context) error { return nil }
func (m *chunkedModel) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	m.whole.Add(1)
	return &llm.Response{Message: llm.AssistantText("one two three"), FinishReason: llm.FinishStop}, nil
}
func (m *chunkedModel) Stream(context.Context, *llm.Request) iter.Seq2[*llm.Chunk, error] {
	m.streamed.Add(1)
	return func(yield func(*llm.Chunk, error) bool) {
		for _, w := range []string{"one ", "two ", "three"} {
			if !yield(&llm.Chunk{Content: w}, nil) {
				return
			}
		}
		yield(&llm.Chunk{FinishReason: llm.FinishStop}, nil)
	}
}

// sectionServer serves the agent "helper" with backend: adk, the
// workspace's model p and the adk: section section, as armature serve
// builds it (the registry's factory, server.NewAdapterAgent).
func sectionServer(t *testing.T, p llm.Provider, section string) *httptest.Server {
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

// TestStreamingByDefault: an agent with backend: adk whose adk: section
// does not set streaming, asked with stream: true on the OpenAI
// endpoint, calls its model streamed (ADK-Go's SSE streaming mode), so
// the reply streams chunk by chunk as on the native backend; streaming:
// false still selects ADK-Go's non-streaming mode. Before, streaming
// was off unless the section said streaming: true: the model was
// called whole and the reply arrived in one chunk at the end.
func TestStreamingByDefault(t *testing.T) {
	for _, tc := range []struct {
		section  string
		streamed bool
	}{{`{}`, true}, {``, true}, {`{"streaming":true}`, true}, {`{"streaming":false}`, false}} {
		m := &chunkedModel{}
		ts := sectionServer(t, m, tc.section)
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"helper","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "three") {
			t.Fatalf("section %q: stream %s", tc.section, body)
		}
		if got := m.streamed.Load() > 0 && m.whole.Load() == 0; got != tc.streamed {
			t.Errorf("section %q: %d streamed model calls, %d whole ones; want streamed %v", tc.section, m.streamed.Load(), m.whole.Load(), tc.streamed)
		}
	}
}
