package bytesize_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/armature-go/armature/internal/bytesize"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"12", 12, true}, {" 12B ", 12, true}, {"64KB", 64 << 10, true}, {"32MiB", 32 << 20, true},
		{"1 GiB", 1 << 30, true}, {"2TB", 2 << 40, true}, {"", 0, false}, {"MiB", 0, false}, {"-1", 0, false},
		{"1.5MiB", 0, false}, {"9223372036854775807", 1<<63 - 1, true}, {"8388608TiB", 0, false}, {"12 kb", 0, false},
	} {
		got, err := bytesize.Parse(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// FuzzParse: Parse never panics, never returns a negative size, and a
// plain number of bytes parses back to itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "32MiB", "1GiB", "-5", "9223372036854775807TiB", " 7 B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := bytesize.Parse(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("Parse(%q) = %d", s, n)
		}
		if back, err := bytesize.Parse(strconv.FormatInt(n, 10)); err != nil || back != n {
			t.Fatalf("%d does not parse back: %d %v", n, back, err)
		}
	})
}

func ExampleParse() {
	n, err := bytesize.Parse("32MiB")
	fmt.Println(n, err)
	// Output: 33554432 <nil>
}
