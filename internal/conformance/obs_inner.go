package conformance

import "fmt"

// inner_subgraphs (observability 054, 055): subgraphs declared without a
// state, used by a fan-out (fan_out.inner_subgraph over items_field) or
// by parallel branches listed by name. Fixture mismatch absorption: the
// vocabulary is not in the adapter spec and leaves the subgraph state
// and the fan-out projection implicit, so the suite rewrites them into
// declared subgraphs: each inner subgraph gets a state holding the
// fields its calls store into (any, null) plus the fan-out item field
// "item", a fan-out gets item_field "item" and collects the first stored
// field into an outer list "inner_collected" (the outer state gets it and
// the items field), and a branch list becomes {name: {subgraph: name}}.

// obsInnerItemField is the item field of an inner fan-out subgraph;
// obsInnerTarget the outer list an inner fan-out collects into.
const (
	obsInnerItemField = "item"
	obsInnerTarget    = "inner_collected"
)

// absorbInnerSubgraphs rewrites a case body with inner_subgraphs; bodies
// without them are returned unchanged.
func absorbInnerSubgraphs(body *Value) (*Value, error) {
	inner, ok := body.Get("inner_subgraphs")
	if !ok {
		return body, nil
	}
	if inner.Kind != KindMap {
		return nil, schemaErrorf(inner.Pos, "inner_subgraphs must be a mapping")
	}
	str := func(s string) *Value { return &Value{Kind: KindString, Pos: inner.Pos, Str: s} }
	field := func(k string, v *Value) *Field { return &Field{Key: k, Pos: inner.Pos, Value: v} }
	mapOf := func(fs ...*Field) *Value { return &Value{Kind: KindMap, Pos: inner.Pos, Fields: fs} }
	anyField := func(name string) *Field {
		return field(name, mapOf(field("type", str("any")), field("default", &Value{Kind: KindNull, Pos: inner.Pos})))
	}
	subs := &Value{Kind: KindMap, Pos: inner.Pos}
	collect := map[string]string{}
	for _, g := range inner.Fields {
		collect[g.Key] = obsInnerItemField
		if _, has := g.Value.Get("state"); has {
			return nil, notImplemented(capObs + " inner_subgraphs with a state")
		}
		fields := mapOf(anyField(obsInnerItemField))
		if nodes, ok := g.Value.Get("nodes"); ok {
			for _, n := range nodes.Fields {
				for _, d := range n.Value.Fields {
					if d.Key != "calls_llm" && d.Key != "calls_tool" {
						continue
					}
					for _, k := range []string{"stores_response_in", "stores_result_in"} {
						if s, ok := d.Value.Get(k); ok && s.Str != obsInnerItemField {
							fields.Fields = append(fields.Fields, anyField(s.Str))
							if collect[g.Key] == obsInnerItemField {
								collect[g.Key] = s.Str
							}
						}
					}
				}
			}
		}
		ng := mapOf(field("state", mapOf(field("fields", fields))))
		ng.Fields = append(ng.Fields, g.Value.Fields...)
		subs.Fields = append(subs.Fields, &Field{Key: g.Key, Pos: g.Pos, Value: ng})
	}
	out := &Value{Kind: KindMap, Pos: body.Pos}
	var itemsFields []string
	for _, f := range body.Fields {
		switch f.Key {
		case "inner_subgraphs":
			continue
		case "subgraphs":
			return nil, notImplemented(capObs + " inner_subgraphs beside subgraphs")
		case "nodes":
			nv, items, err := rewriteInnerUses(f.Value, inner, collect)
			if err != nil {
				return nil, err
			}
			itemsFields = append(itemsFields, items...)
			f = &Field{Key: f.Key, Pos: f.Pos, Value: nv}
		}
		out.Fields = append(out.Fields, f)
	}
	out.Fields = append(out.Fields, field("subgraphs", subs))
	for i, f := range out.Fields {
		if f.Key != "state" || len(itemsFields) == 0 {
			continue
		}
		fs, _ := f.Value.Get("fields")
		if fs == nil {
			return nil, schemaErrorf(f.Pos, "state needs fields")
		}
		nfs := &Value{Kind: KindMap, Pos: fs.Pos, Fields: append([]*Field(nil), fs.Fields...)}
		for _, it := range itemsFields {
			if _, declared := fs.Get(it); !declared {
				nfs.Fields = append(nfs.Fields, field(it, mapOf(field("type", str("list")), field("default", &Value{Kind: KindList, Pos: inner.Pos}))))
			}
		}
		nfs.Fields = append(nfs.Fields, field(obsInnerTarget, mapOf(field("type", str("list")), field("reducer", str("append")),
			field("default", &Value{Kind: KindList, Pos: inner.Pos}))))
		out.Fields[i] = field("state", mapOf(field("fields", nfs)))
	}
	return out, nil
}

