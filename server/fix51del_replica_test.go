package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/postgres"
)

// instantModel answers "Done." at once, counting its calls.
type instantModel struct{ calls atomic.Int32 }

func (m *instantModel) Ready(context.Context) error { return nil }

func (m *instantModel) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	m.calls.Add(1)
	return &llm.Response{Message: llm.AssistantText("Done."), FinishReason: llm.FinishStop}, nil
}

// holdRuns is a replica's PostgreSQL run store whose writes (and
// purges) can be held back: a write or purge that hold matches signals
// held and waits until release is called. It embeds the store, so the
// Recorder finds its optional capabilities (BatchWriter, SessionPurger,
// …) as on the store itself.
type holdRuns struct {
	*postgres.RunStore
	mu      sync.Mutex
	hold    func(start *runtime.Run, app *runtime.AppendRequest, purge *runtime.PurgeRequest) bool
	held    chan struct{}
	gate    chan struct{}
	release func()
}

// arm holds back what match matches from now on, until release.
func (h *holdRuns) arm(match func(start *runtime.Run, app *runtime.AppendRequest, purge *runtime.PurgeRequest) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold, h.held, h.gate = match, make(chan struct{}, 1), make(chan struct{})
	gate := h.gate
	h.release = sync.OnceFunc(func() { close(gate) })
}

func (h *holdRuns) wait(start *runtime.Run, app *runtime.AppendRequest, purge *runtime.PurgeRequest) {
	h.mu.Lock()
	hold, held, gate := h.hold, h.held, h.gate
	h.mu.Unlock()
	if hold == nil || !hold(start, app, purge) {
		return
	}
	select {
	case held <- struct{}{}:
	default:
	}
	<-gate
}

func (h *holdRuns) StartRun(ctx context.Context, run runtime.Run) error {
	h.wait(&run, nil, nil)
	return h.RunStore.StartRun(ctx, run)
}

func (h *holdRuns) Append(ctx context.Context, req runtime.AppendRequest) ([]runtime.Event, error) {
	h.wait(nil, &req, nil)
	return h.RunStore.Append(ctx, req)
}

func (h *holdRuns) Finish(ctx context.Context, req runtime.FinishRequest) error {
	h.wait(nil, &runtime.AppendRequest{Tenant: req.Tenant, RunID: req.RunID, Finish: &req}, nil)
	return h.RunStore.Finish(ctx, req)
}

func (h *holdRuns) WriteTurns(ctx context.Context, turns []runtime.TurnRecord) ([]runtime.Event, error) {
	for _, rec := range turns {
		h.wait(rec.Start, &rec.Append, nil)
	}
	return h.RunStore.WriteTurns(ctx, turns)
}

func (h *holdRuns) PurgeSession(ctx context.Context, req runtime.PurgeRequest) (runtime.PurgeResult, error) {
	h.wait(nil, nil, &req)
	return h.RunStore.PurgeSession(ctx, req)
}

var (
	_ runtime.BatchWriter   = (*holdRuns)(nil)
	_ runtime.SessionPurger = (*holdRuns)(nil)
)

// pgReplica is one replica of armature serve on a shared PostgreSQL
// schema: its own store handle, session locker, run recorder (over a
// holdRuns) and server.
type pgReplica struct {
	st   *postgres.Store
	runs *holdRuns
	rec  *runtime.Recorder
	url  string
}

// warnLog counts the log lines at Warn or above.
type warnLog struct {
	n    atomic.Int32
	info atomic.Int32
}

func (l *warnLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *warnLog) Handle(_ context.Context, r slog.Record) error {
	switch {
	case r.Level >= slog.LevelWarn:
		l.n.Add(1)
	case r.Level >= slog.LevelInfo && strings.Contains(r.Message, "session deleted"):
		l.info.Add(1)
	}
	return nil
}
func (l *warnLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *warnLog) WithGroup(string) slog.Handler      { return l }

