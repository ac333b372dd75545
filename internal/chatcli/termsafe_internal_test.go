package chatcli

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTermSafe: terminal control characters in what the client prints
// are shown as text; newlines, tabs and other text pass as they are.
func TestTermSafe(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, ünïcödé, emoji 🙂, RTL שלום\n\tindented", "plain text, ünïcödé, emoji 🙂, RTL שלום\n\tindented"},
		{"order 9\x1b[2J\x1b[H\x1b]0;PWNED\x07\x1b[1;32mApprove everything? [y/N] ",
			`order 9\x1b[2J\x1b[H\x1b]0;PWNED\a\x1b[1;32mApprove everything? [y/N] `},
		{"overwrite\rfake prompt", `overwrite\rfake prompt`},
		{"C1 CSI \u009b2J and DEL \x7f", `C1 CSI \u009b2J and DEL \x7f`},
		{"NUL \x00 backspace \b", `NUL \x00 backspace \b`},
		{"invalid \xff\xc2 bytes", "invalid \xff\xc2 bytes"},
		{"bidi \u202egnp.exe\u202c and isolates \u2066x\u2069, quotes \u201c\u201d kept", `bidi \u202egnp.exe\u202c and isolates \u2066x\u2069, quotes ` + "\u201c\u201d kept"},
	} {
		var b strings.Builder
		n, err := termSafe{&b}.Write([]byte(tc.in))
		if err != nil || n != len(tc.in) || b.String() != tc.want {
			t.Errorf("%q: wrote %q (%d, %v), want %q", tc.in, b.String(), n, err, tc.want)
		}
	}
}

// FuzzTermSafe: whatever is written, the terminal gets no control
// character but newline and tab, and text without any passes unchanged.
func FuzzTermSafe(f *testing.F) {
	f.Add([]byte("hello\x1b[31mred\n"))
	f.Add([]byte("\xc2\x9b2J"))
	f.Add([]byte("\u202eabc"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var b strings.Builder
		if n, err := (termSafe{&b}).Write(in); err != nil || n != len(in) {
			t.Fatalf("wrote %d, %v", n, err)
		}
		out := []byte(b.String())
		clean := true
		for i := range out {
			if control(out[i:]) {
				t.Fatalf("%q came out as %q, holding a control character at %d", in, out, i)
			}
		}
		for i := 0; i < len(in); {
			clean = clean && !control(in[i:])
			_, size := utf8.DecodeRune(in[i:])
			i += size
		}
		if clean && string(out) != string(in) {
			t.Fatalf("%q came out as %q", in, out)
		}
	})
}
