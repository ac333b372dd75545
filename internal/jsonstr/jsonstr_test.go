package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
)

var cases = []string{"", "plain", `q"b\s`, "<a> & </a>", "\x00\x1f\t\n\r\b\f", "\u2028\u2029", "é😀", "\xff\xfe bad", "a\xc3"}

func check(t *testing.T, s string) {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := Append([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
		t.Errorf("Append(%q) = %s, json.Marshal %s", s, got, want)
	}
}

func TestAppend(t *testing.T) {
	for _, s := range cases {
		check(t, s)
	}
}

// FuzzAppend holds Append to json.Marshal's bytes for any string.
func FuzzAppend(f *testing.F) {
	for _, s := range cases {
		f.Add(s)
	}
	f.Fuzz(check)
}

func TestAppendStrings(t *testing.T) {
	for _, ss := range [][]string{{}, {"a"}, {"<b>", "\u2028", "\xff", ""}} {
		want, err := json.Marshal(ss)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendStrings(nil, ss); string(got) != string(want) {
			t.Errorf("AppendStrings(%q) = %s, want %s", ss, got, want)
		}
	}
}

// FuzzAppendRaw holds AppendRaw to json.Marshal of a json.RawMessage:
// the same bytes for valid JSON, false where json.Marshal fails, except
// that empty raw is null (json.Marshal refuses a non-nil empty one).
func FuzzAppendRaw(f *testing.F) {
	for _, s := range []string{``, `null`, ` { "a" : [1, 2.5, "<b>&"] } `, "\"\u2028\"", `{"a":`, `[1,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) == 0 {
			raw = nil
		}
		want, err := json.Marshal(json.RawMessage(raw))
		got, ok := AppendRaw([]byte("x"), raw)
		if ok != (err == nil) || ok && string(got) != "x"+string(want) || !ok && string(got) != "x" {
			t.Errorf("AppendRaw(%q) = %q, %v; json.Marshal: %q, %v", raw, got, ok, want, err)
		}
	})
}

func TestArray(t *testing.T) {
	for _, c := range []struct {
		items []json.RawMessage
		want  string
	}{{nil, "[]"}, {[]json.RawMessage{json.RawMessage(`1`)}, "[1]"}, {[]json.RawMessage{json.RawMessage(`{"a":[]}`), json.RawMessage(`"x"`), json.RawMessage(`null`)}, `[{"a":[]},"x",null]`}} {
		got := Array(c.items)
		if string(got) != c.want {
			t.Errorf("Array(%s) = %s, want %s", c.items, got, c.want)
		}
	}
}
