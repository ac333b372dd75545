package conformance

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/graph"
)

// Fixture mismatch absorption for observability 044's loose fan-out
// shape: inner_subgraphs declares instance subgraphs without state, and
// the fan_out names one with inner_subgraph:, without item_field,
// collect_field or target_field, over an items field the outer state does
// not declare; augment_metadata_from_field sets, in each instance's own
// context, metadata entries from the instance's item. The runner reads
// it as the graph-engine shape it stands for: the instance subgraph's
// state is its item (item) and the fields its nodes capture metadata
// into; the fan-out collects the (single) captured field into the outer
// field of the same name; the items field is declared as a list; and
// augment_metadata_from_field is instance middleware calling
// graph.SetInvocationMetadata.

// mwFunc is the middleware type of a runner-built Go middleware.
const mwFunc = "<func>"

// innerItemField is the item field of an absorbed instance subgraph.
const innerItemField = "item"

// absorbInner rewrites body's inner_subgraphs and the fan-outs using them
// (see above); bodies without inner_subgraphs are returned unchanged.
func (om *obsMeta) absorbInner(body *Value) (*Value, error) {
	inner, ok := body.Get("inner_subgraphs")
	if !ok {
		return body, nil
	}

	if inner.Kind != KindMap {
		return nil, schemaErrorf(inner.Pos, "inner_subgraphs must be a mapping")
	}
	captured := map[string]string{} // inner graph -> captured field
	subs := &Value{Kind: KindMap, Pos: inner.Pos}
	for _, f := range inner.Fields {
		g, field, err := innerGraph(f.Value)
		if err != nil {
			return nil, err
		}
		captured[f.Key] = field
		subs.Fields = append(subs.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: g})
	}
	out := &Value{Kind: KindMap, Pos: body.Pos}
	var itemsFields []string
	for _, f := range body.Fields {
		switch f.Key {
		case "inner_subgraphs":
			f = &Field{Key: "subgraphs", Pos: f.Pos, Value: subs}
		case "subgraphs":
			return nil, notImplemented(capObs + " inner_subgraphs with subgraphs")
		case "nodes":
			v, items, err := om.innerFanOuts(f.Value, captured)
			if err != nil {
				return nil, err
			}
			itemsFields = items
			f = &Field{Key: f.Key, Pos: f.Pos, Value: v}
		}
		out.Fields = append(out.Fields, f)
	}
	if len(itemsFields) > 0 {
		om.absorbed = append(om.absorbed, itemsFields...)
		return declareFields(out, itemsFields, "list<dict>")
	}
	return out, nil
}

// innerGraph gives an instance subgraph its state: the item and the
// fields its nodes capture metadata into (one at most).
func innerGraph(g *Value) (*Value, string, error) {
	if _, ok := g.Get("state"); ok {
		return nil, "", notImplemented(capObs + " inner_subgraphs with state")
	}
	field := ""
	nodes, _ := g.Get("nodes")
	if nodes != nil {
		for _, n := range nodes.Fields {
			if c, ok := n.Value.Get("capture_invocation_metadata_into"); ok {
				if field != "" || c.Kind != KindString {
					return nil, "", notImplemented(capObs + " inner_subgraphs capturing more than one field")
				}
				field = c.Str
			}
		}
	}
	p := g.Pos
	fd := func(k string, v *Value) *Field { return &Field{Key: k, Pos: p, Value: v} }
	typ := func(t string) *Value {
		return &Value{Kind: KindMap, Pos: p, Fields: []*Field{fd("type", &Value{Kind: KindString, Pos: p, Str: t})}}
	}
	fields := &Value{Kind: KindMap, Pos: p, Fields: []*Field{fd(innerItemField, typ("any"))}}
	if field != "" {
		fields.Fields = append(fields.Fields, fd(field, typ("dict")))
	}
	out := &Value{Kind: KindMap, Pos: p, Fields: []*Field{fd("state", &Value{Kind: KindMap, Pos: p, Fields: []*Field{fd("fields", fields)}})}}
	out.Fields = append(out.Fields, g.Fields...)
	return out, field, nil
}

// innerFanOuts rewrites the fan-outs naming an inner subgraph and returns
// their items fields.
func (om *obsMeta) innerFanOuts(nodes *Value, captured map[string]string) (*Value, []string, error) {
	out := &Value{Kind: nodes.Kind, Pos: nodes.Pos}
	var items []string
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
		field, known := captured[is.Str]
		itemsField, hasItems := fo.Get("items_field")
		if !known || field == "" || !hasItems || itemsField.Kind != KindString {
			return nil, nil, notImplemented(capObs + " fan_out inner_subgraph shape")
		}
		p := fo.Pos
		str := func(s string) *Value { return &Value{Kind: KindString, Pos: p, Str: s} }
		fd := func(k string, v *Value) *Field { return &Field{Key: k, Pos: p, Value: v} }
		rf := &Value{Kind: KindMap, Pos: p, Fields: []*Field{
			fd("subgraph", is), fd("items_field", itemsField), fd("item_field", str(innerItemField)),
			fd("collect_field", str(field)), fd("target_field", str(field)),
		}}
		for _, f := range fo.Fields {
			switch f.Key {
			case "inner_subgraph", "items_field":
			case "augment_metadata_from_field":
				from, err := stringMap(f.Value, f.Key)
				if err != nil {
					return nil, nil, err
				}
				om.instanceMws[nf.Key] = augmentFromItem(from)
			default:
				rf.Fields = append(rf.Fields, f)
			}
		}
		items = append(items, itemsField.Str)
		rn := &Value{Kind: KindMap, Pos: nf.Value.Pos}
		for _, d := range nf.Value.Fields {
			if d.Key == "fan_out" {
				d = fd("fan_out", rf)
			}
			rn.Fields = append(rn.Fields, d)
		}
		out.Fields = append(out.Fields, &Field{Key: nf.Key, Pos: nf.Pos, Value: rn})
	}
	return out, items, nil
}

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

// declareFields adds fields of type typ (default empty) to body's state
// when it does not declare them.
func declareFields(body *Value, names []string, typ string) (*Value, error) {
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
		fields.Fields = append(fields.Fields, &Field{Key: name, Pos: p, Value: &Value{Kind: KindMap, Pos: p, Fields: []*Field{
			{Key: "type", Pos: p, Value: &Value{Kind: KindString, Pos: p, Str: typ}},
		}}})
	}
	return body, nil
}

// innerBranches rewrites a parallel_branches whose branches are a list of
// inner subgraph names (048) into the graph-engine mapping of branch name
// to {subgraph: name}.
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
