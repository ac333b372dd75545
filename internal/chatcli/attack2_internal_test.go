package chatcli

import (
	"testing"
)

// TestSafeLine: SafeLine shows a text as one line without control
// characters, nor raw bytes of 8-bit C1 controls.
func TestSafeLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain ünïcödé", "plain ünïcödé"},
		{"two\nlines\tand a tab", `two\nlines\tand a tab`},
		{"esc \x1b]0;t\x07 cr \r c1 \u009b raw \x9b bidi \u202e", `esc \x1b]0;t\a cr \r c1 \u009b raw ` + "\uFFFD" + ` bidi \u202e`},
	} {
		if got := SafeLine(tc.in); got != tc.want {
			t.Errorf("SafeLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
