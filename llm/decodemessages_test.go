package llm_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/llm"
)

// decodeArray is the reference for DecodeMessages: encoding/json over a
// []llm.Message, which calls Message.UnmarshalJSON for each element.
func decodeArray(data []byte) ([]llm.Message, error) {
	var out []llm.Message
	err := json.Unmarshal(data, &out)
	return out, err
}

func TestDecodeMessages(t *testing.T) {
	tests := []struct {
		name, in  string
		wantIndex int    // for an error: the element (-1 for none)
		wantField string // for an error: its field path
	}{
		{name: "null", in: `null`},
		{name: "empty", in: ` [ ] `},
		{name: "history", in: `[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},
			{"role":"assistant","tool_calls":[{"id":"c1","name":"f","arguments":{"a":1}}]},
			{"role":"tool","tool_call_id":"c1","content":"{\"ok\":true}"},{"role":"assistant","content":"done \u00e9"}]`},
		{name: "null element", in: `[{"role":"user","content":"a"},null]`}, // as encoding/json: a zero message
		{name: "bad role", in: `[{"role":"user","content":"a"},{"role":"bot"}]`, wantIndex: 1, wantField: "messages[1].role"},
		{name: "bad block", in: `[{"role":"user","content":[{"type":"video"}]}]`, wantIndex: 0, wantField: "messages[0].content[0].type"},
		{name: "not an array", in: `{"role":"user"}`, wantIndex: -1, wantField: "messages"},
		{name: "malformed", in: `[{"role":"user","content":"a"},]`, wantIndex: -1},
		{name: "truncated", in: `[{"role":"user","content":"a"}`, wantIndex: -1},
		{name: "trailing data", in: `[] []`, wantIndex: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := llm.DecodeMessages([]byte(tt.in))
			want, werr := decodeArray([]byte(tt.in))
			if tt.wantIndex == 0 && tt.wantField == "" {
				if err != nil || werr != nil {
					t.Fatalf("DecodeMessages = %v, encoding/json = %v", err, werr)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("DecodeMessages differs from encoding/json (-json +got):\n%s", diff)
				}
				if (got == nil) != (want == nil) {
					t.Fatalf("nil-ness: got %v, encoding/json %v", got == nil, want == nil)
				}
				return
			}
			if err == nil || werr == nil {
				t.Fatalf("DecodeMessages = %v, encoding/json = %v: both should fail", err, werr)
			}
			var ve *llm.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, llm.ErrInvalidMessage) {
				t.Fatalf("error %v (%T) is no *llm.ValidationError", err, err)
			}
			if ve.Index != tt.wantIndex || (tt.wantField != "" && ve.Field != tt.wantField) {
				t.Errorf("error index %d field %q, want %d %q (%v)", ve.Index, ve.Field, tt.wantIndex, tt.wantField, err)
			}
		})
	}
}

// FuzzDecodeMessages checks that DecodeMessages never panics and agrees
// with encoding/json over []llm.Message on what decodes and to what.
func FuzzDecodeMessages(f *testing.F) {
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Add([]byte("[" + strings.Join(fuzzSeeds[:12], ",") + "]"))
	for _, s := range fuzzSeeds {
		f.Add([]byte("[" + s + "]"))
		f.Add([]byte(`[{"role":"user","content":"x"}, ` + s + ` ]`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := llm.DecodeMessages(data)
		want, werr := decodeArray(data)
		if (err == nil) != (werr == nil) {
			t.Fatalf("DecodeMessages(%q) error = %v, encoding/json error = %v", data, err, werr)
		}
		if err != nil {
			checkFuzzError(t, err)
			return
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("DecodeMessages(%q) differs from encoding/json (-json +got):\n%s", data, diff)
		}
	})
}
