package langfuse_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/observe/langfuse"
)

// A Host under an escaped path (a reverse proxy route holding %2F):
// the request must go to that path with the ingestion path appended.
func TestHostEscapedPath(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.RequestURI)
		mu.Unlock()
		w.WriteHeader(207)
		_, _ = w.Write([]byte(`{"successes":[],"errors":[]}`))
	}))
	defer srv.Close()
	c, err := langfuse.NewClient(langfuse.ClientConfig{Host: srv.URL + "/team%2Fa/", PublicKey: "pk", SecretKey: "sk", FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.Export([]langfuse.Event{{ID: "1", Type: langfuse.TraceCreate, Timestamp: time.Now().UTC(), Body: map[string]any{"id": "t"}}})
	_ = c.Shutdown(context.Background())
	mu.Lock()
	defer mu.Unlock()
	want := "/team%2Fa/api/public/ingestion"
	if len(got) == 0 || got[0] != want {
		t.Fatalf("requests to %v, want %s", got, want)
	}
}
