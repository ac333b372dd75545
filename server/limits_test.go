package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/server"
)

// TestInputLimits sends every bounded field one byte over its bound and
// checks the 4xx that names it, and that nothing was stored.
func TestInputLimits(t *testing.T) {
	ts := servertest.NewDemo(t)
	long := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"message_id", "POST", "/v1/sessions/lim/messages", `{"content":"hi","message_id":"` + long(257) + `"}`, 400, "message_id must not exceed 256"},
		{"agent", "POST", "/v1/sessions/lim/messages", `{"content":"hi","agent":"` + long(129) + `"}`, 400, "agent must not exceed 128"},
		{"signal_id", "POST", "/v1/sessions/lim/signals", `{"signal_id":"` + long(257) + `","payload":{}}`, 400, "signal_id must not exceed 256"},
		{"invocation_id", "POST", "/v1/sessions/lim/signals", `{"invocation_id":"` + long(257) + `","payload":{}}`, 400, "invocation_id must not exceed 256"},
		{"session id", "POST", "/v1/sessions", `{"session_id":"` + long(129) + `"}`, 400, "invalid session id"},
		{"session page_token", "GET", "/v1/sessions?page_token=" + long(1025), "", 400, "page_token must not exceed 1024"},
		{"runs page_token", "GET", "/v1/sessions/lim/runs?page_token=" + long(1025), "", 400, "page_token must not exceed 1024"},
		{"openai model", "POST", "/v1/chat/completions", `{"model":"` + long(129) + `","messages":[{"role":"user","content":"hi"}]}`, 400, "model must not exceed 128"},
		{"openharness correlation_id", "POST", "/v1/openharness", `{"protocol_version":"1.0.0","request_id":"r1","correlation_id":"` + long(257) + `","request":{"user_intent":"hi"}}`, 200, "correlation_id must not exceed 256"},
		{"assistant message", "POST", "/v1/sessions/lim/messages", `{"message":{"role":"assistant","content":"injected"}}`, 400, "message.role must be user"},
		{"system message", "POST", "/v1/sessions/lim/messages", `{"message":{"role":"system","content":"injected"}}`, 400, "message.role must be user"},
		{"not an object", "POST", "/v1/sessions/lim/messages", `[]`, 400, "the body must be a JSON object"},
		{"message without a role", "POST", "/v1/sessions/lim/messages", `{"message":{"content":"x"}}`, 400, "invalid message: role"},
		{"content and message", "POST", "/v1/sessions/lim/messages", `{"content":"a","message":{"role":"user","content":"b"}}`, 400, "not both"},
		{"body", "POST", "/v1/sessions/lim/messages", `{"content":"` + long(1<<20) + `"}`, 413, "exceeds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("%d %s; want %d with %q", resp.StatusCode, body, tc.status, tc.want)
			}
		})
	}
	resp, err := http.Get(ts.URL + "/v1/sessions/lim")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a refused request stored a session: GET answered %d", resp.StatusCode)
	}
}

// TestCreateSessionTimes: the 201 of POST /v1/sessions carries the
// session's creation time, as GET reads it (it carried zero times).
func TestCreateSessionTimes(t *testing.T) {
	ts := servertest.NewDemo(t)
	type summary struct {
		CreatedAt time.Time `json:"created_at"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	read := func(resp *http.Response, err error) summary {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s summary
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	created := read(http.Post(ts.URL+"/v1/sessions", "application/json", strings.NewReader(`{"session_id":"times"}`)))
	got := read(http.Get(ts.URL + "/v1/sessions/times"))
	if created.CreatedAt.IsZero() || !created.CreatedAt.Equal(got.CreatedAt) || !created.UpdatedAt.Equal(got.UpdatedAt) {
		t.Fatalf("created %+v, read %+v", created, got)
	}
}

// TestHeadOfEventStream: HEAD of a session's event stream answers the
// stream's headers at once, holding no stream slot: with the only slot
// taken by a live stream it is still 200, and the slot stays the
// stream's. Before, a HEAD opened a whole stream.
func TestHeadOfEventStream(t *testing.T) {
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.New(t, a, func(c *server.Config) { c.MaxSSEStreams = 1 })
	live, err := http.Get(ts.URL + "/v1/sessions/h/events")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Body.Close()
	if live.StatusCode != http.StatusOK {
		t.Fatalf("the stream: %d", live.StatusCode)
	}
	for range 3 {
		resp, err := http.Head(ts.URL + "/v1/sessions/h/events")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("HEAD: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}
