package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm/openai"
)

// TestUpstreamFailureAnswers drives the OpenAI-compatible endpoint over
// a real provider mapping and a fake upstream: a Retry-After over a day
// (seconds or date) reaches the client as a day, not as 1s; a garbage
// one as the default 1s; an upstream 401, an unknown model or a 200 whose
// body is an HTML page is a 502 server_error saying the request was
// fine (not a 400 asking the user to adjust their message), naming no
// key. The REST answer of a rate-limited turn carries the wait too
// (error.retry_after, seconds), when the upstream named one.
func TestUpstreamFailureAnswers(t *testing.T) {
	const key = "sk-fix2-secret-key"
	html := "<html><body>502 Bad Gateway</body></html>"
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		wantStatus int
		retryAfter string
		typ, code  string
		restWait   int
	}{
		{"429 for two days", 429, map[string]string{"Retry-After": "172800"}, `{"error":{"message":"slow down","type":"rate_limit_error"}}`,
			429, "86400", "rate_limit_error", "provider_rate_limit", 86400},
		{"429 until a date a year ahead", 429, map[string]string{"Retry-After": time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat)},
			`{"error":{"message":"slow down"}}`, 429, "86400", "rate_limit_error", "provider_rate_limit", 86400},
		{"429 for 30s", 429, map[string]string{"Retry-After": "30"}, `{"error":{"message":"slow down"}}`, 429, "30", "rate_limit_error", "provider_rate_limit", 30},
		{"429 with garbage", 429, map[string]string{"Retry-After": "soon-ish"}, `{"error":{"message":"slow down"}}`, 429, "1", "rate_limit_error", "provider_rate_limit", 0},
		{"429 with a negative wait", 429, map[string]string{"Retry-After": "-5"}, `{"error":{"message":"slow down"}}`, 429, "1", "rate_limit_error", "provider_rate_limit", 0},
		{"401", 401, nil, `{"error":{"message":"Incorrect API key provided: ` + key + `","type":"invalid_request_error","code":"invalid_api_key"}}`,
			502, "", "server_error", "provider_authentication", 0},
		{"unknown model", 404, nil, `{"error":{"message":"The model does not exist","code":"model_not_found"}}`,
			502, "", "server_error", "provider_invalid_model", 0},
		{"200 with an HTML page", 200, map[string]string{"Content-Type": "text/html"}, html, 502, "", "server_error", "provider_invalid_response", 0},
		{"200 with an HTML page labelled JSON", 200, map[string]string{"Content-Type": "application/json"}, html, 502, "", "server_error", "provider_invalid_response", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer up.Close()
			p, err := openai.New(openai.Config{BaseURL: up.URL + "/v1", APIKey: key, Model: "gpt-test"})
			if err != nil {
				t.Fatal(err)
			}
			a, err := agent.New(agent.Config{Provider: p})
			if err != nil {
				t.Fatal(err)
			}
			ts := servertest.New(t, a)
			for _, stream := range []string{"false", "true"} {
				resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
					strings.NewReader(`{"model":"demo","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var e struct {
					Error struct{ Message, Type, Code string } `json:"error"`
				}
				if err := json.Unmarshal(body, &e); err != nil {
					t.Fatalf("stream %s: %d %s", stream, resp.StatusCode, body)
				}
				if resp.StatusCode != tc.wantStatus || resp.Header.Get("Retry-After") != tc.retryAfter || e.Error.Type != tc.typ || e.Error.Code != tc.code {
					t.Errorf("stream %s: %d Retry-After %q %s, want %d Retry-After %q %s %s", stream, resp.StatusCode,
						resp.Header.Get("Retry-After"), body, tc.wantStatus, tc.retryAfter, tc.typ, tc.code)
				}
				if strings.Contains(string(body), key) || strings.Contains(strings.ToLower(string(body)), "adjust your message") {
					t.Errorf("stream %s: the answer %s names the key or blames the request", stream, body)
				}
			}
			var out struct {
				Outcome string
				Error   struct {
					Category   string
					RetryAfter int `json:"retry_after"`
				}
			}
			post(t, ts.URL+"/v1/sessions/rest/messages", `{"content":"hi"}`, &out)
			if out.Outcome != "errored" || out.Error.Category != tc.code || out.Error.RetryAfter != tc.restWait {
				t.Errorf("REST: %+v, want errored %s with retry_after %d", out, tc.code, tc.restWait)
			}
			// OpenHarness: the same wait, in the error's details and the
			// Retry-After header.
			resp, err := http.Post(ts.URL+"/v1/openharness", "application/json", strings.NewReader(
				`{"protocol_version":"1.0.0","request_id":"oh-1","request":{"context":{"session_id":"oh","user_intent":"hi"}}}`))
			if err != nil {
				t.Fatal(err)
			}
			var oh struct {
				Response struct {
					Error struct {
						Code    string
						Details struct {
							RetryAfter int `json:"retry_after_seconds"`
						}
					}
				}
			}
			err = json.NewDecoder(resp.Body).Decode(&oh)
			resp.Body.Close()
			wantHeader := ""
			if tc.restWait > 0 {
				wantHeader = strconv.Itoa(tc.restWait)
			}
			if err != nil || oh.Response.Error.Code != tc.code || oh.Response.Error.Details.RetryAfter != tc.restWait || resp.Header.Get("Retry-After") != wantHeader {
				t.Errorf("OpenHarness: %+v (%v), Retry-After %q, want %s with retry_after_seconds %d", oh, err, resp.Header.Get("Retry-After"), tc.code, tc.restWait)
			}
		})
	}
}
