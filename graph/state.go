package graph

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/armature-go/armature/errcat"
)

// Update is a partial state update: field name → value, each merged into
// the prior state through the field's reducer. Nodes return Updates; the
// typed handles build them (Count.Set(1), Log.Add("a")) and [Update.With]
// combines them.
type Update map[string]any

// With copies the entries of each other update into u and returns u (a
// new Update when u is nil). Later entries win.
func (u Update) With(others ...Update) Update {
	if u == nil {
		n := 0
		for _, o := range others {
			n += len(o)
		}
		u = make(Update, n)
	}
	for _, o := range others {
		for k, v := range o {
			u[k] = v
		}
	}
	return u
}

// State is an immutable snapshot of a graph's state: one value per schema
// field. Merging an update returns a new State; the old one is unchanged.
// The zero State (IsZero) means "absent".
//
// Values read from a State must be treated as read-only: slices are
// returned clipped (appending reallocates), but mapping values and slice
// elements are shared with the snapshot.
type State struct {
	schema *Schema
	vals   []any
}

// IsZero reports whether s is the zero (absent) State.
func (s State) IsZero() bool { return s.schema == nil }

// Schema returns the state's schema.
func (s State) Schema() *Schema { return s.schema }

// Get returns the named field's value and whether the schema declares it.
func (s State) Get(name string) (any, bool) {
	if s.schema == nil {
		return nil, false
	}
	i, ok := s.schema.index[name]
	if !ok {
		return nil, false
	}
	return unwrapList(s.vals[i]), true
}

// stored returns the named field's value as the state stores it (a list
// field merged by an appending reducer as its listVal), without boxing a
// list's slice anew: the typed handles' Get reads through it.
func (s State) stored(name string) any {
	if s.schema == nil {
		return nil
	}
	i, ok := s.schema.index[name]
	if !ok {
		return nil
	}
	return s.vals[i]
}

// Map returns the state as a new field → value map.
func (s State) Map() map[string]any {
	if s.schema == nil {
		return nil
	}
	m := make(map[string]any, len(s.vals))
	for i, f := range s.schema.fields {
		m[f.name] = unwrapList(s.vals[i])
	}
	return m
}

// Merge applies u through the field reducers and returns the new state.
// It fails with a *MergeError: reducer_error when a reducer rejects the
// update's shape, state_validation_error when a value does not fit the
// field's type or names an undeclared field.
func (s State) Merge(u Update) (State, error) {
	out, err := s.merge(u)
	if err != nil {
		return State{}, err
	}
	return out, nil
}

// MergeError reports a failed merge of an update into a state.
type MergeError struct {
	cat errcat.Category
	// Field and Reducer name the field being merged.
	Field   string
	Reducer string
	// Err is the cause.
	Err error
}

// Category returns reducer_error or state_validation_error.
func (e *MergeError) Category() errcat.Category { return e.cat }

// Error formats the failure.
func (e *MergeError) Error() string {
	return fmt.Sprintf("graph: %s: field %q (reducer %s): %v", e.cat, e.Field, e.Reducer, e.Err)
}

// Unwrap returns the cause.
func (e *MergeError) Unwrap() error { return e.Err }

// Is matches the error's category.
func (e *MergeError) Is(target error) bool { return errcat.Matches(e.cat, target) }

