package runtime_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/armature-go/armature/runtime"
)

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct {
		prefix, end string
		ok          bool
	}{
		{"", "", false},
		{"retry-0a1b-", "retry-0a1b.", true},
		{"a", "b", true},
		{"~", "\x7f", true},
		{"é", "ê", true},
		{"x\u007f", "x\u0080", true},
		{"\u07ff", "\u0800", true},
		{"\uD7FF", "\uE000", true}, // past the surrogates
		{"\uFFFF", "\U00010000", true},
		{"a\U0010FFFF", "b", true},
		{"a\U0010FFFF\U0010FFFF", "b", true},
		{"\U0010FFFF", "", false},
		{"\U0010FFFF\U0010FFFF", "", false},
		{"a\xff", "b", true}, // not UTF-8: bytes
		{"a\xfe", "a\xff", true},
		{"\xff\xff", "", false},
	} {
		end, ok := runtime.PrefixEnd(tc.prefix)
		if end != tc.end || ok != tc.ok {
			t.Errorf("PrefixEnd(%q) = %q, %v; want %q, %v", tc.prefix, end, ok, tc.end, tc.ok)
		}
	}
}

func TestValidMessageID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"", true},
		{"retry-0a1b-6c2e", true},
		{"héllo ✓ \U0010FFFF", true},
		{strings.Repeat("x", runtime.MaxIDLength), true},
		{strings.Repeat("x", runtime.MaxIDLength+1), false},
		{"a\nb", false},
		{"a\x00", false},
		{"a\x7f", false},
		{"\xff", false},
	} {
		if got := runtime.ValidMessageID(tc.id); got != tc.want {
			t.Errorf("ValidMessageID(%q) = %v, want %v", tc.id, got, tc.want)
		}
		err := runtime.ValidateRun(runtime.Run{ID: "r", MessageID: tc.id})
		if (err == nil) != tc.want || err != nil && !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("ValidateRun with message id %q = %v", tc.id, err)
		}
		_, _, err = runtime.ListRunsRequest{MessageIDPrefix: tc.id}.Validate()
		if (err == nil) != tc.want || err != nil && !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("ListRunsRequest{MessageIDPrefix: %q}.Validate() = %v", tc.id, err)
		}
	}
}

// FuzzPrefixEnd: the strings s with prefix <= s < end (or prefix <= s,
// when there is no end) are exactly those that begin with prefix, in
// byte order; for a valid prefix, end is valid UTF-8 (a stored text
// bound), without NUL when the prefix has none (PostgreSQL's text has
// none).
func FuzzPrefixEnd(f *testing.F) {
	for _, seed := range [][2]string{
		{"retry-0a1b-", "retry-0a1b-uuid"}, {"retry-0a1b-", "retry-0a1b."}, {"é", "ê"}, {"\uD7FF", "\uE000"},
		{"\U0010FFFF", "\U0010FFFF\U0010FFFF"}, {"a\U0010FFFF", "b"}, {"a\xff", "a\xff\xff"}, {"", "x"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, prefix, s string) {
		end, ok := runtime.PrefixEnd(prefix)
		valid := utf8.ValidString(prefix)
		if valid && ok && (!utf8.ValidString(end) || strings.ContainsRune(end, 0) && !strings.ContainsRune(prefix, 0)) {
			t.Fatalf("PrefixEnd(%q) = %q: not valid UTF-8, or a NUL the prefix has not", prefix, end)
		}
		if ok && end <= prefix {
			t.Fatalf("PrefixEnd(%q) = %q, not above it", prefix, end)
		}
		if valid != utf8.ValidString(s) {
			return // a stored id and a prefix are both valid, or compared as bytes
		}
		in := prefix <= s && (!ok || s < end)
		if has := strings.HasPrefix(s, prefix); in != has {
			t.Fatalf("PrefixEnd(%q) = %q, %v: %q in range %v, has the prefix %v", prefix, end, ok, s, in, has)
		}
	})
}
