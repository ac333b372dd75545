package keyrange

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestEnd(t *testing.T) {
	for _, tc := range []struct {
		prefix, end string
		ok          bool
	}{
		{"", "", false},
		{"retry-ab-", "retry-ab.", true},
		{"k:ü", "k:ý", true},
		{"a\U0010FFFF", "b", true},
		{"\U0010FFFF", "", false},
		{"x\uD7FF", "x\uE000", true},
		{"a\xff", "b", true},
		{"\xff\xff", "", false},
	} {
		if end, ok := End(tc.prefix); end != tc.end || ok != tc.ok {
			t.Errorf("End(%q) = %q, %v; want %q, %v", tc.prefix, end, ok, tc.end, tc.ok)
		}
	}
}

// TestEndRandom checks that [prefix, End(prefix)) holds exactly the
// strings that begin with prefix, on random strings over a small
// alphabet that includes the edge code points.
func TestEndRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	alphabet := []string{"a", "b", "é", "\uD7FF", "\uE000", "\U0010FFFF", "\xff"}
	word := func() string {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 20000 {
		p, s := word(), word()
		if !utf8.ValidString(p) != !utf8.ValidString(s) {
			continue // a store compares valid UTF-8 with valid UTF-8
		}
		end, ok := End(p)
		in := s >= p && (!ok || s < end)
		if in != strings.HasPrefix(s, p) {
			t.Fatalf("seed %d: %q in [%q, %q) (ok %v) = %v, HasPrefix = %v", seed, s, p, end, ok, in, !in)
		}
	}
}
