package graph

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/armature-go/armature/errcat"
)

// FieldSpec declares one state field: its name, type, default and reducer.
// It is implemented by the typed handles ([Field], [ListField],
// [MapField]) and by [NewDynamicField]. FieldSpecs are immutable and may
// be shared by several schemas.
type FieldSpec interface {
	// FieldName returns the field's name.
	FieldName() string
	spec() *fieldSpec
}

// FieldOption configures a field declaration.
type FieldOption func(*fieldSpec)

// Default sets the field's default value. It must match the field's type.
func Default(v any) FieldOption {
	return func(f *fieldSpec) { f.def, f.hasDef = v, true }
}

// WithReducer sets the field's reducer. A field has exactly one reducer:
// declaring a second one fails schema construction with
// conflicting_reducers.
func WithReducer(r Reducer) FieldOption {
	return func(f *fieldSpec) {
		if f.reducerSet {
			f.errs = append(f.errs, compileErr(errcat.ConflictingReducers, "", f.name,
				"field %q declares reducers %s and %s", f.name, f.reducer.Name(), r.Name()))
			return
		}
		f.reducer, f.reducerSet = r, true
	}
}

type fieldSpec struct {
	name       string
	typ        Type
	reducer    Reducer
	reducerSet bool
	def        any
	hasDef     bool
	zero       func() any
	bind       func(Reducer) (boundReducer, error)
	sliceKind  bool // Go-typed slice field: reads are clipped
	required   bool
	errs       []error
}

func (f *fieldSpec) spec() *fieldSpec { return f }

// FieldName returns the field's name.
func (f *fieldSpec) FieldName() string { return f.name }

func newFieldSpec(name string, typ Type, opts []FieldOption) *fieldSpec {
	f := &fieldSpec{name: name, typ: typ}
	for _, o := range opts {
		if o != nil {
			o(f)
		}
	}
	return f
}

// WithDecoder gives a Go-typed field of type T its own decoder from
// JSON, used wherever the engine decodes the field's stored value (a
// session load, a checkpoint, a state from JSON) in place of
// encoding/json: a type whose values are long lists of small objects
// (chat messages) can decode them in one pass. decode must accept what
// encoding/json marshals of a T and reject what is not valid JSON. The
// option is ignored, and reported by schema construction, on a field
// that is not of type T.
func WithDecoder[T any](decode func(data []byte) (T, error)) FieldOption {
	return func(f *fieldSpec) {
		if _, ok := f.typ.(goType[T]); !ok || decode == nil {
			f.errs = append(f.errs, compileErr(errcat.InvalidGraph, "", f.name,
				"field %q: WithDecoder of %s on a field of type %s", f.name, typeName(reflect.TypeFor[T]()), f.typ))
			return
		}
		f.typ = decodedType[T]{decode: decode}
	}
}

// decodedType is a goType whose values decode with their own function
// (WithDecoder).
type decodedType[T any] struct {
	goType[T]
	decode func([]byte) (T, error)
}

