package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// A turn nobody shows live (a REST turn, no subscriber) calls the model
// without streaming and records its text whole, in one agent.output.delta
// holding the reply; a streamed surface, or a session with a live
// subscriber, streams the model call. The run's events are the same
// either way but for the cut of the text.
func TestUnwatchedTurnsCallTheModelWhole(t *testing.T) {
	m := &demo.Counting{}
	a, err := agent.New(agent.Config{Provider: m, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	s := newTruthServer(t, a, 0)
	calls := func() (streamed, plain int32) { return m.Streamed.Swap(0), m.Plain.Swap(0) }

	// REST, unwatched: plain calls, one delta with the whole reply.
	var out struct {
		Outcome string
		Replies []struct{ Content string }
	}
	post(t, s.ts.URL+"/v1/sessions/plain/messages", `{"content":"where is order 7?"}`, &out)
	if out.Outcome != "completed" || len(out.Replies) != 3 {
		t.Fatalf("turn: %+v", out)
	}
	if st, pl := calls(); st != 0 || pl != 2 {
		t.Errorf("unwatched turn: %d streamed and %d plain model calls, want 0 and 2", st, pl)
	}
	runs := sessionRuns(t, s.runs, "plain")
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	evs, err := s.runs.Events(t.Context(), runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: runs[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	var deltas []string
	for _, e := range evs {
		var d struct {
			Event struct {
				Phase, Text string
			}
		}
		if e.Type == runtime.EventAdapterEvent && json.Unmarshal(e.Data, &d) == nil && d.Event.Phase == runtime.PhaseOutputDelta {
			deltas = append(deltas, d.Event.Text)
		}
	}
	if want := out.Replies[2].Content; len(deltas) != 1 || deltas[0] != want {
		t.Errorf("deltas %q, want one: %q", deltas, want)
	}
	if got := phases(t, s.runs, runs[0].ID); strings.Join(got, " ") != strings.Join(toolTurn, " ") {
		t.Errorf("events %v, want %v", got, toolTurn)
	}

	// Streamed to its client: streamed calls.
	resp, err := http.Post(s.ts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"where is order 7?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if st, pl := calls(); st != 2 || pl != 0 {
		t.Errorf("streamed turn: %d streamed and %d plain model calls, want 2 and 0", st, pl)
	}

	// An approval resumed over REST, unwatched: its model call is plain.
	var sus struct {
		Outcome string
		Signal  struct {
			SignalID string `json:"signal_id"`
		}
	}
	post(t, s.ts.URL+"/v1/sessions/plain/messages", `{"content":"please refund order 7"}`, &sus)
	if sus.Outcome != "suspended" {
		t.Fatalf("refund turn: %+v", sus)
	}
	calls()
	post(t, s.ts.URL+"/v1/sessions/plain/signals", `{"signal_id":"`+sus.Signal.SignalID+`","payload":{"approval":{"approved":true}}}`, &out)
	if out.Outcome != "completed" {
		t.Fatalf("resume: %+v", out)
	}
	if st, pl := calls(); st != 0 || pl != 1 {
		t.Errorf("unwatched resume: %d streamed and %d plain model calls, want 0 and 1", st, pl)
	}

	// A REST turn on a session somebody watches live: streamed calls.
	_, cancel := s.rec.Subscribe(t.Context(), server.DefaultTenant, "watched")
	defer cancel()
	post(t, s.ts.URL+"/v1/sessions/watched/messages", `{"content":"hello"}`, &out)
	if st, pl := calls(); st != 1 || pl != 0 {
		t.Errorf("watched turn: %d streamed and %d plain model calls, want 1 and 0", st, pl)
	}
}
