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
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// graphAgentServer serves one agent, h, over sessions, its runs
// recorded in memory by the returned recorder.
func graphAgentServer(t *testing.T, sessions session.Store, h *chat.Harness) (*server.Server, *runtime.Recorder) {
	t.Helper()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runtime.NewMemoryStore(runtime.MemoryConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "g", Chat: h}}, Sessions: sessions, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()); _ = rec.Close(context.Background()) })
	return srv, rec
}

// emitUnencodable reports, from a node, two artifacts (the second's
// metadata a NaN) and output keys, one of which (metadata) holds an
// infinity: none of it is refused on its way to the run's output, as an
// adapter's output may be.
func emitUnencodable(ctx context.Context) {
	chat.EmitEvent(ctx, chat.Event{Type: runtime.EventArtifactCreated, Data: map[string]any{"artifact": runtime.Artifact{ID: "good", Name: "good"}}})
	chat.EmitEvent(ctx, chat.Event{Type: runtime.EventArtifactCreated, Data: map[string]any{"artifact": runtime.Artifact{ID: "bad", Name: "bad", Metadata: map[string]any{"score": math.NaN()}}}})
	chat.EmitEvent(ctx, chat.Event{Output: map[string]any{"metadata": map[string]any{"confidence": math.Inf(1)}, "note": "kept"}})
}

// unencodableOutput is the part of a run's output these tests check.
type unencodableOutput struct {
	Replies   []llm.Message      `json:"replies"`
	Note      string             `json:"note"`
	Metadata  json.RawMessage    `json:"metadata"`
	Artifacts []runtime.Artifact `json:"artifacts"`
}

// checkEncodedPart checks that a run whose output held values JSON
// cannot encode ended with the rest of it: the output key and the
// artifact that encode, the one artifact whose runtime.artifact.created
// was recorded, no metadata; and that it left the recorder's live set.
func checkEncodedPart(t *testing.T, srv *server.Server, rec *runtime.Recorder, run *runtime.Run) unencodableOutput {
	t.Helper()
	var out unencodableOutput
	if err := json.Unmarshal(run.Output, &out); err != nil {
		t.Fatalf("run output %s: %v", run.Output, err)
	}
	if out.Note != "kept" || out.Metadata != nil || len(out.Artifacts) != 1 || out.Artifacts[0].ID != "good" {
		t.Errorf("run output %s, want the note and the good artifact, no metadata", run.Output)
	}
	evs, err := srv.Events(context.Background(), runtime.EventsRequest{RunID: run.ID, Limit: runtime.MaxEventsLimit})
	if err != nil {
		t.Fatal(err)
	}
	arts := 0
	for _, e := range evs {
		if e.Type == runtime.EventArtifactCreated {
			arts++
		}
	}
	if arts != len(out.Artifacts) {
		t.Errorf("the run records %d runtime.artifact.created events, its output lists %d artifacts", arts, len(out.Artifacts))
	}
	if n := rec.CancelAll(context.Background()); n != 0 {
		t.Errorf("%d turns left in the recorder's live set", n)
	}
	return out
}

// A completed turn whose run output holds values JSON cannot encode (a
// NaN in an artifact's metadata, an infinity in the output's): its run
// ends completed, as its client was answered, with its replies and what
// of the rest encodes, rather than staying started for good (a cancel
// doing nothing, its session's delete waiting for it).
func TestRunOutputThatDoesNotEncodeEndsCompletedWithoutIt(t *testing.T) {
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	schema, _ := chat.NewSchema()
	g, err := graph.NewBuilder(schema).
		AddNode("answer", func(ctx context.Context, s graph.State) (graph.Update, error) {
			emitUnencodable(ctx)
			return chat.Messages.Add(llm.AssistantText("done")), nil
		}).
		AddEdge("answer", graph.End).SetEntry("answer").
		Compile(graph.WithSessions(graph.SessionConfig{Store: sessions}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	srv, rec := graphAgentServer(t, sessions, h)
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Outcome.(*chat.Completed); !ok {
		t.Fatalf("outcome %T, want completed", resp.Outcome)
	}
	// Answered: the run's record, with its final status, is in the store.
	run, err := srv.Run(context.Background(), "", resp.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != runtime.StatusCompleted {
		t.Fatalf("run status %q, want completed (the client was answered completed)", run.Status)
	}
	out := checkEncodedPart(t, srv, rec, run)
	if ok, err := srv.Cancel(context.Background(), "", run.ID); ok || err != nil {
		t.Errorf("cancel of the ended run: %v %v, want false <nil>", ok, err)
	}
	if len(out.Replies) != 1 || out.Replies[0].Text() != "done" {
		t.Errorf("run output %s, want the reply", run.Output)
	}
	// The session's delete takes its runs at once.
	w := httptest.NewRecorder()
	start := time.Now()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("DELETE", "http://localhost/v1/sessions/s", nil))
	if w.Code/100 != 2 || time.Since(start) > 5*time.Second {
		t.Errorf("delete: %d %s after %v", w.Code, w.Body, time.Since(start))
	}
	if _, err := srv.Run(context.Background(), "", resp.RunID); err == nil {
		t.Error("the run survives its session's delete")
	}
}

// A turn that suspends with such an output: its run ends suspended with
// what encodes, and the signal resumes it.
func TestRunOutputThatDoesNotEncodeEndsSuspendedWithoutIt(t *testing.T) {
	ctx := context.Background()
	store := servertest.SQLite(t)
	schema, _ := chat.NewSchema()
	g, err := graph.NewBuilder(schema).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			emitUnencodable(ctx)
			return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "gate-go"})
		}).
		AddNode("passed", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return chat.Messages.Add(llm.AssistantText("gate passed")), nil
		}).
		AddEdge("gate", "passed").AddEdge("passed", graph.End).SetEntry("gate").
		Compile(graph.WithName("gate"), graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints()),
		Locker: store.SessionLocker(sqlite.LockerConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	srv, rec := graphAgentServer(t, store, h)
	resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Outcome.(*chat.Suspended); !ok {
		t.Fatalf("outcome %T, want suspended", resp.Outcome)
	}
	run, err := srv.Run(ctx, "", resp.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != runtime.StatusSuspended {
		t.Fatalf("run status %q, want suspended (the client was answered suspended)", run.Status)
	}
	checkEncodedPart(t, srv, rec, run)
	resumed, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Signal: &adapter.Signal{SignalID: "gate-go"}})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := resumed.Outcome.(*chat.Completed); !ok || len(c.Replies) != 1 || c.Replies[0].Text() != "gate passed" {
		t.Fatalf("resume: %T %+v, want completed with gate passed", resumed.Outcome, resumed.Outcome)
	}
}
