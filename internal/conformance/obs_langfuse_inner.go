package conformance

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/armature-go/armature/graph"
)

// Fixture mismatch absorption for the Langfuse caller-metadata fixtures'
// loose fan-out shape (observability 029, 039): inner_subgraphs declares
// instance subgraphs (with or without a state) that call a model, used
// by a fan_out naming one with inner_subgraph: over an items field the
// enclosing state may not declare, without item_field, collect_field or
// target_field; augment_metadata_from_field augments each instance's
// context from its item, a branch's augment_metadata_from_outer_item
// from the enclosing fan-out instance's item; subgraph_call runs a
// serial subgraph. The runner reads it as the graph-engine shape it
// stands for:
//
//   - each inner subgraph becomes a subgraph whose state also holds the
//     instance item ("item") and the fields its calls store into;
//   - a fan-out runs its subgraph with item_field "item", collects the
//     subgraph's first stored (else first declared) field into an
//     "inner_collected" list of the enclosing graph, and its items field
//     is declared (a list) where the enclosing graph does not;
//   - the instance middleware spreads the item's entries into the
//     instance state's fields of the same names (a nested fan-out's items
//     field, 039), makes the item the outer item of the instance's context
//     and applies augment_metadata_from_field there
//     (graph.SetInvocationMetadata);
//   - a branch's augment_metadata_from_outer_item is branch middleware
//     adding the outer item's fields;
//   - subgraph_call: {subgraph: S, outputs} is a subgraph node running S
//     with S's items fields projected in from the caller, which declares
//     them (the outputs projection, which does not type-check against the
//     absorbed shapes, is left out: the fixtures assert the trace only),
//     and a fan-out in S runs its instances in order (concurrency 1), so
//     the serial wrapper's last writer is the last instance, as 039 pins.
//
// Only Langfuse cases with caller metadata take this path; the others
// keep obs_inner.go's and obs_inner_meta.go's.

const (
	lfInnerItem      = "item"
	lfInnerCollected = "inner_collected"
)

// outerItemKey is the context key of the enclosing fan-out instance's
// item.
type outerItemKey struct{}

// lfInnerMws are the runner-built middleware of the absorbed shape, by
// graph ("" outermost), node and branch ("" for a fan-out's instance
// middleware).
type lfInnerMws map[branchAugmentKey]*mwSpec

// absorbInner rewrites body's inner_subgraphs shape (see above).
func (lf *obsLangfuse) absorbInner(body *Value) (*Value, error) {
	inner, ok := body.Get("inner_subgraphs")
	if !ok {
		return body, nil
	}
	if _, meta := body.Get("caller_metadata"); !meta {
		return body, nil
	}
	if inner.Kind != KindMap {
		return nil, schemaErrorf(inner.Pos, "inner_subgraphs must be a mapping")
	}
	p := inner.Pos
	a := &lfAbsorb{pos: p, collected: map[string]string{}, serial: map[string]bool{}, items: map[string][]string{}}
	lf.innerMws = lfInnerMws{}
	a.mws = lf.innerMws
	// The graphs: the inner subgraphs (given the item and stored fields)
	// and the declared subgraphs, by name.
	graphs := map[string]*Value{}
	var order []string
	for _, f := range inner.Fields {
		g, collected, err := a.innerState(f.Value)
		if err != nil {
			return nil, err
		}
		graphs[f.Key], a.collected[f.Key] = g, collected
		order = append(order, f.Key)
	}
	if subs, ok := body.Get("subgraphs"); ok {
		for _, f := range subs.Fields {
			if _, dup := graphs[f.Key]; dup {
				return nil, schemaErrorf(f.Pos, "subgraph %s declared twice", f.Key)
			}
			graphs[f.Key] = f.Value
			order = append(order, f.Key)
		}
	}
	// Which subgraphs run serially (under a subgraph_call).
	for _, g := range append([]*Value{body}, mapValues(graphs, order)...) {
		if nodes, ok := g.Get("nodes"); ok {
			for _, n := range nodes.Fields {
				if sc, ok := n.Value.Get("subgraph_call"); ok {
					if s, ok := sc.Get("subgraph"); ok {
						a.serial[s.Str] = true
					}
				}
			}
		}
	}
	subs := &Value{Kind: KindMap, Pos: p}
	for _, name := range order {
		g, err := a.graph(name, graphs[name])
		if err != nil {
			return nil, err
		}
		subs.Fields = append(subs.Fields, &Field{Key: name, Pos: p, Value: g})
	}
	out, err := a.graph("", body)
	if err != nil {
		return nil, err
	}
	kept := &Value{Kind: KindMap, Pos: out.Pos}
	for _, f := range out.Fields {
		if f.Key != "inner_subgraphs" && f.Key != "subgraphs" {
			kept.Fields = append(kept.Fields, f)
		}
	}
	kept.Fields = append(kept.Fields, &Field{Key: "subgraphs", Pos: p, Value: subs})
	return kept, nil
}

