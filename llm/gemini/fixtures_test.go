package gemini_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/llm/internal/spectest"
)

// exchange is one request the mock server received.
type exchange struct {
	Path   string
	Header http.Header
	Body   []byte
}

// scripted is one canned answer.
type scripted struct {
	Status  int               `yaml:"status"`
	Body    any               `yaml:"body"`
	Headers map[string]string `yaml:"headers"`
}

// mockServer replays canned answers in order and records the requests:
// an in-process stand-in for the Gemini API (never the network).
type mockServer struct {
	*httptest.Server
	mu    sync.Mutex
	queue []scripted
	got   []exchange
}

func newMock(t testing.TB, answers ...scripted) *mockServer {
	m := &mockServer{queue: answers}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.got = append(m.got, exchange{Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
		if len(m.queue) == 0 {
			m.mu.Unlock()
			http.Error(w, `{"error":{"code":418,"message":"mock: no scripted answer left","status":"FAILED_PRECONDITION"}}`, http.StatusTeapot)
			return
		}
		s := m.queue[0]
		m.queue = m.queue[1:]
		m.mu.Unlock()
		for k, v := range s.Headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		status := s.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		switch b := s.Body.(type) {
		case string:
			_, _ = io.WriteString(w, b)
		case json.RawMessage:
			_, _ = w.Write(b)
		default:
			data, _ := json.Marshal(b)
			_, _ = w.Write(data)
		}
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *mockServer) requests() []exchange {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]exchange(nil), m.got...)
}

// fixtureCall is a complete() call of a fixture with its expectations.
type fixtureCall struct {
	Operation      string         `yaml:"operation"`
	Messages       any            `yaml:"messages"`
	Tools          any            `yaml:"tools"`
	ToolChoice     any            `yaml:"tool_choice"`
	Config         map[string]any `yaml:"config"`
	ResponseSchema any            `yaml:"response_schema"`
	Stream         bool           `yaml:"stream"`
	ExpectedWire   any            `yaml:"expected_wire_request"`
	Expected       expectation    `yaml:"expected"`
}

type expectation struct {
	Raises *struct {
		Category string `yaml:"category"`
	} `yaml:"raises"`
	Response map[string]any `yaml:"response"`
}

type mockSpec struct {
	Capabilities map[string]any `yaml:"capabilities"`
	Responses    []scripted     `yaml:"responses"`
}

type fixtureFile struct {
	Mapping string        `yaml:"mapping"`
	Mock    mockSpec      `yaml:"mock_provider"`
	Calls   []fixtureCall `yaml:"calls"`
	Cases   []struct {
		Name         string      `yaml:"name"`
		Call         fixtureCall `yaml:"call"`
		Mock         mockSpec    `yaml:"mock_provider"`
		ExpectedWire any         `yaml:"expected_wire_request"`
		Expected     expectation `yaml:"expected"`
	} `yaml:"cases"`
}

// TestSpecFixtures drives every llm-provider fixture whose mapping is
// gemini against an in-process mock of the API: each call's wire request
// (body, plus the model from the URL path) must equal
// expected_wire_request ("*" matches any non-empty string), and its
// result the expected response or error category.
func TestSpecFixtures(t *testing.T) {
	ran := 0
	for _, file := range spectest.Fixtures(t) {
		var f fixtureFile
		if err := yaml.Unmarshal(file.Data, &f); err != nil {
			t.Fatalf("%s: %v", file.Path, err)
		}
		if f.Mapping != "gemini" {
			continue
		}
		name := file.Name
		ran++
		t.Run(name, func(t *testing.T) {
			if len(f.Calls) > 0 {
				m := newMock(t, f.Mock.Responses...)
				p := newFixtureProvider(t, m, f.Mock.Capabilities)
				for i, c := range f.Calls {
					t.Run(fmt.Sprintf("call%d", i+1), func(t *testing.T) {
						runCall(t, p, m, c, c.ExpectedWire, c.Expected)
					})
				}
				return
			}
			for _, cs := range f.Cases {
				t.Run(cs.Name, func(t *testing.T) {
					m := newMock(t, cs.Mock.Responses...)
					p := newFixtureProvider(t, m, cs.Mock.Capabilities)
					wire, exp := cs.ExpectedWire, cs.Expected
					if wire == nil {
						wire = cs.Call.ExpectedWire
					}
					if exp.Raises == nil && exp.Response == nil {
						exp = cs.Call.Expected
					}
					runCall(t, p, m, cs.Call, wire, exp)
				})
			}
		})
	}
	if ran < 10 {
		t.Fatalf("ran %d gemini fixtures, want at least 10", ran)
	}
}

