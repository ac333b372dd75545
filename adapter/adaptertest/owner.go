package adaptertest

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// NativeID is the id of the native agent CheckSignalOwner serves beside
// the backend's.
const NativeID = "nat"

// CheckSignalOwner checks that an approval resumes the turn of the agent
// that suspended it, in a workspace of two agents sharing one session
// and one store: the backend's agent (AgentID, the default) and a
// native one (NativeID). For each agent in turn, a refund suspends on
// it (the message names the agent); an approval naming the other agent
// answers 404 and resumes nothing; one naming no agent (a REST signal
// as the OpenAI endpoint's resume_url sends it) resumes the suspending
// agent's turn: the resumed run is that agent's, the approved call runs
// once, and no agent calls the model for a new refund. A resume by the
// wrong agent would run the upstream again from the user's message and
// apply the approval to a call nobody saw.
func CheckSignalOwner(t *testing.T, backend string, factory adapter.Factory, section string) {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "owner.db")})
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel()
	var cfgSection json.RawMessage
	if section != "" {
		cfgSection = json.RawMessage(section)
	}
	backendAgent := &adapter.Agent{ID: AgentID, Backend: backend, Model: "scripted", Provider: m, Tools: Tools(), Config: cfgSection}
	native := &adapter.Agent{ID: NativeID, Backend: adapter.Native, Model: "scripted", Provider: m, Tools: Tools()}
	ws := &adapter.Workspace{Agents: []*adapter.Agent{backendAgent, native}}
	if factory == nil {
		factory = adapter.NativeFactory
	}
	reg := &adapter.Registry{}
	if err := reg.Register(backend, factory); err != nil {
		t.Fatal(err)
	}
	if backend != adapter.Native {
		if err := reg.Register(adapter.Native, adapter.NativeFactory); err != nil {
			t.Fatal(err)
		}
	}
	var served []*server.Agent
	for _, ag := range ws.Agents {
		a, err := reg.Build(ctx, adapter.FactoryRequest{Workspace: ws, Agent: ag})
		if err != nil {
			t.Fatal(err)
		}
		sa, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: ag, Workspace: ws, Sessions: store,
			Records: store.Checkpoints(), Locker: store.SessionLocker(sqlite.LockerConfig{})})
		if err != nil {
			t.Fatal(err)
		}
		served = append(served, sa)
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: served, Sessions: store, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = srv.Stop(sctx)
		_ = rec.Close(sctx)
		_ = store.Close(sctx)
	})
	in := &instance{ts: ts}

	for i, owner := range []string{NativeID, AgentID} {
		other := AgentID
		if owner == AgentID {
			other = NativeID
		}
		session := "owner-" + owner
		var sus restOutcome
		in.do(t, "POST", "/v1/sessions/"+session+"/messages", map[string]any{"content": "please refund order 7", "agent": owner}, nil, &sus)
		if sus.Outcome != "suspended" || sus.Signal.SignalID == "" {
			t.Fatalf("%s: the refund: %+v", owner, sus)
		}
		approve := map[string]any{"signal_id": sus.Signal.SignalID, "payload": map[string]any{"approval": map[string]any{"approved": true}}}
		named := map[string]any{"agent": other}
		for k, v := range approve {
			named[k] = v
		}
		var refused restOutcome
		if code := in.do(t, "POST", "/v1/sessions/"+session+"/signals", named, nil, &refused); code != 404 ||
			refused.Error.Category != "harness_signal_correlation_failed" {
			t.Fatalf("%s's suspension approved naming agent %s: %d %+v, want 404 harness_signal_correlation_failed", owner, other, code, refused)
		}
		var done restOutcome
		if code := in.do(t, "POST", "/v1/sessions/"+session+"/signals", approve, nil, &done); code != 200 || done.Outcome != "completed" {
			t.Fatalf("%s's suspension approved naming no agent: %d %+v", owner, code, done)
		}
		var run runtime.Run
		in.do(t, "GET", "/v1/runs/"+done.RunID, nil, nil, &run)
		if run.AgentID != owner {
			t.Fatalf("round %d: %s's suspension was resumed by agent %q", i, owner, run.AgentID)
		}
		var sess struct {
			Messages []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				ToolCalls  []struct {
					ID   string `json:"id"`
					Name string `json:"name"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		in.do(t, "GET", "/v1/sessions/"+session, nil, nil, &sess)
		calls, answered := map[string]string{}, map[string]int{}
		for _, msg := range sess.Messages {
			for _, tc := range msg.ToolCalls {
				calls[tc.ID] = tc.Name
			}
			if msg.Role == "tool" {
				answered[msg.ToolCallID]++
			}
		}
		refunds := 0
		for id, name := range calls {
			if name == "issue_refund" {
				refunds++
			}
			if answered[id] != 1 {
				t.Fatalf("%s: call %s (%s) has %d results; history %+v", owner, id, name, answered[id], sess.Messages)
			}
		}
		if refunds != 1 {
			t.Fatalf("%s: %d issue_refund calls in the history, want the one approved: %+v", owner, refunds, sess.Messages)
		}
	}
}
