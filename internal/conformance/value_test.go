package conformance

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseYAMLPreservesDocumentOrder(t *testing.T) {
	src := `nodes:
  b:
    update_from_field: {v: src}
    update: {v: 1}
    raises: boom
  a:
    zeta: 1
    alpha: 2
`
	v, err := ParseYAML("order.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	nodes, _ := v.Get("nodes")
	var got []string
	for _, n := range nodes.Fields {
		got = append(got, n.Key)
		for _, d := range n.Value.Fields {
			got = append(got, n.Key+"."+d.Key)
		}
	}
	want := []string{"b", "b.update_from_field", "b.update", "b.raises", "a", "a.zeta", "a.alpha"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order mismatch (-want +got):\n%s", diff)
	}
	b, _ := nodes.Field("b")
	if b.Pos != (Pos{File: "order.yaml", Line: 2}) {
		t.Errorf("pos of b = %v, want order.yaml:2", b.Pos)
	}
	raises, _ := b.Value.Field("raises")
	if raises.Pos.Line != 5 || raises.Value.Pos.Line != 5 {
		t.Errorf("raises line = %d/%d, want 5", raises.Pos.Line, raises.Value.Pos.Line)
	}
}

func TestParseYAMLKinds(t *testing.T) {
	tests := []struct {
		src    string
		kind   Kind
		native any
	}{
		{"~", KindNull, nil},
		{"null", KindNull, nil},
		{"true", KindBool, true},
		{"42", KindInt, 42},
		{"-0x10", KindInt, -16},
		{"1.5", KindFloat, 1.5},
		{"1e3", KindFloat, 1000.0},
		{"99999999999999999999", KindFloat, 1e20},
		{`"42"`, KindString, "42"},
		{"2024-01-02", KindString, "2024-01-02"},
		{"hello", KindString, "hello"},
		{"[1, a, null]", KindList, []any{1, "a", nil}},
		{"{a: 1, b: [x]}", KindMap, map[string]any{"a": 1, "b": []any{"x"}}},
		{"a: &x [1, 2]\nb: *x", KindMap, map[string]any{"a": []any{1, 2}, "b": []any{1, 2}}},
	}
	for _, tt := range tests {
		v, err := ParseYAML("k.yaml", []byte(tt.src))
		if err != nil {
			t.Errorf("%q: %v", tt.src, err)
			continue
		}
		if v.Kind != tt.kind {
			t.Errorf("%q: kind %s, want %s", tt.src, v.Kind, tt.kind)
		}
		if diff := cmp.Diff(tt.native, v.Native()); diff != "" {
			t.Errorf("%q: native mismatch (-want +got):\n%s", tt.src, diff)
		}
	}
}

func TestParseYAMLErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"empty", "", "fixture_schema_invalid: empty fixture at e.yaml:1"},
		{"comment only", "# nothing\n", "fixture_schema_invalid: empty fixture at e.yaml:1"},
		{"syntax", "a: 1\nb: [x\n", "fixture_schema_invalid: invalid YAML: did not find expected ',' or ']' at e.yaml:"},
		{"duplicate key", "a: 1\nb: 2\na: 3\n", `fixture_schema_invalid: duplicate key "a" at e.yaml:3`},
		{"two documents", "a: 1\n---\nb: 2\n", "fixture_schema_invalid: more than one YAML document at e.yaml:2"},
		{"complex key", "? [a, b]\n: 1\n", "fixture_schema_invalid: mapping key must be a scalar at e.yaml:1"},
		{"alias bomb", aliasBomb(), "fixture_schema_invalid: YAML expands to more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseYAML("e.yaml", []byte(tt.src))
			if !errors.Is(err, ErrSchemaInvalid) {
				t.Fatalf("err = %v, want fixture_schema_invalid", err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("err = %q, want prefix %q", err, tt.want)
			}
		})
	}
}

// aliasBomb is a "billion laughs" document: each level doubles ten times.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		prev := "*l" + string(rune('0'+i-1))
		b.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(prev)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestValueAccessors(t *testing.T) {
	v, err := ParseYAML("a.yaml", []byte("a: {b: [1, 2.5, \"s\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Get("missing"); ok {
		t.Error("Get(missing) reported a value")
	}
	var nilValue *Value
	if _, ok := nilValue.Get("a"); ok || !nilValue.IsNull() {
		t.Error("nil Value must behave as null")
	}
	if got, want := v.String(), `{a: {b: [1, 2.5, "s"]}}`; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
	for k, s := range map[Kind]string{KindNull: "null", KindMap: "mapping", Kind(99): "Kind(99)"} {
		if k.String() != s {
			t.Errorf("Kind.String() = %q, want %q", k.String(), s)
		}
	}
}

func FuzzParseFixture(f *testing.F) {
	seeds := []string{
		"state: {fields: {v: {type: int, default: 0}}}\nentry: a\nnodes: {a: {update: {v: 1}}}\nedges: [{from: a, to: END}]\n",
		"cases:\n  - name: x\n    graph: {state: {fields: {}}}\n    expected_compile_error: no_declared_entry\n",
		"invocations:\n  - {name: a, drain: {timeout_seconds: 0.1}}\ninvariants: {inner_event_count: 1}\n",
		"a: &x [1, *x]\n",
		"cases: []\n",
		"conformance_version: 99.0.0\n",
		"nodes: {a: {fan_out: {}, bogus: 1}}\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	reg := newInvariantRegistry()
	f.Fuzz(func(t *testing.T, data []byte) {
		fx, cases, err := ParseFixture("graph-engine", "fuzz.yaml", data)
		if err != nil {
			return
		}
		_ = fx.Root.String()
		for _, c := range cases {
			_ = c.ID()
			p := &geParser{invariants: reg}
			_, _ = p.parseCase(c)
		}
	})
}
