package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/llm/openai"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// deltaUpstream is a fake OpenAI upstream streaming size bytes of text
// in 64 KiB deltas, then a finish reason and [DONE].
func deltaUpstream(t *testing.T, size int) string {
	t.Helper()
	piece := strings.Repeat("é", 32<<10) // 64 KiB of two-byte runes
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for sent := 0; sent < size; sent += len(piece) {
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", piece); err != nil {
				return
			}
		}
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	return up.URL
}

// recordedText sums the text of a session's runs' agent.output.delta
// events, and reports the runs' statuses.
func recordedText(t *testing.T, s *truthServer, session string) (int, []runtime.Status) {
	t.Helper()
	n := 0
	var statuses []runtime.Status
	for _, r := range sessionRuns(t, s.runs, session) {
		statuses = append(statuses, r.Status)
		evs, err := s.runs.Events(t.Context(), runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			var d struct {
				Event struct{ Phase, Text string }
			}
			if e.Type == runtime.EventAdapterEvent && json.Unmarshal(e.Data, &d) == nil && d.Event.Phase == runtime.PhaseOutputDelta {
				n += len(d.Event.Text)
			}
		}
	}
	return n, statuses
}

// TestOversizedReplyRecord: a reply the provider refuses at its size
// bound (provider_invalid_response) after streaming most of it leaves at
// most 1 MiB of text in the run record, watched live or not (before, all
// it streamed: up to the bound, 16 MiB by default); a reply within the
// bound but over 1 MiB is recorded whole.
func TestOversizedReplyRecord(t *testing.T) {
	const bound = 3 << 20
	for _, tc := range []struct {
		name    string
		size    int // of the streamed text
		watched bool
		status  runtime.Status
		min     int // of the recorded text
		max     int
	}{
		{"refused, unwatched", 4 << 20, false, runtime.StatusFailed, 1, 1 << 20},
		{"refused, watched", 4 << 20, true, runtime.StatusFailed, 1, 1 << 20},
		{"2 MiB completed, unwatched", 2 << 20, false, runtime.StatusCompleted, 2 << 20, 2 << 20},
		{"2 MiB completed, watched", 2 << 20, true, runtime.StatusCompleted, 2 << 20, 2 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := openai.New(openai.Config{BaseURL: deltaUpstream(t, tc.size), APIKey: "k", Model: "m", MaxResponseBytes: bound})
			if err != nil {
				t.Fatal(err)
			}
			a, err := agent.New(agent.Config{Provider: p})
			if err != nil {
				t.Fatal(err)
			}
			s := newTruthServer(t, a, 0)
			if tc.watched {
				evs, cancel := s.rec.Subscribe(t.Context(), server.DefaultTenant, "big")
				defer cancel()
				go func() {
					for range evs {
					}
				}()
			}
			// Streamed to its client: the model call streams.
			resp, err := http.Post(s.ts.URL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"demo","stream":true,"metadata":{"session_id":"big"},"messages":[{"role":"user","content":"write a lot"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got, statuses := recordedText(t, s, "big")
			if len(statuses) != 1 || statuses[0] != tc.status {
				t.Fatalf("runs %v, want one %s", statuses, tc.status)
			}
			if got < tc.min || got > tc.max {
				t.Errorf("%d bytes of text recorded, want %d to %d", got, tc.min, tc.max)
			}
		})
	}
}
