package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/servertest"
)

// TestNestedFieldNamesAreExact: field names are exact on every surface
// and at every depth (README: "a key that names a field only up to case
// (`Session_ID`, `Content`) is an unknown field and ignored"): inside an
// OpenAI chat message, a chat content part, a Responses input item or a
// Responses content part, a key differing from a field's name only in
// case is ignored, as at the top level. Before, only the top level was
// exact there: `"Content":"X"` after `"content":"hi"` replaced the
// user's text (the demo agent echoed "X"), and `"Content":"X"` alone
// was accepted as the message's content.
func TestNestedFieldNamesAreExact(t *testing.T) {
	ts := servertest.NewDemo(t)
	for _, tc := range []struct{ name, path, body string }{
		{"chat message Content", "/v1/chat/completions",
			`{"model":"demo","messages":[{"role":"user","content":"hi","Content":"X"}]}`},
		{"chat content part Text", "/v1/chat/completions",
			`{"model":"demo","messages":[{"role":"user","content":[{"type":"text","text":"hi","Text":"X"}]}]}`},
		{"responses input item Content", "/v1/responses",
			`{"model":"demo","input":[{"role":"user","content":"hi","Content":"X"}]}`},
		{"responses content part Text", "/v1/responses",
			`{"model":"demo","input":[{"role":"user","content":[{"type":"input_text","text":"hi","Text":"X"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(ts.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), `You said: \"X\"`) || !strings.Contains(string(b), `You said: \"hi\"`) {
				t.Fatalf("the case-different key was taken as the field (the agent answered the text \"X\"): %s", b)
			}
		})
	}
}
