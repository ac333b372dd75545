package chatcli

import (
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// termSafe writes to a terminal what the client prints, with every
// terminal control character but newline and tab shown as text (ESC as
// \x1b, carriage return as \r, the C1 controls as \u0080 to \u009f,
// the bidirectional controls as \u202e, \u200f and the like):
// model replies, tool results and server answers are untrusted, and
// control sequences in them would otherwise clear the screen, retitle
// the window, recolour text or draw a fake prompt ("Approve
// everything? [y/N]"). The client writes none of its own.
type termSafe struct{ w io.Writer }

// Write implements io.Writer: it reports len(p) written when the
// neutralized text was.
func (t termSafe) Write(p []byte) (int, error) {
	i := 0
	for i < len(p) && !control(p[i:]) {
		_, size := utf8.DecodeRune(p[i:])
		i += size
	}
	if i == len(p) { // the usual case: nothing to neutralize
		return t.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for j := 0; j < len(p); {
		r, size := utf8.DecodeRune(p[j:])
		if control(p[j:]) {
			q := strconv.QuoteRuneToASCII(r) // '\x1b', with its quotes
			out = append(out, q[1:len(q)-1]...)
		} else {
			out = append(out, p[j:j+size]...)
		}
		j += size
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// control reports whether p starts with a terminal control character
// other than newline and tab: C0, DEL or C1 (U+0080 to U+009F), or a
// bidirectional control, which would show text in another order than it
// is written (right-to-left text itself shows as it is): an embedding,
// override or isolate (U+202A to U+202E, U+2066 to U+2069) or an
// implicit directional mark (LRM U+200E, RLM U+200F, ALM U+061C), all
// the Bidi_Control characters. Before, the marks passed: invisible,
// they reorder the neutral characters around them ("1-2" shown as
// "2-1" among right-to-left text), and made a text that looks the same
// as another compare different.
func control(p []byte) bool {
	switch b := p[0]; {
	case b == '\n' || b == '\t':
		return false
	case b < 0x20 || b == 0x7f:
		return true
	case b == 0xc2 && len(p) > 1:
		return p[1] >= 0x80 && p[1] <= 0x9f
	case b == 0xd8 && len(p) > 1:
		return p[1] == 0x9c // U+061C ALM
	case b == 0xe2 && len(p) > 2:
		return (p[1] == 0x80 && (p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xaa && p[2] <= 0xae))) ||
			(p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9)
	}
	return false
}

// inline shows s on one line: its newlines as \n and tabs as \t. The
// client's one-line fields (a tool's name, a session or signal id, an
// error) use it, so that text in them cannot start a line of its own,
// such as a fake "  approved" or a second approval prompt; termSafe shows
// the other control characters as text.
func inline(s string) string {
	if !strings.ContainsAny(s, "\n\t") {
		return s
	}
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
}

// SafeLine returns s as one line of text that shows as it is in a
// terminal: newlines, tabs and the control characters the client never
// prints (see [Run]) are shown as escapes (\n, \x1b, \u202e), and
// bytes of invalid UTF-8 as U+FFFD (a stray 0x9b is CSI to a terminal
// not in UTF-8 mode). armature chat prints its final error with it, on
// standard error, which does not go through the client's output.
func SafeLine(s string) string {
	var b strings.Builder
	_, _ = termSafe{&b}.Write([]byte(strings.ToValidUTF8(inline(s), "\uFFFD")))
	return b.String()
}
