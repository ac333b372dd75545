package jsonexact

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The walk Filter made before it read the data once: each object
// rebuilt through a json.Decoder, each array through json.Unmarshal. It
// is kept as the reference Filter must agree with.

func refFilter(data []byte, t reflect.Type) []byte {
	out, changed := refWalk(data, t, 0)
	if !changed {
		return data
	}
	return out
}

func refWalk(data []byte, t reflect.Type, depth int) ([]byte, bool) {
	if depth > maxDepth {
		return data, false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if custom(t) {
		return data, false
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return data, false
	}
	switch t.Kind() {
	case reflect.Struct:
		if trimmed[0] != '{' {
			return data, false
		}
		return refObject(trimmed, depth, func(key string) (reflect.Type, bool) {
			fs := fieldsOf(t)
			if ft, ok := fs.exact[key]; ok {
				return ft, true
			}
			return nil, !fs.variant(key)
		})
	case reflect.Map:
		if trimmed[0] != '{' {
			return data, false
		}
		elem := t.Elem()
		return refObject(trimmed, depth, func(string) (reflect.Type, bool) { return elem, true })
	case reflect.Slice, reflect.Array:
		if trimmed[0] != '[' {
			return data, false
		}
		return refArray(trimmed, t.Elem(), depth)
	}
	return data, false
}

// refObject rebuilds an object, keeping the members keep accepts
// (with the type of their value, nil for one left as is).
func refObject(data []byte, depth int, keep func(key string) (reflect.Type, bool)) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return data, false
	}
	var out bytes.Buffer
	out.WriteByte('{')
	changed, n := false, 0
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return data, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return data, false
		}
		vt, kept := keep(key)
		if !kept {
			changed = true
			continue
		}
		if vt != nil {
			if v, c := refWalk(raw, vt, depth+1); c {
				raw, changed = v, true
			}
		}
		if n > 0 {
			out.WriteByte(',')
		}
		n++
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		out.Write(raw)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return data, false
	}
	if !changed {
		return data, false
	}
	out.WriteByte('}')
	return out.Bytes(), true
}

// refArray rebuilds an array, its elements filtered as elem.
func refArray(data []byte, elem reflect.Type, depth int) ([]byte, bool) {
	var items []json.RawMessage
	if json.Unmarshal(data, &items) != nil {
		return data, false
	}
	changed := false
	for i, it := range items {
		if v, c := refWalk(it, elem, depth+1); c {
			items[i], changed = v, true
		}
	}
	if !changed {
		return data, false
	}
	out, err := json.Marshal(items)
	if err != nil {
		return data, false
	}
	return out, true
}

type refPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type refMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Calls   []struct {
		ID       string `json:"id"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type refRequest struct {
	Model    string                     `json:"model"`
	Messages []json.RawMessage          `json:"messages"`
	Meta     map[string]json.RawMessage `json:"metadata"`
	Format   *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Any any `json:"any"`
}

// refShape is refRequest with its raw messages described.
type refShape struct {
	refRequest
	Messages []struct {
		refMessage
		Content []refPart `json:"content"`
	} `json:"messages"`
}

// FuzzFilterAsReference: on valid JSON, Filter drops what the reference
// walk drops: both results decode alike (as the shape, and as the
// request), and Filter's is data itself exactly when the reference's is.
func FuzzFilterAsReference(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi","Content":"X"}]}`,
		`{"Model":"x", "model":"m" , "MODEL":"y"}`,
		`{"messages":[{"content":[{"type":"text","text":"a","TEXT":"b"},{"Type":"x"}],"tool_calls":[{"ID":"1","function":{"NAME":"n"}}]}]}`,
		`{"response_format":{"Type":"json_object","type":"text"},"metadata":{"K":"v","k":"w"}}`,
		`{"any":{"Model":1},"messages":"x"}`, `[]`, `{}`, ` { "Model" : 1 } `,
		"{\"\\u006dodel\":\"m\",\"\\u004dodel\":\"x\"}",
	} {
		f.Add(s)
	}
	shape := reflect.TypeFor[refShape]()
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			if out := Filter([]byte(in), shape); string(out) != in {
				t.Fatalf("Filter(%q) = %q: not JSON, changed", in, out)
			}
			return
		}
		data := []byte(in)
		got, want := Filter(data, shape), refFilter(data, shape)
		if !json.Valid(got) {
			t.Fatalf("Filter(%q) = %q, not JSON", in, got)
		}
		same := len(got) > 0 && &got[0] == &data[0]
		if same != (len(want) > 0 && &want[0] == &data[0]) {
			t.Fatalf("Filter(%q) = %q, the reference %q", in, got, want)
		}
		for _, typ := range []reflect.Type{shape, reflect.TypeFor[refRequest]()} {
			a, b := reflect.New(typ), reflect.New(typ)
			ea, eb := json.Unmarshal(got, a.Interface()), json.Unmarshal(want, b.Interface())
			if (ea == nil) != (eb == nil) {
				t.Fatalf("%q: Filter's %q decodes with %v, the reference's %q with %v", in, got, ea, want, eb)
			}
			if ea != nil {
				continue
			}
			ja, _ := json.Marshal(a.Interface())
			jb, _ := json.Marshal(b.Interface())
			var va, vb any // invalid UTF-8 is read as U+FFFD, as the decoder reads it
			_, _ = json.Unmarshal(ja, &va), json.Unmarshal(jb, &vb)
			if !reflect.DeepEqual(va, vb) {
				t.Fatalf("%q: Filter's %q decodes as %s, the reference's %q as %s", in, got, ja, want, jb)
			}
		}
	})
}

// BenchmarkFilter filters a chat completion body of 40 messages (text
// and content parts): the reference walk over the request type (what
// the server filtered before messages were described) and over the
// shape, and Filter over the shape, with nothing to drop and with a
// case variant to drop in the last message.
func BenchmarkFilter(b *testing.B) {
	var body bytes.Buffer
	body.WriteString(`{"model":"demo","stream":false,"metadata":{"session_id":"s-1"},"messages":[`)
	for i := range 40 {
		if i > 0 {
			body.WriteByte(',')
		}
		if i%2 == 0 {
			body.WriteString(`{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("where is my order? ", 20) + `"}]}`)
		} else {
			body.WriteString(`{"role":"assistant","content":"` + strings.Repeat("it shipped yesterday. ", 20) + `"}`)
		}
	}
	dirty := append(bytes.Clone(body.Bytes()[:body.Len()-1]), `,"Content":"X"}]}`...)
	clean := append(bytes.Clone(body.Bytes()), `]}`...)
	if !json.Valid(clean) || !json.Valid(dirty) {
		b.Fatal("invalid body")
	}
	req, shape := reflect.TypeFor[refRequest](), reflect.TypeFor[refShape]()
	for _, c := range []struct {
		name string
		f    func([]byte, reflect.Type) []byte
		t    reflect.Type
	}{{"reference/request", refFilter, req}, {"reference/shape", refFilter, shape}, {"Filter/request", Filter, req}, {"Filter/shape", Filter, shape}} {
		for _, in := range []struct {
			name string
			data []byte
		}{{"clean", clean}, {"dirty", dirty}} {
			b.Run(c.name+"/"+in.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.data)))
				b.ReportAllocs()
				for b.Loop() {
					c.f(in.data, c.t)
				}
			})
		}
	}
}