func (s State) merge(u Update) (State, *MergeError) {
	if len(u) == 0 {
		return s, nil
	}
	sc := s.schema
	matched := 0
	vals := make([]any, len(s.vals))
	copy(vals, s.vals)
	for i, f := range sc.fields {
		v, ok := u[f.name]
		if !ok {
			continue
		}
		matched++
		var (
			nv  any
			err error
		)
		if seq, ok := v.(sequence); ok {
			nv = vals[i]
			for _, e := range seq {
				if nv, err = sc.reduce[i](nv, e); err != nil {
					break
				}
			}
		} else {
			nv, err = sc.reduce[i](vals[i], v)
		}
		if err != nil {
			cat := errcat.ReducerError
			var ve *validationError
			if errors.As(err, &ve) {
				cat = errcat.StateValidationError
			}
			return State{}, &MergeError{cat: cat, Field: f.name, Reducer: f.reducer.Name(), Err: err}
		}
		vals[i] = nv
	}
	if matched != len(u) {
		for _, k := range sortedKeys(u) {
			if _, ok := sc.index[k]; !ok {
				return State{}, &MergeError{cat: errcat.StateValidationError, Field: k, Reducer: "-",
					Err: fmt.Errorf("field %q is not declared in the schema", k)}
			}
		}
	}
	return State{schema: sc, vals: vals}, nil
}

// MarshalJSON encodes the state as a JSON object in field order.
func (s State) MarshalJSON() ([]byte, error) {
	if s.schema == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range s.schema.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.name)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(unwrapList(s.vals[i]))
		if err != nil {
			return nil, fmt.Errorf("graph: encoding field %q: %w", f.name, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// DecodeState decodes a JSON object produced by [State.MarshalJSON] (or
// any object naming schema fields) into a State of schema s. Missing fields
// take their defaults; unknown fields and values of the wrong type fail
// with a *StateError (state_validation_error).
func (s *Schema) DecodeState(data []byte) (State, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return State{}, &StateError{Field: "", Err: fmt.Errorf("decoding state: %w", err)}
	}
	vals := slices.Clone(s.defaults)
	for _, name := range sortedKeys(raw) {
		i, ok := s.index[name]
		if !ok {
			return State{}, &StateError{Field: name, Err: fmt.Errorf("field %q is not declared in the schema", name)}
		}
		v, err := decodeValue(s.fields[i].typ, raw[name])
		if err != nil {
			return State{}, &StateError{Field: name, Err: err}
		}
		vals[i] = v
	}
	if err := s.checkRequired(func(n string) bool { _, ok := raw[n]; return ok }); err != nil {
		return State{}, err
	}
	return State{schema: s, vals: vals}, nil
}

// jsonDecoder is implemented by types that decode JSON into their Go
// representation (Go-typed fields).
type jsonDecoder interface {
	decodeJSON(data []byte) (any, error)
}

// decodeJSON decodes a stored value of a Go-typed field. A T that holds
// values of type any somewhere (map[string]any, []any, a struct field)
// decodes the numbers in them as encoding/json does (float64), except an
// integer float64 cannot hold exactly (beyond 2^53: an id, a uint64),
// which keeps its value as the structural form has it (an int, int64 or
// uint64, json.Number beyond 64 bits; see goNumber) rather than rounded.
// A T without any (the common case, chat histories included) decodes
// with json.Unmarshal alone.
func (goType[T]) decodeJSON(data []byte) (any, error) {
	var v T
	if !exactAny(reflect.TypeFor[T]()) {
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		return v, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		// json.Unmarshal's rule: nothing but space after the value.
		return nil, fmt.Errorf("invalid character after the top-level value")
	}
	if err := exactNumbers(reflect.ValueOf(&v).Elem()); err != nil {
		return nil, err
	}
	return v, nil
}

// anyTypes caches holdsAny per type; exactTypes exactAny. They hold
// facts about Go types, the same for every graph and never stale (as
// encoding/json caches its types' codecs), not state.
var anyTypes, exactTypes sync.Map // reflect.Type → bool

// exactAny reports whether decodeJSON decodes the numbers of a T's
// values of type any exactly: T holds any (holdsAny), none of it
// behind an embedded unexported struct, whose fields encoding/json sets
// and reflection cannot (such a T decodes with json.Unmarshal).
func exactAny(t reflect.Type) bool {
	if v, ok := exactTypes.Load(t); ok {
		return v.(bool)
	}
	r := holdsAny(t) && !hiddenAny(t, map[reflect.Type]bool{})
	exactTypes.Store(t, r)
	return r
}

// hiddenAny reports whether t holds any behind an embedded unexported
// struct field.
func hiddenAny(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return hiddenAny(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && f.Anonymous && holdsAny(f.Type) {
				return true
			}
			if (f.IsExported() || f.Anonymous) && hiddenAny(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// holdsAny reports whether encoding/json decodes values of type any into
// a t: an empty interface reachable through its pointers, slices,
// arrays, map values and exported struct fields, not behind a type that
// decodes itself (json.Unmarshaler, encoding.TextUnmarshaler).
func holdsAny(t reflect.Type) bool {
	if v, ok := anyTypes.Load(t); ok {
		return v.(bool)
	}
	r := holdsAnyIn(t, map[reflect.Type]bool{})
	anyTypes.Store(t, r)
	return r
}

func holdsAnyIn(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false // a recursive type: answered where it began
	}
	seen[t] = true
	if t.Kind() != reflect.Interface && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) ||
		t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)) {
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return t.NumMethod() == 0
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsAnyIn(t.Elem(), seen)
	case reflect.Map:
		return holdsAnyIn(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() || f.Anonymous {
				if holdsAnyIn(f.Type, seen) {
					return true
				}
			}
		}
	}
	return false
}

