package anthropic_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
	"github.com/armature-go/armature/llm/internal/spectest"
)

// The files in testdata/fixtures are the exchanges of the llm-provider
// conformance fixtures with "mapping: anthropic" (§8.2), transcribed to
// JSON: per case the scripted responses of the mock server, and per call
// the OA-level request, the expected wire request and the expected
// outcome. The test replays them against an in-process server; it never
// touches the network.

type fixtureFile struct {
	Fixture string        `json:"fixture"`
	Cases   []fixtureCase `json:"cases"`
}

type fixtureCase struct {
	Name         string          `json:"name"`
	Capabilities map[string]any  `json:"capabilities"`
	Responses    []scriptedReply `json:"responses"`
	Calls        []fixtureCall   `json:"calls"`
	Identical    []int           `json:"identical"`
}

type scriptedReply struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

type fixtureCall struct {
	Request    json.RawMessage `json:"request"`
	Wire       map[string]any  `json:"wire"`
	AbsentKeys []string        `json:"absent_keys"`
	Expected   struct {
		Raises *struct {
			Category string `json:"category"`
		} `json:"raises"`
		Response   map[string]json.RawMessage `json:"response"`
		Invariants map[string]bool            `json:"invariants"`
	} `json:"expected"`
}

// mockServer replays scripted replies in order and records every request
// body.
type mockServer struct {
	*httptest.Server
	mu      sync.Mutex
	replies []scriptedReply
	bodies  [][]byte
	headers []http.Header
	overrun int
}

func newMockServer(t testing.TB, replies []scriptedReply) *mockServer {
	m := &mockServer{replies: replies}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		defer m.mu.Unlock()
		m.bodies = append(m.bodies, body)
		m.headers = append(m.headers, r.Header.Clone())
		if len(m.replies) == 0 {
			m.overrun++
			http.Error(w, `{"type":"error","error":{"type":"api_error","message":"no scripted reply"}}`, http.StatusTeapot)
			return
		}
		rep := m.replies[0]
		m.replies = m.replies[1:]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_, _ = w.Write(rep.Body)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *mockServer) requests() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.bodies)
}

