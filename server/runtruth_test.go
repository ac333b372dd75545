package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/syncbuf"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// truthServer is a server over an SQLite file whose run records go to a
// store the test reads directly (not through the Recorder, which would
// wait for queued records), with the graph's log captured.
type truthServer struct {
	ts    *httptest.Server
	srv   *server.Server
	runs  runtime.Store // the runs' store itself
	rec   *runtime.Recorder
	chat  *chat.Harness
	store *sqlite.Store
	logs  *syncbuf.Buffer
}

// slowBatches delays every group commit, so that a run record written
// behind the turn would still be missing when the turn is answered.
type slowBatches struct {
	runtime.Store
	delay time.Duration
}

func (s slowBatches) WriteTurns(ctx context.Context, turns []runtime.TurnRecord) ([]runtime.Event, error) {
	time.Sleep(s.delay)
	return s.Store.(runtime.BatchWriter).WriteTurns(ctx, turns)
}

func (s slowBatches) UnfinishedRuns(ctx context.Context, req runtime.UnfinishedRequest) ([]runtime.Run, error) {
	return s.Store.(runtime.Recoverable).UnfinishedRuns(ctx, req)
}

func newTruthServer(t testing.TB, a *agent.Agent, delay time.Duration) *truthServer {
	t.Helper()
	ctx := context.Background()
	store := servertest.SQLite(t)
	logs := &syncbuf.Buffer{}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()),
		graph.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints())})
	if err != nil {
		t.Fatal(err)
	}
	var runs runtime.Store = store.Runs()
	if delay > 0 {
		runs = slowBatches{Store: runs, delay: delay}
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close(ctx) })
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h, Model: demo.ModelName}},
		Sessions: store, Runs: rec, DisableWebUI: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &truthServer{ts: ts, srv: srv, runs: store.Runs(), rec: rec, chat: h, store: store, logs: logs}
}

// phases returns a run's events as "type" or "type:phase[:node]".
func phases(t *testing.T, s runtime.Store, runID string) []string {
	t.Helper()
	evs, err := s.Events(t.Context(), runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		typ := e.Type
		if e.Type == runtime.EventAdapterEvent {
			var d struct {
				Event struct {
					Phase  string `json:"phase"`
					NodeID string `json:"nodeId"`
				} `json:"event"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			typ = d.Event.Phase
			if d.Event.NodeID != "" {
				typ += ":" + d.Event.NodeID
			}
		}
		if len(out) > 0 && typ == runtime.PhaseOutputDelta && out[len(out)-1] == runtime.PhaseOutputDelta {
			continue // the deltas of one text, once
		}
		out = append(out, typ)
	}
	return out
}

func sessionRuns(t *testing.T, s runtime.Store, session string) []runtime.Run {
	t.Helper()
	resp, err := s.ListRuns(t.Context(), runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: session})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Runs
}

// The events of a tool-calling turn, in the order they happen.
var toolTurn = []string{
	runtime.EventRequestStarted, runtime.PhaseHandoff,
	runtime.PhaseNodeCompleted + ":" + agent.NodeModel,
	runtime.PhaseToolStart, runtime.PhaseToolResult,
	runtime.PhaseNodeCompleted + ":" + agent.NodeTools,
	runtime.PhaseOutputDelta,
	runtime.PhaseNodeCompleted + ":" + agent.NodeModel,
	runtime.EventRequestCompleted,
}

// 40 REST turns nobody streams, run concurrently, each record their
// node completions, in order with their tool and text events, and the
// turn's last node completion before its terminal event.
func TestUnstreamedTurnsRecordNodeEventsInOrder(t *testing.T) {
	s := newTruthServer(t, mustDemo(t), 0)
	const turns = 40
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range turns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var out struct{ Outcome string }
			post(t, fmt.Sprintf("%s/v1/sessions/o%d/messages", s.ts.URL, i%10), fmt.Sprintf(`{"content":"where is order %d?"}`, i), &out)
			if out.Outcome != "completed" {
				t.Errorf("turn %d: %s", i, out.Outcome)
			}
		})
	}
	wg.Wait()
	n := 0
	for i := range 10 {
		for _, r := range sessionRuns(t, s.runs, fmt.Sprintf("o%d", i)) {
			n++
			if diff := cmp.Diff(toolTurn, phases(t, s.runs, r.ID)); diff != "" {
				t.Errorf("run %s events (-want +got):\n%s", r.ID, diff)
			}
		}
	}
	if n != turns {
		t.Errorf("%d runs, want %d", n, turns)
	}
	if strings.Contains(s.logs.String(), "observer failed") {
		t.Errorf("the graph logged observer failures:\n%s", s.logs.String())
	}
}

// A streamed OpenAI turn records its last agent.node.completed before the
// run's terminal event, and no observer fails for a turn that ended.
func TestStreamedTurnRecordsItsLastNodeBeforeTheEnd(t *testing.T) {
	s := newTruthServer(t, mustDemo(t), 0)
	for i := range 10 {
		body := fmt.Sprintf(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"where is order %d?"}]}`, i)
		resp, err := http.Post(s.ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), "data: [DONE]") {
			t.Fatalf("stream: %s", raw)
		}
		session := resp.Header.Get(server.SessionHeader)
		runs := sessionRuns(t, s.runs, session)
		if len(runs) != 1 {
			t.Fatalf("session %s: %d runs", session, len(runs))
		}
		if diff := cmp.Diff(toolTurn, phases(t, s.runs, runs[0].ID)); diff != "" {
			t.Errorf("streamed run events (-want +got):\n%s", diff)
		}
	}
	if strings.Contains(s.logs.String(), "observer failed") {
		t.Errorf("the graph logged observer failures:\n%s", s.logs.String())
	}
}

