package eino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// TestLostCheckpointAnswer: an approval sent over REST after the
// interrupted run's checkpoint was lost (the in-memory store across a
// restart, a deleted or corrupt checkpoint file) is answered as what
// happened: the approval could not be applied and the tool did not run
// (harness_signal_correlation_failed, not 409 "already given and took
// effect"); the refund never runs, and the history says so.
func TestLostCheckpointAnswer(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, ckpts string) (memory bool)
	}{
		{name: "memory, restarted", lose: func(*testing.T, string) bool { return true }},
		{name: "file deleted", lose: func(t *testing.T, ckpts string) bool {
			files, _ := filepath.Glob(filepath.Join(ckpts, "*.ckpt"))
			if len(files) != 1 || os.Remove(files[0]) != nil {
				t.Fatalf("checkpoint files %q", files)
			}
			return false
		}},
		{name: "file corrupt", lose: func(t *testing.T, ckpts string) bool {
			files, _ := filepath.Glob(filepath.Join(ckpts, "*.ckpt"))
			if len(files) != 1 || os.WriteFile(files[0], []byte("garbage{{"), 0o600) != nil {
				t.Fatalf("checkpoint files %q", files)
			}
			return false
		}},
	} {
		for _, surface := range []string{"rest", "openharness"} {
			t.Run(tc.name+"/"+surface, func(t *testing.T) {
				dir := t.TempDir()
				ckpts := filepath.Join(dir, "ckpt")
				tools, refunds := countedTools()
				start := func(memory bool) string {
					var store eino.CheckPointStore = eino.NewMemoryStore()
					if !memory {
						var err error
						if store, err = eino.NewFileStore(ckpts); err != nil {
							t.Fatal(err)
						}
					}
					return serveEino(t, dir, tools, store)
				}
				do := func(method, url, body string) (int, string) {
					req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					return resp.StatusCode, string(b)
				}
				memory := tc.name == "memory, restarted"
				url := start(memory)
				_, body := do(http.MethodPost, url+"/v1/sessions/s/messages", `{"content":"please refund order 7"}`)
				var out struct {
					RunID   string `json:"run_id"`
					Outcome string `json:"outcome"`
					Signal  struct {
						SignalID string `json:"signal_id"`
					} `json:"signal"`
				}
				if json.Unmarshal([]byte(body), &out) != nil || out.Outcome != "suspended" || out.Signal.SignalID == "" {
					t.Fatalf("refund turn: %s", body)
				}
				if tc.lose(t, ckpts) {
					url = start(true) // the restart: a new process, its memory empty
				}
				var code int
				if surface == "rest" {
					code, body = do(http.MethodPost, url+"/v1/sessions/s/signals",
						fmt.Sprintf(`{"signal_id":%q,"payload":{"approval":{"approved":true}}}`, out.Signal.SignalID))
				} else {
					code, body = do(http.MethodPost, url+"/v1/openharness", fmt.Sprintf(`{"protocol_version":"1.0.0","request_id":"r-approve","request":{"context":`+
						`{"session_id":"s","continuation":{"run_id":%q},"extensions":{"dev.armature":{"option":"approve"}}}}}`, out.RunID))
				}
				t.Logf("%d %s", code, body)
				if code == http.StatusConflict || strings.Contains(body, "took effect") {
					t.Errorf("the approval that could not be applied is answered as one that took effect: %d %s", code, body)
				}
				if !strings.Contains(body, "could not be applied") || !strings.Contains(body, "did not run") {
					t.Errorf("the answer does not say the approval could not be applied and the tool did not run: %d %s", code, body)
				}
				if n := refunds(); n != 0 {
					t.Errorf("%d tool calls", n)
				}
				_, body = do(http.MethodGet, url+"/v1/sessions/s", "")
				if !strings.Contains(body, eino.NotRunText) {
					t.Errorf("the history does not say the call was not run: %s", body)
				}
			})
		}
	}
}

// serveEino serves an Eino agent of tools with its checkpoints in store,
// over the SQLite file in dir (which the servers a test starts share),
// stopped at the test's end, and returns its URL.
func serveEino(t *testing.T, dir string, tools []agent.Tool, store eino.CheckPointStore) string {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "armature.db"), Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close(ctx) })
	e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ag := &adapter.Agent{ID: "agent", Backend: eino.Name, Tools: tools}
	served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: &eino.Adapter{Engine: e}, Agent: ag, Sessions: st,
		Records: st.Checkpoints(), Locker: st.SessionLocker(sqlite.LockerConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: st.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{served}, Sessions: st, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); _ = srv.Stop(ctx); _ = rec.Close(ctx) })
	return ts.URL
}
