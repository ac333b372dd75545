package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Type describes the values a state field may hold. Check validates a value
// and returns its canonical form: dynamic types normalise numbers (any Go
// integer kind becomes int, json.Number is decoded) and lists and maps
// into []any and map[string]any; Go-typed fields (see [NewField]) accept
// exactly their Go type.
//
// Types are immutable and safe for concurrent use.
type Type interface {
	// String returns the type in the fixture notation, e.g. "list<string>".
	String() string
	// Check validates v and returns its canonical value.
	Check(v any) (any, error)
}

// Dynamic types. They describe state declared at run time (for example by
// a workflow file) rather than by Go types.
var (
	// TypeAny accepts any JSON-like value.
	TypeAny Type = anyType{}
	// TypeString accepts strings.
	TypeString Type = scalarType{kind: "string"}
	// TypeInt accepts integers (any Go integer kind, or an integral float).
	TypeInt Type = scalarType{kind: "int"}
	// TypeFloat accepts floating-point numbers and integers.
	TypeFloat Type = scalarType{kind: "float"}
	// TypeBool accepts booleans.
	TypeBool Type = scalarType{kind: "bool"}
)

// ListOf returns the dynamic list type with the given element type; a nil
// elem means unconstrained elements ("list").
func ListOf(elem Type) Type { return listType{elem: elem} }

// DictOf returns the dynamic mapping type with string keys of type key
// (nil: any string) and values of type val (nil: unconstrained).
func DictOf(key, val Type) Type { return dictType{key: key, val: val} }

// RecordOf returns a named record type: a mapping whose declared fields are
// checked against their types. Undeclared keys are rejected.
func RecordOf(name string, fields map[string]Type) Type {
	return recordType{name: name, fields: fields}
}

// ParseType parses the fixture type notation: string (or str), int, float,
// bool, any, list, list<T>, list[T], dict, dict<K,V>, nested freely.
// Record names resolve through records, which may be nil.
func ParseType(s string, records ...map[string]Type) (Type, error) {
	p := typeParser{s: s}
	if len(records) > 0 {
		p.records = records[0]
	}
	t, err := p.parse()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.i != len(p.s) {
		return nil, fmt.Errorf("graph: type %q: unexpected %q", s, p.s[p.i:])
	}
	return t, nil
}

type typeParser struct {
	s       string
	i       int
	records map[string]Type
}

func (p *typeParser) skipSpace() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *typeParser) ident() string {
	p.skipSpace()
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i]
}

func (p *typeParser) open() (byte, bool) {
	p.skipSpace()
	if p.i < len(p.s) && (p.s[p.i] == '<' || p.s[p.i] == '[') {
		c := p.s[p.i]
		p.i++
		return c, true
	}
	return 0, false
}

func (p *typeParser) expect(c byte) error {
	p.skipSpace()
	if p.i >= len(p.s) || p.s[p.i] != c {
		return fmt.Errorf("graph: type %q: expected %q at offset %d", p.s, c, p.i)
	}
	p.i++
	return nil
}

func closer(open byte) byte {
	if open == '[' {
		return ']'
	}
	return '>'
}

func (p *typeParser) parse() (Type, error) {
	name := p.ident()
	switch name {
	case "":
		return nil, fmt.Errorf("graph: type %q: expected a type name at offset %d", p.s, p.i)
	case "any", "Any":
		return TypeAny, nil
	case "string", "str":
		return TypeString, nil
	case "int", "integer":
		return TypeInt, nil
	case "float", "number":
		return TypeFloat, nil
	case "bool", "boolean":
		return TypeBool, nil
	case "list":
		o, ok := p.open()
		if !ok {
			return ListOf(nil), nil
		}
		elem, err := p.parse()
		if err != nil {
			return nil, err
		}
		if err := p.expect(closer(o)); err != nil {
			return nil, err
		}
		return ListOf(elem), nil
	case "dict", "record_map":
		o, ok := p.open()
		if !ok {
			return DictOf(nil, nil), nil
		}
		k, err := p.parse()
		if err != nil {
			return nil, err
		}
		if err := p.expect(','); err != nil {
			return nil, err
		}
		v, err := p.parse()
		if err != nil {
			return nil, err
		}
		if err := p.expect(closer(o)); err != nil {
			return nil, err
		}
		if k != TypeString && k != TypeAny {
			return nil, fmt.Errorf("graph: type %q: mapping keys must be strings", p.s)
		}
		return DictOf(k, v), nil
	case "record":
		return DictOf(nil, nil), nil
	default:
		if t, ok := p.records[name]; ok {
			return t, nil
		}
		return nil, fmt.Errorf("graph: type %q: unknown type %q", p.s, name)
	}
}

