package sqlite

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/session"
)

// FuzzMarkBlob: any blob decodes or fails cleanly, and every encoded
// list of marks (values are JSON, never empty) decodes to itself, a
// value shared with the previous mark included.
func FuzzMarkBlob(f *testing.F) {
	f.Add([]byte{markBlobFormat, 1, 'k', 1, '1'}, "k", []byte(`{"a":1}`))
	f.Add([]byte{markBlobFormat1, 1, 'k', 1, '1', 1, 'j', 0}, "k", []byte(`1`))
	f.Add([]byte{markBlobFormat, 1, 'k', 0}, "k", []byte(`[1]`))
	f.Add([]byte{}, "", []byte(nil))
	f.Add([]byte{markBlobFormat, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "x", []byte(`null`))
	f.Fuzz(func(t *testing.T, blob []byte, key string, value []byte) {
		_ = eachMark(blob, func(string, []byte) bool { return true })
		if len(value) == 0 {
			value = []byte(`null`)
		}
		marks := []session.Mark{{Key: key, Value: json.RawMessage(value)}, {Key: key + "1", Value: json.RawMessage(value)},
			{Key: key + "2", Value: json.RawMessage(`1`)}}
		var got []session.Mark
		if err := eachMark(appendMarkBlob(nil, marks), func(k string, v []byte) bool {
			got = append(got, session.Mark{Key: k, Value: json.RawMessage(v)})
			return true
		}); err != nil {
			t.Fatalf("decoding an encoded blob: %v", err)
		}
		if len(got) != len(marks) {
			t.Fatalf("decoded %d marks, want %d", len(got), len(marks))
		}
		for i := range got {
			if got[i].Key != marks[i].Key || !bytes.Equal(got[i].Value, marks[i].Value) {
				t.Fatalf("mark %d: %q=%q, want %q=%q", i, got[i].Key, got[i].Value, marks[i].Key, marks[i].Value)
			}
		}
	})
}