// rewriteInnerUses rewrites the fan-out and parallel-branches nodes that
// use inner subgraphs, returning the fan-outs' items fields.
func rewriteInnerUses(nodes, inner *Value, collect map[string]string) (*Value, []string, error) {
	out := &Value{Kind: KindMap, Pos: nodes.Pos}
	var items []string
	for _, n := range nodes.Fields {
		nn := &Value{Kind: KindMap, Pos: n.Value.Pos}
		for _, d := range n.Value.Fields {
			switch d.Key {
			case "fan_out":
				fo := &Value{Kind: KindMap, Pos: d.Value.Pos}
				for _, k := range d.Value.Fields {
					if k.Key == "inner_subgraph" {
						if _, ok := inner.Get(k.Value.Str); !ok {
							return nil, nil, schemaErrorf(k.Pos, "no inner subgraph %s", k.Value.Str)
						}
						strAt := func(s string) *Value { return &Value{Kind: KindString, Pos: k.Pos, Str: s} }
						fo.Fields = append(fo.Fields, &Field{Key: "subgraph", Pos: k.Pos, Value: k.Value},
							&Field{Key: "item_field", Pos: k.Pos, Value: strAt(obsInnerItemField)})
						if _, has := d.Value.Get("collect_field"); !has {
							fo.Fields = append(fo.Fields, &Field{Key: "collect_field", Pos: k.Pos, Value: strAt(collect[k.Value.Str])},
								&Field{Key: "target_field", Pos: k.Pos, Value: strAt(obsInnerTarget)})
						}
						continue
					}
					if k.Key == "items_field" {
						items = append(items, k.Value.Str)
					}
					fo.Fields = append(fo.Fields, k)
				}
				d = &Field{Key: d.Key, Pos: d.Pos, Value: fo}
			case "parallel_branches":
				pb := &Value{Kind: KindMap, Pos: d.Value.Pos}
				for _, k := range d.Value.Fields {
					if k.Key == "branches" && k.Value.Kind == KindList {
						bm := &Value{Kind: KindMap, Pos: k.Value.Pos}
						for _, b := range k.Value.Items {
							if _, ok := inner.Get(b.Str); !ok {
								return nil, nil, fmt.Errorf("branch %s: %w", b.Str, schemaErrorf(b.Pos, "no inner subgraph %s", b.Str))
							}
							bm.Fields = append(bm.Fields, &Field{Key: b.Str, Pos: b.Pos, Value: &Value{Kind: KindMap, Pos: b.Pos,
								Fields: []*Field{{Key: "subgraph", Pos: b.Pos, Value: b}}}})
						}
						k = &Field{Key: k.Key, Pos: k.Pos, Value: bm}
					}
					pb.Fields = append(pb.Fields, k)
				}
				d = &Field{Key: d.Key, Pos: d.Pos, Value: pb}
			}
			nn.Fields = append(nn.Fields, d)
		}
		out.Fields = append(out.Fields, &Field{Key: n.Key, Pos: n.Pos, Value: nn})
	}
	return out, items, nil
}
