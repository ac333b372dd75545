package conformance

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFixtureForms(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		ids   []string
		check func(t *testing.T, cases []*Case)
	}{
		{
			name: "single case",
			src:  "state: {fields: {}}\nexpected: {}\n",
			ids:  []string{"f.yaml"},
		},
		{
			name: "invocations file is one case",
			src:  "invocations:\n  - {name: a}\n  - {name: b}\n",
			ids:  []string{"f.yaml"},
		},
		{
			name: "cases with names and an unnamed entry",
			src:  "cases:\n  - {name: first}\n  - {description: no name}\n  - {name: third}\n",
			ids:  []string{"f.yaml > first", "f.yaml > #1", "f.yaml > third"},
		},
		{
			name: "file-level keys merge into cases, case keys win",
			src: `subgraph: {name: shared}
entry: file_entry
invariants: {a_inv: 1, clash: file}
cases:
  - name: one
    entry: own_entry
    invariants: {clash: case, b_inv: 2}
  - name: two
`,
			ids: []string{"f.yaml > one", "f.yaml > two"},
			check: func(t *testing.T, cases []*Case) {
				one, two := cases[0].Body, cases[1].Body
				if e, _ := one.Get("entry"); e.Str != "own_entry" {
					t.Errorf("case one entry = %s, want own_entry", e.Str)
				}
				if e, _ := two.Get("entry"); e.Str != "file_entry" {
					t.Errorf("case two entry = %s, want file_entry", e.Str)
				}
				for _, c := range cases {
					if _, ok := c.Body.Get("subgraph"); !ok {
						t.Errorf("case %s lacks the shared subgraph", c.Name)
					}
					if _, ok := c.Body.Get("cases"); ok {
						t.Errorf("case %s carries cases:", c.Name)
					}
				}
				inv, _ := one.Get("invariants")
				var keys []string
				for _, f := range inv.Fields {
					keys = append(keys, f.Key+"="+f.Value.String())
				}
				if diff := cmp.Diff([]string{`clash="case"`, "b_inv=2", "a_inv=1"}, keys); diff != "" {
					t.Errorf("merged invariants (-want +got):\n%s", diff)
				}
				// Case bodies keep their own positions.
				if cases[1].Pos.Line != 8 {
					t.Errorf("case two line = %d, want 8", cases[1].Pos.Line)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, cases, err := ParseFixture("suite", "dir/f.yaml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range cases {
				ids = append(ids, c.ID())
			}
			if diff := cmp.Diff(tt.ids, ids); diff != "" {
				t.Errorf("case ids (-want +got):\n%s", diff)
			}
			if tt.check != nil {
				tt.check(t, cases)
			}
		})
	}
}

func TestParseFixtureInvalid(t *testing.T) {
	tests := []struct {
		name, src string
		sentinel  error
	}{
		{"not a mapping", "[1, 2]\n", ErrSchemaInvalid},
		{"empty cases", "cases: []\n", ErrSchemaInvalid},
		{"case not a mapping", "cases: [1]\n", ErrSchemaInvalid},
		{"newer version", "conformance_version: \"99.0.0\"\n", ErrVersionUnsupported},
		{"bad version", "conformance_version: banana\n", ErrSchemaInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseFixture("s", "f.yaml", []byte(tt.src))
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("err = %v, want %v", err, tt.sentinel)
			}
		})
	}
	if _, _, err := ParseFixture("s", "f.yaml", []byte("conformance_version: \"0.48.0\"\n")); err != nil {
		t.Errorf("older conformance_version rejected: %v", err)
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0.48.0", "0.109.0", -1},
		{"v0.109", "0.109.0", 0},
		{"1.0.0", "0.109.0", 1},
	}
	for _, tt := range tests {
		got, err := compareVersions(tt.a, tt.b)
		if err != nil || got != tt.want {
			t.Errorf("compareVersions(%s, %s) = %d, %v; want %d", tt.a, tt.b, got, err, tt.want)
		}
	}
}