func mapValues(m map[string]*Value, order []string) []*Value {
	out := make([]*Value, len(order))
	for i, k := range order {
		out[i] = m[k]
	}
	return out
}

type lfAbsorb struct {
	pos       Pos
	collected map[string]string
	serial    map[string]bool
	mws       lfInnerMws
	// items are the items fields each rewritten graph declares (a
	// subgraph_call projects them in from its caller).
	items map[string][]string
}

func (a *lfAbsorb) str(s string) *Value { return &Value{Kind: KindString, Pos: a.pos, Str: s} }
func (a *lfAbsorb) fd(k string, v *Value) *Field {
	return &Field{Key: k, Pos: a.pos, Value: v}
}
func (a *lfAbsorb) mp(fs ...*Field) *Value { return &Value{Kind: KindMap, Pos: a.pos, Fields: fs} }

// typed is a field declaration {type: t, default: d}.
func (a *lfAbsorb) typed(t string, d *Value, reducer string) *Value {
	v := a.mp(a.fd("type", a.str(t)))
	if reducer != "" {
		v.Fields = append(v.Fields, a.fd("reducer", a.str(reducer)))
	}
	return &Value{Kind: KindMap, Pos: a.pos, Fields: append(v.Fields, a.fd("default", d))}
}

// innerState gives an inner subgraph the item field and its calls'
// stored fields; collected is the field its instances contribute.
func (a *lfAbsorb) innerState(g *Value) (*Value, string, error) {
	if g.Kind != KindMap {
		return nil, "", schemaErrorf(g.Pos, "an inner subgraph must be a mapping")
	}
	var fields *Value
	if st, ok := g.Get("state"); ok {
		fields, _ = st.Get("fields")
		if fields == nil || fields.Kind != KindMap {
			return nil, "", schemaErrorf(st.Pos, "state needs fields")
		}
	}
	nf := &Value{Kind: KindMap, Pos: a.pos}
	if fields != nil {
		nf.Fields = slices.Clone(fields.Fields)
	}
	null := &Value{Kind: KindNull, Pos: a.pos}
	if _, ok := nf.Get(lfInnerItem); !ok {
		nf.Fields = append(nf.Fields, a.fd(lfInnerItem, a.typed("any", null, "")))
	}
	collected := ""
	if nodes, ok := g.Get("nodes"); ok {
		for _, n := range nodes.Fields {
			for _, d := range n.Value.Fields {
				if d.Key != "calls_llm" && d.Key != "calls_tool" {
					continue
				}
				for _, k := range []string{"stores_response_in", "stores_result_in"} {
					s, ok := d.Value.Get(k)
					if !ok || s.Kind != KindString {
						continue
					}
					if collected == "" {
						collected = s.Str
					}
					if _, declared := nf.Get(s.Str); !declared {
						nf.Fields = append(nf.Fields, a.fd(s.Str, a.typed("any", null, "")))
					}
				}
			}
		}
	}
	if collected == "" && fields != nil && len(fields.Fields) > 0 {
		collected = fields.Fields[0].Key
	}
	if collected == "" {
		collected = lfInnerItem
	}
	out := &Value{Kind: KindMap, Pos: g.Pos, Fields: []*Field{a.fd("state", a.mp(a.fd("fields", nf)))}}
	for _, f := range g.Fields {
		if f.Key != "state" {
			out.Fields = append(out.Fields, f)
		}
	}
	return out, collected, nil
}

