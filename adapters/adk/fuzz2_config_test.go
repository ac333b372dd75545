package adk

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
)

// fuzzKey is the value of the api_key_env variable the fuzz target's
// sections name: no error may echo it.
const fuzzKey = "AIza-fuzz-SECRET-5b7e0c1d"

// FuzzConfigSection: any adk: section (the JSON the workspace hands the
// adapter) is refused with an error wrapping ErrInvalidConfig at decode
// or Validate, or builds its agent; it never panics, and no error echoes
// the value of the api_key_env variable. Sections naming a file outside
// the test's directory or a PostgreSQL database are validated only.
func FuzzConfigSection(f *testing.F) {
	for _, s := range []string{
		// README and Config's doc.
		`{"name":"assistant","instruction":"You help.","model":{"provider":"gemini","name":"gemini-2.5-flash","api_key_env":"FUZZ_API_KEY"},"session":{"driver":"sqlite","path":"adk-sessions.db"},"streaming":true,"max_llm_calls":20}`,
		`{"session":{"driver":"postgres","url_env":"ADK_DATABASE_URL","schema":"adk"}}`,
		`{"model":{"provider":"gemini","name":"gemini-2.5-flash","api_key_env":"FUZZ_API_KEY"},"instruction":"You are a helpful assistant.","session":{"driver":"sqlite","path":"adk-sessions.db"}}`,
		// Existing tests.
		`{"instructions": "x"}`, `{"session": {"driver": "redis"}}`, `[1]`, `{"instruction":"be brief"}`,
		`{}`, `null`, ``, `{"model":{"provider":"scripted"}}`, `{"max_llm_calls":-1}`,
		`{"session":{"driver":"postgres","url_env":"DB","schema":"ADK; DROP"}}`,
		`{"model":{"provider":"openai"}}`, `{"model":{"provider":"gemini"}}`,
		// Found by FuzzConfigSection: accepted, and refused by genai's
		// client when the agent was built.
		`{"model":{"provider":"gemini","name":"0","api_key_env":"FUZZ_UNSET_KEY"}}`,
		// Found by reading, then by the seed: the path's ? began the
		// SQLite URI's parameters.
		`{"session":{"driver":"sqlite","path":"a?mode=ro"}}`,
		`{"session":{"driver":"sqlite","path":"s.db?_pragma=journal_mode(DELETE)"}}`,
		`{"session":{"driver":"sqlite","path":"sub/dir/s.db"}}`,
		`{"session":{"driver":"sqlite","path":"."}}`,
		`{"name":"a b","app_name":"x/y"}`,
		`{"name":"user"}`, `{"name":"a-b"}`, `{"session":{"driver":"sqlite","path":"a#b"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Setenv("FUZZ_API_KEY", fuzzKey)
	f.Fuzz(func(t *testing.T, raw []byte) {
		ag := &adapter.Agent{ID: "a", Backend: Name, Config: raw}
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
			if strings.Contains(err.Error(), fuzzKey) {
				t.Fatalf("the error echoes the API key: %v", err)
			}
			return
		}
		if p := cfg.Session.Path; cfg.Session.Driver == SessionPostgres || p != "" && (strings.ContainsAny(p, `/\`) || p == "." || p == "..") {
			// A database, or a path whose opening depends on the file
			// system (a directory, one missing, one outside the test's).
			return
		}
		if cfg.Model.Provider == ProviderGemini && cfg.Model.APIKeyEnv == "" {
			return // genai's client looks for a key of its own in the environment
		}
		// Not t.TempDir: a seed's directory is named seed#N, and a # is
		// refused in a session path.
		dir, err := os.MkdirTemp("", "adk-fuzz")
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
		// The section round-trips: what was decoded decodes again alike.
		back, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var again Config
		if err := (&adapter.Agent{ID: "a", Backend: Name, Config: back}).DecodeConfig(&again); err != nil || again.Validate() != nil {
			t.Fatalf("%s re-encoded as %s: %v", raw, back, err)
		}
	})
}
