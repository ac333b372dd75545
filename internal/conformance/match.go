package conformance

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Value matchers (conformance-adapter §5.10).
var (
	uuidV4Re       = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	uuidHexRe      = regexp.MustCompile(`^[0-9a-f]{32}$`)
	uuidHexTokenRe = regexp.MustCompile(`^<uuid-hex(?:-[A-Za-z0-9_-]+)?>$`)
	bindingTokenRe = regexp.MustCompile(`^<[a-z][a-z0-9]*(?:_[a-z0-9]+)+>$`)
)

// matchMode selects how mappings are compared.
type matchMode uint8

const (
	// exact: mappings must have exactly the expected keys, at every depth.
	exact matchMode = iota
	// subsetTop: the top-level mapping may have extra keys; nested values
	// are compared exactly (observer events: absent keys are unchecked).
	subsetTop
	// subsetDeep: mappings at every depth may have extra keys (§5.13
	// carries on a mapping-valued field).
	subsetDeep
)

// matcher compares expected fixture values with actual runtime values.
// It holds the first-occurrence bindings of <name_X> tokens, so one
// matcher is used per case.
type matcher struct {
	bindings map[string]any
	// params are harness-injected values for harness_parameterized.
	params map[string]any
}

func newMatcher() *matcher {
	return &matcher{
		bindings: map[string]any{},
		params:   map[string]any{"implementation_name": "armature-go"},
	}
}

