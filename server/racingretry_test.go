package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/server"
)

// TestRacingRetransmission: the same message id sent again while its
// original still runs gets the original's outcome and run id once the
// original ends (the turn ran once); the run the retransmission opened
// ends naming the original ("replay_of") rather than as a second
// completed run with a copy of its replies, as it did.
func TestRacingRetransmission(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 4)
	ts := gatedServer(t, gate, started, func(*server.Config) {})
	type answer struct {
		Outcome  string `json:"outcome"`
		RunID    string `json:"run_id"`
		Replayed bool   `json:"replayed"`
	}
	post := func(into chan<- answer) {
		var a answer
		resp, err := http.Post(ts.URL+"/v1/sessions/r/messages", "application/json", strings.NewReader(`{"content":"hi","message_id":"m-1"}`))
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
		}
		into <- a
	}
	type run struct {
		ID     string         `json:"id"`
		Status string         `json:"status"`
		Output map[string]any `json:"output"`
	}
	runs := func() []run {
		var l struct {
			Runs []run `json:"runs"`
		}
		resp, err := http.Get(ts.URL + "/v1/sessions/r/runs")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&l)
		return l.Runs
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	go post(first)
	<-started
	go post(second)
	for deadline := time.Now().Add(10 * time.Second); len(runs()) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the retransmission opened no run while its original ran")
		}
	}
	gate <- struct{}{}
	a, b := <-first, <-second
	if a.Outcome != "completed" || b.Outcome != "completed" || !b.Replayed || b.RunID != a.RunID || a.RunID == "" {
		t.Fatalf("original %+v, retransmission %+v", a, b)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var done, replay int
		for _, r := range runs() {
			switch {
			case r.Status == "completed" && r.Output["replay_of"] == a.RunID:
				replay++
			case r.Status == "completed" && r.ID == a.RunID && r.Output["replies"] != nil:
				done++
			}
		}
		if done == 1 && replay == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs %+v, want the original's and one naming it", runs())
		}
	}
}