func newPGReplica(t *testing.T, schema string, a *agent.Agent, logs *warnLog) *pgReplica {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.Config{URL: pgtest.URL(), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	l := st.SessionLocker(postgres.LockerConfig{})
	t.Cleanup(l.Close)
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: st}), graph.WithCheckpointStore(st.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.Checkpoints()), Locker: l})
	if err != nil {
		t.Fatal(err)
	}
	runs := &holdRuns{RunStore: st.Runs()}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runs, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h}}, Sessions: st, Runs: rec, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		runs.mu.Lock()
		if runs.release != nil {
			runs.release()
		}
		runs.mu.Unlock()
		ts.Close()
		_ = srv.Stop(ctx)
		_ = rec.Close(ctx)
	})
	return &pgReplica{st: st, runs: runs, rec: rec, url: ts.URL}
}

// pgReplicas starts two replicas on one fresh schema.
func pgReplicas(t *testing.T) (a, b *pgReplica, model *instantModel, logs *warnLog) {
	t.Helper()
	schema, _ := pgtest.Schema(t)
	model, logs = &instantModel{}, &warnLog{}
	ag, err := agent.New(agent.Config{Provider: model})
	if err != nil {
		t.Fatal(err)
	}
	return newPGReplica(t, schema, ag, logs), newPGReplica(t, schema, ag, logs), model, logs
}

// pgCall sends a request and returns its status and body.
func pgCall(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	return resp.StatusCode, raw
}

// sendTo sends a message to the session on replica r and returns the
// turn's run id ("" when it failed, reported).
func sendTo(t *testing.T, r *pgReplica, session, text string) string {
	t.Helper()
	code, body := pgCall(t, "POST", r.url+"/v1/sessions/"+session+"/messages", `{"content":"`+text+`"}`)
	var o struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(body, &o); err != nil || code != http.StatusOK || o.RunID == "" {
		t.Errorf("send to %s: %d %s", session, code, body)
	}
	return o.RunID
}

// sessionRecords returns the runs (id → status) and the number of
// events of the session the shared store holds.
func sessionRecords(t *testing.T, st *postgres.Store, session string) (map[string]runtime.Status, int) {
	t.Helper()
	ctx := context.Background()
	page, err := st.Runs().ListRuns(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: session, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]runtime.Status{}
	for _, r := range page.Runs {
		runs[r.ID] = r.Status
	}
	evs, err := st.Runs().Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, SessionID: session})
	if err != nil {
		t.Fatal(err)
	}
	return runs, len(evs)
}

// waitHeld waits until h holds a write back.
func waitHeld(t *testing.T, h *holdRuns, what string) {
	t.Helper()
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s was never held", what)
	}
}

// A turn replica A ran just before replica B deletes its session
// (B's delete took the session's lock once A's turn committed and let
// it go), whose run's end A writes only after B's purge, is purged
// with the conversation all the same: B purges the runs the session's
// history records as committed even while started, and A, finding its
// run gone when it writes its end, gives the record up quietly. Nothing
// of the conversation remains in the run records.
func TestDeleteOnAnotherReplicaPurgesCommittedRun(t *testing.T) {
	a, b, _, logs := pgReplicas(t)
	sendTo(t, a, "s", "first")
	// A's next turn commits its history, lets the session go, and its
	// run's end waits.
	a.runs.arm(func(start *runtime.Run, app *runtime.AppendRequest, _ *runtime.PurgeRequest) bool {
		return start == nil && app != nil && app.Finish != nil
	})
	done := make(chan string, 1)
	go func() { done <- sendTo(t, a, "s", "the secret") }()
	waitHeld(t, a.runs, "the run's end")
	if code, body := pgCall(t, "DELETE", b.url+"/v1/sessions/s", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE on B: %d %s", code, body)
	}
	a.runs.release()
	var runID string
	select {
	case runID = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("A's turn never answered")
	}
	if runID == "" {
		t.Fatal("A's turn failed")
	}
	if err := a.rec.Flush(context.Background()); err != nil {
		t.Errorf("A's recorder: %v", err)
	}
	runs, events := sessionRecords(t, a.st, "s")
	if len(runs) != 0 || events != 0 {
		t.Fatalf("after the delete the session has runs %v and %d events, want none (A's run %s)", runs, events, runID)
	}
	if code, _ := pgCall(t, "GET", a.url+"/v1/sessions/s", ""); code != http.StatusNotFound {
		t.Fatalf("GET the deleted session: %d, want 404", code)
	}
	if n := logs.n.Load(); n != 0 {
		t.Errorf("%d warnings or errors logged", n)
	}
	if n := logs.info.Load(); n != 1 {
		t.Errorf("%d Info lines about the deleted session's run, want 1", n)
	}
}

