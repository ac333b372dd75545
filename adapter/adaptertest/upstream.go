package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
	"github.com/armature-go/armature/session"
)

// AnthropicEndpoint serves an Anthropic Messages endpoint that answers
// every request with the assistant text "hi" (as a stream of events when
// the request asks to stream), for t's duration. It
// returns its base URL (anthropic.Config.BaseURL) and a function that
// returns the request bodies received so far, decoded: what a bridged
// model really sent, through Armature's own Anthropic client.
func AnthropicEndpoint(t testing.TB) (url string, requests func() []map[string]any) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []map[string]any
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
		if body["stream"] == true {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range []string{
				`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,"output_tokens":0}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`,
				`{"type":"message_stop"}`,
			} {
				var typ struct{ Type string }
				_ = json.Unmarshal([]byte(ev), &typ)
				_, _ = w.Write([]byte("event: " + typ.Type + "\ndata: " + ev + "\n\n"))
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],` +
			`"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), got...)
	}
}

// ProviderFunc is an llm.Provider that calls itself with each request
// and answers "ok": a model bridge's test sees the request the bridge
// built.
type ProviderFunc func(*llm.Request)

// Ready implements llm.Provider.
func (f ProviderFunc) Ready(context.Context) error { return nil }

// Complete implements llm.Provider.
func (f ProviderFunc) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	f(req)
	return &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}

// CheckBridge checks how an adapter of backend, built by f, bridges the
// workspace agent's model (adapter.Agent.Provider) to its upstream, once
// per backend-native section given (none: one run without a section):
//
//   - the workspace's model settings (adapter.Agent.Sampling) reach every
//     call: a turn on Armature's Anthropic client, whose mapping requires
//     max_tokens, completes and sends the settings;
//   - a call's failure keeps its category through the upstream's own
//     error wrapping (errors.Is on errcat.ProviderRateLimit, errors.As
//     on *llm.ProviderError), so the turn fails in the right bucket.
func CheckBridge(t *testing.T, backend string, f adapter.Factory, sections ...string) {
	t.Helper()
	if len(sections) == 0 {
		sections = []string{""}
	}
	ctx := context.Background()
	drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	run := func(t *testing.T, ag *adapter.Agent) (*adapter.Result, error) {
		t.Helper()
		a, err := f(ctx, adapter.FactoryRequest{Agent: ag})
		if err != nil {
			t.Fatal(err)
		}
		return a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello")}, drop)
	}
	for _, section := range sections {
		t.Run("section "+section, func(t *testing.T) {
			url, bodies := AnthropicEndpoint(t)
			p, err := anthropic.New(anthropic.Config{BaseURL: url, APIKey: "test-key", Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			res, err := run(t, &adapter.Agent{ID: "x", Backend: backend, Model: "m", Provider: p, Config: json.RawMessage(section),
				Sampling: llm.Config{MaxTokens: new(1024), Temperature: new(0.5)}})
			if err != nil {
				t.Fatalf("a turn on the anthropic provider: %v", err)
			}
			if res.Output == nil || res.Output.Text != "hi" {
				t.Fatalf("turn: %+v", res)
			}
			if got := bodies(); len(got) != 1 || got[0]["max_tokens"] != float64(1024) || got[0]["temperature"] != 0.5 {
				t.Fatalf("requests: %v, want max_tokens 1024 and temperature 0.5", got)
			}
			_, err = run(t, &adapter.Agent{ID: "x", Backend: backend, Provider: rateLimited{}, Config: json.RawMessage(section)})
			var pe *llm.ProviderError
			if !errors.Is(err, errcat.ProviderRateLimit) || !errors.As(err, &pe) || pe.StatusCode != http.StatusTooManyRequests {
				t.Errorf("the turn failed with %v, want the model's provider_rate_limit", err)
			}
		})
	}
}

// rateLimited is a model that answers every call with a 429.
type rateLimited struct{}

func (rateLimited) Ready(context.Context) error { return nil }

func (rateLimited) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, &llm.ProviderError{Cat: errcat.ProviderRateLimit, Provider: "openai", Op: "complete",
		StatusCode: http.StatusTooManyRequests, Message: "slow down"}
}

// CheckInstructions checks that an adapter of backend, built by f on a
// workspace agent whose model (adapter.Agent.Provider) is bridged to its
// upstream, gives a turn's model calls the turn's per-request
// instructions (agent.WithInstructions, adapter.Request.Instructions) in
// place of the agent's instruction (adapter.Agent.System), as a native
// agent does, through the adapter's chat graph: a turn with
// instructions sends them and not the agent's; the next turn without
// them sends the agent's again; a turn with empty instructions sends
// neither. The upstream may add system text of its own (ADK-Go names
// the agent): the check looks for the instructions in the system
// prompt, not for the prompt itself. section is the backend-native
// section ("" none).
func CheckInstructions(t *testing.T, backend string, f adapter.Factory, section string) {
	t.Helper()
	ctx := context.Background()
	const own, given = "You are the workspace agent.", "Answer in French."
	var (
		mu      sync.Mutex
		systems []string
	)
	p := ProviderFunc(func(req *llm.Request) {
		mu.Lock()
		systems = append(systems, req.System)
		mu.Unlock()
	})
	ag := &adapter.Agent{ID: "x", Backend: backend, Model: "m", System: own, Provider: p}
	if section != "" {
		ag.Config = json.RawMessage(section)
	}
	a, err := f(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := a.(interface{ Close() error }); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	h := Harness(t, a, ag, session.NewMemoryStore(session.MemoryConfig{}))
	for _, tc := range []struct {
		name         string
		instructions *string
		want         string   // in every call's system prompt
		not          []string // in none
	}{
		{name: "with instructions", instructions: new(given), want: given, not: []string{own}},
		{name: "next turn without", want: own, not: []string{given}},
		{name: "empty instructions", instructions: new(""), not: []string{own, given}},
		{name: "again without", want: own, not: []string{given}},
	} {
		tctx := ctx
		if tc.instructions != nil {
			tctx = agent.WithInstructions(ctx, *tc.instructions)
		}
		mu.Lock()
		systems = nil
		mu.Unlock()
		out, err := h.Send(tctx, "acme/s", llm.UserText("hello"))
		if _, ok := out.(*chat.Completed); !ok || err != nil {
			t.Fatalf("%s: %#v %v", tc.name, out, err)
		}
		mu.Lock()
		got := slices.Clone(systems)
		mu.Unlock()
		if len(got) == 0 {
			t.Fatalf("%s: no model call", tc.name)
		}
		for _, s := range got {
			if !strings.Contains(s, tc.want) || slices.ContainsFunc(tc.not, func(n string) bool { return strings.Contains(s, n) }) {
				t.Errorf("%s: a model call's system prompt %q, want %q in it and none of %q", tc.name, s, tc.want, tc.not)
			}
		}
	}
}
