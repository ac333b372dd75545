package jsonexact

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// fieldSet is the exact JSON names of a struct type's fields (promoted
// fields of embedded structs included), each with its type.
type fieldSet struct {
	exact map[string]reflect.Type
	names []string
}

// variant reports whether key names one of the fields up to case, as
// encoding/json folds it (Unicode simple folding: "ſession_id" and
// "Session_ID" are "session_id"): a key to drop. A key no field takes
// at all is kept (the decoder ignores it).
func (fs *fieldSet) variant(key string) bool {
	for _, n := range fs.names {
		if strings.EqualFold(n, key) {
			return true
		}
	}
	return false
}

// fieldSets caches fieldSet by struct type. Types are finite and fixed
// by the program, so the cache is bounded.
var fieldSets sync.Map

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Filter returns data without the object members, at any depth that t
// describes, whose key names a field of the struct decoded there only
// up to case. Data that is not JSON, or that t does not describe (a
// value with its own UnmarshalJSON, an interface), is left as it is:
// the decoder reports or decodes it. data is not modified; the result
// is data itself when nothing was dropped.
func Filter(data []byte, t reflect.Type) []byte {
	out, changed := filter(data, t, 0)
	if !changed {
		return data
	}
	return out
}

// maxDepth bounds the walk (the decoder bounds nesting too).
const maxDepth = 10000

func filter(data []byte, t reflect.Type, depth int) ([]byte, bool) {
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
		return filterObject(trimmed, depth, func(key string) (reflect.Type, bool) {
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
		return filterObject(trimmed, depth, func(string) (reflect.Type, bool) { return elem, true })
	case reflect.Slice, reflect.Array:
		if trimmed[0] != '[' {
			return data, false
		}
		return filterArray(trimmed, t.Elem(), depth)
	}
	return data, false
}

// custom reports whether values of t decode themselves.
func custom(t reflect.Type) bool {
	return t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) ||
		t.Kind() == reflect.Interface
}

// filterObject rebuilds an object, keeping the members keep accepts
// (with the type of their value, nil for one left as is).
func filterObject(data []byte, depth int, keep func(key string) (reflect.Type, bool)) ([]byte, bool) {
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
			if v, c := filter(raw, vt, depth+1); c {
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

// filterArray rebuilds an array, its elements filtered as elem.
func filterArray(data []byte, elem reflect.Type, depth int) ([]byte, bool) {
	var items []json.RawMessage
	if json.Unmarshal(data, &items) != nil {
		return data, false
	}
	changed := false
	for i, it := range items {
		if v, c := filter(it, elem, depth+1); c {
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

// fieldsOf returns t's fieldSet (t a struct type).
func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{exact: map[string]reflect.Type{}}
	addFields(fs, t, 0)
	v, _ := fieldSets.LoadOrStore(t, fs)
	return v.(*fieldSet)
}

// addFields adds t's fields, and those its embedded structs promote, to
// fs (a field of the outer struct wins over a promoted one of its name).
func addFields(fs *fieldSet, t reflect.Type, depth int) {
	if depth > 8 {
		return
	}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := fs.exact[name]; !ok {
			fs.exact[name] = f.Type
			fs.names = append(fs.names, name)
		}
	}
	for _, et := range embedded {
		addFields(fs, et, depth+1)
	}
}
