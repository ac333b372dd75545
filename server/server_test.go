package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// newDemoServer serves the demo agent over an SQLite file in a temp dir.
func newDemoServer(t *testing.T, mutate ...func(*server.Config)) *httptest.Server {
	t.Helper()
	return servertest.NewDemo(t, mutate...)
}

func post(t *testing.T, url, body string, out any) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

type frame struct {
	id, event string
	data      map[string]any
}

// readFrames reads SSE frames until stop returns true or the stream ends.
func readFrames(t *testing.T, body io.Reader, stop func(frame) bool) []frame {
	t.Helper()
	var out []frame
	var cur frame
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" {
				out = append(out, cur)
				if stop(cur) {
					return out
				}
			}
			cur = frame{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &cur.data); err != nil {
				t.Fatalf("frame data %q: %v", line, err)
			}
		}
	}
	return out
}

func openStream(t *testing.T, url, lastID string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return openStreamCtx(t, ctx, url, lastID)
}

// openStreamCtx is openStream for as long as ctx lasts: a stream that
// must outlive openStream's 10 s (a long turn on a loaded machine).
func openStreamCtx(t *testing.T, ctx context.Context, url, lastID string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// TestEventStreamLiveResumeAndReplay: a listener on the session's event
// stream sees a turn's events live (start, handoff, tool progress,
// deltas, outcome), receives the outcome of a turn resumed by a signal
// sent on another request, and a reconnect with Last-Event-ID replays
// what it missed.
func TestEventStreamLiveResumeAndReplay(t *testing.T) {
	ts := newDemoServer(t)
	stream := openStream(t, ts.URL+"/v1/sessions/s1/events", "")
	frames := make(chan []frame, 1)
	go func() {
		frames <- readFrames(t, stream.Body, func(f frame) bool {
			return f.event == "runtime.request.completed" && f.data["parentRequestId"] != nil
		})
	}()
	time.Sleep(50 * time.Millisecond) // let the subscription register
	var out struct {
		Outcome string `json:"outcome"`
		Signal  struct {
			SignalID string `json:"signal_id"`
		} `json:"signal"`
	}
	post(t, ts.URL+"/v1/sessions/s1/messages", `{"content":"refund order 3"}`, &out)
	if out.Outcome != "suspended" {
		t.Fatalf("send: %+v", out)
	}
	post(t, ts.URL+"/v1/sessions/s1/signals", `{"signal_id":"`+out.Signal.SignalID+`","payload":{"approval":{"approved":true}}}`, &out)
	if out.Outcome != "completed" {
		t.Fatalf("signal: %+v", out)
	}
	var got []frame
	select {
	case got = <-frames:
	case <-time.After(10 * time.Second):
		t.Fatal("no resumed outcome on the stream")
	}
	var types []string
	for _, f := range got {
		typ := f.event
		if d, ok := f.data["data"].(map[string]any); ok && f.event == "runtime.adapter.event" {
			ev, _ := d["event"].(map[string]any)
			phase, _ := ev["phase"].(string)
			typ += ":" + phase
		}
		types = append(types, typ)
	}
	// Node completions come from the engine's observer queue, tool and
	// text events from the stream: their relative order may vary, so
	// each expected run of events is checked on its own.
	joined := strings.Join(types, " ")
	if strings.Index(joined, "agent.tool.start") > strings.Index(joined, "agent.tool.result") {
		t.Errorf("tool result before its start:\n%s", joined)
	}
	for _, want := range []string{
		"runtime.request.started runtime.adapter.event:agent.handoff",
		"runtime.adapter.event:agent.node.completed",
		"runtime.request.suspended runtime.approval.requested",
		"runtime.approval.resolved",
		"runtime.adapter.event:agent.tool.start",
		"runtime.adapter.event:agent.tool.result",
		"runtime.adapter.event:agent.output.delta",
		"runtime.request.completed",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("stream lacks %q:\n%s", want, joined)
		}
	}

	// Reconnect after the suspension: replay starts after the given id.
	var mid string
	for _, f := range got {
		if f.event == "runtime.request.suspended" {
			mid = f.id
		}
	}
	replay := openStream(t, ts.URL+"/v1/sessions/s1/events", mid)
	again := readFrames(t, replay.Body, func(f frame) bool { return f.event == "runtime.request.completed" })
	if len(again) == 0 || again[0].event != "runtime.approval.requested" || again[len(again)-1].data["parentRequestId"] == nil {
		t.Fatalf("replay after %s: %+v", mid, again)
	}
}

