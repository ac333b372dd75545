package prompt_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/prompt"
)

// TestCacheServesStaleAtOnceAfterFailedRead: the workspace's prompt
// manager (internal/cli promptManager) is Langfuse behind a Cache with
// ServeStale, then the prompt dir. When Langfuse hangs (a black-holed
// connection), the fetch whose entry expired waits for Langfuse's timeout
// before serving the stale copy; for StaleRetry after that failed read,
// the next fetches are served the stale copy at once instead of each
// waiting the whole timeout again (the agent fetches its system prompt at
// each model call). Here the timeout is 400 ms and the clock stands
// still: the third fetch does not wait for it.
func TestCacheServesStaleAtOnceAfterFailedRead(t *testing.T) {
	hang := make(chan struct{})
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name":"support","version":3,"type":"text","prompt":"Be brief.","labels":["production"]}`))
	}))
	defer srv.Close()
	defer close(hang)
	const timeout = 400 * time.Millisecond
	lf, err := prompt.NewLangfuse(prompt.LangfuseConfig{BaseURL: srv.URL, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	clock := func() time.Time { return now }
	cache := prompt.NewCache(lf, prompt.CacheConfig{TTL: time.Minute, ServeStale: true, Now: clock})
	m, err := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{cache}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.Fetch(ctx, "support", "", prompt.FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	now = now.Add(2 * time.Minute) // the entry expired; Langfuse now hangs
	var waits []time.Duration
	for range 3 {
		start := time.Now()
		p, err := m.Fetch(ctx, "support", "", prompt.FetchOptions{})
		waits = append(waits, time.Since(start).Round(10*time.Millisecond))
		if err != nil || p.Version != "3" {
			t.Fatalf("fetch: %v %+v", err, p)
		}
	}
	t.Logf("waits: %v", waits)
	if waits[2] >= timeout {
		t.Fatalf("every fetch during the outage waited Langfuse's whole timeout before serving the stale prompt: %v", waits)
	}
}

// TestCacheStaleRetryBounds: StaleRetry is never longer than TTL, a
// negative StaleRetry reads the source at every fetch.
func TestCacheStaleRetryBounds(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		ttl, retry time.Duration
		advance    time.Duration // between the two stale fetches
		reads      int           // source reads of the second
	}{
		{name: "within StaleRetry", ttl: time.Minute, retry: 30 * time.Second, advance: 29 * time.Second, reads: 0},
		{name: "past StaleRetry", ttl: time.Minute, retry: 30 * time.Second, advance: 30 * time.Second, reads: 1},
		{name: "bounded by TTL", ttl: 5 * time.Second, retry: time.Hour, advance: 5 * time.Second, reads: 1},
		{name: "negative", ttl: time.Minute, retry: -1, reads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			clock := func() time.Time { return now }
			src := &source{next: prompt.NewMemory(clock, &prompt.Prompt{Name: "g", Template: prompt.MustParseTemplate("x")})}
			c := prompt.NewCache(src, prompt.CacheConfig{TTL: tt.ttl, ServeStale: true, StaleRetry: tt.retry, Now: clock})
			if _, err := c.Fetch(ctx, "g", "production", prompt.FetchOptions{}); err != nil {
				t.Fatal(err)
			}
			src.down = true
			now = now.Add(2 * time.Hour)
			if _, err := c.Fetch(ctx, "g", "production", prompt.FetchOptions{}); err != nil || src.reads != 2 {
				t.Fatalf("first stale fetch: %v, reads %d", err, src.reads)
			}
			now = now.Add(tt.advance)
			if _, err := c.Fetch(ctx, "g", "production", prompt.FetchOptions{}); err != nil || src.reads != 2+tt.reads {
				t.Fatalf("second stale fetch: %v, reads %d, want %d", err, src.reads, 2+tt.reads)
			}
		})
	}
}
