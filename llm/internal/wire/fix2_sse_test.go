package wire_test

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/llm/internal/wire"
)

// TestReadSSELineEnds: LF, CRLF and lone CR end lines alike, also when
// a CRLF is split across reads; a last event whose line was cut (no line
// end at EOF) is dropped, and one whose lines are whole is dispatched
// without its blank line; a leading byte order mark is skipped.
func TestReadSSELineEnds(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		want         []string
	}{
		{"LF", "data: a\n\ndata: b\ndata: c\n\n", []string{"a", "b\nc"}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\ndata: c\r\n\r\n", []string{"a", "b\nc"}},
		{"CR", "data: a\r\rdata: b\rdata: c\r\r", []string{"a", "b\nc"}},
		{"mixed", "data: a\r\n\ndata: b\r\rdata: c\n\r\n", []string{"a", "b", "c"}},
		{"last event without its blank line", "data: a\n\ndata: b\n", []string{"a", "b"}},
		{"last event without its blank line, CR", "data: a\r\rdata: b\r", []string{"a", "b"}},
		{"cut inside the last line", "data: a\n\ndata: {\"b\":", []string{"a"}},
		{"cut inside a multi-line event", "data: a\n\ndata: b\ndata: c", []string{"a"}},
		{"cut inside a comment", "data: a\n\n: keep", []string{"a"}},
		{"byte order mark", "\ufeffdata: a\n\n", []string{"a"}},
	} {
		for _, split := range []bool{false, true} {
			name := tc.name
			if split {
				name += "/one byte a read"
			}
			t.Run(name, func(t *testing.T) {
				var got []string
				var rd io.Reader = strings.NewReader(tc.stream)
				if split {
					rd = iotest.OneByteReader(rd)
				}
				err := wire.ReadSSE(rd, 1<<10, func(d []byte) (bool, error) {
					got = append(got, string(d))
					return true, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			})
		}
	}
}
