package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// tricklingModel streams its answer in n one-word chunks, every ms.
type tricklingModel struct {
	demo.Model
	n  int
	ms time.Duration
}

func (m tricklingModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	var b strings.Builder
	for i := range m.n {
		fmt.Fprintf(&b, "w%d ", i)
	}
	return &llm.Response{Message: llm.AssistantText(b.String()), FinishReason: llm.FinishStop}, nil
}

func (m tricklingModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		for i := range m.n {
			time.Sleep(m.ms)
			if !yield(&llm.Chunk{Content: fmt.Sprintf("w%d ", i)}, nil) {
				return
			}
		}
		yield(&llm.Chunk{FinishReason: llm.FinishStop}, nil)
	}
}

// A turn whose session someone watches live records the text it streams
// at most every Config.LiveTextEvery (25 ms by default): 200 chunks
// streamed over about 400 ms are a few tens of agent.output.delta
// events, each a store write, with the same text; with LiveTextEvery
// negative, one per chunk. Before, a watched turn wrote each chunk as
// its own event, a commit per token.
func TestWatchedTurnTextCoalesced(t *testing.T) {
	const chunks = 200
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{
		{"default", 0},
		{"every chunk", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := agent.New(agent.Config{Provider: tricklingModel{n: chunks, ms: 2 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			ts := servertest.New(t, a, func(c *server.Config) { c.LiveTextEvery = tc.every })
			// A live watcher of the session.
			req, err := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/v1/sessions/w/events", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				Outcome string
				Replies []struct{ Content string }
			}
			start := time.Now()
			post(t, ts.URL+"/v1/sessions/w/messages", `{"content":"hello"}`, &out)
			took := time.Since(start)
			if out.Outcome != "completed" || len(out.Replies) != 1 {
				t.Fatalf("turn: %+v", out)
			}
			var runs struct{ Runs []runtime.Run }
			getJSON(t, ts.URL+"/v1/sessions/w/runs", &runs)
			if len(runs.Runs) != 1 {
				t.Fatalf("runs %+v", runs)
			}
			var page struct{ Events []runtime.Event }
			getJSON(t, ts.URL+"/v1/runs/"+runs.Runs[0].ID+"/events?limit=10000", &page)
			evs := page.Events
			var text strings.Builder
			deltas := 0
			for _, e := range evs {
				var d struct{ Event struct{ Phase, Text string } }
				if e.Type == runtime.EventAdapterEvent && json.Unmarshal(e.Data, &d) == nil && d.Event.Phase == runtime.PhaseOutputDelta {
					deltas++
					text.WriteString(d.Event.Text)
				}
			}
			if text.String() != out.Replies[0].Content {
				t.Fatalf("the deltas' text %q, want the reply %q", text.String(), out.Replies[0].Content)
			}
			switch {
			case tc.every < 0 && deltas != chunks:
				t.Errorf("%d agent.output.delta events for %d chunks, want one each", deltas, chunks)
			case tc.every == 0 && (deltas >= chunks || deltas > int(took/(25*time.Millisecond))+2):
				// At most one every 25 ms of the turn, and the rest at its end.
				t.Errorf("%d agent.output.delta events for %d chunks in %v, want at most one per 25 ms", deltas, chunks, took)
			}
		})
	}
}
