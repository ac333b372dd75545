package chatcli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/internal/chatcli"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// reporter is a backend adapter answering with a report artifact.
type reporter struct{}

func (reporter) Name() string { return "reporter" }

func (reporter) Run(ctx context.Context, req *adapter.Request, emit adapter.Emitter) (*adapter.Result, error) {
	return &adapter.Result{Output: &adapter.Output{Text: "Your report is ready.",
		Artifacts: []runtime.Artifact{{Name: "report.pdf", URI: "https://example.com/report.pdf"}}}}, nil
}

// TestChatShowsArtifacts: the terminal client serves any backend and
// shows the artifacts its turns create.
func TestChatShowsArtifacts(t *testing.T) {
	store := servertest.SQLite(t)
	served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: reporter{}, Agent: &adapter.Agent{ID: "demo", Backend: "reporter"},
		Sessions: store, Records: store.Checkpoints()})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.Serve(t, server.Config{Agents: []*server.Agent{served}, Sessions: store})
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, "")})
	s.waitFor("you> ")
	s.send("a report, please")
	got := s.waitFor("you> ")
	for _, want := range []string{"  · artifact report.pdf https://example.com/report.pdf", "agent> Your report is ready."} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	s.quit()
}
