package conformance

import (
	"strings"
	"testing"
)

func TestMatcherValues(t *testing.T) {
	const uuid = "3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b"
	tests := []struct {
		name      string
		want, got any
		mode      matchMode
		errSubstr string // "" = must match
	}{
		{"int vs float", 3, 3.0, exact, ""},
		{"int vs int64", 3, int64(3), exact, ""},
		{"int vs uint8", 3, uint8(3), exact, ""},
		{"float vs int", 2.5, 2, exact, "want 2.5, got 2"},
		{"string vs number", "3", 3, exact, `want "3", got 3`},
		{"bool", true, false, exact, "want true, got false"},
		{"null", nil, nil, exact, ""},
		{"null vs value", nil, "x", exact, `want null, got "x"`},
		{"typed slice", []any{"a", "b"}, []string{"a", "b"}, exact, ""},
		{"list length", []any{1}, []int{1, 2}, exact, "want 1 items [1], got 2 items [1, 2]"},
		{"list element", []any{1, 2}, []int{1, 3}, exact, "p[1]: want 2, got 3"},
		{"typed map", map[string]any{"a": 1}, map[string]int{"a": 1}, exact, ""},
		{"missing key", map[string]any{"a": 1}, map[string]any{}, exact, `missing key "a"`},
		{"extra key exact", map[string]any{"a": 1}, map[string]any{"a": 1, "b": 2}, exact, `unexpected key "b"`},
		{"extra key subsetTop", map[string]any{"a": 1}, map[string]any{"a": 1, "b": 2}, subsetTop, ""},
		{"nested extra key subsetTop", map[string]any{"a": map[string]any{"x": 1}}, map[string]any{"a": map[string]any{"x": 1, "y": 2}}, subsetTop, `p.a: unexpected key "y"`},
		{"nested extra key subsetDeep", map[string]any{"a": map[string]any{"x": 1}}, map[string]any{"a": map[string]any{"x": 1, "y": 2}}, subsetDeep, ""},
		{"uuid ok", "<uuid>", uuid, exact, ""},
		{"uuid v1 rejected", "<uuid>", "3f2b8c1e-9a4d-1e6f-8b2a-1c3d5e7f9a0b", exact, "canonical UUIDv4"},
		{"uuid uppercase rejected", "<uuid>", strings.ToUpper(uuid), exact, "canonical UUIDv4"},
		{"uuid non-string", "<uuid>", 7, exact, "canonical UUIDv4"},
		{"uuid-hex", "<uuid-hex>", "3f2b8c1e9a4d4e6f8b2a1c3d5e7f9a0b", exact, ""},
		{"uuid-hex suffix", "<uuid-hex-5-a>", "3f2b8c1e9a4d4e6f8b2a1c3d5e7f9a0b", exact, ""},
		{"uuid-hex dashed rejected", "<uuid-hex-1>", uuid, exact, "32 lowercase hex"},
		{"any-string", "<any-string>", "x", exact, ""},
		{"any-string empty", "<any-string>", "", exact, "non-empty string"},
		{"non_empty_string", map[string]any{"non_empty_string": true}, "x", exact, ""},
		{"non_empty_string empty", map[string]any{"non_empty_string": true}, "", exact, "non-empty string"},
		{"harness_parameterized", map[string]any{"harness_parameterized": "implementation_name"}, "armature-go", exact, ""},
		{"harness_parameterized unknown", map[string]any{"harness_parameterized": "nope"}, "x", exact, "unknown harness parameter"},
		{"literal angle string", "<not a token>", "<not a token>", exact, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newMatcher().match("p", tt.want, tt.got, tt.mode)
			switch {
			case tt.errSubstr == "" && err != nil:
				t.Errorf("unexpected mismatch: %v", err)
			case tt.errSubstr != "" && err == nil:
				t.Errorf("matched, want a mismatch containing %q", tt.errSubstr)
			case tt.errSubstr != "" && !strings.Contains(err.Error(), tt.errSubstr):
				t.Errorf("err = %q, want it to contain %q", err, tt.errSubstr)
			}
		})
	}
}

func TestMatcherBindings(t *testing.T) {
	m := newMatcher()
	steps := []struct {
		want, got string
		ok        bool
	}{
		{"<trace_id_parent>", "abc", true}, // first occurrence binds
		{"<trace_id_parent>", "abc", true}, // same value again
		{"<trace_id_child>", "abc", true},  // a distinct token binds independently
		{"<trace_id_parent>", "xyz", false},
		{"<trace_id_child>", "def", false},
	}
	for i, s := range steps {
		err := m.match("id", s.want, s.got, exact)
		if (err == nil) != s.ok {
			t.Errorf("step %d: match(%s, %s) err = %v, want ok=%t", i, s.want, s.got, err, s.ok)
		}
	}
	// Bindings are per matcher (per case).
	if err := newMatcher().match("id", "<trace_id_parent>", "xyz", exact); err != nil {
		t.Errorf("fresh matcher kept a binding: %v", err)
	}
}

func TestSameSetAndFormat(t *testing.T) {
	if !sameSet([]any{0, 1, 2}, []any{2.0, int64(1), 0, 1}) {
		t.Error("sameSet must ignore order, duplicates and numeric representation")
	}
	if sameSet([]any{0, 1}, []any{0}) {
		t.Error("sameSet must compare sizes")
	}
	if got := formatValue(map[string]any{"b": []any{1.0, nil}, "a": "x"}); got != `{a: "x", b: [1, null]}` {
		t.Errorf("formatValue = %s", got)
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"Node": "node", "ParentStates": "parent_states", "ID": "id",
		"InvocationID": "invocation_id", "RegisteredMigrationsCount": "registered_migrations_count",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%s) = %s, want %s", in, got, want)
		}
	}
}
