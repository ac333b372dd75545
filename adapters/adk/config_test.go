package adk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
)

func TestConfigValidate(t *testing.T) {
	t.Setenv("DB", "postgres://db.invalid/armature") // url_env names a variable that is set
	for _, c := range []struct {
		name string
		cfg  adk.Config
		ok   bool
	}{
		{"zero value", adk.Config{}, true},
		{"scripted", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderScripted}}, true},
		{"gemini", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "gemini-2.5-flash"}}, true},
		{"gemini without a name", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini}}, false},
		{"unknown provider", adk.Config{Model: adk.ModelConfig{Provider: "openai"}}, false},
		{"gemini with bounds", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "g", Timeout: "90s", MaxResponseBytes: 1 << 20}}, true},
		{"gemini, a zero timeout", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "g", Timeout: "0s"}}, false},
		{"gemini, a timeout that is no duration", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "g", Timeout: "90"}}, false},
		{"gemini, a negative bound", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "g", MaxResponseBytes: -1}}, false},
		{"a timeout without a call to bound", adk.Config{Model: adk.ModelConfig{Timeout: "90s"}}, false},
		{"a reply bound without a call to bound", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderScripted, MaxResponseBytes: 10}}, false},
		{"gemini thinking by level", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "g", Thinking: &adk.ThinkingConfig{Level: "High", IncludeThoughts: true}}}, true},
		{"gemini thinking by budget", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "g", Thinking: &adk.ThinkingConfig{Budget: new(int32(-1))}}}, true},
		{"gemini thinking off", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "g", Thinking: &adk.ThinkingConfig{Budget: new(int32(0))}}}, true},
		{"gemini thinking, a budget below -1", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "g", Thinking: &adk.ThinkingConfig{Budget: new(int32(-2))}}}, false},
		{"gemini thinking, an unknown level", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "g", Thinking: &adk.ThinkingConfig{Level: "max"}}}, false},
		{"gemini thinking, a budget and a level", adk.Config{Model: adk.ModelConfig{Provider: adk.ProviderGemini, Name: "g", Thinking: &adk.ThinkingConfig{Level: "low", Budget: new(int32(100))}}}, false},
		{"thinking without ADK-Go's Gemini client", adk.Config{Model: adk.ModelConfig{Thinking: &adk.ThinkingConfig{Level: "low"}}}, false},
		{"sqlite", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionSQLite, Path: "s.db"}}, true},
		{"sqlite without a path", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionSQLite}}, false},
		{"memory with a path", adk.Config{Session: adk.SessionConfig{Path: "s.db"}}, false},
		{"unknown driver", adk.Config{Session: adk.SessionConfig{Driver: "mysql"}}, false},
		{"postgres", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionPostgres, URLEnv: "DB"}}, true},
		{"postgres, url_env unset", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionPostgres, URLEnv: "ARMATURE_TEST_URL_NEVER_SET"}}, false},
		{"postgres in code", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionPostgres, URL: "postgres://x"}}, true},
		{"postgres without a url", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionPostgres}}, false},
		{"postgres in a schema", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionPostgres, URLEnv: "DB", Schema: "adk_sessions"}}, true},
		{"postgres in a bad schema", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionPostgres, URLEnv: "DB", Schema: "ADK; DROP"}}, false},
		{"sqlite with a schema", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionSQLite, Path: "s.db", Schema: "adk"}}, false},
		{"postgres with a path", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionPostgres, URLEnv: "DB", Path: "s.db"}}, false},
		{"sqlite with a url", adk.Config{Session: adk.SessionConfig{Driver: adk.SessionSQLite, Path: "s.db", URLEnv: "DB"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, adk.ErrInvalidConfig)) {
				t.Fatalf("Validate() = %v, want ok=%v", err, c.ok)
			}
		})
	}
}

func TestFactoryRejects(t *testing.T) {
	for _, c := range []struct{ name, section string }{
		{"misspelt key", `{"instructions": "x"}`},
		{"misspelt thinking key", `{"model": {"provider": "gemini", "name": "g", "thinking": {"include_thought": true}}}`},
		{"invalid driver", `{"session": {"driver": "redis"}}`},
		{"not an object", `[1]`},
		// An unset url_env must not connect with libpq's defaults.
		{"unset url_env", `{"session": {"driver": "postgres", "url_env": "ARMATURE_TEST_ADK_URL_NEVER_SET"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ag := &adapter.Agent{ID: "a", Backend: adk.Name, Config: json.RawMessage(c.section)}
			if _, err := adk.Factory(context.Background(), adapter.FactoryRequest{Agent: ag}); !errors.Is(err, adapter.ErrInvalidConfig) && !errors.Is(err, adk.ErrInvalidConfig) {
				t.Fatalf("Factory: %v", err)
			}
		})
	}
}

func TestErrorPrefixes(t *testing.T) {
	for _, err := range []error{adk.ErrInvalidConfig, adk.ErrNoPending} {
		if !strings.HasPrefix(err.Error(), "adk: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
	}
}

// TestModelBoundsDecode: a workspace writes max_response_bytes as a
// number of bytes or a size string; anything else is refused.
func TestModelBoundsDecode(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want adk.Size
		ok   bool
	}{
		{`4096`, 4096, true}, {`"32MiB"`, 32 << 20, true}, {`"1 GiB"`, 1 << 30, true}, {`"lots"`, 0, false},
		{`-5`, 0, false}, {`1.5`, 0, false}, {`true`, 0, false}, {`"99999999999TiB"`, 0, false},
	} {
		ag := &adapter.Agent{ID: "x", Backend: adk.Name, Config: json.RawMessage(`{"model": {"max_response_bytes": ` + c.raw + `}}`)}
		var cfg adk.Config
		err := ag.DecodeConfig(&cfg)
		if (err == nil) != c.ok || cfg.Model.MaxResponseBytes != c.want {
			t.Errorf("max_response_bytes %s: %d, %v; want %d, ok %v", c.raw, cfg.Model.MaxResponseBytes, err, c.want, c.ok)
		}
	}
}
