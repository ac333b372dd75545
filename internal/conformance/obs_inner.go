package conformance

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/graph"
)

// inner_subgraphs (observability 029, 039, 044, 048, 054, 055): instance
// and branch subgraphs used by a fan-out (fan_out.inner_subgraph over an
// items_field) or by parallel branches listed by name. Fixture mismatch
// absorption: the vocabulary is not in the adapter spec and leaves the
// subgraph state and the fan-out projection implicit, so the suite reads
// it as the graph-engine shape it stands for, in one pass before the
// rest of the case is parsed:
//
//   - each inner subgraph joins subgraphs: (beside any declared there),
//     its state the declared one (if any) plus the item field "item"
//     (any), the fields its calls store into (any, null) and the field it
//     captures metadata into (dict) when not declared;
//   - a fan-out naming one gets item_field "item" and, unless it sets its
//     own, collects the subgraph's collected field — the captured one,
//     else the first stored one — into the outer field of the same name
//     when captured, else into an outer list "inner_collected"; its items
//     field and "inner_collected" are declared as lists when the outer
//     state does not declare them and left out of final_state;
//   - augment_metadata_from_field becomes instance middleware setting,
//     in each instance's own context, metadata entries from the item
//     (graph.SetInvocationMetadata);
//   - a branch list becomes the mapping {name: {subgraph: name}}.
//
// A fan-out over a field of an enclosing instance's item (an inner
// subgraph fanning out over inner_seed, 039) has no graph-engine shape
// here and makes the case not implemented.

// mwFunc is the middleware type of a runner-built Go middleware.
const mwFunc = "<func>"

const (
	// innerItemField is the item field of an absorbed instance subgraph.
	innerItemField = "item"
	// innerTarget is the outer list a fan-out collects a stored field into.
	innerTarget = "inner_collected"
)

// innerSub is one absorbed inner subgraph: its graph and the field a
// fan-out over it collects (captured tells a metadata capture).
type innerSub struct {
	graph     *Value
	collected string
	captured  bool
}

// absorbInner rewrites body's inner_subgraphs and their uses (see
// above); bodies without inner_subgraphs are returned unchanged.
func (om *obsMeta) absorbInner(body *Value) (*Value, error) {
	inner, ok := body.Get("inner_subgraphs")
	if !ok {
		return body, nil
	}
	if inner.Kind != KindMap {
		return nil, schemaErrorf(inner.Pos, "inner_subgraphs must be a mapping")
	}
	subs := map[string]*innerSub{}
	for _, f := range inner.Fields {
		s, err := innerGraph(f.Value)
		if err != nil {
			return nil, fmt.Errorf("inner subgraph %s: %w", f.Key, err)
		}
		subs[f.Key] = s
	}
	var lists []string // outer list fields to declare
	rewrite := func(graphKey string, nodes *Value) (*Value, error) {
		v, ls, err := om.innerUses(graphKey, nodes, subs)
		lists = append(lists, ls...)
		return v, err
	}
	declared := &Value{Kind: KindMap, Pos: inner.Pos}
	out := &Value{Kind: KindMap, Pos: body.Pos}
	for _, f := range body.Fields {
		switch f.Key {
		case "inner_subgraphs":
			continue
		case "subgraphs":
			if f.Value.Kind != KindMap {
				return nil, schemaErrorf(f.Value.Pos, "subgraphs must be a mapping")
			}
			declared = f.Value
			continue
		case "nodes":
			v, err := rewrite("", f.Value)
			if err != nil {
				return nil, err
			}
			f = &Field{Key: f.Key, Pos: f.Pos, Value: v}
		}
		out.Fields = append(out.Fields, f)
	}
	all := &Value{Kind: KindMap, Pos: declared.Pos}
	for _, f := range declared.Fields {
		g, err := rewriteGraphNodes(f.Value, func(nodes *Value) (*Value, error) { return rewrite(f.Key, nodes) })
		if err != nil {
			return nil, err
		}
		all.Fields = append(all.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: g})
	}
	for _, f := range inner.Fields {
		if _, dup := declared.Get(f.Key); dup {
			return nil, schemaErrorf(f.Pos, "inner subgraph %s is also declared under subgraphs", f.Key)
		}
		g, err := rewriteGraphNodes(subs[f.Key].graph, func(nodes *Value) (*Value, error) { return rewrite(f.Key, nodes) })
		if err != nil {
			return nil, err
		}
		all.Fields = append(all.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: g})
	}
	out.Fields = append(out.Fields, &Field{Key: "subgraphs", Pos: inner.Pos, Value: all})
	if len(lists) == 0 {
		return out, nil
	}
	om.absorbed = append(om.absorbed, lists...)
	return declareFields(out, lists)
}

