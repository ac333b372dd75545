package conformance

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Determinism (observability §10) in the observability suite: the when:
// edge condition (fixture 011: a node with a conditional edge and a
// fallback edge) becomes a graph-engine if_field condition, and
// determinism_check compares the span trees of two invocations.

var determinismKeys = vocab("compare_runs ignore_attributes compare require_equal")

// determinismCheck is a parsed determinism_check.
type determinismCheck struct {
	runs    [2]int
	ignore  []string
	compare []string
	equal   bool
}

// rewriteWhenEdges turns each node's pair of edges {from, when: {field,
// gt}, to: X} and {from, to: Y} into one conditional edge (if_field
// field gt → X, else Y), the graph-engine's one outgoing edge per node.
func rewriteWhenEdges(v *Value) (*Value, error) {
	if v.Kind != KindList {
		return v, nil
	}
	out := &Value{Kind: KindList, Pos: v.Pos}
	byFrom := map[string][]*Value{}
	var order []string
	for _, e := range v.Items {
		from, ok := e.Get("from")
		if !ok || from.Kind != KindString {
			out.Items = append(out.Items, e)
			continue
		}
		if byFrom[from.Str] == nil {
			order = append(order, from.Str)
		}
		byFrom[from.Str] = append(byFrom[from.Str], e)
	}
	for _, from := range order {
		es := byFrom[from]
		i := slices.IndexFunc(es, func(e *Value) bool { _, ok := e.Get("when"); return ok })
		if i < 0 {
			out.Items = append(out.Items, es...)
			continue
		}
		if len(es) != 2 {
			return nil, schemaErrorf(es[i].Pos, "a when: edge from %s needs exactly one fallback edge", from)
		}
		w, _ := es[i].Get("when")
		to, _ := es[i].Get("to")
		other, _ := es[1-i].Get("to")
		field, _ := w.Get("field")
		gt, hasGt := w.Get("gt")
		if field == nil || !hasGt || len(w.Fields) != 2 || to == nil || other == nil {
			return nil, notImplemented(capObs + " edge when: condition other than {field, gt}")
		}
		p := es[i].Pos
		fd := func(k string, v *Value) *Field { return &Field{Key: k, Pos: p, Value: v} }
		cond := &Value{Kind: KindMap, Pos: p, Fields: []*Field{
			fd("if_field", field), fd("gt", gt), fd("then", to), fd("else", other),
		}}
		out.Items = append(out.Items, &Value{Kind: KindMap, Pos: p, Fields: []*Field{
			fd("from", &Value{Kind: KindString, Pos: p, Str: from}), fd("condition", cond),
		}})
	}
	return out, nil
}

// parseDeterminism parses determinism_check.
func (p *geParser) parseDeterminism(v *Value) (*determinismCheck, error) {
	if err := p.checkKeys(v, "determinism_check", determinismKeys); err != nil {
		return nil, err
	}
	dc := &determinismCheck{runs: [2]int{0, 1}, equal: true}
	if r, ok := v.Get("compare_runs"); ok {
		if r.Kind != KindList || len(r.Items) != 2 || r.Items[0].Kind != KindInt || r.Items[1].Kind != KindInt {
			return nil, schemaErrorf(r.Pos, "compare_runs must be two run indices")
		}
		dc.runs = [2]int{int(r.Items[0].Int), int(r.Items[1].Int)}
	}
	var err error
	if a, ok := v.Get("ignore_attributes"); ok {
		if dc.ignore, err = strList(a, "ignore_attributes"); err != nil {
			return nil, err
		}
	}
	if c, ok := v.Get("compare"); ok {
		if dc.compare, err = strList(c, "compare"); err != nil {
			return nil, err
		}
		for _, k := range dc.compare {
			switch k {
			case "span_tree_structure", "span_names", "span_status", "span_attributes_excluding_ignored":
			default:
				return nil, &DirectiveUnknownError{Name: k, Pos: c.Pos}
			}
		}
	}
	if r, ok := v.Get("require_equal"); ok {
		if r.Kind != KindBool {
			return nil, schemaErrorf(r.Pos, "require_equal must be a bool")
		}
		dc.equal = r.Bool
	}
	return dc, nil
}

func (dc *determinismCheck) ignored(key string) bool {
	for _, pat := range dc.ignore {
		if prefix, glob := strings.CutSuffix(pat, "*"); glob && strings.HasPrefix(key, prefix) || key == pat {
			return true
		}
	}
	return false
}

// render describes a span forest with what dc compares, one line per
// span, children indented.
func (dc *determinismCheck) render(b *strings.Builder, ns []*spanNode, depth int) {
	for _, n := range ns {
		if slices.Contains(dc.compare, "span_tree_structure") {
			b.WriteString(strings.Repeat("  ", depth))
		}
		if slices.Contains(dc.compare, "span_names") {
			b.WriteString(n.span.Name)
		}
		if slices.Contains(dc.compare, "span_status") {
			b.WriteString(" " + statusName(n.span.Status.Code))
		}
		if slices.Contains(dc.compare, "span_attributes_excluding_ignored") {
			attrs := spanAttrs(n.span)
			for _, k := range sortedKeys(attrs) {
				if !dc.ignored(k) {
					fmt.Fprintf(b, " %s=%s", k, formatValue(attrs[k]))
				}
			}
		}
		b.WriteString("\n")
		dc.render(b, n.children, depth+1)
	}
}

// check compares the two runs.
func (dc *determinismCheck) check(runs []*obsRun) error {
	for _, i := range dc.runs {
		if i < 0 || i >= len(runs) {
			return fmt.Errorf("determinism_check: no run %d of %d", i, len(runs))
		}
	}
	var a, b strings.Builder
	dc.render(&a, runs[dc.runs[0]].roots, 0)
	dc.render(&b, runs[dc.runs[1]].roots, 0)
	if equal := a.String() == b.String(); equal != dc.equal {
		return fmt.Errorf("determinism_check: runs %d and %d equal = %t, want %t:\n%s---\n%s", dc.runs[0], dc.runs[1], equal, dc.equal, a.String(), b.String())
	}
	return nil
}

// determinismInvariants compare every run with the first.
var determinismInvariants = map[string]func(a, b *obsRun) (bool, string){
	"same_execution_path": func(a, b *obsRun) (bool, string) {
		return slices.Equal(a.Path, b.Path), fmt.Sprintf("paths %v and %v", a.Path, b.Path)
	},
	"span_count_equal_across_runs": func(a, b *obsRun) (bool, string) {
		na, nb := len(a.otel.allSpans()), len(b.otel.allSpans())
		return na == nb && na > 0, fmt.Sprintf("%d and %d spans", na, nb)
	},
}

func checkDeterminismInvariant(name string, want *Value, runs []*obsRun) (bool, error) {
	inv, ok := determinismInvariants[name]
	if !ok {
		return false, nil
	}
	if len(runs) < 2 {
		return true, errors.New("needs at least two invocations")
	}
	for _, r := range runs[1:] {
		if got, why := inv(runs[0], r); !got {
			return true, compareBool(want, false, why)
		}
	}
	return true, compareBool(want, true, "")
}