// decodeRequest builds an llm.Request from a fixture's OA-level call.
func decodeRequest(t testing.TB, raw json.RawMessage) *llm.Request {
	t.Helper()
	var in struct {
		Messages       []llm.Message   `json:"messages"`
		Tools          []llm.Tool      `json:"tools"`
		ToolChoice     json.RawMessage `json:"tool_choice"`
		Config         map[string]any  `json:"config"`
		ResponseSchema json.RawMessage `json:"response_schema"`
		Stream         bool            `json:"stream"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("fixture request: %v", err)
	}
	req := &llm.Request{Messages: in.Messages, Tools: in.Tools, ResponseSchema: in.ResponseSchema, Stream: in.Stream}
	if len(in.ToolChoice) > 0 {
		var mode string
		if json.Unmarshal(in.ToolChoice, &mode) == nil {
			req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceMode(mode)}
		} else {
			var f struct{ Type, Name string }
			if err := json.Unmarshal(in.ToolChoice, &f); err != nil {
				t.Fatalf("tool_choice: %v", err)
			}
			req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceMode(f.Type), Name: f.Name}
		}
	}
	c := &req.Config
	for k, v := range in.Config {
		switch k {
		case "temperature":
			c.Temperature = new(v.(float64))
		case "top_p":
			c.TopP = new(v.(float64))
		case "frequency_penalty":
			c.FrequencyPenalty = new(v.(float64))
		case "presence_penalty":
			c.PresencePenalty = new(v.(float64))
		case "max_tokens":
			c.MaxTokens = new(int(v.(float64)))
		case "seed":
			c.Seed = new(int64(v.(float64)))
		case "stop_sequences":
			for _, s := range v.([]any) {
				c.StopSequences = append(c.StopSequences, s.(string))
			}
		case "extras":
			c.Extras = v.(map[string]any)
		default:
			t.Fatalf("config key %q", k)
		}
	}
	return req
}

func TestFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/fixtures/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var ff fixtureFile
		if err := json.Unmarshal(data, &ff); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, fc := range ff.Cases {
			name := ff.Fixture
			if fc.Name != ff.Fixture {
				name += "/" + fc.Name
			}
			t.Run(name, func(t *testing.T) { runFixtureCase(t, fc) })
		}
	}
}

func runFixtureCase(t *testing.T, fc fixtureCase) {
	srv := newMockServer(t, fc.Responses)
	model := "claude-test"
	for _, c := range fc.Calls {
		if m, ok := c.Wire["model"].(string); ok {
			model = m
		}
	}
	mode := anthropic.StructuredNative
	if v, ok := fc.Capabilities["supports_native_structured_output"].(bool); ok && !v {
		mode = anthropic.StructuredTool
	}
	p, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "sk-ant-fixture-key", Model: model, StructuredOutput: mode})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range fc.Calls {
		before := len(srv.requests())
		req := decodeRequest(t, c.Request)
		resp, err := llm.Complete(context.Background(), p, req)
		sent := srv.requests()[before:]
		if r := c.Expected.Raises; r != nil {
			if got := errcat.Of(err); string(got) != r.Category {
				t.Fatalf("call %d: error %v (category %q), want category %q", i, err, got, r.Category)
			}
			if strings.Contains(err.Error(), "sk-ant-fixture-key") {
				t.Errorf("call %d: the API key leaked into the error: %v", i, err)
			}
			if len(fc.Responses) == 0 && len(sent) > 0 {
				t.Errorf("call %d: a pre-send rejection sent %d request(s)", i, len(sent))
			}
			continue
		}
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(sent) != 1 {
			t.Fatalf("call %d: %d requests sent, want 1", i, len(sent))
		}
		var body map[string]any
		if err := json.Unmarshal(sent[0], &body); err != nil {
			t.Fatalf("call %d: wire body is not JSON: %v\n%s", i, err, sent[0])
		}
		if c.Wire != nil {
			if err := spectest.MatchJSON("wire", c.Wire, body); err != nil {
				t.Errorf("call %d: %v\nbody: %s", i, err, sent[0])
			}
		}
		for _, k := range c.AbsentKeys {
			if _, ok := body[k]; ok {
				t.Errorf("call %d: wire body has %q: %s", i, k, sent[0])
			}
		}
		checkResponse(t, i, c, resp)
	}
	if len(fc.Identical) > 0 {
		reqs := srv.requests()
		for _, j := range fc.Identical[1:] {
			if string(reqs[j]) != string(reqs[fc.Identical[0]]) {
				t.Errorf("wire bytes differ between calls %d and %d:\n%s\n%s", fc.Identical[0], j, reqs[fc.Identical[0]], reqs[j])
			}
		}
	}
}

func checkResponse(t *testing.T, i int, c fixtureCall, resp *llm.Response) {
	t.Helper()
	exp := c.Expected.Response
	if v, ok := exp["finish_reason"]; ok {
		var want string
		_ = json.Unmarshal(v, &want)
		if string(resp.FinishReason) != want {
			t.Errorf("call %d: finish_reason %q, want %q", i, resp.FinishReason, want)
		}
	}
	if v, ok := exp["message"]; ok {
		var want llm.Message
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatalf("call %d: expected message: %v", i, err)
		}
		if diff := cmp.Diff(want, resp.Message, spectest.RawJSON()); diff != "" {
			t.Errorf("call %d: message (-want +got):\n%s", i, diff)
		}
	}
	if v, ok := exp["usage"]; ok {
		type counters struct {
			PromptTokens     *int `json:"prompt_tokens"`
			CompletionTokens *int `json:"completion_tokens"`
			TotalTokens      *int `json:"total_tokens"`
		}
		var want counters
		_ = json.Unmarshal(v, &want)
		got := resp.Usage
		if diff := cmp.Diff(want, counters{got.PromptTokens, got.CompletionTokens, got.TotalTokens}); diff != "" {
			t.Errorf("call %d: usage (-want +got):\n%s", i, diff)
		}
		if got.CachedTokens != nil || got.CacheCreationTokens != nil {
			t.Errorf("call %d: cache counters set: %+v", i, got)
		}
	}
	if v, ok := exp["parsed"]; ok {
		if !llm.JSONEqual(json.RawMessage(v), resp.Parsed) {
			t.Errorf("call %d: parsed %s, want %s", i, resp.Parsed, v)
		}
	}
	if v, ok := exp["raw_check"]; ok {
		var rc struct {
			RequiredKeys []string `json:"required_keys"`
		}
		_ = json.Unmarshal(v, &rc)
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(resp.Raw, &raw); err != nil {
			t.Fatalf("call %d: raw: %v", i, err)
		}
		for _, k := range rc.RequiredKeys {
			if _, ok := raw[k]; !ok {
				t.Errorf("call %d: raw lacks %q", i, k)
			}
		}
	}
	if c.Expected.Invariants["raw_usage_input_tokens_verbatim_malformed"] {
		var raw struct {
			Usage struct {
				InputTokens json.RawMessage `json:"input_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal(resp.Raw, &raw)
		if string(raw.Usage.InputTokens) != `"abc"` {
			t.Errorf("call %d: raw usage.input_tokens = %s, want \"abc\"", i, raw.Usage.InputTokens)
		}
	}
}