// Every surface answers a turn only once its run record, with its final
// status, is in the store, even when the group commit is slow.
func TestAcknowledgedTurnsAreRecorded(t *testing.T) {
	s := newTruthServer(t, mustDemo(t), 30*time.Millisecond)
	check := func(what, session string, want runtime.Status) {
		t.Helper()
		runs := sessionRuns(t, s.runs, session)
		if len(runs) == 0 {
			t.Fatalf("%s: answered, but no run record is in the store", what)
		}
		if r := runs[0]; r.Status != want {
			t.Errorf("%s: answered, but the stored run is %s, want %s", what, r.Status, want)
		}
	}
	var out struct {
		Outcome string
		Signal  struct {
			SignalID string `json:"signal_id"`
		}
	}
	post(t, s.ts.URL+"/v1/sessions/rest/messages", `{"content":"where is order 1?"}`, &out)
	check("REST send", "rest", runtime.StatusCompleted)
	post(t, s.ts.URL+"/v1/sessions/rest/messages", `{"content":"refund order 1"}`, &out)
	if out.Outcome != "suspended" {
		t.Fatalf("refund: %+v", out)
	}
	check("REST suspended send", "rest", runtime.StatusSuspended)
	post(t, s.ts.URL+"/v1/sessions/rest/signals", `{"signal_id":"`+out.Signal.SignalID+`","payload":{"approval":{"approved":true}}}`, &out)
	check("REST signal", "rest", runtime.StatusCompleted)

	post(t, s.ts.URL+"/v1/openharness", `{"protocol_version":"1.0.0","request":{"context":{"session_id":"oh","user_intent":"where is order 2?"}}}`, nil)
	check("OpenHarness", "oh", runtime.StatusCompleted)

	req, _ := http.NewRequest("POST", s.ts.URL+"/v1/chat/completions", strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"where is order 3?"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(server.SessionHeader, "oai")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	check("OpenAI completion", "oai", runtime.StatusCompleted)

	req, _ = http.NewRequest("POST", s.ts.URL+"/v1/chat/completions", strings.NewReader(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"where is order 4?"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(server.SessionHeader, "oais")
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasSuffix(strings.TrimSpace(string(raw)), "data: [DONE]") {
		t.Fatalf("stream: %s", raw)
	}
	check("OpenAI stream", "oais", runtime.StatusCompleted)
}

// gatedTool is the demo's lookup_order, held until release is closed;
// entered receives once it runs.
func gatedAgent(t *testing.T, entered chan<- struct{}, release <-chan struct{}) *agent.Agent {
	t.Helper()
	lookup := agent.MustTool("lookup_order", "Look an order up by number",
		func(ctx context.Context, a struct {
			Order string `json:"order"`
		}) (string, error) {
			entered <- struct{}{}
			<-release
			return "order " + a.Order + ": shipped", nil
		})
	a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: []agent.Tool{lookup}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustDemo(t testing.TB) *agent.Agent {
	t.Helper()
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A subscriber that joins the session's event stream while a turn nobody
// watched is running gets the turn's events so far at once, then the
// rest live, each once, in order.
func TestEventStreamMidTurnSubscriber(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	s := newTruthServer(t, gatedAgent(t, entered, release), 0)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the server closes, on failure too
	done := make(chan struct{})
	go func() {
		defer close(done)
		post(t, s.ts.URL+"/v1/sessions/mid/messages", `{"content":"where is order 7?"}`, nil)
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool never ran")
	}
	stream := openStream(t, s.ts.URL+"/v1/sessions/mid/events", "")
	frames := make(chan frame, 64)
	go func() {
		defer close(frames)
		readFrames(t, stream.Body, func(f frame) bool {
			frames <- f
			return f.event == runtime.EventRequestCompleted
		})
	}()
	var got []frame
	next := func() frame {
		t.Helper()
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("the stream ended after %d frames", len(got))
			}
			got = append(got, f)
			return f
		case <-time.After(5 * time.Second):
			t.Fatalf("mid-turn, the stream gave %d frames and then nothing: the turn's events so far are missing", len(got))
		}
		return frame{}
	}
	// While the tool is still running: the start, the handoff, the
	// model's completion and the tool's start.
	for {
		f := next()
		if phaseOf(f) == runtime.PhaseToolStart {
			break
		}
	}
	unblock()
	for next().event != runtime.EventRequestCompleted {
	}
	<-done
	var names []string
	var last float64
	for i, f := range got {
		names = append(names, phaseOf(f))
		if seq := f.data["seq"].(float64); seq != float64(i+1) {
			t.Errorf("frame %d has seq %v: a gap or a duplicate", i, seq)
		}
		id := f.data["id"].(float64)
		if id <= last {
			t.Errorf("frame %d id %v after %v", i, id, last)
		}
		last = id
	}
	var want []string
	for _, p := range toolTurn {
		want = append(want, strings.SplitN(p, ":", 2)[0])
	}
	if diff := cmp.Diff(want, dedupeDeltas(names)); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
}

func phaseOf(f frame) string {
	if f.event != runtime.EventAdapterEvent {
		return f.event
	}
	d, _ := f.data["data"].(map[string]any)
	ev, _ := d["event"].(map[string]any)
	p, _ := ev["phase"].(string)
	return p
}

func dedupeDeltas(names []string) []string {
	var out []string
	for _, n := range names {
		if len(out) > 0 && n == runtime.PhaseOutputDelta && out[len(out)-1] == n {
			continue
		}
		out = append(out, n)
	}
	return out
}

// RecoverRuns reconciles runs a crash left started from the outcomes the
// chat harness recorded with the turns' session writes, with nobody
// subscribed: committed turns complete or suspend their runs (with their
// replies or invocation), the others fail as interrupted.
func TestRecoverRunsReconcilesFromTheSessionStore(t *testing.T) {
	s := newTruthServer(t, mustDemo(t), 0)
	ctx := t.Context()
	start := func(id, session string) {
		t.Helper()
		if err := s.runs.StartRun(ctx, runtime.Run{ID: id, Tenant: server.DefaultTenant, SessionID: session, AgentID: "demo"}); err != nil {
			t.Fatal(err)
		}
	}
	key := func(session string) string { return server.DefaultTenant + "/" + session }
	// A turn that committed, then the process died before its run's end
	// was written.
	start("committed", "a")
	done, err := s.chat.Send(ctx, key("a"), llm.UserText("where is order 5?"), chat.WithRecordKey(server.RunRecordKeyPrefix+"committed"))
	if err != nil {
		t.Fatal(err)
	}
	// One that committed suspended.
	start("paused", "b")
	paused, err := s.chat.Send(ctx, key("b"), llm.UserText("refund order 5"), chat.WithRecordKey(server.RunRecordKeyPrefix+"paused"))
	if err != nil {
		t.Fatal(err)
	}
	// A resumed turn that committed.
	start("resumed", "b")
	if _, err := s.chat.Signal(ctx, chat.Signal{SignalID: paused.(*chat.Suspended).Descriptor.SignalID, SessionID: key("b"),
		Payload: agent.Approve(""), RecordKey: server.RunRecordKeyPrefix + "resumed"}); err != nil {
		t.Fatal(err)
	}
	// One whose turn never committed, and one of another agent no longer
	// served.
	start("lost", "c")
	if err := s.runs.StartRun(ctx, runtime.Run{ID: "gone", Tenant: server.DefaultTenant, SessionID: "c", AgentID: "retired"}); err != nil {
		t.Fatal(err)
	}

	sum, err := s.srv.RecoverRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (runtime.Reconciled{Completed: 2, Suspended: 1, Failed: 2}); sum != want {
		t.Errorf("RecoverRuns = %+v, want %+v", sum, want)
	}
	run := func(id string) runtime.Run {
		t.Helper()
		r, err := s.runs.Run(ctx, server.DefaultTenant, id)
		if err != nil {
			t.Fatal(err)
		}
		return *r
	}
	// The run's output is what its end would have recorded: the replies
	// and, recorded with the turn's outcome, its model usage.
	output := map[string]any{"replies": done.(*chat.Completed).Replies}
	if ti := done.Info(); ti.ModelCalls > 0 {
		u := map[string]int{"model_calls": ti.ModelCalls}
		for k, p := range map[string]*int{"prompt_tokens": ti.Usage.PromptTokens, "completion_tokens": ti.Usage.CompletionTokens,
			"total_tokens": ti.Usage.TotalTokens, "cached_tokens": ti.Usage.CachedTokens, "cache_creation_tokens": ti.Usage.CacheCreationTokens} {
			if p != nil {
				u[k] = *p
			}
		}
		output["usage"], output["finish_reason"] = u, ti.FinishReason
	}
	replies, _ := json.Marshal(output)
	if r := run("committed"); r.Status != runtime.StatusCompleted || string(r.Output) != string(replies) {
		t.Errorf("committed run = %+v\nwant output %s", r, replies)
	}
	if r := run("paused"); r.Status != runtime.StatusSuspended || r.InvocationID != paused.Info().InvocationID {
		t.Errorf("paused run = %+v", r)
	}
	if r := run("resumed"); r.Status != runtime.StatusCompleted || !strings.Contains(string(r.Output), "refunded") {
		t.Errorf("resumed run = %+v", r)
	}
	for _, id := range []string{"lost", "gone"} {
		if r := run(id); r.Status != runtime.StatusFailed || r.Error == nil || r.Error.Category != runtime.CategoryInterrupted {
			t.Errorf("run %s = %+v", id, r)
		}
	}
	// The run recorded nothing: its start comes first all the same.
	if diff := cmp.Diff([]string{runtime.EventRequestStarted, runtime.EventRequestSuspended, runtime.EventApprovalRequested}, phases(t, s.runs, "paused")); diff != "" {
		t.Errorf("paused run events (-want +got):\n%s", diff)
	}
	if sum, err := s.srv.RecoverRuns(ctx); err != nil || sum.Total() != 0 {
		t.Errorf("second RecoverRuns = %+v, %v", sum, err)
	}
}

// scripted is the demo model with two more scripts: a message with
// "ghost" calls a tool that does not exist (so the tools node emits
// nothing), and one with "chatty" says something before its tool call.
type scripted struct{ demo.Model }

func (m scripted) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	id := fmt.Sprintf("call_%d", len(req.Messages))
	switch {
	case last.Role == llm.RoleUser && strings.Contains(last.Text(), "ghost"):
		return &llm.Response{Message: llm.AssistantToolCalls(llm.ToolCall{ID: id, Name: "ghost", Arguments: json.RawMessage(`{}`)}),
			FinishReason: llm.FinishToolCalls}, nil
	case last.Role == llm.RoleUser && strings.Contains(last.Text(), "chatty"):
		msg := llm.AssistantToolCalls(llm.ToolCall{ID: id, Name: "lookup_order", Arguments: json.RawMessage(`{"order":"9"}`)})
		msg.Content = llm.AssistantText("Let me look that up. ").Content
		return &llm.Response{Message: msg, FinishReason: llm.FinishToolCalls}, nil
	}
	return m.Model.Complete(ctx, req)
}

func (m scripted) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		resp, err := m.Complete(ctx, req)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, w := range strings.SplitAfter(resp.Message.Text(), " ") {
			if w != "" && !yield(&llm.Chunk{Content: w}, nil) {
				return
			}
		}
		for i, tc := range resp.Message.ToolCalls {
			d := llm.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)}
			if !yield(&llm.Chunk{ToolCalls: []llm.ToolCallDelta{d}}, nil) {
				return
			}
		}
		yield(&llm.Chunk{FinishReason: resp.FinishReason}, nil)
	}
}

