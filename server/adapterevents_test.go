package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// agentPhases returns the phases of evs's agent.* events, each with its
// nodeId.
func agentPhases(t *testing.T, evs []runtime.Event) []string {
	t.Helper()
	var got []string
	for _, e := range evs {
		if e.Type != runtime.EventAdapterEvent {
			continue
		}
		var d struct {
			Event struct {
				Phase, NodeID string
			} `json:"event"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Event.Phase+" "+d.Event.NodeID)
	}
	return got
}

// scriptedServer serves one agent per Scripted adapter (ids a0, a1,
// ...) over one in-memory session store, recording runs in an in-memory
// run store.
func scriptedServer(t *testing.T, scripts ...adaptertest.Scripted) (*server.Server, *runtime.Recorder, *runtime.MemoryStore, []*server.Agent) {
	t.Helper()
	ctx := context.Background()
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	var agents []*server.Agent
	for i, s := range scripts {
		a, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: s, Agent: &adapter.Agent{ID: fmt.Sprint("a", i), Backend: s.Name()},
			Sessions: sessions})
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: agents, Sessions: sessions, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(ctx); _ = rec.Close(ctx) })
	return srv, rec, store, agents
}

// A backend adapter's turn records the upstream's node completions and
// none of the scaffolding graph Compile wraps it in (adapter.Wraps): its
// run node is the runtime's, not the upstream's.
func TestAdapterTurnRecordsUpstreamNodesOnly(t *testing.T) {
	ctx := context.Background()
	for _, tool := range []bool{false, true} {
		srv, rec, store, _ := scriptedServer(t, adaptertest.Scripted{Tool: tool})
		resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("hello")})
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err := store.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: resp.RunID})
		if err != nil {
			t.Fatal(err)
		}
		got := agentPhases(t, evs)
		want := []string{"agent.handoff ", "agent.output.delta ", "agent.node.completed agent"}
		if tool {
			want = []string{"agent.handoff ", "agent.tool.start ", "agent.tool.result ", "agent.output.delta ", "agent.node.completed agent"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("tool %v: agent events %q, want %q", tool, got, want)
		}
	}
}

// A watched session gets a backend adapter's turn live, in order, with
// the same events the store keeps: the turn has no node observer, and
// its events go out as they happen.
func TestAdapterTurnWatchedLive(t *testing.T) {
	ctx := context.Background()
	srv, rec, store, _ := scriptedServer(t, adaptertest.Scripted{Tool: true})
	live, cancel := rec.Subscribe(ctx, server.DefaultTenant, "watched")
	defer cancel()
	resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "watched", Message: llm.UserText("hello")})
	if err != nil {
		t.Fatal(err)
	}
	var got []runtime.Event
	for e := range live {
		got = append(got, e)
		if e.Type == runtime.EventRequestCompleted {
			break
		}
	}
	stored, err := store.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: resp.RunID})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"agent.handoff ", "agent.tool.start ", "agent.tool.result ", "agent.output.delta ", "agent.node.completed agent"}
	if p := agentPhases(t, got); !slices.Equal(p, want) {
		t.Errorf("live agent events %q, want %q", p, want)
	}
	if len(got) != len(stored) {
		t.Fatalf("%d live events, %d stored", len(got), len(stored))
	}
	for i := range got {
		if got[i].ID != stored[i].ID || got[i].Type != stored[i].Type || string(got[i].Data) != string(stored[i].Data) {
			t.Errorf("live event %d = %d %s %s, stored %d %s %s", i, got[i].ID, got[i].Type, got[i].Data, stored[i].ID, stored[i].Type, stored[i].Data)
		}
	}
}

// Concurrent backend-adapter turns on many sessions, some watched and
// some not, a watcher joining or leaving at random: every run ends
// completed with its full event sequence in the store, in order
// (randomized; the seed is logged).
func TestAdapterTurnsConcurrent(t *testing.T) {
	ctx := context.Background()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	srv, rec, store, agents := scriptedServer(t, adaptertest.Scripted{}, adaptertest.Scripted{Tool: true})
	type job struct {
		session string
		agent   int
		watch   bool
	}
	var jobs []job
	for i := range 64 {
		jobs = append(jobs, job{session: fmt.Sprint("a", i%2, "-s", rng.IntN(6)), agent: i % 2, watch: rng.IntN(3) == 0})
	}
	runs := make([]string, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			if j.watch {
				live, cancel := rec.Subscribe(ctx, server.DefaultTenant, j.session)
				defer cancel()
				go func() {
					for range live {
					}
				}()
			}
			resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: j.session, Agent: agents[j.agent].ID, Message: llm.UserText("hello")})
			if err != nil {
				t.Error(err)
				return
			}
			runs[i] = resp.RunID
		})
	}
	wg.Wait()
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range runs {
		if id == "" {
			continue
		}
		evs, err := store.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: id})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"agent.handoff ", "agent.output.delta ", "agent.node.completed agent"}
		if jobs[i].agent == 1 {
			want = []string{"agent.handoff ", "agent.tool.start ", "agent.tool.result ", "agent.output.delta ", "agent.node.completed agent"}
		}
		if got := agentPhases(t, evs); !slices.Equal(got, want) {
			t.Errorf("run %d (%+v): agent events %q, want %q", i, jobs[i], got, want)
		}
		if evs[0].Type != runtime.EventRequestStarted || evs[len(evs)-1].Type != runtime.EventRequestCompleted {
			t.Errorf("run %d: events from %s to %s", i, evs[0].Type, evs[len(evs)-1].Type)
		}
		for k := 1; k < len(evs); k++ {
			if evs[k].Seq != evs[k-1].Seq+1 || evs[k].ID <= evs[k-1].ID {
				t.Errorf("run %d: event %d out of order (seq %d after %d, id %d after %d)", i, k, evs[k].Seq, evs[k-1].Seq, evs[k].ID, evs[k-1].ID)
			}
		}
	}
}

// Two agents serving one session take its turns one at a time: turns
// sent through both at once all complete and lose no message (the
// session store's locks are shared by every agent's harness).
func TestTwoAgentsOneSession(t *testing.T) {
	ctx := context.Background()
	srv, _, _, agents := scriptedServer(t, adaptertest.Scripted{}, adaptertest.Scripted{})
	const turns = 32
	var wg sync.WaitGroup
	for i := range turns {
		wg.Go(func() {
			resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "shared", Agent: agents[i%2].ID, Message: llm.UserText(fmt.Sprint("m", i))})
			if err != nil {
				t.Error(err)
				return
			}
			if _, ok := resp.Outcome.(*chat.Completed); !ok {
				t.Errorf("turn %d: %#v", i, resp.Outcome)
			}
		})
	}
	wg.Wait()
	st, err := agents[0].Chat.Harness().Graph().SessionState(ctx, server.DefaultTenant+"/shared")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(chat.Messages.Get(st)); n != 2*turns {
		t.Errorf("%d messages stored after %d completed turns, want %d", n, turns, 2*turns)
	}
}
