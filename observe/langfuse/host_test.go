package langfuse_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/observe/langfuse"
)

// A Host with a query string (a gateway in front of a self-hosted
// Langfuse that routes by a query parameter) would have the ingestion
// path land inside the query, every batch POSTed to the gateway's root:
// NewClient rejects it, as it rejects a host carrying credentials.
func TestNewClientHostWithQuery(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		_, _ = w.Write([]byte(`{"successes":[],"errors":[]}`))
	}))
	defer srv.Close()
	c, err := langfuse.NewClient(langfuse.ClientConfig{Host: srv.URL + "/?tenant=team-a", PublicKey: "pk-lf-1", SecretKey: "sk-lf-1",
		FlushInterval: time.Hour})
	if err != nil {
		if !errors.Is(err, langfuse.ErrInvalidClientConfig) {
			t.Fatalf("NewClient: %v, want ErrInvalidClientConfig", err)
		}
		return
	}
	defer c.Shutdown(context.Background())
	c.Export([]langfuse.Event{{ID: "e1", Type: langfuse.EventCreate, Timestamp: time.Unix(0, 0).UTC(),
		Body: &langfuse.ObservationBody{ID: "o1", TraceID: "t1"}}})
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 1 || paths[0] != langfuse.IngestionPath {
		t.Fatalf("the batch was POSTed to paths %q, not %s (client stats %+v: counted as sent)", paths, langfuse.IngestionPath, c.Stats())
	}
}