// exactNumbers replaces, in a value decoded with json.Decoder.UseNumber,
// each json.Number held by an interface value with the number as the
// structural form has it (normalize).
func exactNumbers(v reflect.Value) error {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() || v.NumMethod() != 0 {
			return nil
		}
		x, err := exactValue(v.Elem().Interface())
		if err != nil {
			return err
		}
		if v.CanSet() {
			v.Set(reflect.ValueOf(&x).Elem())
		}
		return nil
	case reflect.Pointer:
		if v.IsNil() || !holdsAny(v.Type().Elem()) {
			return nil
		}
		return exactNumbers(v.Elem())
	case reflect.Slice, reflect.Array:
		if !holdsAny(v.Type().Elem()) {
			return nil
		}
		for i := range v.Len() {
			if err := exactNumbers(v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		et := v.Type().Elem()
		if v.IsNil() || !holdsAny(et) {
			return nil
		}
		it := v.MapRange()
		for it.Next() {
			e := reflect.New(et).Elem() // map values are not addressable
			e.Set(it.Value())
			if err := exactNumbers(e); err != nil {
				return err
			}
			v.SetMapIndex(it.Key(), e)
		}
	case reflect.Struct:
		if !holdsAny(v.Type()) {
			return nil
		}
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				if err := exactNumbers(f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// goNumber is the value of number x within an any: the float64
// encoding/json makes of it, as long as the float64 is the number
// exactly — so a float64 written reads back a float64, warm or cold —
// and otherwise (an integer beyond 2^53 that float64 would round) the
// exact integer the structural form makes of it (normalize).
func goNumber(x json.Number) (any, error) {
	f, err := strconv.ParseFloat(string(x), 64)
	if err != nil {
		return nil, fmt.Errorf("invalid number %q", string(x))
	}
	if !isIntLiteral(string(x)) || math.Abs(f) < 1<<53 || new(big.Float).SetFloat64(f).Text('f', 0) == string(x) {
		return f, nil
	}
	return normalize(x, 0)
}

// exactValue converts the json.Numbers of a value decoded into an any
// (nil, bool, string, json.Number, []any, map[string]any), in place.
func exactValue(x any) (any, error) {
	switch t := x.(type) {
	case json.Number:
		return goNumber(t)
	case []any:
		for i, e := range t {
			c, err := exactValue(e)
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
	case map[string]any:
		for k, e := range t {
			if _, ok := e.(string); ok {
				continue
			}
			c, err := exactValue(e)
			if err != nil {
				return nil, err
			}
			t[k] = c
		}
	}
	return x, nil
}

func decodeValue(t Type, data []byte) (any, error) {
	if d, ok := t.(jsonDecoder); ok {
		return d.decodeJSON(data)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return t.Check(v)
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
