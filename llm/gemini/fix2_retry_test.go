package gemini_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/armature-go/armature/llm/gemini"
)

// TestRetryAfterBounded: a rate-limited answer's wait, from the
// Retry-After header or the RetryInfo detail, is clamped to a day, never
// overflowed into a negative or absurd wait (a header of 10^11 seconds
// overflowed time.Duration), and a garbage header falls back to the
// detail.
func TestRetryAfterBounded(t *testing.T) {
	body := func(delay string) []byte {
		return []byte(`{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "` + delay + `"}]}}`)
	}
	for _, tc := range []struct {
		name   string
		header string
		delay  string
		want   time.Duration
	}{
		{"header", "5", "37s", 5 * time.Second},
		{"huge header", "99999999999", "37s", 24 * time.Hour},
		{"two days", "172800", "", 24 * time.Hour},
		{"date a year ahead", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat), "", 24 * time.Hour},
		{"garbage header", "later", "37s", 37 * time.Second},
		{"negative header", "-5", "37s", 37 * time.Second},
		{"huge detail", "", "9000000s", 24 * time.Hour},
		{"garbage detail", "", "soon", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set("Retry-After", tc.header)
			}
			pe := gemini.ParseError(429, h, body(tc.delay))
			if pe.RetryAfter != tc.want {
				t.Errorf("RetryAfter %v, want %v", pe.RetryAfter, tc.want)
			}
		})
	}
}