// graph rewrites one graph's fan-outs, branches and subgraph calls, and
// declares the fields they need in its state.
func (a *lfAbsorb) graph(name string, g *Value) (*Value, error) {
	nodes, ok := g.Get("nodes")
	if !ok || nodes.Kind != KindMap {
		return g, nil
	}
	var declare []string
	collects := false
	nn := &Value{Kind: KindMap, Pos: nodes.Pos}
	for _, n := range nodes.Fields {
		node := n.Value
		if sc, ok := node.Get("subgraph_call"); ok {
			s, _ := sc.Get("subgraph")
			if s == nil || s.Kind != KindString {
				return nil, schemaErrorf(sc.Pos, "subgraph_call needs a subgraph")
			}
			rn := &Value{Kind: KindMap, Pos: node.Pos}
			for _, d := range node.Fields {
				if d.Key == "subgraph_call" {
					d = &Field{Key: "subgraph", Pos: d.Pos, Value: s}
				}
				rn.Fields = append(rn.Fields, d)
			}
			if in := a.items[s.Str]; len(in) > 0 {
				m := a.mp()
				for _, f := range in {
					m.Fields = append(m.Fields, a.fd(f, a.str(f)))
					declare = append(declare, f)
				}
				rn.Fields = append(rn.Fields, a.fd("inputs", m))
			}
			node = rn
		}
		if fo, ok := node.Get("fan_out"); ok {
			if is, ok := fo.Get("inner_subgraph"); ok {
				rf, items, err := a.fanOut(name, n.Key, fo, is)
				if err != nil {
					return nil, err
				}
				declare = append(declare, items)
				collects = true
				node = replaceField(node, "fan_out", rf)
			}
		}
		if pb, ok := node.Get("parallel_branches"); ok {
			rpb, err := a.branches(name, n.Key, pb)
			if err != nil {
				return nil, err
			}
			node = replaceField(node, "parallel_branches", rpb)
		}
		nn.Fields = append(nn.Fields, &Field{Key: n.Key, Pos: n.Pos, Value: node})
	}
	out := replaceField(g, "nodes", nn)
	a.items[name] = declare
	st, ok := out.Get("state")
	fields, _ := st.Get("fields")
	if !ok || fields == nil || fields.Kind != KindMap {
		return out, nil // the graph-engine parser reports it
	}
	nf := &Value{Kind: KindMap, Pos: fields.Pos, Fields: slices.Clone(fields.Fields)}
	empty := &Value{Kind: KindList, Pos: a.pos}
	for _, f := range declare {
		if _, ok := nf.Get(f); !ok {
			nf.Fields = append(nf.Fields, a.fd(f, a.typed("list", empty, "")))
		}
	}
	if _, ok := nf.Get(lfInnerCollected); collects && !ok {
		nf.Fields = append(nf.Fields, a.fd(lfInnerCollected, a.typed("list", empty, "append")))
	}
	return replaceField(out, "state", replaceField(st, "fields", nf)), nil
}

// fanOut rewrites a fan-out over an inner subgraph; it returns its items
// field.
func (a *lfAbsorb) fanOut(graphKey, node string, fo, is *Value) (*Value, string, error) {
	collected, known := a.collected[is.Str]
	itemsField, hasItems := fo.Get("items_field")
	if !known || !hasItems || itemsField.Kind != KindString {
		return nil, "", notImplemented(capObs + " fan_out inner_subgraph shape")
	}
	rf := a.mp(a.fd("subgraph", is), a.fd("items_field", itemsField), a.fd("item_field", a.str(lfInnerItem)),
		a.fd("collect_field", a.str(collected)), a.fd("target_field", a.str(lfInnerCollected)))
	var augment map[string]string
	for _, f := range fo.Fields {
		switch f.Key {
		case "inner_subgraph", "items_field":
		case "augment_metadata_from_field":
			m, err := stringMap(f.Value, f.Key)
			if err != nil {
				return nil, "", err
			}
			augment = m
		default:
			rf.Fields = append(rf.Fields, f)
		}
	}
	if _, set := fo.Get("concurrency"); !set && a.serial[graphKey] {
		rf.Fields = append(rf.Fields, a.fd("concurrency", &Value{Kind: KindInt, Pos: a.pos, Int: 1}))
	}
	a.mws[branchAugmentKey{graphKey, node, ""}] = instanceItem(augment)
	return rf, itemsField.Str, nil
}

