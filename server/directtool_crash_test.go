package server_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

const (
	directCrashChildEnv = "ARMATURE_DIRECTCRASH_CHILD"
	directCrashDirEnv   = "ARMATURE_DIRECTCRASH_DIR"
)

// directCrashServer is armature serve's server over one SQLite file
// (sessions and runs), with a gateway tool "charge" that marks its call
// (a file "entered") and then never returns, so the process can be
// killed while it runs.
func directCrashServer(ctx context.Context, dir string) (*server.Server, error) {
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "s.db"), Durability: sqlite.DurabilityFull})
	if err != nil {
		return nil, err
	}
	a, err := demo.New()
	if err != nil {
		return nil, err
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		return nil, err
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints())})
	if err != nil {
		return nil, err
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		return nil, err
	}
	charge := agent.Tool{Definition: llm.Tool{Name: "charge", Description: "charge", Parameters: json.RawMessage(`{"type":"object"}`)},
		Call: func(ctx context.Context, _ json.RawMessage) (string, error) {
			_ = os.WriteFile(filepath.Join(dir, "entered"), nil, 0o600)
			select {} // killed here
		}}
	return server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h, Model: demo.ModelName, Gateway: []agent.Tool{charge}}},
		Sessions: store, Runs: rec, DisableWebUI: true, DirectTools: map[string][]string{server.DefaultTenant: {"*"}}})
}

// TestDirectToolCrashChild is the body of the child process that
// TestDirectToolInterruptedRunRecordsCall starts and kills; it runs only
// when directCrashChildEnv is set.
func TestDirectToolCrashChild(t *testing.T) {
	if os.Getenv(directCrashChildEnv) == "" {
		t.Skip("runs as the direct tool crash child process only")
	}
	ctx := context.Background()
	dir := os.Getenv(directCrashDirEnv)
	srv, err := directCrashServer(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "addr.tmp"), []byte(ln.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "addr.tmp"), filepath.Join(dir, "addr")); err != nil {
		t.Fatal(err)
	}
	t.Fatal(srv.Serve(ctx, ln, time.Second))
}

// TestDirectToolInterruptedRunRecordsCall checks that a direct tool
// call's runtime.tool.direct.started event (toolId, arguments) is in the
// store before the tool runs. When the process is killed (SIGKILL) while
// the tool runs, the next start ends the run as failed (run_interrupted),
// and that run must still say which tool was running and with which
// arguments: the tool may have had a side effect (a charge, a refund).
// Buffering the event until the run ends would lose it, which is why a
// turn's approved call is likewise made durable before it runs (README
// "Durability").
func TestDirectToolInterruptedRunRecordsCall(t *testing.T) {
	if os.Getenv(directCrashChildEnv) != "" {
		t.Skip("parent only")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDirectToolCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), directCrashChildEnv+"=1", directCrashDirEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	var addr []byte
	for deadline := time.Now().Add(8 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if addr, err = os.ReadFile(filepath.Join(dir, "addr")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child process did not start within 8s")
		}
	}
	go func() {
		req, _ := http.NewRequest("POST", "http://"+string(addr)+"/v1/agents/demo/tools/charge",
			strings.NewReader(`{"arguments":{"order":"7","amount":30},"session_id":"crash-direct"}`))
		req.Header.Set("Content-Type", "application/json")
		if r, err := http.DefaultClient.Do(req); err == nil {
			r.Body.Close()
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "entered")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tool was not called within 5s")
		}
	}
	time.Sleep(500 * time.Millisecond) // the flusher's linger is long past
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	killed = true

	ctx := context.Background()
	srv, err := directCrashServer(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop(ctx) }()
	if _, err := srv.RecoverRuns(ctx); err != nil {
		t.Fatal(err)
	}
	runs, err := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "crash-direct"})
	if err != nil || len(runs.Runs) != 1 {
		t.Fatalf("runs after the restart: got %+v, error %v; want 1 run", runs, err)
	}
	run := runs.Runs[0]
	evs, err := srv.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	sawStart := false
	for _, ev := range evs {
		types = append(types, ev.Type)
		if ev.Type == runtime.EventToolDirectStarted && strings.Contains(string(ev.Data), `"charge"`) {
			sawStart = true
		}
	}
	if run.Status != runtime.StatusFailed || run.Error == nil || run.Error.Category != runtime.CategoryInterrupted {
		t.Errorf("the interrupted direct call's run: got %+v; want failed with category %s", run, runtime.CategoryInterrupted)
	}
	if !sawStart {
		t.Errorf("the interrupted direct call's run records %q; want a %s event naming tool \"charge\" and its arguments", types, runtime.EventToolDirectStarted)
	}
}
