package llm_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/spectest"
)

// fixtureCall is the part of a fixture call this package can check: the
// request messages and tools, and whether the call must be rejected with
// provider_invalid_request.
type fixtureCall struct {
	Operation string `yaml:"operation"`
	Messages  any    `yaml:"messages"`
	Tools     any    `yaml:"tools"`
	Expected  struct {
		Raises *struct {
			Category string `yaml:"category"`
		} `yaml:"raises"`
	} `yaml:"expected"`
}

type fixtureFile struct {
	Calls []fixtureCall `yaml:"calls"`
	Cases []struct {
		Name string      `yaml:"name"`
		Call fixtureCall `yaml:"call"`
		// Table cases put expected beside call.
		Expected struct {
			Raises *struct {
				Category string `yaml:"category"`
			} `yaml:"raises"`
		} `yaml:"expected"`
	} `yaml:"cases"`
}

// TestSpecFixtures runs every complete() call of the llm-provider fixtures
// through JSON decoding and ValidateMessages: the pre-send message
// validation cases (003, 014, 015, 017-020) must fail with
// provider_invalid_request, and every other call's messages and tools must
// decode and validate.
func TestSpecFixtures(t *testing.T) {
	checked := 0
	for _, file := range spectest.Fixtures(t) {
		var f fixtureFile
		if err := yaml.Unmarshal(file.Data, &f); err != nil {
			t.Fatalf("%s: %v", file.Path, err)
		}
		base := file.Name
		var calls []namedCall
		for i, c := range f.Calls {
			calls = append(calls, namedCall{base + "/call" + itoa(i), c})
		}
		for _, c := range f.Cases {
			call := c.Call
			if call.Expected.Raises == nil {
				call.Expected = c.Expected
			}
			calls = append(calls, namedCall{base + "/" + c.Name, call})
		}
		for _, c := range calls {
			if c.call.Messages == nil {
				continue
			}
			checked++
			t.Run(c.name, func(t *testing.T) { checkFixtureCall(t, c.name, c.call) })
		}
	}
	if checked < 50 {
		t.Errorf("only %d fixture calls checked", checked)
	}
}

type namedCall struct {
	name string
	call fixtureCall
}

// ours lists the fixtures whose calls this package must reject: the
// pre-send message-shape validation cases. Every other fixture's messages
// and tools are valid, including those rejected for reasons outside the
// message model (tool_choice, a mapping's configuration, a capability).
var ours = map[string]bool{
	"003-message-validation":                             true,
	"014-content-blocks-validation-empty-sequence":       true,
	"015-content-blocks-validation-empty-text-block":     true,
	"017-content-blocks-system-message-text-only":        true,
	"018-content-blocks-image-source-missing":            true,
	"019-content-blocks-invalid-detail-value":            true,
	"020-content-blocks-inline-image-missing-media-type": true,
}

func checkFixtureCall(t *testing.T, name string, call fixtureCall) {
	msgsJSON, err := json.Marshal(call.Messages)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	decodeErr := json.Unmarshal(msgsJSON, &msgs)
	var tools []llm.Tool
	if call.Tools != nil {
		toolsJSON, err := json.Marshal(call.Tools)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(toolsJSON, &tools); err != nil {
			t.Fatalf("tools %s: %v", toolsJSON, err)
		}
	}
	wantInvalid := ours[strings.SplitN(name, "/", 2)[0]]
	if wantInvalid && (call.Expected.Raises == nil || call.Expected.Raises.Category != string(errcat.ProviderInvalidRequest)) {
		t.Fatalf("fixture %s no longer expects provider_invalid_request", name)
	}
	if decodeErr != nil {
		if !wantInvalid {
			t.Fatalf("messages %s: %v", msgsJSON, decodeErr)
		}
		return
	}
	err = llm.ValidateMessages(msgs, tools)
	switch {
	case wantInvalid && err == nil:
		t.Errorf("ValidateMessages accepted %s", msgsJSON)
	case wantInvalid && !errors.Is(err, errcat.ProviderInvalidRequest):
		t.Errorf("ValidateMessages error %v is not provider_invalid_request", err)
	case !wantInvalid && err != nil:
		t.Errorf("ValidateMessages rejected %s: %v", msgsJSON, err)
	}
	// Whatever decodes re-encodes to a fixed point.
	out, err := json.Marshal(msgs)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	var again []llm.Message
	if err := json.Unmarshal(out, &again); err != nil {
		t.Fatalf("Unmarshal(Marshal): %v", err)
	}
	if out2, _ := json.Marshal(again); string(out2) != string(out) {
		t.Errorf("canonical form not stable:\n%s\n%s", out, out2)
	}
}
