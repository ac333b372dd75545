package graph

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/armature-go/armature/errcat"
)

// Canonical reducer names (graph-engine §2). They are wire identifiers and
// must not change.
const (
	ReducerLastWriteWins = "last_write_wins"
	ReducerAppend        = "append"
	ReducerMerge         = "merge"
	ReducerConcatFlatten = "concat_flatten"
	ReducerMergeAll      = "merge_all"
	ReducerBoundedAppend = "bounded_append"
	ReducerDedupeAppend  = "dedupe_append"
	ReducerMergeByKey    = "merge_by_key"
)

// A Reducer merges a node's partial update for one field into the field's
// prior value. Every field has exactly one reducer; the default is
// [LastWriteWins].
//
// Reducers are values: the canonical parameter-less ones are package
// variables, the factories ([BoundedAppend], [DedupeAppend], [MergeByKey])
// build configured values, and [CustomReducer] wraps a function. A factory
// given invalid parameters does not panic: the field declaring it fails
// schema construction with reducer_configuration_invalid.
type Reducer struct {
	name       string
	maxLen     int
	key        KeyFunc
	keyGiven   bool
	custom     func(prior, update any) (any, error)
	idempotent bool
	configErr  string
}

// The canonical parameter-less reducers.
var (
	// LastWriteWins replaces the prior value with the update.
	LastWriteWins = Reducer{name: ReducerLastWriteWins, idempotent: true}
	// Append extends a list field with the update's items.
	Append = Reducer{name: ReducerAppend}
	// Merge shallow-merges a mapping update into a mapping field; later
	// writes win on key conflict.
	Merge = Reducer{name: ReducerMerge, idempotent: true}
	// ConcatFlatten extends a list field with the one-level flattening of
	// a list-of-lists update.
	ConcatFlatten = Reducer{name: ReducerConcatFlatten}
	// MergeAll folds a list-of-mappings update into a mapping field, as
	// Merge applied once per element.
	MergeAll = Reducer{name: ReducerMergeAll}
)

// KeyFunc maps a list item to the key DedupeAppend and MergeByKey compare.
// The key must be comparable (hashable); an error or an uncomparable key
// fails the merge with reducer_error.
type KeyFunc func(item any) (any, error)

// FieldKey returns a KeyFunc reading the named entry of mapping items (or
// the named field of struct items), failing for items without it.
func FieldKey(name string) KeyFunc {
	return func(item any) (any, error) {
		if m, ok := item.(map[string]any); ok {
			v, ok := m[name]
			if !ok {
				return nil, fmt.Errorf("item has no key %q", name)
			}
			return v, nil
		}
		rv := reflect.ValueOf(item)
		for rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv = rv.Elem()
		}
		switch rv.Kind() {
		case reflect.Map:
			if rv.Type().Key().Kind() == reflect.String {
				v := rv.MapIndex(reflect.ValueOf(name).Convert(rv.Type().Key()))
				if v.IsValid() {
					return v.Interface(), nil
				}
			}
		case reflect.Struct:
			if f := rv.FieldByName(name); f.IsValid() && f.CanInterface() {
				return f.Interface(), nil
			}
		}
		return nil, fmt.Errorf("item has no key %q", name)
	}
}

// BoundedAppend returns an append reducer that keeps at most maxLen items,
// dropping the oldest first. maxLen must be at least 1.
func BoundedAppend(maxLen int) Reducer {
	r := Reducer{name: ReducerBoundedAppend, maxLen: maxLen}
	if maxLen < 1 {
		r.configErr = fmt.Sprintf("bounded_append: max_len must be >= 1, got %d", maxLen)
	}
	return r
}

// DedupeAppend returns an append reducer that skips update items whose key
// already appears in the list (or earlier in the same update). A nil key
// uses the item itself.
func DedupeAppend(key KeyFunc) Reducer {
	return Reducer{name: ReducerDedupeAppend, key: key, keyGiven: key != nil, idempotent: true}
}

