package wire_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/llm/internal/wire"
)

// TestRetryAfterClamped: a wait over a day, in seconds or as an HTTP
// date, is clamped to wire.MaxRetryAfter rather than dropped (which the
// server answered as "retry after 1s"); garbage and past dates are no
// wait at all.
func TestRetryAfterClamped(t *testing.T) {
	now := time.Now()
	date := func(d time.Duration) string { return now.Add(d).UTC().Format(http.TimeFormat) }
	for _, tc := range []struct {
		name     string
		v        string
		min, max time.Duration
	}{
		{"seconds", "30", 30 * time.Second, 30 * time.Second},
		{"spaces", "  30 ", 30 * time.Second, 30 * time.Second},
		{"fraction", "0.25", 250 * time.Millisecond, 250 * time.Millisecond},
		{"two days", "172800", wire.MaxRetryAfter, wire.MaxRetryAfter},
		{"hundreds of digits", strings.Repeat("9", 400), wire.MaxRetryAfter, wire.MaxRetryAfter},
		{"date in an hour", date(time.Hour), 58 * time.Minute, time.Hour},
		{"date in a year", date(365 * 24 * time.Hour), wire.MaxRetryAfter, wire.MaxRetryAfter},
		{"date in the past", date(-time.Hour), 0, 0},
		{"negative", "-30", 0, 0},
		{"plus sign", "+30", 0, 0},
		{"exponent", "3e1", 0, 0},
		{"hex", "0x1e", 0, 0},
		{"infinity", "Infinity", 0, 0},
		{"trailing dot", "30.", 0, 0},
		{"two dots", "1.2.3", 0, 0},
		{"words", "in a while", 0, 0},
		{"NUL", "\x00", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wire.RetryAfter(tc.v)
			if got < tc.min || got > tc.max {
				t.Errorf("RetryAfter(%q) = %v, want in [%v, %v]", tc.v, got, tc.min, tc.max)
			}
		})
	}
}
