package spectest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/llm"
)

// DirEnv names the environment variable that points at the spec
// checkout.
const DirEnv = "ARMATURE_SPEC_DIR"

// Dir returns the OpenArmature spec checkout: $ARMATURE_SPEC_DIR, or
// shared/openarmature-spec beside the module root (the nearest directory
// at or above the working directory holding a go.mod), as a path relative
// to the working directory. The test skips when the checkout is missing,
// except under CI, where it fails.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(DirEnv)
	if dir == "" {
		root := "."
		for i := 0; i < 16; i++ {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			root = filepath.Join(root, "..")
		}
		dir = filepath.Join(root, "..", "shared", "openarmature-spec")
	}
	if _, err := os.Stat(filepath.Join(dir, "spec", "llm-provider")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("spec fixtures not found at %s: %v", dir, err)
		}
		t.Skipf("spec fixtures not found at %s", dir)
	}
	return dir
}

// Fixture is one llm-provider conformance fixture file.
type Fixture struct {
	// Path is the file's path.
	Path string
	// Name is the file's base name without ".yaml".
	Name string
	// Data is the file's content.
	Data []byte
}

// Fixtures reads the llm-provider conformance fixtures of [Dir], in name
// order. The test fails when there are none.
func Fixtures(t testing.TB) []Fixture {
	t.Helper()
	dir := filepath.Join(Dir(t), "spec", "llm-provider", "conformance")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	out := make([]Fixture, 0, len(files))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Fixture{Path: file, Name: strings.TrimSuffix(filepath.Base(file), ".yaml"), Data: data})
	}
	return out
}

// MatchJSON compares an expected decoded JSON value with an actual one
// exactly (same object members, same array lengths), except that the
// string "*" in want matches any non-empty string. It returns nil or the
// first difference, located under path; object members are visited in
// name order.
func MatchJSON(path string, want, got any) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %s, want an object", path, jsonText(got))
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			wv, wok := w[k]
			gv, gok := g[k]
			switch {
			case !wok:
				return fmt.Errorf("%s.%s: unexpected member %s", path, k, jsonText(gv))
			case !gok:
				return fmt.Errorf("%s.%s: missing", path, k)
			}
			if err := MatchJSON(path+"."+k, wv, gv); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %s, want %s", path, jsonText(got), jsonText(want))
		}
		for i := range w {
			if err := MatchJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); err != nil {
				return err
			}
		}
		return nil
	case string:
		if g, ok := got.(string); ok && w == "*" && g != "" {
			return nil
		}
	}
	if !llm.JSONEqual(want, got) {
		return fmt.Errorf("%s: got %s, want %s", path, jsonText(got), jsonText(want))
	}
	return nil
}

// RawJSON returns a cmp option that compares json.RawMessage values as
// JSON (an empty value equals only an empty one).
func RawJSON() cmp.Option {
	return cmp.Comparer(func(a, b json.RawMessage) bool {
		if len(a) == 0 || len(b) == 0 {
			return len(a) == len(b)
		}
		return llm.JSONEqual(a, b)
	})
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// CheckSeparateSystem checks a wire mapping's handling of
// [llm.Request.System] and asides ([llm.AsideFilter]): for conversations
// with and without a system prompt, with tool-call groups holding asides,
// body (the mapping's request encoder) must give the request that carries
// its system prompt in System and its history as stored the same bytes
// as the request whose Messages are the conversation as it goes on the
// wire ([llm.Request.Transcript]). cfg is the requests' config (Anthropic
// needs max_tokens).
func CheckSeparateSystem(t *testing.T, cfg llm.Config, body func(*llm.Request) ([]byte, error)) {
	t.Helper()
	call := func(id string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
	}
	tools := []llm.Tool{{Name: "get_weather", Description: "Weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
	grouped := []llm.Message{
		llm.UserText("Weather in Paris and Oslo?"),
		llm.AssistantToolCalls(call("c1"), call("c2")),
		llm.AssistantText("I need your approval to call get_weather."),
		llm.ToolResult("c1", "Sunny"),
		llm.AssistantText("I need your approval again."),
		llm.ToolResult("c2", "Rain"),
		llm.AssistantText("Sunny in Paris, rain in Oslo."),
		llm.UserText("And tomorrow?"),
		llm.AssistantToolCalls(call("c3")),
		llm.AssistantText("Approve?"),
		llm.ToolResult("c3", "Snow"),
	}
	for _, tc := range []struct {
		name   string
		system string
		msgs   []llm.Message
		wire   int // messages on the wire, the system prompt included
	}{
		{"system, one user message", "Be brief.", []llm.Message{llm.UserText("Hi")}, 2},
		{"system, assistant first", "Be brief.", []llm.Message{llm.AssistantText("Hello!"), llm.UserText("Hi")}, 3},
		{"system, groups with asides", "Be brief.", grouped, 9},
		{"no system, groups with asides", "", grouped, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &llm.Request{System: tc.system, Messages: tc.msgs, Tools: tools, Config: cfg}
			want := &llm.Request{Messages: req.Transcript(), Tools: tools, Config: cfg}
			if len(want.Messages) != tc.wire {
				t.Fatalf("Transcript has %d messages, want %d", len(want.Messages), tc.wire)
			}
			got, err := body(req)
			if err != nil {
				t.Fatal(err)
			}
			wantBody, err := body(want)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(wantBody) {
				t.Errorf("body with System and asides:\n%s\nwant (the transcript):\n%s", got, wantBody)
			}
		})
	}
}
