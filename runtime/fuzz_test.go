package runtime_test

import (
	"errors"
	"testing"

	"github.com/armature-go/armature/runtime"
)

func FuzzParsePageToken(f *testing.F) {
	for _, s := range []string{"", runtime.PageToken(1), runtime.PageToken(1 << 62), "cjEuMA", "cjEuLTE", "!!", "cjEuMDE"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		pos, err := runtime.ParsePageToken(tok)
		if err != nil {
			if !errors.Is(err, runtime.ErrInvalidRequest) {
				t.Fatalf("error %v is not ErrInvalidRequest", err)
			}
			return
		}
		if tok == "" {
			if pos != 0 {
				t.Fatalf("empty token = %d", pos)
			}
			return
		}
		if pos <= 0 || runtime.PageToken(pos) != tok {
			t.Fatalf("token %q = %d, which encodes as %q", tok, pos, runtime.PageToken(pos))
		}
	})
}

func TestPageTokenRoundTrip(t *testing.T) {
	for _, pos := range []int64{1, 2, 99, 1<<63 - 1} {
		got, err := runtime.ParsePageToken(runtime.PageToken(pos))
		if err != nil || got != pos {
			t.Errorf("round trip of %d = %d, %v", pos, got, err)
		}
	}
}
