package adaptertest

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	runtime2 "runtime"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
)

// Soak bounds, per deleted conversation: what the process may keep of
// it (heap bytes, after a collection) and the goroutines it may leave.
// A conversation's own data (its history, run records and events) is
// several KiB: keeping any of it shows well above SoakBytesPerSession,
// which leaves room for the runtime's and the upstream's caches.
const (
	SoakBytesPerSession = 2048
	SoakSlackGoroutines = 2
)

// Soak serves cfg's agent over an SQLite store (as Run does) and runs
// warm, then n more conversations through it. Each has a plain turn, a
// tool turn and an approval over REST, which every other conversation
// approves and then continues with a streamed OpenAI completion while
// the rest leave it pending; opens the session's event stream and drops
// it; and is deleted. Nothing of a deleted conversation may stay in the
// process: t fails if the live heap grows by more than
// SoakBytesPerSession a conversation over the last n, or the goroutines
// by more than SoakSlackGoroutines.
func Soak(t *testing.T, cfg Config, warm, n int) {
	t.Helper()
	if cfg.Factory == nil && cfg.Backend == adapter.Native {
		cfg.Factory = adapter.NativeFactory
	}
	in := start(t, cfg, filepath.Join(t.TempDir(), "soak.db"))
	defer in.stop(t)
	var heap0 uint64
	var g0 int
	for i := range warm + n {
		in.soakSession(t, fmt.Sprintf("soak-%d", i), i)
		if i == warm-1 {
			heap0, g0 = settle()
		}
	}
	heap1, g1 := settle()
	per := (float64(heap1) - float64(heap0)) / float64(n)
	t.Logf("%d conversations after %d: live heap %d → %d bytes (%.0f a conversation), goroutines %d → %d", n, warm, heap0, heap1, per, g0, g1)
	if per > SoakBytesPerSession {
		t.Errorf("the live heap grew by %.0f bytes a deleted conversation (at most %d)", per, SoakBytesPerSession)
	}
	if g1 > g0+SoakSlackGoroutines {
		t.Errorf("goroutines grew from %d to %d over %d deleted conversations", g0, g1, n)
	}
}

// settle lets the server's background work end, collects, and returns
// the live heap and the goroutine count.
func settle() (uint64, int) {
	time.Sleep(300 * time.Millisecond)
	runtime2.GC()
	runtime2.GC()
	var ms runtime2.MemStats
	runtime2.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime2.NumGoroutine()
}

// soakSession is one of Soak's conversations, on session id.
func (in *instance) soakSession(t *testing.T, id string, i int) {
	t.Helper()
	var out restOutcome
	if code := in.do(t, "POST", "/v1/sessions/"+id+"/messages", map[string]any{"content": "hello " + id}, nil, &out); code != 200 || out.Outcome != "completed" {
		t.Fatalf("hello %s: %d %+v", id, code, out)
	}
	in.lookup(t, id, "7")
	out = restOutcome{}
	if code := in.do(t, "POST", "/v1/sessions/"+id+"/messages", map[string]any{"content": "refund order 12"}, nil, &out); code != 200 || out.Outcome != "suspended" {
		t.Fatalf("refund %s: %d %+v", id, code, out)
	}
	if i%2 == 0 {
		sig := out.Signal.SignalID
		out = restOutcome{}
		if code := in.do(t, "POST", "/v1/sessions/"+id+"/signals", map[string]any{"signal_id": sig,
			"payload": map[string]any{"approval": map[string]any{"approved": true}}}, nil, &out); code != 200 || out.Outcome != "completed" {
			t.Fatalf("approve %s: %d %+v", id, code, out)
		}
		if s := in.completionStream(t, id, "where is order 9?"); !strings.Contains(s, "[DONE]") {
			t.Fatalf("stream %s: %s", id, s)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", in.ts.URL+"/v1/sessions/"+id+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events of %s: %d", id, resp.StatusCode)
	}
	cancel()
	resp.Body.Close()
	if code := in.do(t, "DELETE", "/v1/sessions/"+id, nil, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete %s: %d", id, code)
	}
}
