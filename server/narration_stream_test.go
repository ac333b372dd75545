package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// TestNarrationStreamCarriesCompletion checks that, with narration
// enabled, the narration frames of a streamed OpenAI turn (event:
// stable_harness.progress.narration) are exactly the run's recorded
// runtime.progress.narration events, in order: the tool steps'
// ("Calling lookup_order…", "lookup_order returned its result.") and the
// completion's ("The answer is ready."; an artifact's narration likewise).
// README promises "a template sentence per tool step and at completion;
// on the OpenAI stream as event: stable_harness.progress.narration", the
// stable-harness runtime.stream.progress.narration view whose source is
// runtime.progress.narration.
func TestNarrationStreamCarriesCompletion(t *testing.T) {
	ts := servertest.NewDemo(t, func(c *server.Config) { c.Narration = &server.Narration{} })
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", strings.NewReader(
		`{"model":"demo","stream":true,"messages":[{"role":"user","content":"where is order 3?"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(server.SessionHeader, "narr")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var streamed []string
	var id string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && line != "data: [DONE]":
			var f struct {
				ID      string `json:"id"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f)
			if id == "" {
				id = f.ID
			}
			if event == server.NarrationEvent {
				streamed = append(streamed, f.Message)
			}
		case line == "":
			event = ""
		}
	}
	runID := strings.TrimPrefix(id, "chatcmpl-")
	r, err := http.Get(ts.URL + "/v1/runs/" + runID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var body struct{ Events []runtime.Event }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	var recorded []string
	for _, ev := range body.Events {
		if ev.Type == runtime.EventProgressNarration {
			var d struct{ Message string }
			_ = json.Unmarshal(ev.Data, &d)
			recorded = append(recorded, d.Message)
		}
	}
	if len(recorded) == 0 {
		t.Fatalf("run %q: got no recorded narration; want at least one", runID)
	}
	if !slices.Equal(streamed, recorded) {
		t.Errorf("narrations on the OpenAI stream: got %q, want the run's recorded %q", streamed, recorded)
	}
}
