package eino

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/internal/demo"
)

// FuzzConfigSection: any eino: section (the JSON the workspace hands the
// adapter) is refused with an error wrapping ErrInvalidConfig at decode
// or Validate, or builds its agent (on the workspace's model); it never
// panics. A PostgreSQL checkpoint store is validated only (its table
// name included); a checkpoint directory outside the test's is not
// built.
func FuzzConfigSection(f *testing.F) {
	for _, s := range []string{
		// README and Config's doc.
		`{"name":"assistant","instruction":"You help.","max_iterations":10,"provider":"workspace","checkpoint":{"driver":"file","dir":"eino-checkpoints"},"streaming":true,"workflow":"support-graph"}`,
		`{"checkpoint":{"driver":"postgres","url_env":"EINO_DATABASE_URL","table":"eino_checkpoints"}}`,
		`{"instruction":"You are a helpful assistant.","max_iterations":10,"checkpoint":{"driver":"file","dir":"eino-checkpoints"}}`,
		// Existing tests.
		`{"instructions": "x"}`, `{"checkpoint": {"driver": "redis"}}`, `{"provider": "workspace"}`, `[1]`,
		`{}`, `{"name": "support"}`, `{"workflow": "graph-1"}`, `{"workflow": ""}`, `null`, ``,
		`{"instruction":"be brief","max_iterations":3}`, `{"provider":"scripted"}`, `{"max_iterations":-1}`,
		// Found by reading: a table the store refuses only once it
		// connects, when the agent is built.
		`{"checkpoint":{"driver":"postgres","url_env":"DB","table":"Eino; DROP"}}`,
		`{"checkpoint":{"driver":"postgres","url_env":"DB","table":"1abc"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ag := &adapter.Agent{ID: "a", Backend: Name, Config: raw, Provider: demo.Model{}, Model: demo.ModelName}
		var cfg Config
		err := ag.DecodeConfig(&cfg)
		if err == nil {
			if err = cfg.Validate(); err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate: %v does not wrap ErrInvalidConfig", err)
			}
		} else if !errors.Is(err, adapter.ErrInvalidConfig) {
			t.Fatalf("DecodeConfig: %v does not wrap adapter.ErrInvalidConfig", err)
		}
		if err != nil {
			return
		}
		cc := cfg.Checkpoint
		if cc.Driver == CheckpointPostgres {
			if cc.Table != "" && !tableName.MatchString(cc.Table) {
				t.Fatalf("section %s passed Validate with a table the store refuses", raw)
			}
			return // a database
		}
		if d := filepath.ToSlash(cc.Dir); filepath.IsAbs(cc.Dir) || strings.Contains(d, "..") || strings.ContainsRune(d, 0) {
			return // a directory outside the test's
		}
		dir, err := os.MkdirTemp("", "eino-fuzz")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		a, err := Factory(t.Context(), adapter.FactoryRequest{Agent: ag, Workspace: &adapter.Workspace{Dir: dir}})
		if err != nil {
			t.Fatalf("section %s passed Validate, and Factory refused it: %v", raw, err)
		}
		if err := a.(*Adapter).Close(); err != nil {
			t.Fatal(err)
		}
	})
}
