package server_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

func turnFuncServer(t *testing.T, a adapter.Adapter) (*server.Server, *runtime.MemoryStore) {
	t.Helper()
	ctx := context.Background()
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	ag, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: &adapter.Agent{ID: "a0", Backend: a.Name()}, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{ag}, Sessions: sessions, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(ctx); _ = rec.Close(ctx) })
	return srv, store
}

func settledRun(t *testing.T, srv *server.Server, id string) (*runtime.Run, []runtime.Event) {
	t.Helper()
	ctx := context.Background()
	var run *runtime.Run
	var err error
	for i := 0; i < 100; i++ {
		run, err = srv.Run(ctx, "", id)
		if err == nil && run.Status != runtime.StatusStarted {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	var evs []runtime.Event
	var after int64
	for {
		page, err := srv.Events(ctx, runtime.EventsRequest{RunID: id, AfterID: after, Limit: runtime.MaxEventsLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		evs = append(evs, page...)
		after = page[len(page)-1].ID
	}
	return run, evs
}

// An artifact whose metadata JSON cannot encode (a NaN score): the run
// must still end with the turn's outcome.
func TestAdapterArtifactThatDoesNotEncodeEndsItsRunAsAnswered(t *testing.T) {
	srv, _ := turnFuncServer(t, funcAdapter(func(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
		res := adapter.Completed("done", nil)
		res.Output.Artifacts = []runtime.Artifact{{Name: "report", Metadata: map[string]any{"score": math.NaN()}}}
		return res, nil
	}))
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("outcome %T", resp.Outcome)
	run, evs := settledRun(t, srv, resp.RunID)
	for _, e := range evs {
		t.Logf("%d %s %s", e.Seq, e.Type, e.Data)
	}
	if want := runStatusOf(resp.Outcome); run.Status != want {
		t.Errorf("run status %q, want %q (the client was answered %T)", run.Status, want, resp.Outcome)
	}
}

// runStatusOf is the run status that matches the outcome a client was
// answered: the adapter may refuse an output that does not encode (the
// turn then fails), or the server record it without what does not
// encode; either way the run ends as the client was told.
func runStatusOf(out chat.Outcome) runtime.Status {
	switch out.(type) {
	case *chat.Completed:
		return runtime.StatusCompleted
	case *chat.Suspended:
		return runtime.StatusSuspended
	}
	return runtime.StatusFailed
}

// Artifact ids must identify an artifact within its run.
func TestAdapterArtifactIDsUniqueInRun(t *testing.T) {
	srv, _ := turnFuncServer(t, funcAdapter(func(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
		emit.Emit(ctx, adapter.Event{Artifact: &runtime.Artifact{ID: "artifact-2", Name: "first"}})
		res := adapter.Completed("done", nil)
		res.Output.Artifacts = []runtime.Artifact{{Name: "second"}}
		return res, nil
	}))
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	run, evs := settledRun(t, srv, resp.RunID)
	var out struct {
		Artifacts []runtime.Artifact `json:"artifacts"`
	}
	_ = json.Unmarshal(run.Output, &out)
	seen := map[string]string{}
	for _, a := range out.Artifacts {
		if prev, ok := seen[a.ID]; ok {
			t.Errorf("artifacts %q and %q share id %q in run output %s", prev, a.Name, a.ID, run.Output)
		}
		seen[a.ID] = a.Name
	}
	_ = evs
}

// An artifact emitted by a turn that then suspends for an approval.
func TestAdapterArtifactOfSuspendedTurnOnItsRun(t *testing.T) {
	srv, _ := turnFuncServer(t, funcAdapter(func(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
		if req.Resume != nil {
			return adapter.Completed("ok", nil), nil
		}
		emit.Emit(ctx, adapter.Event{Artifact: &runtime.Artifact{Name: "draft", Text: "draft refund"}})
		return &adapter.Result{Suspension: &adapter.Suspension{ToolCall: llm.ToolCall{ID: "c1", Name: "issue_refund", Arguments: json.RawMessage(`{}`)}}}, nil
	}))
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("outcome %T", resp.Outcome)
	run, evs := settledRun(t, srv, resp.RunID)
	arts := 0
	for _, e := range evs {
		t.Logf("%d %s %s", e.Seq, e.Type, e.Data)
		if e.Type == runtime.EventArtifactCreated {
			arts++
		}
	}
	t.Logf("run %s output %s", run.Status, run.Output)
	var out struct {
		Artifacts []runtime.Artifact `json:"artifacts"`
	}
	_ = json.Unmarshal(run.Output, &out)
	if arts != len(out.Artifacts) {
		t.Errorf("run records %d runtime.artifact.created events but its output lists %d artifacts", arts, len(out.Artifacts))
	}
}

// Output metadata JSON cannot encode: the run must end as the client
// was answered.
func TestAdapterMetadataThatDoesNotEncodeEndsItsRunAsAnswered(t *testing.T) {
	srv, _ := turnFuncServer(t, funcAdapter(func(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
		res := adapter.Completed("done", nil)
		res.Output.Metadata = map[string]any{"confidence": math.Inf(1)}
		return res, nil
	}))
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("outcome %T", resp.Outcome)
	run, evs := settledRun(t, srv, resp.RunID)
	for _, e := range evs {
		t.Logf("%d %s %s", e.Seq, e.Type, e.Data)
	}
	if want := runStatusOf(resp.Outcome); run.Status != want {
		t.Errorf("run status %q, want %q (the client was answered %T)", run.Status, want, resp.Outcome)
	}
	// The run has ended: a cancel finds nothing to cancel.
	ok, err := srv.Cancel(context.Background(), "", resp.RunID)
	if ok || err != nil {
		t.Errorf("cancel of the ended run: %v %v, want false <nil>", ok, err)
	}
}

// After the NaN-metadata turn: the session's delete and the run listing.
func TestAdapterOutputThatDoesNotEncodeLeavesNoRunBehindADelete(t *testing.T) {
	srv, _ := turnFuncServer(t, funcAdapter(func(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
		res := adapter.Completed("done", nil)
		res.Output.Metadata = map[string]any{"confidence": math.NaN()}
		return res, nil
	}))
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("DELETE", "http://localhost/v1/sessions/s", nil)
	h.ServeHTTP(rec, req)
	t.Logf("delete: %d %s", rec.Code, rec.Body)
	run, err := srv.Run(context.Background(), "", resp.RunID)
	t.Logf("run after delete: %+v %v", run, err)
	if err == nil {
		t.Errorf("run %s (status %s) survives its session's delete", run.ID, run.Status)
	}
}
