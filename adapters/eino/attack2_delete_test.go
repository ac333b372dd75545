package eino_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// gatedRefund is a model whose first call waits for release, then calls
// issue_refund; it answers a tool result with its text.
type gatedRefund struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (*gatedRefund) Ready(context.Context) error { return nil }

func (g *gatedRefund) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
		return &llm.Response{Message: llm.AssistantText(last.Text()), FinishReason: llm.FinishStop}, nil
	}
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &llm.Response{Message: llm.AssistantToolCalls(llm.ToolCall{ID: "r1", Name: "issue_refund",
		Arguments: json.RawMessage(`{"order":"7","amount":30}`)}), FinishReason: llm.FinishToolCalls}, nil
}

// TestAttackDeleteWhileRunning: a session deleted over REST while its
// turn runs (the turn then suspends for an approval) is gone afterwards,
// with the checkpoint of that suspension.
func TestAttackDeleteWhileRunning(t *testing.T) {
	ctx := context.Background()
	ms := eino.NewMemoryStore()
	m := &gatedRefund{entered: make(chan struct{}), release: make(chan struct{})}
	e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: ms, Model: eino.NewProviderModel(m)})
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	ag := &adapter.Agent{ID: "agent", Backend: eino.Name, Tools: demo.Tools()}
	served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: &eino.Adapter{Engine: e}, Agent: ag, Sessions: sessions})
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
	defer func() { ts.Close(); _ = srv.Stop(ctx); _ = rec.Close(ctx) }()
	turn := make(chan string, 1)
	go func() {
		resp, err := http.Post(ts.URL+"/v1/sessions/s/messages", "application/json", strings.NewReader(`{"content":"please refund order 7"}`))
		if err != nil {
			turn <- err.Error()
			return
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		turn <- resp.Status + " " + func() string { s, _ := out["outcome"].(string); return s }()
	}()
	<-m.entered
	deleted := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/v1/sessions/s", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			deleted <- err.Error()
			return
		}
		resp.Body.Close()
		deleted <- resp.Status
	}()
	time.Sleep(100 * time.Millisecond)
	close(m.release)
	t.Logf("turn: %s, delete: %s", <-turn, <-deleted)
	resp, err := http.Get(ts.URL + "/v1/sessions/s")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	t.Logf("session after: %s; %d checkpoints", resp.Status, ms.Len())
	if resp.StatusCode != http.StatusNotFound || ms.Len() != 0 {
		t.Errorf("after the delete: session %s, %d checkpoints", resp.Status, ms.Len())
	}
}