func TestRunInspector(t *testing.T) {
	ts := newDemoServer(t)
	post(t, ts.URL+"/v1/sessions/s1/messages", `{"content":"where is order 5?"}`, nil)
	var runs struct {
		Runs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"runs"`
	}
	if code := getJSON(t, ts.URL+"/v1/sessions/s1/runs", &runs); code != 200 || len(runs.Runs) != 1 || runs.Runs[0].Status != "completed" {
		t.Fatalf("runs: %d %+v", code, runs)
	}
	id := runs.Runs[0].ID
	var run struct {
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	if getJSON(t, ts.URL+"/v1/runs/"+id, &run); run.Status != "completed" || !strings.Contains(string(run.Output), "order 5: shipped") {
		t.Fatalf("run: %+v", run)
	}
	var evs struct {
		Events []struct {
			Seq  int64           `json:"seq"`
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"events"`
	}
	getJSON(t, ts.URL+"/v1/runs/"+id+"/events", &evs)
	// The agent.* events a served turn records from fields carry what
	// the map json.Marshal encodes would.
	var agentEvents []string
	for _, e := range evs.Events {
		if e.Type == "runtime.adapter.event" {
			var d struct {
				Event map[string]any `json:"event"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(d)
			if !bytes.Equal(want, e.Data) {
				t.Errorf("event %d data %s, want the canonical %s", e.Seq, e.Data, want)
			}
			_, tools := d.Event["tools"] // null: the demo agent declares none
			agentEvents = append(agentEvents, fmt.Sprintf("%v %v %v %v %v", d.Event["phase"], d.Event["adapter"], d.Event["toolId"] != nil,
				tools, d.Event["args"] != nil))
		}
	}
	if want := []string{"agent.handoff armature false true false", "agent.node.completed armature false false false",
		"agent.tool.start armature true false true", "agent.tool.result armature true false false"}; !slices.Equal(agentEvents[:4], want) {
		t.Errorf("agent events %q, want them to start %q", agentEvents, want)
	}
	if len(evs.Events) < 5 || evs.Events[0].Type != "runtime.request.started" || evs.Events[len(evs.Events)-1].Type != "runtime.request.completed" {
		t.Fatalf("events: %+v", evs)
	}
	for i, e := range evs.Events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	var c struct {
		Cancelled bool `json:"cancelled"`
	}
	if code := post(t, ts.URL+"/v1/runs/"+id+"/cancel", ``, &c); code != 202 || c.Cancelled {
		t.Fatalf("cancel of a finished run: %d %+v", code, c)
	}
	if code := getJSON(t, ts.URL+"/v1/runs/nope", nil); code != 404 {
		t.Fatalf("unknown run: %d", code)
	}
}

func TestMaxSSEStreams(t *testing.T) {
	ts := newDemoServer(t, func(c *server.Config) { c.MaxSSEStreams = 1 })
	openStream(t, ts.URL+"/v1/sessions/a/events", "")
	resp, err := http.Get(ts.URL + "/v1/sessions/b/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second stream: %d", resp.StatusCode)
	}
}

// TestShutdownCancelsTurnsPastGrace: a turn still running when the
// graceful shutdown's grace runs out ends as a cancelled run.
func TestShutdownCancelsTurnsPastGrace(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: t.TempDir() + "/s.db"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(ctx)
	schema, _ := chat.NewSchema()
	started := make(chan struct{})
	g, err := graph.NewBuilder(schema).
		AddNode("slow", func(ctx context.Context, s graph.State) (graph.Update, error) {
			close(started)
			<-ctx.Done() // a model call that outlives the shutdown
			return nil, ctx.Err()
		}).
		AddEdge("slow", graph.End).SetEntry("slow").
		Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := chat.New(chat.Config{Graph: g})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "slow", Chat: h}}, Sessions: store, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln, 200*time.Millisecond) }()
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+"/v1/sessions/s1/messages", "application/json", strings.NewReader(`{"content":"hi"}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	runs, err := rec.Store().ListRuns(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "s1"})
	if err != nil || len(runs.Runs) != 1 || runs.Runs[0].Status != runtime.StatusCancelled {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	evs, err := rec.Store().Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: runs.Runs[0].ID})
	var end struct{ Cause runtime.CancelCause }
	if err != nil || len(evs) == 0 || json.Unmarshal(evs[len(evs)-1].Data, &end) != nil || end.Cause != runtime.CauseRequested {
		t.Fatalf("the cancelled turn's events: %+v, %v; want its end's cause %q", evs, err, runtime.CauseRequested)
	}
}

// An agent with a workflow brackets each completed turn with
// runtime.workflow.started and runtime.workflow.completed, their data
// {"adapter", "workflowId"} encoded once for every turn.
func TestWorkflowEvents(t *testing.T) {
	ts := newDemoServer(t, func(c *server.Config) { c.Agents[0].Workflow = "order-desk" })
	for i := range 2 {
		var out struct {
			RunID string `json:"run_id"`
		}
		if code := post(t, ts.URL+"/v1/sessions/s1/messages", fmt.Sprintf(`{"content":"hello %d"}`, i), &out); code != 200 || out.RunID == "" {
			t.Fatalf("turn %d: %d %+v", i, code, out)
		}
		var evs struct {
			Events []struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			} `json:"events"`
		}
		getJSON(t, ts.URL+"/v1/runs/"+out.RunID+"/events", &evs)
		var got []string
		for _, e := range evs.Events {
			if strings.HasPrefix(e.Type, "runtime.workflow.") {
				got = append(got, e.Type+" "+string(e.Data))
			}
		}
		want := []string{`runtime.workflow.started {"adapter":"armature","workflowId":"order-desk"}`,
			`runtime.workflow.completed {"adapter":"armature","workflowId":"order-desk"}`}
		if !slices.Equal(got, want) {
			t.Errorf("turn %d: workflow events %q, want %q", i, got, want)
		}
	}
}