// rewriteGraphNodes returns g with its nodes rewritten by f.
func rewriteGraphNodes(g *Value, f func(nodes *Value) (*Value, error)) (*Value, error) {
	if g.Kind != KindMap {
		return g, nil
	}
	out := &Value{Kind: KindMap, Pos: g.Pos}
	for _, fd := range g.Fields {
		if fd.Key == "nodes" {
			v, err := f(fd.Value)
			if err != nil {
				return nil, err
			}
			fd = &Field{Key: fd.Key, Pos: fd.Pos, Value: v}
		}
		out.Fields = append(out.Fields, fd)
	}
	return out, nil
}

// innerGraph gives an inner subgraph its state (see above).
func innerGraph(g *Value) (*innerSub, error) {
	if g.Kind != KindMap {
		return nil, schemaErrorf(g.Pos, "an inner subgraph must be a mapping")
	}
	p := g.Pos
	fd := func(k string, v *Value) *Field { return &Field{Key: k, Pos: p, Value: v} }
	typed := func(t string, def *Value) *Value {
		v := &Value{Kind: KindMap, Pos: p, Fields: []*Field{fd("type", &Value{Kind: KindString, Pos: p, Str: t})}}
		if def != nil {
			v.Fields = append(v.Fields, fd("default", def))
		}
		return v
	}
	fields := &Value{Kind: KindMap, Pos: p}
	var rest []*Field
	for _, f := range g.Fields {
		if f.Key != "state" {
			rest = append(rest, f)
			continue
		}
		fs, ok := f.Value.Get("fields")
		if f.Value.Kind != KindMap || len(f.Value.Fields) != 1 || !ok || fs.Kind != KindMap {
			return nil, notImplemented(capObs + " inner subgraph state beyond fields")
		}
		fields.Fields = append(fields.Fields, fs.Fields...)
	}
	add := func(name string, v *Value) {
		if _, ok := fields.Get(name); !ok {
			fields.Fields = append(fields.Fields, fd(name, v))
		}
	}
	add(innerItemField, typed("any", nil))
	s := &innerSub{}
	nodes, _ := g.Get("nodes")
	if nodes != nil {
		for _, n := range nodes.Fields {
			if c, ok := n.Value.Get("capture_invocation_metadata_into"); ok {
				if s.captured || c.Kind != KindString {
					return nil, notImplemented(capObs + " inner_subgraphs capturing more than one field")
				}
				s.collected, s.captured = c.Str, true
				add(c.Str, typed("dict", nil))
			}
			for _, d := range n.Value.Fields {
				if d.Key != "calls_llm" && d.Key != "calls_tool" {
					continue
				}
				for _, k := range []string{"stores_response_in", "stores_result_in"} {
					if st, ok := d.Value.Get(k); ok && st.Str != innerItemField {
						add(st.Str, typed("any", &Value{Kind: KindNull, Pos: p}))
						if s.collected == "" {
							s.collected = st.Str
						}
					}
				}
			}
		}
	}
	if s.collected == "" {
		s.collected = innerItemField
	}
	state := &Value{Kind: KindMap, Pos: p, Fields: []*Field{fd("fields", fields)}}
	s.graph = &Value{Kind: KindMap, Pos: p, Fields: append([]*Field{fd("state", state)}, rest...)}
	return s, nil
}

// innerUses rewrites the fan-out and parallel-branches nodes of one graph
// that use inner subgraphs, returning the outer list fields to declare.
func (om *obsMeta) innerUses(graphKey string, nodes *Value, subs map[string]*innerSub) (*Value, []string, error) {
	if nodes.Kind != KindMap {
		return nodes, nil, nil
	}
	out := &Value{Kind: KindMap, Pos: nodes.Pos}
	var lists []string
	for _, nf := range nodes.Fields {
		if pb, ok := nf.Value.Get("parallel_branches"); ok {
			nf = innerBranches(nf, pb)
		}
		fo, ok := nf.Value.Get("fan_out")
		is, inner := fo.Get("inner_subgraph")
		if !ok || !inner {
			out.Fields = append(out.Fields, nf)
			continue
		}
		sub, known := subs[is.Str]
		itemsField, hasItems := fo.Get("items_field")
		if !known || !hasItems || itemsField.Kind != KindString {
			return nil, nil, notImplemented(capObs + " fan_out inner_subgraph shape")
		}
		if graphKey != "" {
			if _, nested := subs[graphKey]; nested {
				return nil, nil, notImplemented(capObs + " fan_out over a field of an enclosing instance's item")
			}
		}
		p := fo.Pos
		str := func(s string) *Value { return &Value{Kind: KindString, Pos: p, Str: s} }
		fd := func(k string, v *Value) *Field { return &Field{Key: k, Pos: p, Value: v} }
		rf := &Value{Kind: KindMap, Pos: p, Fields: []*Field{fd("subgraph", is), fd("items_field", itemsField), fd("item_field", str(innerItemField))}}
		if _, own := fo.Get("collect_field"); !own {
			target := innerTarget
			if sub.captured {
				target = sub.collected
			} else {
				lists = append(lists, innerTarget)
			}
			rf.Fields = append(rf.Fields, fd("collect_field", str(sub.collected)), fd("target_field", str(target)))
		}
		for _, f := range fo.Fields {
			switch f.Key {
			case "inner_subgraph", "items_field":
			case "augment_metadata_from_field":
				from, err := stringMap(f.Value, f.Key)
				if err != nil {
					return nil, nil, err
				}
				om.instanceMws[instanceKey(graphKey, nf.Key)] = augmentFromItem(from)
			default:
				rf.Fields = append(rf.Fields, f)
			}
		}
		lists = append(lists, itemsField.Str)
		rn := &Value{Kind: KindMap, Pos: nf.Value.Pos}
		for _, d := range nf.Value.Fields {
			if d.Key == "fan_out" {
				d = fd("fan_out", rf)
			}
			rn.Fields = append(rn.Fields, d)
		}
		out.Fields = append(out.Fields, &Field{Key: nf.Key, Pos: nf.Pos, Value: rn})
	}
	return out, lists, nil
}