// match compares want (a native fixture value) with got (any runtime
// value), returning an error naming the first difference under path.
func (m *matcher) match(path string, want, got any, mode matchMode) error {
	got = normalize(got)
	if s, ok := want.(string); ok {
		if handled, err := m.token(path, s, got); handled {
			return err
		}
	}
	switch w := want.(type) {
	case exactValue:
		return m.match(path, w.v, got, exact)
	case nil:
		if got != nil {
			return mismatch(path, want, got)
		}
		return nil
	case map[string]any:
		if handled, err := m.subKeys(path, w, got); handled {
			return err
		}
		g, ok := got.(map[string]any)
		if !ok {
			return mismatch(path, want, got)
		}
		for _, k := range sortedKeys(w) {
			gv, present := g[k]
			if !present {
				return fmt.Errorf("%s: missing key %q (want %s)", path, k, formatValue(w[k]))
			}
			child := exact
			if mode == subsetDeep {
				child = subsetDeep
			}
			if err := m.match(joinPath(path, k), w[k], gv, child); err != nil {
				return err
			}
		}
		if mode == exact {
			for _, k := range sortedKeys(g) {
				if _, ok := w[k]; !ok {
					return fmt.Errorf("%s: unexpected key %q = %s", path, k, formatValue(g[k]))
				}
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok {
			return mismatch(path, want, got)
		}
		if len(g) != len(w) {
			return fmt.Errorf("%s: want %d items %s, got %d items %s", path, len(w), formatValue(w), len(g), formatValue(g))
		}
		child := exact
		if mode == subsetDeep {
			child = subsetDeep
		}
		for i := range w {
			if err := m.match(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], child); err != nil {
				return err
			}
		}
		return nil
	}
	if !scalarEqual(want, got) {
		return mismatch(path, want, got)
	}
	return nil
}

// token handles the inline value tokens. It reports whether s was a token.
func (m *matcher) token(path, s string, got any) (bool, error) {
	gs, isStr := got.(string)
	switch {
	case s == "<uuid>":
		if !isStr || !uuidV4Re.MatchString(gs) {
			return true, fmt.Errorf("%s: want a canonical UUIDv4, got %s", path, formatValue(got))
		}
		return true, nil
	case s == "<any-string>":
		if !isStr || gs == "" {
			return true, fmt.Errorf("%s: want a non-empty string, got %s", path, formatValue(got))
		}
		return true, nil
	case uuidHexTokenRe.MatchString(s):
		if !isStr || !uuidHexRe.MatchString(gs) {
			return true, fmt.Errorf("%s: want 32 lowercase hex digits (%s), got %s", path, s, formatValue(got))
		}
		return true, nil
	case bindingTokenRe.MatchString(s):
		bound, ok := m.bindings[s]
		if !ok {
			m.bindings[s] = got
			return true, nil
		}
		if !deepEqual(bound, got) {
			return true, fmt.Errorf("%s: %s was bound to %s earlier in the case, got %s",
				path, s, formatValue(bound), formatValue(got))
		}
		return true, nil
	}
	return false, nil
}

// subKeys handles the assertion sub-keys (§5.10): a mapping holding only
// non_empty_string and/or harness_parameterized (observability 058 gives
// both), each checked.
func (m *matcher) subKeys(path string, w map[string]any, got any) (bool, error) {
	if len(w) == 0 {
		return false, nil
	}
	for k := range w {
		if k != "non_empty_string" && k != "harness_parameterized" {
			return false, nil
		}
	}
	if v, ok := w["non_empty_string"]; ok {
		if v != true {
			return true, fmt.Errorf("%s: non_empty_string must be true, got %s", path, formatValue(v))
		}
		if s, ok := got.(string); !ok || s == "" {
			return true, fmt.Errorf("%s: want a non-empty string, got %s", path, formatValue(got))
		}
	}
	if v, ok := w["harness_parameterized"]; ok {
		name, _ := v.(string)
		p, known := m.params[name]
		if !known {
			return true, fmt.Errorf("%s: unknown harness parameter %s", path, formatValue(v))
		}
		if !deepEqual(p, got) {
			return true, fmt.Errorf("%s: want harness parameter %s = %s, got %s", path, name, formatValue(p), formatValue(got))
		}
	}
	return true, nil
}

func mismatch(path string, want, got any) error {
	return fmt.Errorf("%s: want %s, got %s", path, formatValue(want), formatValue(got))
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// scalarEqual compares normalized scalars; numbers compare numerically.
func scalarEqual(a, b any) bool {
	a, b = normalize(a), normalize(b)
	if af, ok := toFloat(a); ok {
		bf, ok := toFloat(b)
		if !ok {
			return false
		}
		ai, aInt := a.(int64)
		bi, bInt := b.(int64)
		if aInt && bInt {
			return ai == bi
		}
		return af == bf || (math.IsNaN(af) && math.IsNaN(bf))
	}
	return a == b
}

// deepEqual compares two values structurally with numeric comparison.
func deepEqual(a, b any) bool {
	a, b = normalize(a), normalize(b)
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, x := range av {
			y, ok := bv[k]
			if !ok || !deepEqual(x, y) {
				return false
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !deepEqual(av[i], bv[i]) {
				return false
			}
		}
		return true
	case nil:
		return b == nil
	}
	switch b.(type) {
	case map[string]any, []any, nil:
		return false
	}
	return scalarEqual(a, b)
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// stateMapper is implemented by graph.State; normalize uses it so states
// nested in events and errors compare as mappings.
type stateMapper interface {
	IsZero() bool
	Map() map[string]any
}

// normalize converts a runtime value to the canonical shapes the matcher
// compares: nil, bool, int64, uint64 (only above MaxInt64), float64,
// string, []any and map[string]any. Typed slices, maps, pointers and
// states are converted recursively.
func normalize(v any) any {
	switch x := v.(type) {
	case nil, bool, string, int64, float64:
		return v
	case int:
		return int64(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case stateMapper:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return nil
		}
		if x.IsZero() {
			return nil
		}
		return normalize(x.Map())
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u <= math.MaxInt64 {
			return int64(u)
		}
		return u
	case reflect.Float32, reflect.Float64:
		return rv.Float()
	case reflect.Bool:
		return rv.Bool()
	case reflect.String:
		return rv.String()
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}
		}
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = normalize(rv.Index(i).Interface())
		}
		return out
	case reflect.Map:
		out := make(map[string]any, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			out[fmt.Sprint(normalize(iter.Key().Interface()))] = normalize(iter.Value().Interface())
		}
		return out
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil
		}
		return normalize(rv.Elem().Interface())
	}
	return v
}

// formatValue renders a value in YAML flow style for messages and as a
// canonical key for set comparisons (integral floats print as integers,
// mapping keys are sorted).
func formatValue(v any) string {
	var b strings.Builder
	writeValue(&b, normalize(v))
	return b.String()
}

func writeValue(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		b.WriteString(strconv.Quote(x))
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			b.WriteString(strconv.FormatInt(int64(x), 10))
		} else {
			b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
		}
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k)
			b.WriteString(": ")
			writeValue(b, x[k])
		}
		b.WriteByte('}')
	default:
		fmt.Fprint(b, x)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sameSet reports whether two lists hold the same elements ignoring order
// and duplicates (numbers compared numerically via formatValue).
func sameSet(want, got []any) bool {
	ws := make(map[string]bool, len(want))
	for _, w := range want {
		ws[formatValue(w)] = true
	}
	gs := make(map[string]bool, len(got))
	for _, g := range got {
		gs[formatValue(g)] = true
	}
	if len(ws) != len(gs) {
		return false
	}
	for k := range ws {
		if !gs[k] {
			return false
		}
	}
	return true
}
