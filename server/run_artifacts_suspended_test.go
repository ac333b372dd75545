package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// funcAdapter runs fn as its turn.
type funcAdapter func(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error)

func (funcAdapter) Name() string { return "func" }
func (f funcAdapter) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	return f(ctx, req, emit)
}

// runArtifacts returns the artifacts a run's output lists and the
// number of runtime.artifact.created events the run recorded.
func runArtifacts(t *testing.T, srv *server.Server, runID string) (*runtime.Run, []runtime.Artifact, int) {
	t.Helper()
	ctx := context.Background()
	run, err := srv.Run(ctx, "", runID)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Artifacts []runtime.Artifact `json:"artifacts"`
	}
	if len(run.Output) > 0 {
		if err := json.Unmarshal(run.Output, &out); err != nil {
			t.Fatalf("run output %s: %v", run.Output, err)
		}
	}
	evs, err := srv.Events(ctx, runtime.EventsRequest{RunID: runID, Limit: runtime.MaxEventsLimit})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == runtime.EventArtifactCreated {
			n++
		}
	}
	return run, out.Artifacts, n
}

// The artifacts an adapter emitted in a turn that then suspended for an
// approval are listed on the suspended run's output (with its usage, if
// any), as a completed run's are; the resumed turn's run lists its own.
func TestSuspendedRunOutputListsTheTurnsArtifacts(t *testing.T) {
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	a := funcAdapter(func(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
		if req.Resume != nil {
			emit.Emit(ctx, adapter.Event{Artifact: &runtime.Artifact{ID: "refund", Name: "refund", Text: "refund issued"}})
			return adapter.Completed("refunded", nil), nil
		}
		emit.Emit(ctx, adapter.Event{Artifact: &runtime.Artifact{Name: "draft", Text: "draft refund"}})
		return &adapter.Result{Suspension: &adapter.Suspension{ToolCall: llm.ToolCall{ID: "c1", Name: "issue_refund", Arguments: json.RawMessage(`{}`)}}}, nil
	})
	ag, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: &adapter.Agent{ID: "a0", Backend: a.Name()}, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runtime.NewMemoryStore(runtime.MemoryConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{ag}, Sessions: sessions, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()); _ = rec.Close(context.Background()) })

	ctx := context.Background()
	resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("refund me")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Outcome.(*chat.Suspended); !ok {
		t.Fatalf("outcome %T, want suspended", resp.Outcome)
	}
	run, arts, events := runArtifacts(t, srv, resp.RunID)
	if run.Status != runtime.StatusSuspended {
		t.Fatalf("run status %q, want suspended", run.Status)
	}
	if events != 1 || len(arts) != 1 || arts[0].Name != "draft" || arts[0].Text != "draft refund" || arts[0].ID == "" {
		t.Errorf("the suspended run records %d runtime.artifact.created events, its output %s: want the draft listed", events, run.Output)
	}

	resumed, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s",
		Signal: &adapter.Signal{SignalID: agent.SignalPrefix + "c1", Payload: map[string]any(agent.Approve(""))}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resumed.Outcome.(*chat.Completed); !ok {
		t.Fatalf("resume: outcome %T, want completed", resumed.Outcome)
	}
	run, arts, events = runArtifacts(t, srv, resumed.RunID)
	if run.Status != runtime.StatusCompleted || events != 1 || len(arts) != 1 || arts[0].ID != "refund" {
		t.Errorf("the resumed run (%s) records %d runtime.artifact.created events, its output %s: want the refund alone", run.Status, events, run.Output)
	}
}

// A native graph's node that reports an artifact (a
// runtime.artifact.created event, no output of its own) has it listed
// on its completed run's output too.
func TestCompletedRunOutputListsReportedArtifacts(t *testing.T) {
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	schema, _ := chat.NewSchema()
	g, err := graph.NewBuilder(schema).
		AddNode("answer", func(ctx context.Context, s graph.State) (graph.Update, error) {
			chat.EmitEvent(ctx, chat.Event{Type: runtime.EventArtifactCreated, Data: map[string]any{"artifact": runtime.Artifact{ID: "a1", Name: "report"}}})
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
	srv, _ := graphAgentServer(t, sessions, h)
	resp, err := srv.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	run, arts, events := runArtifacts(t, srv, resp.RunID)
	if run.Status != runtime.StatusCompleted || events != 1 || len(arts) != 1 || arts[0].ID != "a1" {
		t.Errorf("the run (%s) records %d runtime.artifact.created events, its output %s: want the report listed", run.Status, events, run.Output)
	}
}
