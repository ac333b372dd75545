package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// Parallel branches stream text and tool progress at once through the
// server: the chunk handler and the synchronous observer run on the
// branches' goroutines, so under -race this catches any unserialized
// state. Every chunk is recorded once, the branches' node completions
// come before the final node's, and the run completes; several turns
// run concurrently on their own sessions.
func TestParallelBranchChunks(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	const branches, pieces = 4, 25
	branch := func(name string) graph.Branch {
		return graph.Branch{Name: name, Call: func(ctx context.Context, _ graph.State) (graph.Update, error) {
			r := rand.New(rand.NewPCG(seed, uint64(len(name))))
			for i := range pieces {
				if r.IntN(4) == 0 {
					time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
				}
				chat.EmitText(ctx, fmt.Sprintf("<%s%d>", name, i))
				if i%10 == 0 {
					id := fmt.Sprintf("%s-%d", name, i)
					chat.EmitTool(ctx, chat.ToolProgress{CallID: id, Name: "t", Status: chat.ToolRunning})
					chat.EmitTool(ctx, chat.ToolProgress{CallID: id, Name: "t", Status: chat.ToolCompleted, Result: "ok"})
				}
			}
			return nil, nil
		}}
	}
	schema, err := chat.NewSchema()
	if err != nil {
		t.Fatal(err)
	}
	var bs []graph.Branch
	for i := range branches {
		bs = append(bs, branch(fmt.Sprintf("b%d", i)))
	}
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	g, err := graph.NewBuilder(schema).
		AddParallelBranches("fan", graph.ParallelBranches{Branches: bs}).
		AddNode("reply", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			chat.EmitText(ctx, "done")
			return chat.Messages.Add(llm.AssistantText("done")), nil
		}).
		SetEntry("fan").AddEdge("fan", "reply").AddEdge("reply", graph.End).
		Compile(graph.WithSessions(graph.SessionConfig{Store: sessions}), graph.WithCallableBranchHead(0)) // the branches overlap
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	runs := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runs})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "par", Chat: h}}, Sessions: sessions, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()); _ = rec.Close(context.Background()) })

	const turns = 6
	errs := make(chan error, turns)
	for n := range turns {
		go func() {
			var relayed strings.Builder
			resp, err := srv.Submit(t.Context(), adapter.SubmitRequest{SessionID: fmt.Sprintf("p%d", n), Message: llm.UserText("go"),
				OnChunk: func(c chat.Chunk) { relayed.WriteString(c.Text) }})
			if err == nil {
				err = checkParallelRun(t.Context(), rec, runs, resp, relayed.String(), branches, pieces)
			}
			errs <- err
		}()
	}
	for range turns {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func checkParallelRun(ctx context.Context, rec *runtime.Recorder, runs *runtime.MemoryStore, resp *adapter.Response, relayed string, branches, pieces int) error {
	if _, ok := resp.Outcome.(*chat.Completed); !ok {
		return fmt.Errorf("outcome %T", resp.Outcome)
	}
	if err := rec.Flush(ctx); err != nil {
		return err
	}
	evs, err := runs.Events(ctx, runtime.EventsRequest{Tenant: "default", RunID: resp.RunID, Limit: 10000})
	if err != nil {
		return err
	}
	var text strings.Builder
	var nodes []string
	starts, results := 0, 0
	for _, e := range evs {
		if e.Type != runtime.EventAdapterEvent {
			continue
		}
		var p struct {
			Event struct {
				Phase  string `json:"phase"`
				Text   string `json:"text"`
				NodeID string `json:"nodeId"`
			} `json:"event"`
		}
		if err := json.Unmarshal(e.Data, &p); err != nil {
			return err
		}
		switch p.Event.Phase {
		case runtime.PhaseOutputDelta:
			text.WriteString(p.Event.Text)
		case runtime.PhaseToolStart:
			starts++
		case runtime.PhaseToolResult:
			results++
		case runtime.PhaseNodeCompleted:
			nodes = append(nodes, p.Event.NodeID)
		}
	}
	got := text.String()
	if got != relayed {
		return fmt.Errorf("recorded text %q, relayed %q", got, relayed)
	}
	for b := range branches {
		for i := range pieces {
			if piece := fmt.Sprintf("<b%d%d>", b, i); strings.Count(got, piece) != 1 {
				return fmt.Errorf("piece %s recorded %d times in %q", piece, strings.Count(got, piece), got)
			}
		}
	}
	if !strings.HasSuffix(got, "done") {
		return fmt.Errorf("the final node's text is not last: %q", got)
	}
	if want := branches * ((pieces + 9) / 10); starts != want || results != want {
		return fmt.Errorf("%d tool starts and %d results, want %d each", starts, results, want)
	}
	if len(nodes) == 0 || nodes[len(nodes)-1] != "reply" {
		return fmt.Errorf("node completions %v: want reply last", nodes)
	}
	return nil
}