// MergeByKey returns a reducer for lists of records: update items whose key
// matches an existing item replace it in place, novel keys are appended in
// update order. key is required.
func MergeByKey(key KeyFunc) Reducer {
	r := Reducer{name: ReducerMergeByKey, key: key, keyGiven: key != nil, idempotent: true}
	if key == nil {
		r.configErr = "merge_by_key: a key function is required"
	}
	return r
}

// CustomReducer wraps fn as a reducer named name. idempotent declares that
// re-applying an already merged value leaves the field unchanged, which
// silences the projection round-trip compile warning.
func CustomReducer(name string, fn func(prior, update any) (any, error), idempotent bool) Reducer {
	r := Reducer{name: name, custom: fn, idempotent: idempotent}
	switch {
	case name == "":
		r.configErr = "custom reducer: a name is required"
	case fn == nil:
		r.configErr = fmt.Sprintf("custom reducer %q: a function is required", name)
	}
	return r
}

// Name returns the reducer's name, e.g. "append".
func (r Reducer) Name() string {
	if r.name == "" {
		return ReducerLastWriteWins
	}
	return r.name
}

// collects reports whether the reducer takes a list of contributions as
// its update (the append family, concat_flatten, merge_all): the shape of
// a fan-out's collected target field.
func (r Reducer) collects() bool {
	switch r.Name() {
	case ReducerAppend, ReducerBoundedAppend, ReducerDedupeAppend, ReducerMergeByKey, ReducerConcatFlatten, ReducerMergeAll:
		return true
	}
	return false
}

// RoundTripIdempotent reports whether re-applying an already merged value
// leaves the field unchanged (graph-engine §2 reducer round-trip warning).
func (r Reducer) RoundTripIdempotent() bool { return r.name == "" || r.idempotent }

// boundReducer merges update into prior. It returns *shapeError or
// *validationError failures (see mergeError).
type boundReducer func(prior, update any) (any, error)

// validationError marks a failure of the update's values against the
// field's declared type (state_validation_error), as opposed to a reducer
// shape failure (reducer_error).
type validationError struct{ err error }

func (e *validationError) Error() string { return e.err.Error() }
func (e *validationError) Unwrap() error { return e.err }

// elemCodec converts update payloads to typed element slices for one list
// field. Dynamic fields use E = any with element type checks; Go-typed
// fields assert the Go type.
type elemCodec[E any] struct {
	list func(v any) ([]E, error) // an update that must be a list of E
	item func(v any) (E, error)   // one element of a list of lists
}

func dynamicCodec(elem Type) elemCodec[any] {
	checkElems := func(l []any) ([]any, error) {
		c, err := listType{elem: elem}.Check(l)
		if err != nil {
			return nil, &validationError{err}
		}
		return c.([]any), nil
	}
	return elemCodec[any]{
		list: func(v any) ([]any, error) {
			l, err := asAnyList(v)
			if err != nil {
				return nil, err
			}
			return checkElems(l)
		},
		item: func(v any) (any, error) {
			if elem == nil {
				c, err := normalize(v, 1)
				if err != nil {
					return nil, &validationError{err}
				}
				return c, nil
			}
			c, err := elem.Check(v)
			if err != nil {
				return nil, &validationError{err}
			}
			return c, nil
		},
	}
}

func typedCodec[E any]() elemCodec[E] {
	return elemCodec[E]{
		list: func(v any) ([]E, error) {
			switch x := unwrapList(v).(type) {
			case []E:
				return x, nil
			case nil:
				return nil, fmt.Errorf("update must be a list, got null")
			}
			err := fmt.Errorf("update must be %s, got %s", typeName(reflect.TypeFor[[]E]()), describe(v))
			if k := reflect.TypeOf(v).Kind(); k == reflect.Slice || k == reflect.Array {
				// A list of the wrong element type: the shape is right, the
				// values are not.
				return nil, &validationError{err}
			}
			return nil, err
		},
		item: func(v any) (E, error) {
			e, ok := v.(E)
			if !ok {
				var zero E
				return zero, &validationError{fmt.Errorf("want %s, got %s", typeName(reflect.TypeOf(&zero).Elem()), describe(v))}
			}
			return e, nil
		},
	}
}