// A turn on A whose run's start is not stored yet does not run: the
// server waits for the start before the turn takes the session
// (startDurable), so a delete on B meanwhile finds the session free,
// and the turn, once its start is stored, begins a new conversation and
// keeps its run; the deleted conversation's runs are gone.
func TestDeleteOnAnotherReplicaWhileAStartIsQueued(t *testing.T) {
	a, b, model, logs := pgReplicas(t)
	old := sendTo(t, a, "s", "first")
	a.runs.arm(func(start *runtime.Run, _ *runtime.AppendRequest, _ *runtime.PurgeRequest) bool {
		return start != nil && start.SessionID == "s"
	})
	calls := model.calls.Load()
	done := make(chan string, 1)
	go func() { done <- sendTo(t, a, "s", "a new conversation") }()
	waitHeld(t, a.runs, "the run's start")
	if code, body := pgCall(t, "DELETE", b.url+"/v1/sessions/s", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE on B: %d %s", code, body)
	}
	if n := model.calls.Load(); n != calls {
		t.Fatalf("the turn ran before its run's start was stored (%d model calls, want %d)", n, calls)
	}
	a.runs.release()
	var runID string
	select {
	case runID = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("A's turn never answered")
	}
	runs, _ := sessionRecords(t, b.st, "s")
	if len(runs) != 1 || runs[runID] != runtime.StatusCompleted {
		t.Fatalf("runs of the session = %v, want only the new conversation's %s, completed (the deleted one's %s gone)", runs, runID, old)
	}
	if n := logs.n.Load(); n != 0 {
		t.Errorf("%d warnings or errors logged", n)
	}
}

// Turns of the new conversation that waited for the session's lock while
// a delete held it (one on each replica) keep their runs: they had
// committed nothing to the deleted conversation.
func TestDeleteOnAnotherReplicaKeepsWaitingTurns(t *testing.T) {
	a, b, _, logs := pgReplicas(t)
	old := sendTo(t, a, "s", "first")
	b.runs.arm(func(_ *runtime.Run, _ *runtime.AppendRequest, purge *runtime.PurgeRequest) bool {
		return purge != nil && purge.SessionID == "s"
	})
	deleted := make(chan int, 1)
	go func() {
		code, _ := pgCall(t, "DELETE", b.url+"/v1/sessions/s", "")
		deleted <- code
	}()
	waitHeld(t, b.runs, "the purge")
	// The delete holds the session: these wait for it.
	ids := make(chan string, 2)
	for _, r := range []*pgReplica{a, b} {
		go func() { ids <- sendTo(t, r, "s", "a new conversation") }()
	}
	// Both turns are started, waiting for the session's lock.
	deadline := time.Now().Add(20 * time.Second)
	for {
		runs, _ := sessionRecords(t, a.st, "s")
		started := 0
		for _, st := range runs {
			if st == runtime.StatusStarted {
				started++
			}
		}
		if started == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting turns' runs: %v", runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.runs.release()
	if code := <-deleted; code != http.StatusNoContent {
		t.Fatalf("DELETE on B: %d", code)
	}
	want := map[string]runtime.Status{}
	for range 2 {
		select {
		case id := <-ids:
			want[id] = runtime.StatusCompleted
		case <-time.After(40 * time.Second):
			t.Fatal("a waiting turn never answered")
		}
	}
	runs, _ := sessionRecords(t, a.st, "s")
	if len(runs) != 2 || runs[old] != "" {
		t.Fatalf("runs of the session = %v, want the two new turns' %v (the deleted %s gone)", runs, want, old)
	}
	for id := range want {
		if runs[id] != runtime.StatusCompleted {
			t.Fatalf("runs of the session = %v, want the two new turns' %v completed", runs, want)
		}
	}
	if n := logs.n.Load(); n != 0 {
		t.Errorf("%d warnings or errors logged", n)
	}
}
