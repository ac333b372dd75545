package graph_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

// A model call that times out on the provider's own Timeout fails with
// provider_unavailable (wrapping context.DeadlineExceeded) while the
// invocation's context is fine: it is a failure of the upstream, not a
// cancellation, so Retry retries it and FailureIsolation catches it.
func TestProviderCallTimeoutIsRetriedAndIsolated(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select { // a hung upstream
		case <-r.Context().Done():
		case <-time.After(100 * time.Millisecond):
		}
	}))
	defer srv.Close()
	p, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "m", Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32 // counted here: under load the client's timeout may pass before the server sees the request
	call := func(ctx context.Context, s graph.State) (graph.Update, error) {
		attempts.Add(1)
		_, err := p.Complete(ctx, &llm.Request{Messages: []llm.Message{llm.UserText("hi")}})
		return nil, err
	}
	schema := mustSchema(t, graph.NewDynamicField("x", graph.TypeString))

	retry, err := graph.NewRetry(graph.RetryConfig{MaxAttempts: 3, Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	g := mustCompile(t, graph.NewBuilder(schema).AddNode("call", call, graph.WithMiddleware(retry)).AddEdge("call", graph.End).SetEntry("call"))
	if _, err := g.Invoke(context.Background(), nil); err == nil {
		t.Fatal("the hung upstream's call succeeded")
	} else if !slices.Contains(errcat.Chain(err), errcat.ProviderUnavailable) {
		t.Fatalf("error %v, want provider_unavailable", err)
	}
	if n := attempts.Load(); n != 3 || hits.Load() == 0 {
		t.Fatalf("the timed-out call was attempted %d times under Retry{MaxAttempts: 3}, want 3", n)
	}

	iso, err := graph.NewFailureIsolation(graph.FailureIsolationConfig{EventName: "model", Degraded: graph.Update{"x": "degraded"}})
	if err != nil {
		t.Fatal(err)
	}
	g = mustCompile(t, graph.NewBuilder(schema).AddNode("call", call, graph.WithMiddleware(iso)).AddEdge("call", graph.End).SetEntry("call"))
	final, err := g.Invoke(context.Background(), nil)
	if err != nil {
		t.Fatalf("FailureIsolation did not catch the timed-out call: %v", err)
	}
	if v, _ := final.State.Get("x"); v != "degraded" {
		t.Fatalf("x = %v, want the degraded update", v)
	}
}