func newFixtureProvider(t *testing.T, m *mockServer, caps map[string]any) *gemini.Provider {
	t.Helper()
	mode := gemini.StructuredNative
	if v, ok := caps["supports_native_structured_output"].(bool); ok && !v {
		mode = gemini.StructuredPrompt
	}
	p, err := gemini.New(gemini.Config{BaseURL: m.URL, APIKey: "AIza-conformance-key", Model: "gemini-test", StructuredOutput: mode})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func runCall(t *testing.T, p *gemini.Provider, m *mockServer, c fixtureCall, wantWire any, exp expectation) {
	t.Helper()
	before := len(m.requests())
	req := fixtureRequest(t, c)
	resp, err := llm.Complete(context.Background(), p, req)
	reqs := m.requests()[before:]
	if wantWire != nil {
		if len(reqs) != 1 {
			t.Fatalf("sent %d requests, want 1", len(reqs))
		}
		got := wireView(t, reqs[0])
		if err := spectest.MatchJSON("", normalize(wantWire), got); err != nil {
			t.Errorf("wire request mismatch: %v\ngot: %s", err, mustJSON(got))
		}
	}
	if exp.Raises != nil {
		if err == nil {
			t.Fatalf("no error, want category %s", exp.Raises.Category)
		}
		if got := errcat.Of(err); string(got) != exp.Raises.Category {
			t.Fatalf("error category %q (%v), want %q", got, err, exp.Raises.Category)
		}
		return
	}
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	checkResponse(t, resp, exp.Response)
}

// wireView is the recorded request as the fixtures state it: the JSON
// body plus "model", which Gemini carries in the URL path.
func wireView(t *testing.T, ex exchange) map[string]any {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(ex.Body, &body); err != nil {
		t.Fatalf("request body is not a JSON object: %v: %s", err, ex.Body)
	}
	const prefix = "/v1beta/models/"
	path, _, _ := strings.Cut(ex.Path, "?")
	model, ok := strings.CutSuffix(strings.TrimPrefix(path, prefix), ":generateContent")
	if !strings.HasPrefix(path, prefix) || !ok {
		t.Fatalf("request path %q is not %s{model}:generateContent", ex.Path, prefix)
	}
	body["model"] = model
	return body
}

func fixtureRequest(t *testing.T, c fixtureCall) *llm.Request {
	t.Helper()
	req := &llm.Request{Stream: c.Stream}
	if err := json.Unmarshal(mustJSON(normalize(c.Messages)), &req.Messages); err != nil {
		t.Fatalf("messages: %v", err)
	}
	if c.Tools != nil {
		if err := json.Unmarshal(mustJSON(normalize(c.Tools)), &req.Tools); err != nil {
			t.Fatalf("tools: %v", err)
		}
	}
	switch tc := c.ToolChoice.(type) {
	case nil:
	case string:
		req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceMode(tc)}
	case map[string]any:
		name, _ := tc["name"].(string)
		req.ToolChoice = llm.ForceTool(name)
	default:
		t.Fatalf("tool_choice %v", tc)
	}
	if c.ResponseSchema != nil {
		req.ResponseSchema = mustJSON(normalize(c.ResponseSchema))
	}
	req.Config = fixtureConfig(t, c.Config)
	return req
}

func fixtureConfig(t *testing.T, m map[string]any) llm.Config {
	t.Helper()
	var c llm.Config
	for k, v := range m {
		switch k {
		case "temperature":
			c.Temperature = new(toFloat(v))
		case "top_p":
			c.TopP = new(toFloat(v))
		case "frequency_penalty":
			c.FrequencyPenalty = new(toFloat(v))
		case "presence_penalty":
			c.PresencePenalty = new(toFloat(v))
		case "max_tokens":
			c.MaxTokens = new(int(toFloat(v)))
		case "seed":
			c.Seed = new(int64(toFloat(v)))
		case "stop_sequences":
			for _, s := range v.([]any) {
				c.StopSequences = append(c.StopSequences, s.(string))
			}
		case "extras":
			c.Extras = normalize(v).(map[string]any)
		default:
			if c.Extras == nil {
				c.Extras = map[string]any{}
			}
			c.Extras[k] = normalize(v)
		}
	}
	return c
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case float64:
		return x
	}
	panic(fmt.Sprintf("not a number: %v", v))
}

// normalize turns a YAML-decoded value into its JSON-decoded form
// (float64 numbers, map[string]any objects).
func normalize(v any) any {
	var out any
	if err := json.Unmarshal(mustJSON(v), &out); err != nil {
		panic(err)
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// checkResponse compares the members the fixture states.
func checkResponse(t *testing.T, resp *llm.Response, want map[string]any) {
	t.Helper()
	for k, v := range want {
		switch k {
		case "message":
			var msg llm.Message
			if err := json.Unmarshal(mustJSON(normalize(v)), &msg); err != nil {
				t.Fatalf("expected message: %v", err)
			}
			if diff := cmp.Diff(msg, resp.Message, spectest.RawJSON()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		case "finish_reason":
			if string(resp.FinishReason) != v {
				t.Errorf("finish_reason %q, want %q", resp.FinishReason, v)
			}
		case "parsed":
			if !llm.JSONEqual(mustJSON(normalize(v)), resp.Parsed) {
				t.Errorf("parsed %s, want %s", resp.Parsed, mustJSON(v))
			}
		case "usage":
			got := map[string]any{}
			u := resp.Usage
			for name, p := range map[string]*int{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens} {
				if p != nil {
					got[name] = *p
				} else {
					got[name] = nil
				}
			}
			if !llm.JSONEqual(mustJSON(normalize(v)), mustJSON(got)) {
				t.Errorf("usage %s, want %s", mustJSON(got), mustJSON(v))
			}
		default:
			t.Errorf("unchecked expected.response member %q", k)
		}
	}
}

const okBody = `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4}}`
