// Package servertest builds, for tests, the server armature serve runs by
// default: the offline demo agent over an SQLite file in a temporary
// directory, served by httptest. Each call has its own store and server,
// both closed by the test's cleanup.
//
// # Example
//
//	ts := servertest.NewDemo(t, func(c *server.Config) { c.Tokens = tokens })
//	resp, err := http.Get(ts.URL + "/v1/sessions")
package servertest

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// NewDemo serves the demo agent (agent id "demo") over an SQLite file in
// t.TempDir(); mutate adjusts the server's configuration first.
func NewDemo(t testing.TB, mutate ...func(*server.Config)) *httptest.Server {
	t.Helper()
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	return New(t, a, mutate...)
}

// New serves agent a under the agent id "demo" over an SQLite file in
// t.TempDir(), as NewDemo serves the demo agent.
func New(t testing.TB, a *agent.Agent, mutate ...func(*server.Config)) *httptest.Server {
	t.Helper()
	return On(t, SQLite(t), a, mutate...)
}

// On serves agent a under the agent id "demo" over store, as New does:
// a test that restarts the server opens the same file again
// ([SQLiteAt]) and serves a new server on it.
func On(t testing.TB, store *sqlite.Store, a *agent.Agent, mutate ...func(*server.Config)) *httptest.Server {
	t.Helper()
	cfg := server.Config{Agents: []*server.Agent{{ID: "demo", Chat: Harness(t, store, a), Model: demo.ModelName}}, Sessions: store}
	for _, m := range mutate {
		m(&cfg)
	}
	return Serve(t, cfg)
}

// Harness is the chat harness armature serve builds for agent a over
// store: sessions and suspensions in the store, turns of a session
// serialized through its locker.
func Harness(t testing.TB, store *sqlite.Store, a *agent.Agent) *chat.Harness {
	t.Helper()
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints()),
		Locker: store.SessionLocker(sqlite.LockerConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// SQLite opens a store on a file in t.TempDir(), closed at cleanup.
func SQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	return SQLiteAt(t, t.TempDir()+"/s.db")
}

// SQLiteAt opens a store on the file at path, closed at cleanup (closing
// it earlier is harmless).
func SQLiteAt(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(ctx) })
	return store
}

// Serve serves a server of cfg on an httptest server, closed at cleanup.
func Serve(t testing.TB, cfg server.Config) *httptest.Server {
	t.Helper()
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// Chromium finds a headless browser for browser tests: $ARMATURE_CHROMIUM,
// else Debian's chromium (or chrome) on PATH. Without one the test skips
// locally and fails in CI ($CI set): there it must run.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ARMATURE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed: the browser tests cannot run in CI (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed; the browser tests skip (apt-get install -y chromium)")
	return ""
}

// Nginx finds nginx, a reverse proxy to put in front of a server:
// $ARMATURE_NGINX, else nginx on PATH or in /usr/sbin. Without one the
// proxy tests skip locally and fail in CI.
func Nginx(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ARMATURE_NGINX"); p != "" {
		return p
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	if os.Getenv("CI") != "" {
		t.Fatal("nginx is not installed: the proxy tests cannot run in CI (apt-get install -y nginx-light)")
	}
	t.Skip("nginx is not installed; the proxy tests skip (apt-get install -y nginx-light)")
	return ""
}

// Gauge reads one unlabelled series of the server at base from its
// /metrics; a series it does not have fails the test.
func Gauge(t testing.TB, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}