// listVal is the stored form of a list field merged by an appending
// reducer. It shares its backing array with older snapshots: owner.n
// records how far the array is claimed, so the snapshot at the claimed end
// may extend it in place (amortised O(len(update)) per merge) while any
// other snapshot copies. Readers always see a clipped slice, so code that
// appends to a value read from state never writes into shared memory.
type listVal[E any] struct {
	s   []E
	off int
	own *arrayOwner
}

type arrayOwner struct{ n atomic.Int64 }

// listUnwrapper lets type-erased code read a listVal.
type listUnwrapper interface{ unwrapList() any }

func (l listVal[E]) unwrapList() any { return l.clipped() }

// listPrefixer lets type-erased code take a listVal's first items.
type listPrefixer interface{ listPrefix(n int) any }

// listPrefix is the list's first n items (0 <= n <= its length), sharing
// its array: the whole list itself when n is its length, so that an
// append claims the array's spare capacity as the list's own would; a
// shorter prefix cannot claim it (its end is not the owner's), and an
// append copies it.
func (l listVal[E]) listPrefix(n int) any {
	if n == len(l.s) {
		return l
	}
	return listVal[E]{s: l.s[:n:n], off: l.off, own: l.own}
}

// clipped is the list's items, clipped: what a reader sees.
func (l listVal[E]) clipped() []E { return l.s[:len(l.s):len(l.s)] }

// clippedList is a listVal read through a typed handle whose type T is
// the list's slice type: reading it so boxes nothing.
type clippedList[T any] interface{ clipped() T }

func unwrapList(v any) any {
	if u, ok := v.(listUnwrapper); ok {
		return u.unwrapList()
	}
	return v
}

func asListVal[E any](v any, codec elemCodec[E]) (listVal[E], error) {
	switch x := v.(type) {
	case listVal[E]:
		return x, nil
	case nil:
		return listVal[E]{}, nil
	}
	l, err := codec.list(v)
	if err != nil {
		return listVal[E]{}, fmt.Errorf("prior value: %w", err)
	}
	return listVal[E]{s: l[:len(l):len(l)]}, nil
}

// appendItems returns prior extended with items, in place when prior holds
// the claimed end of its backing array and there is room.
func appendItems[E any](prior listVal[E], items []E) listVal[E] {
	if len(items) == 0 {
		return prior
	}
	n := len(prior.s)
	if prior.own != nil && cap(prior.s)-n >= len(items) {
		end := int64(prior.off + n)
		if prior.own.n.CompareAndSwap(end, end+int64(len(items))) {
			return listVal[E]{s: append(prior.s, items...), off: prior.off, own: prior.own}
		}
	}
	size := n + len(items)
	buf := make([]E, size, max(2*size, 8))
	copy(buf, prior.s)
	copy(buf[n:], items)
	own := &arrayOwner{}
	own.n.Store(int64(size))
	return listVal[E]{s: buf, own: own}
}

// listMerge adapts a merge over typed items to a boundReducer: it decodes
// the update and the prior value, and treats an empty update as a no-op.
func listMerge[E any](codec elemCodec[E], merge func(p listVal[E], items []E) (any, error)) boundReducer {
	return func(prior, update any) (any, error) {
		items, err := codec.list(update)
		if err != nil {
			return nil, err
		}
		p, err := asListVal(prior, codec)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return p, nil
		}
		return merge(p, items)
	}
}