type anyType struct{}

func (anyType) String() string           { return "any" }
func (anyType) Check(v any) (any, error) { return normalize(v, 0) }

type scalarType struct{ kind string }

func (t scalarType) String() string { return t.kind }

func (t scalarType) Check(v any) (any, error) {
	switch t.kind {
	case "string":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "bool":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "int":
		if i, ok := toInt(v); ok {
			return i, nil
		}
	case "float":
		if f, ok := toFloat(v); ok {
			return f, nil
		}
	}
	return nil, typeMismatch(t, v)
}

type listType struct{ elem Type }

func (t listType) String() string {
	if t.elem == nil {
		return "list"
	}
	return "list<" + t.elem.String() + ">"
}

func (t listType) Check(v any) (any, error) {
	if l, ok := v.([]any); ok {
		return checkList(t, l)
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, typeMismatch(t, v)
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return checkList(t, out)
}

// checkList checks every element; it copies l only when an element needs
// normalising, so already-canonical lists are shared, never rewritten.
func checkList(t listType, l []any) (any, error) {
	var out []any
	for i, e := range l {
		var (
			c   any
			err error
		)
		if t.elem == nil {
			c, err = normalize(e, 1)
		} else {
			c, err = t.elem.Check(e)
		}
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		if out == nil && !sameValue(c, e) {
			out = make([]any, len(l))
			copy(out, l[:i])
		}
		if out != nil {
			out[i] = c
		}
	}
	if out != nil {
		return out, nil
	}
	if l == nil {
		return []any{}, nil
	}
	return l, nil
}

type dictType struct{ key, val Type }

func (t dictType) String() string {
	if t.key == nil && t.val == nil {
		return "dict"
	}
	k, v := "any", "any"
	if t.key != nil {
		k = t.key.String()
	}
	if t.val != nil {
		v = t.val.String()
	}
	return "dict<" + k + "," + v + ">"
}

func (t dictType) Check(v any) (any, error) {
	m, err := toStringMap(v)
	if err != nil {
		return nil, typeMismatch(t, v)
	}
	var out map[string]any
	for k, e := range m {
		var c any
		if t.val == nil {
			c, err = normalize(e, 1)
		} else {
			c, err = t.val.Check(e)
		}
		if err != nil {
			return nil, fmt.Errorf("[%q]: %w", k, err)
		}
		if out == nil && !sameValue(c, e) {
			out = make(map[string]any, len(m))
			for k2, e2 := range m {
				out[k2] = e2
			}
		}
		if out != nil {
			out[k] = c
		}
	}
	if out != nil {
		return out, nil
	}
	if m == nil {
		return map[string]any{}, nil
	}
	return m, nil
}

type recordType struct {
	name   string
	fields map[string]Type
}

func (t recordType) String() string { return t.name }

func (t recordType) Check(v any) (any, error) {
	m, err := toStringMap(v)
	if err != nil {
		return nil, typeMismatch(t, v)
	}
	out := make(map[string]any, len(m))
	for k, e := range m {
		ft, ok := t.fields[k]
		if !ok {
			return nil, fmt.Errorf("record %s has no field %q", t.name, k)
		}
		c, err := ft.Check(e)
		if err != nil {
			return nil, fmt.Errorf(".%s: %w", k, err)
		}
		out[k] = c
	}
	return out, nil
}

func typeMismatch(t Type, v any) error {
	return fmt.Errorf("want %s, got %s", t, describe(v))
}

// describe names a value's kind for diagnostics without printing the value
// itself (state can hold secrets).
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "mapping"
	}
	if _, ok := toInt(v); ok {
		return "int"
	}
	if _, ok := toFloat(v); ok {
		return "float"
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		return "list (" + rv.Type().String() + ")"
	case reflect.Map:
		return "mapping (" + rv.Type().String() + ")"
	}
	return rv.Type().String()
}

const maxDepth = 256

