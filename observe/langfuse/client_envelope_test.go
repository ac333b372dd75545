package langfuse_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/observe/langfuse"
)

// ClientConfig: "BatchSize and MaxBatchBytes bound one request". The
// request envelope ({"batch":[…],"metadata":{…}}) counts: no request
// body exceeds MaxBatchBytes, whether its events fill it one by one or
// one event nearly fills it alone (that one cannot be sent within the
// bound: it is dropped and counted, never sent oversized).
func TestClientRequestBodyWithinMaxBatchBytes(t *testing.T) {
	const limit = 4096
	event := func(id string, size int) (langfuse.Event, int) {
		ev := langfuse.Event{ID: id, Type: langfuse.EventCreate, Timestamp: time.Unix(0, 0).UTC(),
			Body: &langfuse.ObservationBody{ID: "o" + id, TraceID: "t1", Name: "x"}}
		b, _ := json.Marshal(ev)
		ev.Body.(*langfuse.ObservationBody).StatusMessage = strings.Repeat("a", size-len(b)-len(`,"statusMessage":""`))
		b, _ = json.Marshal(ev)
		return ev, len(b)
	}
	for _, tc := range []struct {
		name  string
		sizes []int
	}{
		{"one event nearly the limit", []int{limit - 2}},
		{"events filling requests", []int{limit / 2, limit / 2, limit/2 - 100, limit/2 - 40, 900, 3000, 1000}},
		{"event just within room", []int{limit - 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var sizes []int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				sizes = append(sizes, len(b))
				mu.Unlock()
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte(`{"successes":[],"errors":[]}`))
			}))
			defer srv.Close()
			c, err := langfuse.NewClient(langfuse.ClientConfig{Host: srv.URL, PublicKey: "pk-lf-1", SecretKey: "sk-lf-1",
				MaxBatchBytes: limit, FlushInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Shutdown(context.Background())
			var evs []langfuse.Event
			for i, size := range tc.sizes {
				ev, n := event(string(rune('a'+i)), size)
				if n > limit {
					t.Fatalf("test event is %d bytes", n)
				}
				evs = append(evs, ev)
			}
			c.Export(evs)
			if err := c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			st := c.Stats()
			if st.Sent+st.Dropped != int64(len(evs)) {
				t.Fatalf("%d events exported; stats %+v", len(evs), st)
			}
			if st.Sent > 0 && len(sizes) == 0 {
				t.Fatalf("stats %+v but no request", st)
			}
			for _, n := range sizes {
				if n > limit {
					t.Fatalf("request bodies of %v bytes; MaxBatchBytes is %d (stats %+v)", sizes, limit, st)
				}
			}
			if tc.name != "one event nearly the limit" && st.Dropped != 0 {
				t.Fatalf("an event that fits a request was dropped: stats %+v", st)
			}
		})
	}
}
