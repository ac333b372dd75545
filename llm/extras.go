package llm

import (
	"bytes"
	"encoding/json"
	"math/big"
	"slices"
	"sort"

	"github.com/armature-go/armature/errcat"
)

// CanonicalJSON returns raw re-encoded with object keys sorted
// recursively, no insignificant whitespace, and number literals kept as
// written (§8 intra-implementation wire-byte stability). Strings are
// escaped as encoding/json escapes them.
func CanonicalJSON(raw []byte) (json.RawMessage, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	return marshalCanonical(v)
}

// CanonicalValue returns the canonical JSON (see [CanonicalJSON]) of any
// JSON-encodable value, such as a Config.Extras value.
func CanonicalValue(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return CanonicalJSON(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return CanonicalJSON(b)
}

func marshalCanonical(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps encode with sorted keys
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// JSONEqual reports whether two JSON-encodable values are equal as decoded
// JSON (§6 decoded-value deep equality): objects member-wise regardless of
// order, arrays element-wise in order, numbers numerically (1 equals 1.0).
func JSONEqual(a, b any) bool {
	da, err1 := toDecoded(a)
	db, err2 := toDecoded(b)
	return err1 == nil && err2 == nil && jsonEqual(da, db)
}

func toDecoded(v any) (any, error) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	return decodeJSON(raw)
}

// jsonEqual compares values produced by decodeJSON.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, ok1 := new(big.Rat).SetString(x.String())
		ry, ok2 := new(big.Rat).SetString(y.String())
		return ok1 && ok2 && rx.Cmp(ry) == 0
	default:
		return a == b
	}
}

// ManagedField is a wire-body field a mapping manages (§6 Managed-field
// collision), named by its wire key. A mapping lists only the fields it
// manages on this call: a conditionally managed field (response_format
// only with a native response schema, stream_options only when
// streaming, a declared field's realization only while it is set) is
// listed only when the mapping produces it.
type ManagedField struct {
	// Key is the wire key, as it would appear in Config.Extras.
	Key string
	// Value is the mapping's value of a non-additive field: an extras
	// value equal to it (JSON deep equality) is a no-op, a different one
	// is rejected.
	Value any
	// List marks an additive, list-shaped field of strings and holds the
	// mapping's values; the extras value merges after them.
	List []string
	// CoerceString accepts a scalar string extras value as a one-element
	// list (OpenAI's stop).
	CoerceString bool
}

// Additive reports whether the field is list-shaped.
func (f ManagedField) Additive() bool { return f.List != nil }

// ResolveExtras resolves a call's extras against the mapping's managed
// fields (§6 Managed-field collision). It returns the extras to pass
// through untouched (unmanaged keys), and for each additive managed field
// the merged list (the mapping's values first, then the caller's,
// de-duplicated, first occurrence winning; an extras value that is not a
// list of strings, or a string when CoerceString, is treated as absent).
// A non-additive managed field whose extras value differs from the
// managed one fails with a *[ProviderError] in provider_invalid_request
// matching [ErrManagedField]; an equal one is dropped (the mapping emits
// its own). extras is not modified.
func ResolveExtras(extras map[string]any, managed []ManagedField) (pass map[string]any, lists map[string][]string, err error) {
	pass = make(map[string]any, len(extras))
	for k, v := range extras {
		pass[k] = v
	}
	for _, f := range managed {
		v, ok := pass[f.Key]
		if f.Additive() {
			merged := slices.Clone(f.List)
			if ok {
				delete(pass, f.Key)
				merged = MergeStrings(merged, stringList(v, f.CoerceString)...)
			}
			if lists == nil {
				lists = make(map[string][]string)
			}
			lists[f.Key] = merged
			continue
		}
		if !ok {
			continue
		}
		if !JSONEqual(v, f.Value) {
			return nil, nil, &ProviderError{
				Cat:     errcat.ProviderInvalidRequest,
				Message: "config extras key " + quote(f.Key) + " conflicts with the value the mapping manages",
				Err:     ErrManagedField,
			}
		}
		delete(pass, f.Key)
	}
	return pass, lists, nil
}

// stringList returns v as a list of strings, or nil when it is malformed
// for the merge (all-or-nothing).
func stringList(v any, coerce bool) []string {
	d, err := toDecoded(v)
	if err != nil {
		return nil
	}
	switch x := d.(type) {
	case string:
		if coerce {
			return []string{x}
		}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	return nil
}

// MergeStrings appends to base the values of extra not already present,
// in order, and de-duplicates base itself (first occurrence wins).
func MergeStrings(base []string, extra ...string) []string {
	out := make([]string, 0, len(base)+len(extra))
	for _, s := range slices.Concat(base, extra) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// SortedKeys returns m's keys in lexicographic order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
