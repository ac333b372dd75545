package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

const (
	secretA = "tenant-a-secret-0123456789"
	secretB = "tenant-b-secret-0123456789"
)

// tenantReq sends a request as the tenant of secret; body "" sends none.
func tenantReq(ctx context.Context, t *testing.T, base, secret, method, path, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// One tenant's idle streams never take another tenant's: tenant A opens
// its share and gets 429 with Retry-After for one more, while tenant B
// still opens its session stream and an OpenAI stream. Before per-tenant
// shares, A's streams took the global cap and B got 503.
func TestStreamSharesPerTenant(t *testing.T) {
	ts := newDemoServer(t, func(c *server.Config) {
		c.Tokens = []server.Token{{Secret: secretA, Tenant: "a"}, {Secret: secretB, Tenant: "b"}}
		c.MaxSSEStreams, c.MaxSSEStreamsPerTenant = 4, 2
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 2 {
		resp := tenantReq(ctx, t, ts.URL, secretA, "GET", "/v1/sessions/s"+string(rune('0'+i))+"/events", "")
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("tenant a's stream %d: %d", i, resp.StatusCode)
		}
	}
	resp := tenantReq(ctx, t, ts.URL, secretA, "GET", "/v1/sessions/s9/events", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("tenant a over its share: %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp = tenantReq(ctx, t, ts.URL, secretB, "GET", "/v1/sessions/s1/events", "")
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("tenant b's session stream: %d", resp.StatusCode)
	}
	resp = tenantReq(ctx, t, ts.URL, secretB, "POST", "/v1/chat/completions",
		`{"model":"demo","stream":true,"messages":[{"role":"user","content":"where is order 3?"}]}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "[DONE]") {
		t.Fatalf("tenant b's OpenAI stream: %d %s", resp.StatusCode, body)
	}
	var m strings.Builder
	r, _ := http.Get(ts.URL + "/metrics")
	io.Copy(&m, r.Body)
	r.Body.Close()
	if !strings.Contains(m.String(), `armature_requests_refused_total{kind="stream",reason="tenant_share"} 1`) {
		t.Errorf("/metrics does not count the refusal:\n%s", m.String())
	}
}

// gatedServer serves an agent whose turns wait for the gate to open.
func gatedServer(t *testing.T, gate chan struct{}, started chan<- struct{}, mutate func(*server.Config)) *httptest.Server {
	t.Helper()
	store := servertest.SQLite(t)
	cfg := server.Config{Agents: []*server.Agent{{ID: "gated", Chat: gatedChat(t, store, gate, started)}}, Sessions: store}
	mutate(&cfg)
	return servertest.Serve(t, cfg)
}

// gatedChat is the chat harness of gatedServer's agent, on store.
func gatedChat(t *testing.T, store *sqlite.Store, gate chan struct{}, started chan<- struct{}) *chat.Harness {
	t.Helper()
	h, err := chat.New(chat.Config{Graph: gatedGraph(t, store, gate, started)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// gatedGraph is a chat graph on store whose one node signals started,
// then waits for gate (or the turn's end) and answers "done".
func gatedGraph(t *testing.T, store *sqlite.Store, gate chan struct{}, started chan<- struct{}) *graph.Graph {
	t.Helper()
	schema, _ := chat.NewSchema()
	g, err := graph.NewBuilder(schema).
		AddNode("gated", func(ctx context.Context, s graph.State) (graph.Update, error) {
			started <- struct{}{}
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return chat.Messages.Add(llm.AssistantText("done")), nil
		}).
		AddEdge("gated", graph.End).SetEntry("gated").
		Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Turns: tenant A's share of turns in flight and of queued turns never
// blocks tenant B, whose turn runs while A's wait; A's next one gets 429
// with Retry-After once its queue share is full.
func TestTurnSharesPerTenant(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 16)
	ts := gatedServer(t, gate, started, func(c *server.Config) {
		c.Tokens = []server.Token{{Secret: secretA, Tenant: "a"}, {Secret: secretB, Tenant: "b"}}
		c.MaxTurns, c.MaxTurnsPerTenant = 3, 2
		c.MaxQueuedTurns, c.MaxQueuedTurnsPerTenant = 4, 1
		c.QueueWait = 5 * time.Second
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	codes := make(chan int, 8)
	send := func(secret, session string) {
		defer wg.Done()
		resp := tenantReq(ctx, t, ts.URL, secret, "POST", "/v1/sessions/"+session+"/messages", `{"content":"hi"}`)
		resp.Body.Close()
		codes <- resp.StatusCode
	}
	// A: two running, one queued.
	wg.Add(3)
	go send(secretA, "a1")
	go send(secretA, "a2")
	<-started
	<-started
	go send(secretA, "a3")
	time.Sleep(100 * time.Millisecond) // a3 queues
	// A's fourth: its queue share is full.
	resp := tenantReq(ctx, t, ts.URL, secretA, "POST", "/v1/sessions/a4/messages", `{"content":"hi"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("tenant a over its share: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// B runs now, on the capacity A cannot take.
	wg.Add(1)
	go send(secretB, "b1")
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("tenant b's turn did not start while tenant a was over its share")
	}
	close(gate)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("an admitted turn answered %d", c)
		}
	}
}