// instanceKey keys om.instanceMws: the graph ("" for the outermost) and
// the fan-out node.
func instanceKey(graphKey, node string) string { return graphKey + "\x00" + node }

// augmentFromItem is instance middleware adding, for each entry
// (key: item field), the instance item's field to the invocation
// metadata of the instance's own context.
func augmentFromItem(from map[string]string) *mwSpec {
	return &mwSpec{typ: mwFunc, fn: graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		item, _ := s.Get(innerItemField)
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("conformance: fan-out item %v is not a mapping", item)
		}
		entries := map[string]any{}
		for k, f := range from {
			entries[k] = m[f]
		}
		if err := graph.SetInvocationMetadata(ctx, entries); err != nil {
			return nil, err
		}
		return next(ctx, s)
	})}
}

// declareFields adds the list fields (default empty; inner_collected
// with the append reducer) to body's state when it does not declare
// them.
func declareFields(body *Value, names []string) (*Value, error) {
	st, ok := body.Get("state")
	fields, _ := st.Get("fields")
	if !ok || fields == nil || fields.Kind != KindMap {
		return body, nil // the graph-engine parser reports it
	}
	for _, name := range names {
		if _, ok := fields.Get(name); ok {
			continue
		}
		p := fields.Pos
		fd := func(k string, v *Value) *Field { return &Field{Key: k, Pos: p, Value: v} }
		spec := &Value{Kind: KindMap, Pos: p, Fields: []*Field{
			fd("type", &Value{Kind: KindString, Pos: p, Str: "list"}),
			fd("default", &Value{Kind: KindList, Pos: p}),
		}}
		if name == innerTarget {
			spec.Fields = append(spec.Fields, fd("reducer", &Value{Kind: KindString, Pos: p, Str: "append"}))
		}
		fields.Fields = append(fields.Fields, &Field{Key: name, Pos: p, Value: spec})
	}
	return body, nil
}

// innerBranches rewrites a parallel_branches whose branches are a list of
// inner subgraph names (048, 055) into the graph-engine mapping of branch
// name to {subgraph: name}.
func innerBranches(nf *Field, pb *Value) *Field {
	bs, ok := pb.Get("branches")
	if !ok || bs.Kind != KindList {
		return nf
	}
	m := &Value{Kind: KindMap, Pos: bs.Pos}
	for _, b := range bs.Items {
		if b.Kind != KindString {
			return nf // the graph-engine parser reports it
		}
		m.Fields = append(m.Fields, &Field{Key: b.Str, Pos: b.Pos, Value: &Value{Kind: KindMap, Pos: b.Pos,
			Fields: []*Field{{Key: "subgraph", Pos: b.Pos, Value: b}}}})
	}
	rpb := &Value{Kind: KindMap, Pos: pb.Pos}
	for _, f := range pb.Fields {
		if f.Key == "branches" {
			f = &Field{Key: f.Key, Pos: f.Pos, Value: m}
		}
		rpb.Fields = append(rpb.Fields, f)
	}
	rn := &Value{Kind: KindMap, Pos: nf.Value.Pos}
	for _, d := range nf.Value.Fields {
		if d.Key == "parallel_branches" {
			d = &Field{Key: d.Key, Pos: d.Pos, Value: rpb}
		}
		rn.Fields = append(rn.Fields, d)
	}
	return &Field{Key: nf.Key, Pos: nf.Pos, Value: rn}
}