// The order holds when the same node runs twice with a node between
// that emits only a failed call's result (a call to a tool that does not
// exist, which never starts), and when a model says something before its
// tool call: each chunk is placed in the node execution it came from.
func TestTurnEventsOrderWithRepeatedNodes(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: scripted{}, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	s := newTruthServer(t, a, 0)
	model, tools := runtime.PhaseNodeCompleted+":"+agent.NodeModel, runtime.PhaseNodeCompleted+":"+agent.NodeTools
	cases := map[string][]string{
		"ghost": {runtime.EventRequestStarted, runtime.PhaseHandoff, model, runtime.PhaseToolResult, tools,
			runtime.PhaseOutputDelta, model, runtime.EventRequestCompleted},
		"chatty": {runtime.EventRequestStarted, runtime.PhaseHandoff, runtime.PhaseOutputDelta, model,
			runtime.PhaseToolStart, runtime.PhaseToolResult, tools, runtime.PhaseOutputDelta, model, runtime.EventRequestCompleted},
	}
	var wg sync.WaitGroup
	for name := range cases {
		for i := range 20 {
			wg.Go(func() {
				var out struct{ Outcome string }
				post(t, fmt.Sprintf("%s/v1/sessions/%s-%d/messages", s.ts.URL, name, i), `{"content":"`+name+` please"}`, &out)
				if out.Outcome != "completed" {
					t.Errorf("%s %d: %s", name, i, out.Outcome)
				}
			})
		}
	}
	wg.Wait()
	for name, want := range cases {
		for i := range 20 {
			for _, r := range sessionRuns(t, s.runs, fmt.Sprintf("%s-%d", name, i)) {
				if diff := cmp.Diff(want, phases(t, s.runs, r.ID)); diff != "" {
					t.Errorf("%s run %s events (-want +got):\n%s", name, r.ID, diff)
				}
			}
		}
	}
}
