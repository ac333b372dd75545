package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// newRuntime builds a server of the demo agent, not served over HTTP.
func newRuntime(t *testing.T, mutate ...func(*server.Config)) *server.Server {
	t.Helper()
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	cfg := server.Config{Agents: []*server.Agent{{ID: "demo", Chat: servertest.Harness(t, store, a), Model: demo.ModelName,
		Gateway: demo.Tools()}}, Sessions: store}
	for _, m := range mutate {
		m(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	return srv
}

// TestRuntimeInterfaces drives the server through the four runtime
// interfaces alone: submit, inspect, resume, cancel, stop.
func TestRuntimeInterfaces(t *testing.T) {
	ctx := context.Background()
	var rt adapter.Runtime = newRuntime(t)
	events, cancel := rt.Subscribe(ctx, server.DefaultTenant, "s1")
	defer cancel()

	resp, err := rt.Submit(ctx, adapter.SubmitRequest{SessionID: "s1", Message: llm.UserText("where is order 12?")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Outcome.(*chat.Completed); !ok || resp.RunID == "" || resp.SessionID != "s1" {
		t.Fatalf("Submit = %+v", resp)
	}
	run, err := rt.Run(ctx, server.DefaultTenant, resp.RunID)
	if err != nil || run.Status != runtime.StatusCompleted {
		t.Fatalf("Run = %+v, %v", run, err)
	}
	evs, err := rt.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: resp.RunID})
	if err != nil || evs[0].Type != runtime.EventRequestStarted || evs[len(evs)-1].Type != runtime.EventRequestCompleted {
		t.Fatalf("Events = %v, %v", evs, err)
	}
	if e := <-events; e.Type != runtime.EventRequestStarted || e.RunID != resp.RunID {
		t.Errorf("the subscription's first event: %+v", e)
	}

	// A minted session; a suspension resumed by a signal.
	resp, err = rt.Submit(ctx, adapter.SubmitRequest{Message: llm.UserText("refund order 12")})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := resp.Outcome.(*chat.Suspended)
	if !ok || resp.SessionID == "" {
		t.Fatalf("refund: %+v", resp)
	}
	resumed, err := rt.Submit(ctx, adapter.SubmitRequest{SessionID: resp.SessionID,
		Signal: &adapter.Signal{SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")}})
	if err != nil {
		t.Fatal(err)
	}
	if run, _ := rt.Run(ctx, server.DefaultTenant, resumed.RunID); run == nil || run.ParentID != resp.RunID || run.Status != runtime.StatusCompleted {
		t.Fatalf("resumed run: %+v", run)
	}
	list, err := rt.Runs(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: resp.SessionID})
	if err != nil || len(list.Runs) != 2 {
		t.Fatalf("Runs = %+v, %v", list, err)
	}

	// Cancelling a suspended run; an unknown run.
	resp, _ = rt.Submit(ctx, adapter.SubmitRequest{SessionID: "s2", Message: llm.UserText("refund order 3")})
	if ok, err := rt.Cancel(ctx, server.DefaultTenant, resp.RunID); !ok || err != nil {
		t.Fatalf("Cancel = %v, %v", ok, err)
	}
	if _, err := rt.Cancel(ctx, server.DefaultTenant, "nope"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Cancel(unknown) = %v", err)
	}
	if _, err := rt.Submit(ctx, adapter.SubmitRequest{Agent: "nobody", Message: llm.UserText("hi")}); err == nil {
		t.Error("an unknown agent was served")
	}

	for range 2 { // idempotent
		if err := rt.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rt.Submit(ctx, adapter.SubmitRequest{Message: llm.UserText("hi")}); !errors.Is(err, server.ErrStopped) {
		t.Errorf("Submit after Stop = %v", err)
	}
}

// TestNarration: with narration on, a tool turn records
// runtime.progress.narration events from its tool events, and the OpenAI
// stream carries them.
func TestNarration(t *testing.T) {
	ctx := context.Background()
	srv := newRuntime(t, func(c *server.Config) { c.Narration = &server.Narration{} })
	resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "n", Message: llm.UserText("where is order 12?")})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := srv.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: resp.RunID})
	var got []string
	for _, e := range evs {
		if e.Type != runtime.EventProgressNarration {
			continue
		}
		var d struct {
			Message  string   `json:"message"`
			Provider string   `json:"provider"`
			Sources  []string `json:"sourceEventTypes"`
			Style    string   `json:"style"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil || d.Provider != server.NarrationProvider || len(d.Sources) == 0 || d.Style != "concise" {
			t.Errorf("narration %s: %v", e.Data, err)
		}
		got = append(got, d.Message)
	}
	want := "Calling lookup_order…|lookup_order returned its result.|The answer is ready."
	if strings.Join(got, "|") != want {
		t.Errorf("narrations %q, want %q", got, want)
	}
	// A narration follows an event of each type it names as its source
	// (the narrator only consumes events).
	seen := map[string]bool{}
	for _, e := range evs {
		if e.Type == runtime.EventProgressNarration {
			var d struct {
				Sources []string `json:"sourceEventTypes"`
			}
			_ = json.Unmarshal(e.Data, &d)
			for _, src := range d.Sources {
				if !seen[src] {
					t.Errorf("narration %s before any %s event", e.Data, src)
				}
			}
		}
		seen[e.Type] = true
	}

	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", strings.NewReader(
		`{"model":"demo","stream":true,"messages":[{"role":"user","content":"where is order 4?"}]}`))
	req.Header.Set("Content-Type", "application/json")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(raw), "event: "+server.NarrationEvent) {
		t.Errorf("the OpenAI stream has no narration:\n%s", raw)
	}
	// Every frame's data is a chat.completion.chunk (the official SDKs
	// hand every event to the caller as one, whatever its name), the
	// narration's too, with its own fields beside.
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Object  string            `json:"object"`
			Choices []json.RawMessage `json:"choices"`
			Message string            `json:"message"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != "chat.completion.chunk" || c.Choices == nil {
			t.Errorf("a frame that is not a chunk: %s", data)
		}
	}
}

// TestDirectTools: direct tool requests are authorized per tenant.
func TestDirectTools(t *testing.T) {
	srv := newRuntime(t, func(c *server.Config) {
		c.Tokens = []server.Token{{Secret: "acme-secret-000001", Tenant: "acme"}, {Secret: "globex-secret-0001", Tenant: "globex"},
			{Secret: "ops-secret-0000001", Tenant: "ops"}}
		c.DirectTools = map[string][]string{"acme": {"lookup_order"}, "ops": {"*"}}
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, tc := range []struct {
		name, secret, path, body string
		want                     int
	}{
		{"allowed", "acme-secret-000001", "/v1/agents/demo/tools/lookup_order", `{"arguments":{"order":"1"}}`, 200},
		{"another tool", "acme-secret-000001", "/v1/agents/demo/tools/issue_refund", `{"arguments":{"order":"1","amount":1}}`, 403},
		{"no entry", "globex-secret-0001", "/v1/agents/demo/tools/lookup_order", `{}`, 403},
		{"any tool", "ops-secret-0000001", "/v1/agents/demo/tools/lookup_order", `{"arguments":{"order":"1"}}`, 200},
		{"any tool needing approval", "ops-secret-0000001", "/v1/agents/demo/tools/issue_refund", `{"arguments":{"order":"1","amount":1}}`, 403},
		{"unknown tool", "ops-secret-0000001", "/v1/agents/demo/tools/nope", `{}`, 404},
		{"unknown agent", "ops-secret-0000001", "/v1/agents/nobody/tools/lookup_order", `{}`, 404},
		{"bad arguments", "ops-secret-0000001", "/v1/agents/demo/tools/lookup_order", `{"arguments":[1]}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tc.secret)
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", r.StatusCode, tc.want, raw)
			}
			if tc.want != 200 {
				return
			}
			var out struct {
				RunID  string `json:"run_id"`
				Output string `json:"output"`
			}
			_ = json.Unmarshal(raw, &out)
			evs, err := srv.Events(context.Background(), runtime.EventsRequest{Tenant: strings.SplitN(tc.secret, "-", 2)[0], RunID: out.RunID})
			if err != nil || len(evs) != 4 || evs[1].Type != runtime.EventToolDirectStarted || evs[2].Type != runtime.EventToolDirectCompleted {
				t.Fatalf("events %v, %v", evs, err)
			}
		})
	}
}

func TestNewAdapterAgentConfig(t *testing.T) {
	store := servertest.SQLite(t)
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	native := adapter.NewNative(a)
	ag := &adapter.Agent{ID: "demo", Model: demo.ModelName, Tools: demo.Tools()}
	for name, cfg := range map[string]server.AdapterAgentConfig{
		"no adapter":  {Agent: ag, Sessions: store},
		"no agent":    {Adapter: native, Sessions: store},
		"no sessions": {Adapter: native, Agent: ag},
	} {
		if _, err := server.NewAdapterAgent(cfg); !errors.Is(err, server.ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	got, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: native, Agent: ag, Sessions: store, Records: store.Checkpoints()})
	if err != nil || got.Backend != adapter.Native || got.ID != "demo" || len(got.Gateway) != 2 || got.Chat == nil {
		t.Fatalf("NewAdapterAgent = %+v, %v", got, err)
	}
}

// Submit hands a send's chunks to OnChunk as the turn streams, in order,
// before it returns: the text chunks make the reply, and the tool call's
// progress comes before them.
func TestSubmitOnChunk(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t)
	var kinds []chat.ChunkKind
	var text strings.Builder
	resp, err := rt.Submit(ctx, adapter.SubmitRequest{SessionID: "s1", Message: llm.UserText("where is order 12?"),
		CorrelationID: "trace-1", OnChunk: func(c chat.Chunk) {
			kinds = append(kinds, c.Kind)
			if c.Kind == chat.ChunkText {
				text.WriteString(c.Text)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	done, ok := resp.Outcome.(*chat.Completed)
	if !ok {
		t.Fatalf("Submit = %+v", resp)
	}
	if got, want := text.String(), done.Replies[len(done.Replies)-1].Text(); got != want {
		t.Errorf("text chunks %q, reply %q", got, want)
	}
	tool, txt := -1, -1
	for i, k := range kinds {
		if k == chat.ChunkTool && tool < 0 {
			tool = i
		}
		if k == chat.ChunkText && txt < 0 {
			txt = i
		}
	}
	if tool < 0 || txt < 0 || tool > txt {
		t.Errorf("chunk kinds %v: want tool progress, then text", kinds)
	}
}

// gatedStore is a run store whose group commits wait for the gate, and
// that reports itself Volatile or not.
type gatedStore struct {
	*runtime.MemoryStore
	volatile bool
	gate     chan struct{}
}

func (g *gatedStore) Volatile() bool { return g.volatile }

func (g *gatedStore) WriteTurns(ctx context.Context, turns []runtime.TurnRecord) ([]runtime.Event, error) {
	<-g.gate
	return g.MemoryStore.WriteTurns(ctx, turns)
}

// TestSubmitWaitsForDurableRecords: over a store that keeps its records,
// a turn is answered once its run record is written; over a volatile one
// (runtime.Volatile: nothing survives a restart anyway) it is answered
// without waiting for the write, and its run is readable all the same.
func TestSubmitWaitsForDurableRecords(t *testing.T) {
	for _, volatile := range []bool{false, true} {
		store := &gatedStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryConfig{}), volatile: volatile, gate: make(chan struct{})}
		rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		rt := newRuntime(t, func(c *server.Config) { c.Runs = rec })
		if rec.Durable() == volatile {
			t.Fatalf("volatile=%t: Durable() = %t", volatile, rec.Durable())
		}
		done := make(chan *adapter.Response, 1)
		go func() {
			resp, err := rt.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s1", Message: llm.UserText("hello")})
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
		var resp *adapter.Response
		if volatile {
			// Answered while every write is held: it waits for none.
			select {
			case resp = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("a turn over a volatile run store waited for its record's write")
			}
			close(store.gate)
		} else {
			select {
			case <-done:
				t.Fatal("a turn was answered before its run record was written to a durable store")
			case <-time.After(300 * time.Millisecond):
			}
			close(store.gate)
			resp = <-done
		}
		run, err := rec.Store().Run(context.Background(), server.DefaultTenant, resp.RunID)
		if err != nil || run.Status != runtime.StatusCompleted {
			t.Fatalf("volatile=%t: run %+v, %v", volatile, run, err)
		}
		if err := rec.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
