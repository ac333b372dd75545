package eino_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/internal/demo"
)

func TestConfigValidate(t *testing.T) {
	t.Setenv("DB", "postgres://db.invalid/armature") // url_env names a variable that is set
	for _, c := range []struct {
		name string
		cfg  eino.Config
		ok   bool
	}{
		{"zero value", eino.Config{}, true},
		{"scripted", eino.Config{Provider: eino.ProviderScripted}, true},
		{"workspace", eino.Config{Provider: eino.ProviderWorkspace}, true},
		{"unknown provider", eino.Config{Provider: "ark"}, false},
		{"negative iterations", eino.Config{MaxIterations: -1}, false},
		{"file", eino.Config{Checkpoint: eino.CheckpointConfig{Driver: eino.CheckpointFile, Dir: "ck"}}, true},
		{"file without a dir", eino.Config{Checkpoint: eino.CheckpointConfig{Driver: eino.CheckpointFile}}, false},
		{"memory with a dir", eino.Config{Checkpoint: eino.CheckpointConfig{Dir: "ck"}}, false},
		{"unknown driver", eino.Config{Checkpoint: eino.CheckpointConfig{Driver: "redis"}}, false},
		{"postgres", eino.Config{Checkpoint: eino.CheckpointConfig{Driver: eino.CheckpointPostgres, URLEnv: "DB", Table: "ck"}}, true},
		{"postgres, url_env unset", eino.Config{Checkpoint: eino.CheckpointConfig{Driver: eino.CheckpointPostgres, URLEnv: "ARMATURE_TEST_URL_NEVER_SET", Table: "ck"}}, false},
		{"postgres in code", eino.Config{Checkpoint: eino.CheckpointConfig{Driver: eino.CheckpointPostgres, URL: "postgres://x"}}, true},
		{"postgres without a url", eino.Config{Checkpoint: eino.CheckpointConfig{Driver: eino.CheckpointPostgres}}, false},
		{"postgres with a dir", eino.Config{Checkpoint: eino.CheckpointConfig{Driver: eino.CheckpointPostgres, URLEnv: "DB", Dir: "ck"}}, false},
		{"file with a table", eino.Config{Checkpoint: eino.CheckpointConfig{Driver: eino.CheckpointFile, Dir: "ck", Table: "t"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, eino.ErrInvalidConfig)) {
				t.Fatalf("Validate() = %v, want ok=%v", err, c.ok)
			}
		})
	}
}

func TestFactoryRejects(t *testing.T) {
	for _, c := range []struct{ name, section string }{
		{"misspelt key", `{"instructions": "x"}`},
		{"invalid driver", `{"checkpoint": {"driver": "redis"}}`},
		{"workspace model without one", `{"provider": "workspace"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ag := &adapter.Agent{ID: "a", Backend: eino.Name, Config: json.RawMessage(c.section)}
			if _, err := eino.Factory(context.Background(), adapter.FactoryRequest{Agent: ag}); !errors.Is(err, adapter.ErrInvalidConfig) && !errors.Is(err, eino.ErrInvalidConfig) {
				t.Fatalf("Factory: %v", err)
			}
		})
	}
}

func TestErrorPrefixes(t *testing.T) {
	for _, err := range []error{eino.ErrInvalidConfig, eino.ErrNoCheckpoint, eino.ErrInterrupt, eino.ErrInvalidToolCall} {
		if !strings.HasPrefix(err.Error(), "eino: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
	}
}

func TestStores(t *testing.T) {
	fs, err := eino.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		store interface {
			eino.CheckPointStore
			Delete(context.Context, string) error
		}
	}{{"memory", eino.NewMemoryStore()}, {"file", fs}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if _, ok, err := c.store.Get(ctx, "a/b"); ok || err != nil {
				t.Fatalf("Get of a missing id: %v %v", ok, err)
			}
			for _, v := range []string{"one", "two"} {
				if err := c.store.Set(ctx, "a/b", []byte(v)); err != nil {
					t.Fatal(err)
				}
				if b, ok, err := c.store.Get(ctx, "a/b"); !ok || err != nil || string(b) != v {
					t.Fatalf("Get = %q %v %v, want %q", b, ok, err, v)
				}
			}
			if err := c.store.Delete(ctx, "a/b"); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := c.store.Get(ctx, "a/b"); ok {
				t.Fatal("the checkpoint survived Delete")
			}
			if err := c.store.Delete(ctx, "a/b"); err != nil {
				t.Fatalf("Delete of a missing id: %v", err)
			}
		})
	}
}

// TestMemoryRestart documents the in-memory store's restart semantics:
// an interrupted run whose checkpoint is lost cannot be resumed; and a
// resumed run's checkpoint is deleted.
func TestMemoryRestart(t *testing.T) {
	ctx := context.Background()
	store := eino.NewMemoryStore()
	e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Send(ctx, "t1", []*schema.Message{schema.UserMessage("refund order 7")}, func(eino.Event) {})
	if err != nil || res.Pending == nil || store.Len() != 1 {
		t.Fatalf("approval turn: %+v %v (%d checkpoints)", res, err, store.Len())
	}
	restarted, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Resume(ctx, *res.Pending, eino.Decision{Approved: true}, func(eino.Event) {}); !errors.Is(err, eino.ErrNoCheckpoint) {
		t.Fatalf("resume after a restart: %v, want ErrNoCheckpoint", err)
	}
	if _, err := e.Resume(ctx, *res.Pending, eino.Decision{Approved: true}, func(eino.Event) {}); err != nil || store.Len() != 0 {
		t.Fatalf("resume: %v (%d checkpoints left)", err, store.Len())
	}
}

// TestStreaming checks that Eino's streaming streams a streaming model's
// answer as deltas that add up to the answer.
func TestStreaming(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		ctx := context.Background()
		e, err := eino.NewEngine(ctx, eino.Config{Streaming: new(streaming), Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		var deltas []string
		res, err := e.Send(ctx, "t1", []*schema.Message{schema.UserMessage("where is order 7?")}, func(ev eino.Event) {
			if ev.Kind == eino.EventDelta {
				deltas = append(deltas, ev.Text)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(deltas, ""); got != res.Text || (len(deltas) > 1) != streaming || len(res.Messages) != 3 {
			t.Errorf("streaming=%v: deltas %q, answer %q, %d messages", streaming, deltas, res.Text, len(res.Messages))
		}
	}
}

func TestFactoryWorkflow(t *testing.T) {
	for _, c := range []struct{ section, want string }{
		{`{}`, "assistant"},
		{`{"name": "support"}`, "support"},
		{`{"workflow": "graph-1"}`, "graph-1"},
		{`{"workflow": ""}`, ""},
	} {
		ag := &adapter.Agent{ID: "a", Backend: eino.Name, Config: json.RawMessage(c.section)}
		a, err := eino.Factory(context.Background(), adapter.FactoryRequest{Agent: ag})
		if err != nil {
			t.Fatal(err)
		}
		if got := adapter.WorkflowOf(a); got != c.want {
			t.Errorf("%s: workflow %q, want %q", c.section, got, c.want)
		}
	}
}
