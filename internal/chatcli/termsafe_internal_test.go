package chatcli

import (
	"strings"
	"testing"
	"unicode"
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
		{"marks LRM \u200e RLM \u200f ALM \u061c, neighbours \u200d\u2010\u061b\u061d kept", `marks LRM \u200e RLM \u200f ALM \u061c, neighbours ` + "\u200d\u2010\u061b\u061d kept"},
		{"Arabic \u0627\u0644\u0639\u0631\u0628\u064a\u0629 shows as it is", "Arabic \u0627\u0644\u0639\u0631\u0628\u064a\u0629 shows as it is"},
	} {
		var b strings.Builder
		n, err := termSafe{&b}.Write([]byte(tc.in))
		if err != nil || n != len(tc.in) || b.String() != tc.want {
			t.Errorf("%q: wrote %q (%d, %v), want %q", tc.in, b.String(), n, err, tc.want)
		}
	}
}

// TestControlCoversBidiControls: the characters termSafe escapes are
// exactly the control characters (C0, DEL, C1) but newline and tab, and
// the Unicode Bidi_Control characters, among them the marks LRM, RLM and
// ALM, which passed before while the overrides and isolates did not.
func TestControlCoversBidiControls(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		want := (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) && r != '\n' && r != '\t'
		if got := control(utf8.AppendRune(nil, r)); got != want {
			t.Errorf("control(%U) = %v, want %v", r, got, want)
		}
	}
}

// FuzzTermSafe: whatever is written, the terminal gets no control
// character but newline and tab, and text without any passes unchanged.
func FuzzTermSafe(f *testing.F) {
	f.Add([]byte("hello\x1b[31mred\n"))
	f.Add([]byte("\xc2\x9b2J"))
	f.Add([]byte("\u202eabc"))
	f.Add([]byte("\u200e\u200f\u061c\u061d"))
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
