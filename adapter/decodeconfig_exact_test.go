package adapter_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
)

type exactInner struct {
	Driver string `json:"driver,omitempty"`
	Dir    string `json:"dir,omitempty"`
}

type exactBase struct {
	Shared string `json:"shared,omitempty"`
}

type exactConfig struct {
	exactBase
	MaxIterations int                        `json:"max_iterations,omitempty"`
	Checkpoint    exactInner                 `json:"checkpoint"`
	Ptr           *exactInner                `json:"ptr,omitempty"`
	Named         map[string]exactInner      `json:"named,omitempty"`
	List          []exactInner               `json:"list,omitempty"`
	Raw           json.RawMessage            `json:"raw,omitempty"`
	Any           any                        `json:"any,omitempty"`
	Free          map[string]json.RawMessage `json:"free,omitempty"`
	When          time.Time                  `json:"when,omitzero"`
	Untagged      string
	Hidden        string `json:"-"`
}

// TestDecodeConfigExactKeys: a backend-native section's keys match the
// config's fields exactly, at any depth. Before, DecodeConfig used
// encoding/json's case-insensitive matching, so an eino: or adk:
// section took "Max_Iterations", "MAX_ITERATIONS" or "Checkpoint:
// {Driver: memory}" as the fields they spell up to case (the last of
// two spellings winning), though the sections are documented as decoded
// strictly. Now such a key is an unknown key, refused with its path.
func TestDecodeConfigExactKeys(t *testing.T) {
	for _, tc := range []struct{ raw, path string }{
		{`{"Max_Iterations":1}`, `"Max_Iterations"`},
		{`{"max_iterations":5,"MAX_ITERATIONS":500}`, `"MAX_ITERATIONS"`},
		{`{"Checkpoint":{"Driver":"memory"}}`, `"Checkpoint"`},
		{`{"checkpoint":{"Driver":"memory"}}`, `"checkpoint.Driver"`},
		{`{"ptr":{"dir":"x","DIR":"y"}}`, `"ptr.DIR"`},
		{`{"named":{"a":{"driver":"m"},"b":{"Driver":"m"}}}`, `"named[\"b\"].Driver"`},
		{`{"list":[{"driver":"m"},{"drivEr":"m"}]}`, `"list[1].drivEr"`},
		{`{"Shared":"x"}`, `"Shared"`},
		{`{"untagged":"x"}`, `"untagged"`},
		{`{"hidden":"x"}`, `"hidden"`},
		{`{"modle":"m"}`, `"modle"`},
		{`{"checkpoint":{"nope":1}}`, `"checkpoint.nope"`},
	} {
		var cfg exactConfig
		err := (&adapter.Agent{ID: "a", Backend: "eino", Config: json.RawMessage(tc.raw)}).DecodeConfig(&cfg)
		if !errors.Is(err, adapter.ErrInvalidConfig) || !strings.Contains(err.Error(), "unknown key "+tc.path) {
			t.Errorf("%s: %v, want an unknown key %s", tc.raw, err, tc.path)
		}
	}
	if err := (&adapter.Agent{ID: "a", Backend: "eino", Config: json.RawMessage(`{"Max_Iterations":1}`)}).DecodeConfig(&exactConfig{}); err == nil ||
		!strings.Contains(err.Error(), `"max_iterations"`) {
		t.Errorf("the error does not name the field the key misspells: %v", err)
	}
}

// TestDecodeConfigExactKeysAccepted: what exact keys decode to is what
// encoding/json with unknown fields refused decodes them to, values
// that decode themselves (json.RawMessage, time.Time), interfaces and
// maps' own keys keeping any spelling.
func TestDecodeConfigExactKeysAccepted(t *testing.T) {
	for _, raw := range []string{
		``, `null`, `{}`,
		`{"max_iterations":5,"checkpoint":{"driver":"file","dir":"d"},"ptr":{"dir":"x"},"shared":"s"}`,
		`{"named":{"Any Key":{"driver":"m"},"B":{}},"list":[{"driver":"m"},{}],"raw":{"Whatever":1}}`,
		`{"any":{"Max_Iterations":1},"free":{"X":{"Y":2}},"when":"2026-01-02T03:04:05Z","Untagged":"u"}`,
		`{"max\u005fiterations":3}`, `{"list":null,"named":null,"ptr":null}`,
	} {
		var got, want exactConfig
		err := (&adapter.Agent{ID: "a", Backend: "eino", Config: json.RawMessage(raw)}).DecodeConfig(&got)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if strings.TrimSpace(raw) != "" && raw != "null" {
			dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&want); err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v, encoding/json %+v", raw, got, want)
		}
	}
	// Malformed sections are still the decoder's to report.
	for _, raw := range []string{`{`, `[1]`, `{"max_iterations":"x"}`, `{"list":{"driver":1}}`} {
		if err := (&adapter.Agent{ID: "a", Backend: "eino", Config: json.RawMessage(raw)}).DecodeConfig(&exactConfig{}); !errors.Is(err, adapter.ErrInvalidConfig) {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
