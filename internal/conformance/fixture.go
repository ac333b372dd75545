package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Fixture is one parsed fixture file.
type Fixture struct {
	// Suite is the capability directory the fixture lives in
	// (spec/<suite>/conformance/).
	Suite string
	// Path is the file's path; Name is its base name.
	Path string
	Name string
	// Root is the whole document.
	Root *Value
}

// Case is one runnable scenario: one entry of a fixture's cases: list, or
// the whole fixture when it has none (an invocations: fixture is one case).
type Case struct {
	Fixture *Fixture
	// Name is the case's name: its name: key, "#<index>" for an unnamed
	// entry of cases:, or "" for a single-case fixture.
	Name string
	// Index is the position in cases: (0 for a single-case fixture).
	Index int
	// Pos is where the case starts.
	Pos Pos
	// Body is the case mapping with the fixture's file-level keys merged
	// in (see [LoadFixture]).
	Body *Value
}

// ID identifies the case in reports: "<file>" or "<file> > <case>".
func (c *Case) ID() string {
	if c.Name == "" {
		return c.Fixture.Name
	}
	return c.Fixture.Name + " > " + c.Name
}

// AdapterVersion is the conformance-adapter (spec) version this runner
// targets (spec/SNAPSHOT, v0.109.0). Fixtures declaring a newer
// conformance_version fail with fixture_version_unsupported (§4.4).
const AdapterVersion = "0.109.0"

// LoadFixture reads and parses the fixture at path.
func LoadFixture(suite, path string) (*Fixture, []*Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("conformance: read fixture: %w", err)
	}
	return ParseFixture(suite, path, data)
}

// ParseFixture parses fixture data and splits it into cases.
//
// A fixture with a cases: list yields one case per entry; every other
// top-level key of the file (shared subgraph:, subgraphs:, invariants:,
// ...) is merged into each case, the case's own keys winning — except
// invariants:, whose entries are unioned (the case's entry wins on a
// name clash). A fixture without cases: is a single case.
func ParseFixture(suite, path string, data []byte) (*Fixture, []*Case, error) {
	name := filepath.Base(path)
	root, err := ParseYAML(name, data)
	if err != nil {
		return nil, nil, err
	}
	fx := &Fixture{Suite: suite, Path: path, Name: name, Root: root}
	if root.Kind != KindMap {
		return fx, nil, schemaErrorf(root.Pos, "fixture must be a mapping, got %s", root.Kind)
	}
	if err := checkVersion(root); err != nil {
		return fx, nil, err
	}
	casesField, ok := root.Field("cases")
	if !ok {
		return fx, []*Case{{Fixture: fx, Pos: root.Pos, Body: root}}, nil
	}
	list := casesField.Value
	if list.Kind != KindList || len(list.Items) == 0 {
		return fx, nil, schemaErrorf(casesField.Pos, "cases: must be a non-empty list")
	}
	var shared []*Field
	for _, f := range root.Fields {
		if f.Key != "cases" {
			shared = append(shared, f)
		}
	}
	cases := make([]*Case, 0, len(list.Items))
	for i, item := range list.Items {
		if item.Kind != KindMap {
			return fx, nil, schemaErrorf(item.Pos, "cases[%d] must be a mapping, got %s", i, item.Kind)
		}
		c := &Case{Fixture: fx, Index: i, Pos: item.Pos, Body: mergeShared(item, shared)}
		if n, ok := item.Get("name"); ok && n.Kind == KindString && n.Str != "" {
			c.Name = n.Str
		} else {
			c.Name = "#" + strconv.Itoa(i)
		}
		cases = append(cases, c)
	}
	return fx, cases, nil
}

// mergeShared returns the case mapping with the file-level fields added.
func mergeShared(item *Value, shared []*Field) *Value {
	if len(shared) == 0 {
		return item
	}
	out := &Value{Kind: KindMap, Pos: item.Pos}
	out.Fields = append(out.Fields, item.Fields...)
	for _, sf := range shared {
		own, ok := item.Field(sf.Key)
		switch {
		case !ok:
			out.Fields = append(out.Fields, sf)
		case sf.Key == "invariants" && own.Value.Kind == KindMap && sf.Value.Kind == KindMap:
			merged := &Value{Kind: KindMap, Pos: own.Value.Pos}
			merged.Fields = append(merged.Fields, own.Value.Fields...)
			for _, inv := range sf.Value.Fields {
				if _, clash := own.Value.Get(inv.Key); !clash {
					merged.Fields = append(merged.Fields, inv)
				}
			}
			for i, f := range out.Fields {
				if f == own {
					out.Fields[i] = &Field{Key: own.Key, Pos: own.Pos, Value: merged}
				}
			}
		}
	}
	return out
}

// checkVersion enforces conformance-adapter §4.4.
func checkVersion(root *Value) error {
	f, ok := root.Field("conformance_version")
	if !ok {
		return nil
	}
	var s string
	switch f.Value.Kind {
	case KindString:
		s = f.Value.Str
	case KindInt, KindFloat:
		s = fmt.Sprint(f.Value.Native())
	default:
		return schemaErrorf(f.Pos, "conformance_version must be a version string")
	}
	cmp, err := compareVersions(s, AdapterVersion)
	if err != nil {
		return schemaErrorf(f.Pos, "conformance_version: %v", err)
	}
	if cmp > 0 {
		return fmt.Errorf("%w: fixture targets %s, adapter targets %s at %s",
			ErrVersionUnsupported, s, AdapterVersion, f.Pos)
	}
	return nil
}

// compareVersions compares dotted numeric versions ("0.48.0", "v1.2").
func compareVersions(a, b string) (int, error) {
	pa, err := versionParts(a)
	if err != nil {
		return 0, err
	}
	pb, err := versionParts(b)
	if err != nil {
		return 0, err
	}
	for len(pa) < len(pb) {
		pa = append(pa, 0)
	}
	for len(pb) < len(pa) {
		pb = append(pb, 0)
	}
	for i := range pa {
		switch {
		case pa[i] < pb[i]:
			return -1, nil
		case pa[i] > pb[i]:
			return 1, nil
		}
	}
	return 0, nil
}

func versionParts(s string) ([]int, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if s == "" {
		return nil, fmt.Errorf("empty version")
	}
	parts := strings.Split(s, ".")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("invalid version %q", s)
		}
		out[i] = n
	}
	return out, nil
}