// bindList returns the merge function of r for a list field of element
// type E.
func bindList[E any](r Reducer, codec elemCodec[E]) (boundReducer, error) {
	switch r.Name() {
	case ReducerAppend:
		return listMerge(codec, func(p listVal[E], items []E) (any, error) {
			return appendItems(p, items), nil
		}), nil
	case ReducerBoundedAppend:
		maxLen := r.maxLen
		return listMerge(codec, func(p listVal[E], items []E) (any, error) {
			if len(items) >= maxLen {
				fresh := make([]E, maxLen)
				copy(fresh, items[len(items)-maxLen:])
				return listVal[E]{s: fresh}, nil
			}
			out := appendItems(p, items)
			if drop := len(out.s) - maxLen; drop > 0 {
				out.s = out.s[drop:]
				out.off += drop
			}
			return out, nil
		}), nil
	case ReducerConcatFlatten:
		return func(prior, update any) (any, error) {
			outer, err := asAnyList(update)
			if err != nil {
				return nil, err
			}
			var items []E
			for i, sub := range outer {
				l, err := codec.list(sub)
				if err != nil {
					var ve *validationError
					if errors.As(err, &ve) {
						return nil, err
					}
					return nil, fmt.Errorf("update element [%d] must be a list, got %s", i, describe(sub))
				}
				items = append(items, l...)
			}
			p, err := asListVal(prior, codec)
			if err != nil {
				return nil, err
			}
			return appendItems(p, items), nil
		}, nil
	case ReducerDedupeAppend:
		key := r.key
		return listMerge(codec, func(p listVal[E], items []E) (any, error) {
			seen := make(map[any]struct{}, len(p.s)+len(items))
			for _, it := range p.s {
				k, err := itemKey(key, it)
				if err != nil {
					return nil, err
				}
				seen[k] = struct{}{}
			}
			var keep []E
			for _, it := range items {
				k, err := itemKey(key, it)
				if err != nil {
					return nil, err
				}
				if _, dup := seen[k]; dup {
					continue
				}
				seen[k] = struct{}{}
				keep = append(keep, it)
			}
			return appendItems(p, keep), nil
		}), nil
	case ReducerMergeByKey:
		key := r.key
		return listMerge(codec, func(p listVal[E], items []E) (any, error) {
			idx := make(map[any]int, len(p.s)+len(items))
			for i, it := range p.s {
				k, err := itemKey(key, it)
				if err != nil {
					return nil, err
				}
				idx[k] = i // the last prior duplicate wins
			}
			out := make([]E, len(p.s), len(p.s)+len(items))
			copy(out, p.s)
			for _, it := range items {
				k, err := itemKey(key, it)
				if err != nil {
					return nil, err
				}
				if i, ok := idx[k]; ok {
					out[i] = it
					continue
				}
				idx[k] = len(out)
				out = append(out, it)
			}
			return out[:len(out):len(out)], nil
		}), nil
	}
	return nil, fmt.Errorf("reducer %q does not apply to a list field", r.Name())
}

// itemKey computes and canonicalises a dedupe/merge key.
func itemKey[E any](key KeyFunc, item E) (k any, err error) {
	defer func() {
		if p := recover(); p != nil {
			k, err = nil, fmt.Errorf("key function panicked: %v", p)
		}
	}()
	k = any(item)
	if key != nil {
		k, err = key(k)
		if err != nil {
			return nil, fmt.Errorf("key function: %w", err)
		}
	}
	return hashable(k)
}

// hashable canonicalises numeric keys (1 and 1.0 are the same key) and
// rejects keys that cannot index a map.
func hashable(k any) (any, error) {
	if k == nil {
		return nil, nil
	}
	if i, ok := toInt(k); ok {
		return i, nil
	}
	if f, ok := toFloat(k); ok {
		return f, nil
	}
	t := reflect.TypeOf(k)
	if !t.Comparable() || !comparableValue(reflect.ValueOf(k)) {
		return nil, fmt.Errorf("key of type %s is not hashable", typeName(t))
	}
	return k, nil
}

// comparableValue reports whether v can be used as a map key without a
// run-time panic (interfaces inside structs may hold uncomparable values).
func comparableValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return true
		}
		e := v.Elem()
		return e.Type().Comparable() && comparableValue(e)
	case reflect.Struct:
		for i := range v.NumField() {
			if !comparableValue(v.Field(i)) {
				return false
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			if !comparableValue(v.Index(i)) {
				return false
			}
		}
	}
	return true
}

