package jsonexact_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/jsonexact"
)

type inner struct {
	Name string `json:"name"`
}

type Base struct {
	Tenant string `json:"tenant"`
}

type request struct {
	Base
	SessionID string            `json:"session_id"`
	Items     []inner           `json:"items"`
	Inner     *inner            `json:"inner"`
	Labels    map[string]inner  `json:"labels"`
	Raw       json.RawMessage   `json:"raw"`
	When      time.Time         `json:"when"`
	Any       any               `json:"any"`
	Plain     string            // no tag: its Go name
	Skipped   string            `json:"-"`
	Extra     map[string]string `json:"extra,omitempty"`
}

func TestFilter(t *testing.T) {
	typ := reflect.TypeFor[request]()
	for _, tc := range []struct {
		name, in string
		want     request
		same     bool // Filter returns its input
	}{
		{"exact", `{"session_id":"a","items":[{"name":"x"}]}`, request{SessionID: "a", Items: []inner{{"x"}}}, true},
		{"a case variant after", `{"session_id":"mine","Session_ID":"theirs"}`, request{SessionID: "mine"}, false},
		{"a case variant before", `{"SESSION_ID":"theirs","session_id":"mine"}`, request{SessionID: "mine"}, false},
		{"a variant alone", `{"Session_Id":"theirs"}`, request{}, false},
		{"Unicode folding", "{\"\u017fession_id\":\"theirs\"}", request{}, false}, // ſ folds to s
		{"nested in an array", `{"items":[{"name":"a","NAME":"b"}]}`, request{Items: []inner{{"a"}}}, false},
		{"nested pointer", `{"inner":{"Name":"b","name":"a"}}`, request{Inner: &inner{"a"}}, false},
		{"map values", `{"labels":{"K":{"nAme":"b","name":"a"}}}`, request{Labels: map[string]inner{"K": {"a"}}}, false},
		{"map keys keep their case", `{"extra":{"A":"1","a":"2"}}`, request{Extra: map[string]string{"A": "1", "a": "2"}}, true},
		{"promoted field", `{"tenant":"t","Tenant":"u"}`, request{Base: Base{Tenant: "t"}}, false},
		{"untagged field", `{"Plain":"p","plain":"q"}`, request{Plain: "p"}, false},
		{"unknown keys kept", `{"whatever":1,"session_id":"a"}`, request{SessionID: "a"}, true},
		{"raw and any untouched", `{"raw":{"X":1,"x":2},"any":{"Name":1}}`, request{Raw: json.RawMessage(`{"X":1,"x":2}`), Any: map[string]any{"Name": float64(1)}}, true},
		{"custom decoder untouched", `{"when":"2026-01-01T00:00:00Z"}`, request{When: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			out := jsonexact.Filter(in, typ)
			if tc.same && &out[0] != &in[0] {
				t.Errorf("Filter rebuilt %s as %s", in, out)
			}
			var got request
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s decoded %+v, want %+v", out, got, tc.want)
			}
		})
	}
}

// Not JSON, or not what the type describes: left as is, for the decoder
// to report.
func TestFilterLeavesTheRest(t *testing.T) {
	typ := reflect.TypeFor[request]()
	for _, in := range []string{``, `{`, `[1,2]`, `"x"`, `{"session_id":}`, `{"items":{"a":1}}`, `null`, `{"a":1}x`} {
		if out := jsonexact.Filter([]byte(in), typ); string(out) != in {
			t.Errorf("Filter(%q) = %q", in, out)
		}
	}
}

// FuzzFilter: whatever the input, Filter does not panic; what it returns
// for valid JSON is valid JSON, decodes without error when the input
// did, and holds no case variant of a field that the decoder would take.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{`{"session_id":"a","Session_ID":"b"}`, `{"items":[{"NAME":"x","name":"y"}]}`, `{"labels":{"a":{"Name":"z"}}}`, `[]`, `{"inner":null}`} {
		f.Add(s)
	}
	typ := reflect.TypeFor[request]()
	f.Fuzz(func(t *testing.T, in string) {
		out := jsonexact.Filter([]byte(in), typ)
		if !json.Valid([]byte(in)) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Filter(%q) = %q, not JSON", in, out)
		}
		var a, b request
		if json.Unmarshal([]byte(in), &a) == nil && json.Unmarshal(out, &b) != nil {
			t.Fatalf("Filter(%q) = %q does not decode", in, out)
		}
	})
}

type rawRequest struct {
	Items []json.RawMessage `json:"items"`
	Note  string            `json:"note"`
}

// rawShape describes rawRequest's raw items, decoded later as inner.
type rawShape struct {
	rawRequest
	Items []inner `json:"items"`
}

// TestFilterDropsWhole: a dropped member goes with its comma and the
// space around it, wherever it stands, and raw fields that a shape
// describes are filtered as it describes them.
func TestFilterDropsWhole(t *testing.T) {
	typ := reflect.TypeFor[rawShape]()
	for in, want := range map[string]string{
		`{"NOTE":"x","note":"a"}`:                                   `{"note":"a"}`,
		`{ "NOTE" : "x" , "Note":1 , "note" : "a" }`:                `{ "note" : "a" }`,
		`{"note":"a","NOTE":"x","Note":{"a":[1]}}`:                  `{"note":"a"}`,
		`{"note":"a", "NOTE":"x", "items":[]}`:                      `{"note":"a", "items":[]}`,
		`{"NOTE":"x"}`:                                              `{}`,
		` {"Note":"x","NOTE":"y"} `:                                 ` {} `,
		`{"items":[{"Name":"x","name":"a"},{"name":"b","NAME":1}]}`: `{"items":[{"name":"a"},{"name":"b"}]}`,
		`{"items":[{"Name":"x"}],"Items":[]}`:                       `{"items":[{}]}`,
	} {
		if got := string(jsonexact.Filter([]byte(in), typ)); got != want {
			t.Errorf("Filter(%s) = %s, want %s", in, got, want)
		}
	}
	// Without the shape, raw items are left as they are.
	in := `{"items":[{"Name":"x","name":"a"}]}`
	if got := string(jsonexact.Filter([]byte(in), reflect.TypeFor[rawRequest]())); got != in {
		t.Errorf("Filter(%s) = %s as raw items", in, got)
	}
}