func (t decodedType[T]) decodeJSON(data []byte) (any, error) {
	v, err := t.decode(data)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// NewDynamicField declares a field whose type is described at run time
// (see [ParseType]); its values are JSON-like: string, int, float64, bool,
// nil, []any and map[string]any. The reducer defaults to [LastWriteWins].
func NewDynamicField(name string, typ Type, opts ...FieldOption) FieldSpec {
	if typ == nil {
		typ = TypeAny
	}
	f := newFieldSpec(name, typ, opts)
	f.zero = func() any { return dynamicZero(typ) }
	f.bind = func(r Reducer) (boundReducer, error) {
		switch r.Name() {
		case ReducerAppend, ReducerBoundedAppend, ReducerConcatFlatten, ReducerDedupeAppend, ReducerMergeByKey:
			var elem Type
			switch t := typ.(type) {
			case listType:
				elem = t.elem
			case anyType:
			default:
				return nil, fmt.Errorf("reducer %s needs a list field, field type is %s", r.Name(), typ)
			}
			return bindList(r, dynamicCodec(elem))
		case ReducerMerge, ReducerMergeAll:
			switch t := typ.(type) {
			case dictType:
				return bindMap(r, dynamicMapCodec(t))
			case anyType:
				return bindMap(r, dynamicMapCodec(dictType{}))
			}
			return nil, fmt.Errorf("reducer %s needs a mapping field, field type is %s", r.Name(), typ)
		}
		return bindScalar(r, typ)
	}
	return f
}

func dynamicZero(t Type) any {
	switch t := t.(type) {
	case scalarType:
		switch t.kind {
		case "string":
			return ""
		case "int":
			return 0
		case "float":
			return 0.0
		case "bool":
			return false
		}
	case listType:
		return []any{}
	case dictType, recordType:
		return map[string]any{}
	}
	return nil
}

// goType is the Type of a Go-typed field.
type goType[T any] struct{}

func (goType[T]) String() string { return typeName(reflect.TypeFor[T]()) }

func (goType[T]) Check(v any) (any, error) {
	if x, ok := unwrapList(v).(T); ok {
		return x, nil
	}
	if v == nil && isNilable(reflect.TypeFor[T]()) {
		var zero T
		return zero, nil
	}
	return nil, fmt.Errorf("want %s, got %s", typeName(reflect.TypeFor[T]()), describe(v))
}

// Field is a typed handle on a state field holding values of type T.
// Declare handles once (typically as package variables), build a [Schema]
// from them, and read and write state through them:
//
//	var Count = graph.NewField[int]("count")
//	n := Count.Get(state)
//	return Count.Set(n + 1), nil
type Field[T any] struct{ f *fieldSpec }

// NewField declares a field of Go type T with the [LastWriteWins] reducer
// unless [WithReducer] says otherwise (a [CustomReducer]; use
// [NewListField] and [NewMapField] for the canonical collection reducers).
func NewField[T any](name string, opts ...FieldOption) Field[T] {
	f := newFieldSpec(name, goType[T]{}, opts)
	f.sliceKind = reflect.TypeFor[T]().Kind() == reflect.Slice
	f.zero = func() any { var zero T; return zero }
	f.bind = func(r Reducer) (boundReducer, error) { return bindScalar(r, goType[T]{}) }
	return Field[T]{f}
}

// FieldName returns the field's name.
func (h Field[T]) FieldName() string { return h.f.name }

func (h Field[T]) spec() *fieldSpec { return h.f }

// Get returns the field's value in s, or T's zero value when s's schema
// does not declare the field. Slices are returned clipped: appending to
// them never writes into state.
func (h Field[T]) Get(s State) T {
	v := s.stored(h.f.name)
	if h.f.sliceKind {
		if l, ok := v.(clippedList[T]); ok {
			return l.clipped()
		}
	}
	x, ok := v.(T)
	if !ok {
		var zero T
		return zero
	}
	if h.f.sliceKind {
		return clipSlice(x)
	}
	return x
}

// clipSlice returns x (a slice) with its capacity cut to its length. It is
// a separate function so that reading non-slice fields does not move the
// value to the heap.
func clipSlice[T any](x T) T {
	rv := reflect.ValueOf(&x).Elem()
	if rv.Cap() > rv.Len() {
		rv.Set(rv.Slice3(0, rv.Len(), rv.Len()))
	}
	return x
}

// Set returns an update assigning v to the field (merged through the
// field's reducer).
func (h Field[T]) Set(v T) Update { return Update{h.f.name: v} }

// ListField is a typed handle on a list field of element type E.
type ListField[E any] struct{ Field[[]E] }

// NewListField declares a list field of element type E merged by r, one of
// [Append], [ConcatFlatten], [BoundedAppend], [DedupeAppend], [MergeByKey]
// or [LastWriteWins].
func NewListField[E any](name string, r Reducer, opts ...FieldOption) ListField[E] {
	f := newFieldSpec(name, goType[[]E]{}, append([]FieldOption{WithReducer(r)}, opts...))
	f.sliceKind = true
	f.zero = func() any { return []E{} }
	f.bind = func(r Reducer) (boundReducer, error) {
		if r.Name() == ReducerLastWriteWins || r.custom != nil {
			return bindScalar(r, goType[[]E]{})
		}
		if r.Name() == ReducerConcatFlatten {
			return bindFlatten[E](), nil
		}
		return bindList(r, typedCodec[E]())
	}
	return ListField[E]{Field[[]E]{f}}
}

// bindFlatten is concat_flatten over typed [][]E updates.
func bindFlatten[E any]() boundReducer {
	codec := typedCodec[E]()
	return func(prior, update any) (any, error) {
		lists, ok := update.([][]E)
		if !ok {
			return nil, fmt.Errorf("update must be %s, got %s", typeName(reflect.TypeFor[[][]E]()), describe(update))
		}
		var items []E
		for _, l := range lists {
			items = append(items, l...)
		}
		p, err := asListVal(prior, codec)
		if err != nil {
			return nil, err
		}
		return appendItems(p, items), nil
	}
}

// Get returns the field's items in s (clipped; appending to the result
// never writes into state).
func (h ListField[E]) Get(s State) []E {
	v := s.stored(h.f.name)
	if l, ok := v.(listVal[E]); ok {
		return l.clipped()
	}
	if x, ok := v.([]E); ok {
		return x[:len(x):len(x)]
	}
	return nil
}

// Add returns an update adding items through the field's reducer: the
// items are appended (or, for merge_by_key, merged) for the list reducers,
// wrapped as one sub-list for concat_flatten, and replace the list for
// last_write_wins.
func (h ListField[E]) Add(items ...E) Update {
	if h.f.reducer.Name() == ReducerConcatFlatten {
		return Update{h.f.name: [][]E{items}}
	}
	if items == nil {
		items = []E{}
	}
	return Update{h.f.name: items}
}

// MapField is a typed handle on a mapping field.
type MapField[K comparable, V any] struct{ Field[map[K]V] }

// NewMapField declares a mapping field merged by r: [Merge], [MergeAll]
// or [LastWriteWins].
func NewMapField[K comparable, V any](name string, r Reducer, opts ...FieldOption) MapField[K, V] {
	f := newFieldSpec(name, goType[map[K]V]{}, append([]FieldOption{WithReducer(r)}, opts...))
	f.zero = func() any { return map[K]V{} }
	f.bind = func(r Reducer) (boundReducer, error) {
		if r.Name() == ReducerLastWriteWins || r.custom != nil {
			return bindScalar(r, goType[map[K]V]{})
		}
		return bindMap(r, typedMapCodec[K, V]())
	}
	return MapField[K, V]{Field[map[K]V]{f}}
}

// Put returns an update setting one key (through the field's reducer).
func (h MapField[K, V]) Put(k K, v V) Update {
	if h.f.reducer.Name() == ReducerMergeAll {
		return Update{h.f.name: []map[K]V{{k: v}}}
	}
	return Update{h.f.name: map[K]V{k: v}}
}

// Schema is a compiled, immutable state schema: an ordered set of fields
// with their types, defaults and bound reducers. It is safe for concurrent
// use.
type Schema struct {
	fields   []*fieldSpec
	index    map[string]int
	reduce   []boundReducer
	defaults []any
	version  string
	required bool // some field is Required
}

// Required marks a field that has no default: a state is valid only when
// the field is given — in the initial state of [Schema.New] and in a
// decoded state ([Schema.DecodeState], e.g. a migrated checkpoint).
func Required() FieldOption {
	return func(f *fieldSpec) { f.required = true }
}

// WithVersion returns a copy of s labelled with a schema version
// (pipeline-utilities §10.2): checkpoint records are stamped with the
// version of the outermost graph's declared schema, and a record saved
// under another version is migrated at resume through the migrations
// registered with [CheckpointMigrations]. Versions are opaque strings; the
// zero version "" means undeclared.
func (s *Schema) WithVersion(v string) *Schema {
	c := *s
	c.version = v
	return &c
}

// Version returns the schema's version ("" when undeclared).
func (s *Schema) Version() string { return s.version }

// checkRequired fails when a required field is not among the given ones.
func (s *Schema) checkRequired(given func(name string) bool) error {
	if !s.required {
		return nil
	}
	for _, f := range s.fields {
		if f.required && !given(f.name) {
			return &StateError{Field: f.name, Err: fmt.Errorf("required field %q is missing", f.name)}
		}
	}
	return nil
}

// NewSchema builds a schema from field declarations. It fails with a
// *CompileError for an invalid reducer configuration
// (reducer_configuration_invalid), a field with two reducers
// (conflicting_reducers), a reducer that does not fit the field's type, a
// default of the wrong type, or a duplicate or empty field name.
func NewSchema(fields ...FieldSpec) (*Schema, error) {
	s := &Schema{index: make(map[string]int, len(fields))}
	for _, fs := range fields {
		if fs == nil || fs.spec() == nil {
			return nil, compileErr(errcat.InvalidGraph, "", "", "nil field declaration")
		}
		f := fs.spec()
		if len(f.errs) > 0 {
			return nil, f.errs[0]
		}
		if f.name == "" || strings.ContainsRune(f.name, 0) {
			return nil, compileErr(errcat.InvalidGraph, "", f.name, "field names must be non-empty and contain no NUL")
		}
		if prev, dup := s.index[f.name]; dup {
			if s.fields[prev].reducer.Name() != f.reducer.Name() {
				return nil, compileErr(errcat.ConflictingReducers, "", f.name,
					"field %q is declared with reducers %s and %s", f.name, s.fields[prev].reducer.Name(), f.reducer.Name())
			}
			return nil, compileErr(errcat.InvalidGraph, "", f.name, "field %q is declared twice", f.name)
		}
		if err := f.reducer.configError(f.name); err != nil {
			return nil, err
		}
		red, err := f.bind(f.reducer)
		if err != nil {
			return nil, compileErr(errcat.ReducerConfigurationInvalid, "", f.name, "field %q: %v", f.name, err)
		}
		def := f.zero()
		if f.hasDef {
			def, err = f.typ.Check(f.def)
			if err != nil {
				return nil, compileErr(errcat.InvalidGraph, "", f.name, "field %q default: %v", f.name, err)
			}
		}
		s.required = s.required || f.required
		s.index[f.name] = len(s.fields)
		s.fields = append(s.fields, f)
		s.reduce = append(s.reduce, red)
		s.defaults = append(s.defaults, def)
	}
	return s, nil
}

// MustSchema is like NewSchema but panics on error. Use it for package-level
// schemas built from constant declarations.
func MustSchema(fields ...FieldSpec) *Schema {
	s, err := NewSchema(fields...)
	if err != nil {
		panic(err)
	}
	return s
}

// Fields returns the field names in declaration order.
func (s *Schema) Fields() []string {
	out := make([]string, len(s.fields))
	for i, f := range s.fields {
		out[i] = f.name
	}
	return out
}

// Has reports whether the schema declares the named field.
func (s *Schema) Has(name string) bool { _, ok := s.index[name]; return ok }

// Type returns the named field's type, or nil.
func (s *Schema) Type(name string) Type {
	if i, ok := s.index[name]; ok {
		return s.fields[i].typ
	}
	return nil
}

// Reducer returns the named field's reducer.
func (s *Schema) Reducer(name string) (Reducer, bool) {
	if i, ok := s.index[name]; ok {
		return s.fields[i].reducer, true
	}
	return Reducer{}, false
}

// Defaults returns the state holding every field's default value.
func (s *Schema) Defaults() State {
	return State{schema: s, vals: s.defaults}
}

// New returns the default state with the fields of init set directly
// (replacing the defaults, not merged through reducers) after validation
// against the field types. It fails with state_validation_error naming the
// offending field.
func (s *Schema) New(init Update) (State, error) {
	vals := make([]any, len(s.defaults))
	copy(vals, s.defaults)
	for _, name := range sortedKeys(init) {
		i, ok := s.index[name]
		if !ok {
			return State{}, &StateError{Field: name, Err: fmt.Errorf("field %q is not declared in the schema", name)}
		}
		v, err := s.fields[i].typ.Check(init[name])
		if err != nil {
			return State{}, &StateError{Field: name, Err: err}
		}
		vals[i] = v
	}
	if err := s.checkRequired(func(n string) bool { _, ok := init[n]; return ok }); err != nil {
		return State{}, err
	}
	return State{schema: s, vals: vals}, nil
}

// StateError reports state that fails validation against its schema
// (state_validation_error), outside any node: an invalid initial state, a
// bad value decoded from JSON.
type StateError struct {
	// Field names the offending field.
	Field string
	// Err describes the problem.
	Err error
}

// Category returns errcat.StateValidationError.
func (e *StateError) Category() errcat.Category { return errcat.StateValidationError }

// Error formats the failure with the field name.
func (e *StateError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("graph: state_validation_error: field %q: %v", e.Field, e.Err)
}

// Unwrap returns the cause.
func (e *StateError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Is matches errcat.StateValidationError.
func (e *StateError) Is(target error) bool {
	return e != nil && errcat.Matches(errcat.StateValidationError, target)
}