// asAnyList views a list update as []any without checking its elements.
func asAnyList(v any) ([]any, error) {
	switch x := unwrapList(v).(type) {
	case []any:
		return x, nil
	case nil:
		return nil, fmt.Errorf("update must be a list, got null")
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, fmt.Errorf("update must be a list, got %s", describe(v))
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, nil
}

// mapCodec converts payloads for one mapping field.
type mapCodec[K comparable, V any] struct {
	mapping func(v any) (map[K]V, error)
}

func dynamicMapCodec(t dictType) mapCodec[string, any] {
	return mapCodec[string, any]{mapping: func(v any) (map[string]any, error) {
		m, err := toStringMap(v)
		if err != nil {
			return nil, fmt.Errorf("update must be a mapping, got %s", describe(v))
		}
		c, err := t.Check(m)
		if err != nil {
			return nil, &validationError{err}
		}
		return c.(map[string]any), nil
	}}
}

func typedMapCodec[K comparable, V any]() mapCodec[K, V] {
	return mapCodec[K, V]{mapping: func(v any) (map[K]V, error) {
		m, ok := v.(map[K]V)
		if !ok {
			err := fmt.Errorf("update must be %s, got %s", typeName(reflect.TypeFor[map[K]V]()), describe(v))
			if v != nil && reflect.TypeOf(v).Kind() == reflect.Map {
				return nil, &validationError{err}
			}
			return nil, err
		}
		return m, nil
	}}
}

func bindMap[K comparable, V any](r Reducer, codec mapCodec[K, V]) (boundReducer, error) {
	mergeInto := func(dst, src map[K]V) {
		for k, v := range src {
			dst[k] = v
		}
	}
	prior := func(v any) (map[K]V, error) {
		if v == nil {
			return nil, nil
		}
		m, err := codec.mapping(v)
		if err != nil {
			return nil, fmt.Errorf("prior value: %w", err)
		}
		return m, nil
	}
	switch r.Name() {
	case ReducerMerge:
		return func(p, update any) (any, error) {
			u, err := codec.mapping(update)
			if err != nil {
				return nil, err
			}
			pm, err := prior(p)
			if err != nil {
				return nil, err
			}
			if len(u) == 0 && pm != nil {
				return pm, nil
			}
			out := make(map[K]V, len(pm)+len(u))
			mergeInto(out, pm)
			mergeInto(out, u)
			return out, nil
		}, nil
	case ReducerMergeAll:
		return func(p, update any) (_ any, err error) {
			var list []any
			if typed, ok := update.([]map[K]V); ok {
				list = make([]any, len(typed))
				for i, m := range typed {
					list[i] = m
				}
			} else if list, err = asAnyList(update); err != nil {
				return nil, err
			}
			pm, err := prior(p)
			if err != nil {
				return nil, err
			}
			if len(list) == 0 && pm != nil {
				return pm, nil
			}
			out := make(map[K]V, len(pm))
			mergeInto(out, pm)
			for i, e := range list {
				m, err := codec.mapping(e)
				if err != nil {
					var ve *validationError
					if errors.As(err, &ve) {
						return nil, err
					}
					return nil, fmt.Errorf("update element [%d] must be a mapping, got %s", i, describe(e))
				}
				mergeInto(out, m)
			}
			return out, nil
		}, nil
	}
	return nil, fmt.Errorf("reducer %q does not apply to a mapping field", r.Name())
}

// bindScalar returns the merge function for last_write_wins or a custom
// reducer on a field of type typ.
func bindScalar(r Reducer, typ Type) (boundReducer, error) {
	switch {
	case r.custom != nil:
		fn := r.custom
		return func(prior, update any) (out any, err error) {
			defer func() {
				if p := recover(); p != nil {
					out, err = nil, fmt.Errorf("reducer panicked: %v", p)
				}
			}()
			out, err = fn(unwrapList(prior), update)
			if err != nil {
				return nil, err
			}
			c, cerr := typ.Check(out)
			if cerr != nil {
				return nil, fmt.Errorf("reducer result: %w", cerr)
			}
			return c, nil
		}, nil
	case r.Name() == ReducerLastWriteWins:
		return func(_, update any) (any, error) {
			c, err := typ.Check(update)
			if err != nil {
				return nil, &validationError{err}
			}
			return c, nil
		}, nil
	}
	return nil, fmt.Errorf("reducer %q does not apply to a field of type %s", r.Name(), typ)
}

// configError reports a factory configuration problem as a CompileError.
func (r Reducer) configError(field string) error {
	if r.configErr == "" {
		return nil
	}
	return &CompileError{cat: errcat.ReducerConfigurationInvalid, Field: field, msg: r.configErr}
}
