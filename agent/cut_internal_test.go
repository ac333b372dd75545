package agent

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// cutResult cuts at a character boundary, never into a character, and
// cuts text that is not UTF-8 where the bound is rather than back to
// nothing.
func TestCutResult(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		body  int // bytes kept
	}{
		{"under the bound", "héllo", 10, 6},
		{"ascii", strings.Repeat("a", 100), 10, 10},
		{"two-byte characters", strings.Repeat("é", 100), 11, 10},
		{"four-byte characters", strings.Repeat("😀", 100), 10, 8},
		{"not UTF-8", strings.Repeat("\xff\x80", 500), 100, 100},
		{"no bound", strings.Repeat("a", 100), -1, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := cutResult(tc.in, tc.limit)
			body, _, cut := strings.Cut(got, "\n[cut: ")
			if len(body) != tc.body {
				t.Fatalf("kept %d bytes, want %d (%q)", len(body), tc.body, got)
			}
			if cut != (tc.body < len(tc.in)) {
				t.Fatalf("note %v: %q", cut, got)
			}
			if utf8.ValidString(tc.in) && !utf8.ValidString(body) {
				t.Fatalf("cut into a character: %q", body)
			}
		})
	}
}