// branches takes the branches' augment_metadata_from_outer_item out.
func (a *lfAbsorb) branches(graphKey, node string, pb *Value) (*Value, error) {
	bs, ok := pb.Get("branches")
	if !ok || bs.Kind != KindMap {
		return pb, nil
	}
	nbs := &Value{Kind: KindMap, Pos: bs.Pos}
	for _, bf := range bs.Fields {
		aug, has := bf.Value.Get("augment_metadata_from_outer_item")
		if !has {
			nbs.Fields = append(nbs.Fields, bf)
			continue
		}
		from, err := stringMap(aug, "augment_metadata_from_outer_item")
		if err != nil {
			return nil, err
		}
		a.mws[branchAugmentKey{graphKey, node, bf.Key}] = outerItemAugment(from)
		nb := &Value{Kind: KindMap, Pos: bf.Value.Pos}
		for _, f := range bf.Value.Fields {
			if f.Key != "augment_metadata_from_outer_item" {
				nb.Fields = append(nb.Fields, f)
			}
		}
		nbs.Fields = append(nbs.Fields, &Field{Key: bf.Key, Pos: bf.Pos, Value: nb})
	}
	return replaceField(pb, "branches", nbs), nil
}

// instanceItem is the instance middleware of an absorbed fan-out: it
// spreads the item into the instance state, binds it as the outer item
// of the instance's context and applies augment there.
func instanceItem(augment map[string]string) *mwSpec {
	return &mwSpec{typ: mwFunc, fn: graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		v, _ := s.Get(lfInnerItem)
		item, _ := v.(map[string]any)
		if sc := s.Schema(); sc != nil && len(item) > 0 {
			upd := graph.Update{}
			for k, x := range item {
				if k != lfInnerItem && sc.Has(k) {
					upd[k] = x
				}
			}
			if len(upd) > 0 {
				ns, err := s.Merge(upd)
				if err != nil {
					return nil, fmt.Errorf("conformance: spreading the fan-out item: %w", err)
				}
				s = ns
			}
		}
		ctx = context.WithValue(ctx, outerItemKey{}, item)
		if len(augment) > 0 {
			if item == nil {
				return nil, fmt.Errorf("conformance: fan-out item %v is not a mapping", v)
			}
			entries := map[string]any{}
			for k, f := range augment {
				entries[k] = item[f]
			}
			if err := graph.SetInvocationMetadata(ctx, entries); err != nil {
				return nil, err
			}
		}
		return next(ctx, s)
	})}
}

// outerItemAugment is branch middleware adding, for each entry (key:
// item field), the enclosing fan-out instance's item field to the
// invocation metadata of the branch's context.
func outerItemAugment(from map[string]string) *mwSpec {
	return &mwSpec{typ: mwFunc, fn: graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		item, ok := ctx.Value(outerItemKey{}).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("conformance: augment_metadata_from_outer_item outside a fan-out instance")
		}
		entries := map[string]any{}
		for k, f := range from {
			entries[k] = item[f]
		}
		if err := graph.SetInvocationMetadata(ctx, entries); err != nil {
			return nil, err
		}
		return next(ctx, s)
	})}
}

// installInner puts the absorbed shape's middleware on the parsed case.
func (lf *obsLangfuse) installInner(gc *geCase) error {
	if lf == nil {
		return nil
	}
	for _, k := range slices.SortedFunc(maps.Keys(lf.innerMws), func(a, b branchAugmentKey) int {
		return compareKeys(a, b)
	}) {
		mw := lf.innerMws[k]
		g := gc.outer
		if k.graph != "" {
			g = gc.subgraphs[k.graph]
		}
		if g == nil {
			return schemaErrorf(gc.pos, "no graph %q", k.graph)
		}
		found := false
		for _, n := range g.nodes {
			if n.name != k.node {
				continue
			}
			switch {
			case k.branch == "" && n.fan != nil:
				n.fan.instanceMws = append([]*mwSpec{mw}, n.fan.instanceMws...)
				found = true
			case k.branch != "" && n.par != nil:
				for _, b := range n.par.branches {
					if b.name == k.branch {
						b.mws = append([]*mwSpec{mw}, b.mws...)
						found = true
					}
				}
			}
		}
		if !found {
			return schemaErrorf(gc.pos, "no node %s (branch %q) in graph %q for the absorbed middleware", k.node, k.branch, k.graph)
		}
	}
	return nil
}

func compareKeys(a, b branchAugmentKey) int {
	for _, c := range [][2]string{{a.graph, b.graph}, {a.node, b.node}, {a.branch, b.branch}} {
		if c[0] != c[1] {
			if c[0] < c[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}
