package jsonexact

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"unicode"

	"github.com/armature-go/armature/internal/jsonvalid"
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
//
// A field decoded later from raw JSON (a json.RawMessage) is filtered
// when t describes it: a filter type may shadow such a field with the
// type it is decoded as (a field of the outer struct wins over the one
// an embedded struct promotes), so that one pass filters the body at
// every depth.
//
// Filter reads data once, without allocating when nothing is dropped:
// it is on the path of every request it serves.
func Filter(data []byte, t reflect.Type) []byte {
	w := walker{data: data}
	i := w.value(jsonvalid.SkipSpace(data, 0), t, 0)
	if len(w.drops) == 0 || i < 0 || jsonvalid.SkipSpace(data, i) != len(data) || !jsonvalid.Valid(data) {
		// Nothing to drop, or not one JSON value (the walk reads what
		// it skips loosely: the check is made before anything is
		// dropped).
		return data
	}
	out := make([]byte, 0, len(data))
	at := 0
	for _, d := range w.drops {
		out = append(out, data[at:d[0]]...)
		at = d[1]
	}
	return append(out, data[at:]...)
}

// maxDepth bounds the walk (the decoder bounds nesting too).
const maxDepth = jsonvalid.MaxDepth

// walker walks a JSON value as a type describes it, noting the byte
// ranges of the members to drop, in order.
type walker struct {
	data  []byte
	drops [][2]int
}

// value walks the value at i (white space skipped) as t describes it
// (nil: skipped), and returns the index after it, or -1 when the data
// is not JSON there.
func (w *walker) value(i int, t reflect.Type, depth int) int {
	if t == nil || depth > maxDepth || i >= len(w.data) {
		return w.skip(i)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if custom(t) {
		return w.skip(i)
	}
	switch c := w.data[i]; {
	case c == '{' && t.Kind() == reflect.Struct:
		fs := fieldsOf(t)
		return w.object(i, depth, func(key []byte) (reflect.Type, bool) {
			if ft, ok := fs.exact[string(key)]; ok {
				return ft, true
			}
			return nil, !fs.variant(string(key))
		})
	case c == '{' && t.Kind() == reflect.Map:
		elem := t.Elem()
		return w.object(i, depth, func([]byte) (reflect.Type, bool) { return elem, true })
	case c == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		return w.array(i, t.Elem(), depth)
	}
	return w.skip(i)
}

// object walks the object at i, keeping the members keep accepts (with
// the type of their value, nil for one skipped). A dropped member is
// dropped with the comma that separates it from a kept one.
func (w *walker) object(i, depth int, keep func(key []byte) (reflect.Type, bool)) int {
	data := w.data
	i = jsonvalid.SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1
	}
	kept := false // a member before was kept
	prev := -1    // the end of the previous member's value
	open := -1    // the start of a leading run of dropped members
	for {
		if i >= len(data) || data[i] != '"' {
			return -1
		}
		start := i
		if open >= 0 {
			w.drops = append(w.drops, [2]int{open, start})
			open = -1
		}
		end := jsonvalid.String(data, i)
		if end < 0 {
			return -1
		}
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(data[i:end], &k) != nil {
				return -1
			}
			key = []byte(k)
		}
		i = jsonvalid.SkipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return -1
		}
		vt, ok := keep(key)
		if i = w.value(jsonvalid.SkipSpace(data, i+1), vt, depth+1); i < 0 {
			return -1
		}
		switch {
		case ok:
			kept = true
		case kept:
			w.drops = append(w.drops, [2]int{prev, i})
		default:
			open = start
		}
		prev = i
		i = jsonvalid.SkipSpace(data, i)
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case ',':
			i = jsonvalid.SkipSpace(data, i+1)
		case '}':
			if open >= 0 {
				w.drops = append(w.drops, [2]int{open, i})
			}
			return i + 1
		default:
			return -1
		}
	}
}

// array walks the array at i, its elements as elem.
func (w *walker) array(i int, elem reflect.Type, depth int) int {
	data := w.data
	i = jsonvalid.SkipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1
	}
	for {
		if i = w.value(i, elem, depth+1); i < 0 {
			return -1
		}
		i = jsonvalid.SkipSpace(data, i)
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case ',':
			i = jsonvalid.SkipSpace(data, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
}

// skip returns the index after the value at i, read loosely (Filter
// checks the data before it drops anything), or -1.
func (w *walker) skip(i int) int {
	data := w.data
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return jsonvalid.String(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				if i = jsonvalid.String(data, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	// A number or a literal: up to the next delimiter.
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', '"', '{', '[', ':':
			if j == i {
				return -1
			}
			return j
		}
		j++
	}
	return j
}

// custom reports whether values of t decode themselves.
func custom(t reflect.Type) bool {
	return t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) ||
		t.Kind() == reflect.Interface
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
		if name == "" || !validTagName(name) {
			// encoding/json takes a name it does not accept as the
			// field's Go name; listed under both, the set errs on the
			// side of a name it might take.
			fs.add(f.Name, f.Type)
		}
		if name != "" {
			fs.add(name, f.Type)
		}
	}
	for _, et := range embedded {
		addFields(fs, et, depth+1)
	}
}

// add lists a field under name unless a field is listed so already.
func (fs *fieldSet) add(name string, t reflect.Type) {
	if _, ok := fs.exact[name]; !ok {
		fs.exact[name] = t
		fs.names = append(fs.names, name)
	}
}

// validTagName is encoding/json's test of a tag's name (isValidTag).
func validTagName(s string) bool {
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// Fields returns the exact JSON names of struct type t's fields, those
// its embedded structs promote included (a field of the outer struct
// wins over a promoted one of its name), each with its type, as Filter
// reads them. The map is shared: callers must not change it.
func Fields(t reflect.Type) map[string]reflect.Type { return fieldsOf(t).exact }

// Custom reports whether a value of type t decodes itself (UnmarshalJSON
// or UnmarshalText) or is an interface: the keys of its JSON are no
// struct's fields.
func Custom(t reflect.Type) bool { return custom(t) }
