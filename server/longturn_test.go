package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/server"
)

// TestLongTurnAnswered: a turn that runs past the server's WriteTimeout
// still reaches its client, on REST and on the OpenAI endpoint
// (non-streamed): the answer gets a write deadline of its own. Before,
// the client read an empty reply while the log showed 200.
func TestLongTurnAnswered(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 4)
	base, stop, served := serveGated(t, gate, started, time.Second, func(c *server.Config) { c.WriteTimeout = 200 * time.Millisecond })
	t.Cleanup(func() { stop(); <-served })
	for _, c := range []struct{ path, body, want string }{
		{"/v1/sessions/long/messages", `{"content":"hi"}`, `"outcome":"completed"`},
		{"/v1/chat/completions", `{"model":"gated","messages":[{"role":"user","content":"hi"}]}`, `"content":"done"`},
	} {
		go func() {
			<-started
			time.Sleep(600 * time.Millisecond) // past WriteTimeout
			gate <- struct{}{}
		}()
		resp, err := http.Post(base+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatalf("%s: %v (the answer was lost)", c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), c.want) || !json.Valid(body) {
			t.Fatalf("%s: %d %s", c.path, resp.StatusCode, body)
		}
	}
}