// normalize converts a JSON-like value to canonical form: integer kinds to
// int, slices to []any, maps with string keys to map[string]any. A
// json.Number that is an integer stays exact: int when it fits, else
// int64 or uint64 when it fits, else the json.Number itself; any other
// number becomes float64. Values of other types (Go structs, integers
// that do not fit int and the like) pass through unchanged.
func normalize(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil, string, bool, int, float64:
		if f, ok := x.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return nil, fmt.Errorf("non-finite number")
		}
		return v, nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			if int64(int(i)) == i {
				return int(i), nil
			}
			return i, nil
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return u, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("invalid number %q", string(x))
		}
		if isIntLiteral(string(x)) {
			return x, nil // an integer beyond 64 bits: float64 would round it
		}
		return f, nil
	case []any:
		var out []any
		for i, e := range x {
			c, err := normalize(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if out == nil && !sameValue(c, e) {
				out = make([]any, len(x))
				copy(out, x[:i])
			}
			if out != nil {
				out[i] = c
			}
		}
		if out != nil {
			return out, nil
		}
		return x, nil
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			c, err := normalize(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", k, err)
			}
			if out == nil && !sameValue(c, e) {
				out = make(map[string]any, len(x))
				for k2, e2 := range x {
					out[k2] = e2
				}
			}
			if out != nil {
				out[k] = c
			}
		}
		if out != nil {
			return out, nil
		}
		return x, nil
	}
	if i, ok := toInt(v); ok {
		return i, nil
	}
	if f, ok := toFloat(v); ok {
		return f, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			c, err := normalize(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = c
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return v, nil
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			c, err := normalize(it.Value().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[it.Key().String()] = c
		}
		return out, nil
	}
	return v, nil
}

// isIntLiteral reports whether a JSON number is written as an integer (no
// fraction, no exponent).
func isIntLiteral(n string) bool {
	return !strings.ContainsAny(n, ".eE")
}

// decodeStructural decodes one stored JSON value into the structural form
// state migrations work on (package migrate): numbers kept exact
// (json.Decoder.UseNumber), then normalized as a state value is. Sessions
// and checkpoints both decode through it, so a migration sees the same
// types whichever record it migrates.
func decodeStructural(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return normalize(v, 0)
}

// decodeStructuralFields decodes a stored state, one JSON value per field,
// with [decodeStructural].
func decodeStructuralFields(fields map[string]json.RawMessage) (map[string]any, error) {
	tree := make(map[string]any, len(fields))
	for k, raw := range fields {
		v, err := decodeStructural(raw)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		tree[k] = v
	}
	return tree, nil
}

// sameValue reports whether normalisation left a value untouched. It
// compares only the cheap identity-bearing cases; containers are treated as
// changed when their dynamic type differs.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int:
		y, ok := b.(int)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	return false
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int8:
		return int(x), true
	case int16:
		return int(x), true
	case int32:
		return int(x), true
	case int64:
		return int(x), int64(int(x)) == x
	case uint:
		return int(x), x <= math.MaxInt
	case uint8:
		return int(x), true
	case uint16:
		return int(x), true
	case uint32:
		return int(x), uint64(x) <= math.MaxInt
	case uint64:
		return int(x), x <= math.MaxInt
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int(x), true
		}
	case float32:
		f := float64(x)
		if f == math.Trunc(f) && math.Abs(f) < 1<<24 {
			return int(f), true
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil && int64(int(i)) == i {
			return int(i), true
		}
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int(f), true
		}
	}
	return 0, false
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		f := float64(x)
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	if i, ok := toInt(v); ok {
		return float64(i), true
	}
	return 0, false
}

func toStringMap(v any) (map[string]any, error) {
	switch m := v.(type) {
	case map[string]any:
		return m, nil
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("mapping key %v is not a string", k)
			}
			out[ks] = e
		}
		return out, nil
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
		return nil, fmt.Errorf("not a mapping")
	}
	out := make(map[string]any, rv.Len())
	it := rv.MapRange()
	for it.Next() {
		out[it.Key().String()] = it.Value().Interface()
	}
	return out, nil
}

// isNilable reports whether the zero value of t can be nil.
func isNilable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return true
	}
	return false
}

func typeName(t reflect.Type) string {
	s := t.String()
	return strings.ReplaceAll(s, "interface {}", "any")
}
