package server_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// stallAfterResult is the demo model, whose call after a tool's result
// blocks (entered closed) until release is closed: a resumed turn whose
// approved call ran, caught before it ends.
type stallAfterResult struct {
	demo.Model
	entered, release chan struct{}
}

func (m *stallAfterResult) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if msgs := req.Transcript(); len(msgs) > 0 && msgs[len(msgs)-1].Role == llm.RoleTool {
		close(m.entered)
		<-m.release
	}
	return m.Model.Complete(ctx, req)
}

// TestApprovedResultSurvivesACrash: the run resuming an approved call
// has the call's start and result in the store as soon as the call
// ran, before the turn goes on: a process killed during the follow-up
// model call leaves a run record saying the refund ran (the session
// keeps its result, and the approval is spent). Before, the events
// waited in the turn's buffer until the turn ended, and the crash left
// a run with no trace of the call.
func TestApprovedResultSurvivesACrash(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	store, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(ctx) })
	m := &stallAfterResult{entered: make(chan struct{}), release: make(chan struct{})}
	a, err := agent.New(agent.Config{Provider: m, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints())})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h}}, Sessions: store, Runs: rec, DisableWebUI: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("refund order 5")})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := resp.Outcome.(*chat.Suspended)
	if !ok {
		t.Fatalf("the refund did not ask for approval: %#v", resp.Outcome)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Signal: &adapter.Signal{SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")}})
	}()
	t.Cleanup(func() {
		close(m.release)
		<-done
		_ = srv.Stop(ctx)
		_ = rec.Close(ctx)
	})
	<-m.entered // the refund ran; the follow-up model call is under way

	// What a process killed now leaves on disk, read by another.
	after, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = after.Close(ctx) }()
	runs, err := after.Runs().ListRuns(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "s"})
	if err != nil || len(runs.Runs) != 2 {
		t.Fatalf("the session's runs: %v, %v", runs.Runs, err)
	}
	resumed := runs.Runs[0] // newest first
	evs, err := after.Runs().Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: resumed.ID})
	if err != nil {
		t.Fatal(err)
	}
	var got []string // the event types, an agent.* phase in its data
	for _, e := range evs {
		typ := e.Type
		for _, phase := range []string{runtime.PhaseToolStart, runtime.PhaseToolResult} {
			if strings.Contains(string(e.Data), `"`+phase+`"`) {
				typ = phase
			}
		}
		got = append(got, typ)
		if typ == runtime.PhaseToolResult && !strings.Contains(string(e.Data), "issue_refund") {
			t.Errorf("the result recorded is not the refund's: %s", e.Data)
		}
	}
	for _, want := range []string{"runtime.approval.resolved", runtime.PhaseToolStart, runtime.PhaseToolResult} {
		if !slices.Contains(got, want) {
			t.Fatalf("the resumed run's events on disk while its follow-up runs: %v; want %s among them", got, want)
		}
	}
}
