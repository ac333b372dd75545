package adapterserve

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/llm"
)

// echo is a backend whose section sets a prefix.
type echo struct{ prefix string }

func (e echo) Name() string { return "echo" }

func (e echo) Run(_ context.Context, req *adapter.Request, _ adapter.Emitter) (*adapter.Result, error) {
	return adapter.Text(e.prefix + req.Input.Text()), nil
}

func newEcho(_ context.Context, req adapter.FactoryRequest) (adapter.Adapter, error) {
	var cfg struct {
		Prefix string `json:"prefix"`
	}
	if err := req.Agent.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	return echo{prefix: cfg.Prefix}, nil
}

// lineWriter signals the first write matching re.
type lineWriter struct {
	re    *regexp.Regexp
	found chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	if m := w.re.FindSubmatch(p); m != nil {
		select {
		case w.found <- string(m[1]):
		default:
		}
	}
	return len(p), nil
}

func TestRun(t *testing.T) {
	for _, c := range []struct{ name, config string }{
		{"section", "prefix: 'echo: '\n"},
		{"workspace agent", "echo:\n  prefix: 'echo: '\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "echo.yaml")
			if err := os.WriteFile(cfg, []byte(c.config), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			out := &lineWriter{re: regexp.MustCompile(`on (http://\S+)`), found: make(chan string, 1)}
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, []string{"--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data"), "--config", cfg}, out, "echo", newEcho)
			}()
			var base string
			select {
			case base = <-out.found:
			case err := <-done:
				t.Fatalf("Run ended before serving: %v", err)
			}
			body, _ := json.Marshal(map[string]any{"content": "hi"})
			resp, err := http.Post(base+"/v1/sessions/s1/messages", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Replies []llm.Message `json:"replies"`
			}
			err = json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if err != nil || len(got.Replies) != 1 || got.Replies[0].Text() != "echo: hi" {
				t.Fatalf("turn: %v %+v", err, got)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

func TestRunRejects(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("prefx: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"a misspelt key", []string{"--data", dir, "--config", bad}},
		{"a missing file", []string{"--data", dir, "--config", filepath.Join(dir, "none.yaml")}},
		{"an argument", []string{"--data", dir, "extra"}},
		{"a public address", []string{"--data", dir, "--addr", "0.0.0.0:0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			if err := Run(context.Background(), c.args, &out, "echo", newEcho); err == nil {
				t.Fatal("Run accepted it")
			}
		})
	}
}
