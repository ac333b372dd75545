package conformance

import (
	"context"

	"github.com/armature-go/armature/graph"
)

// A branch-level augment_metadata (observability 030: each parallel
// branch augments the invocation metadata in its own context before its
// subgraph runs) is branch middleware calling graph.SetInvocationMetadata:
// branch middleware runs in the branch's own context, so the entries
// reach the branch's dispatch observation and everything under it, and
// no sibling. stripBranchAugments takes the directive out of a
// parallel_branches node before the graph-engine parser sees it;
// installBranchAugments puts the middleware on the parsed branches.

// branchAugmentKey identifies a branch: graph ("" outermost), node and
// branch name.
type branchAugmentKey struct{ graph, node, branch string }

// stripBranchAugments returns the parallel_branches value of a node
// without its branches' augment_metadata, recording them.
func (om *obsMeta) stripBranchAugments(graphKey, node string, pb *Value) (*Value, error) {
	bs, ok := pb.Get("branches")
	if !ok || bs.Kind != KindMap {
		return pb, nil
	}
	nbs := &Value{Kind: KindMap, Pos: bs.Pos}
	changed := false
	for _, bf := range bs.Fields {
		aug, has := bf.Value.Get("augment_metadata")
		if !has {
			nbs.Fields = append(nbs.Fields, bf)
			continue
		}
		entries, ok := aug.Native().(map[string]any)
		if !ok {
			return nil, schemaErrorf(aug.Pos, "augment_metadata must be a mapping")
		}
		if om.branchAugments == nil {
			om.branchAugments = map[branchAugmentKey]map[string]any{}
		}
		om.branchAugments[branchAugmentKey{graphKey, node, bf.Key}] = entries
		nb := &Value{Kind: KindMap, Pos: bf.Value.Pos}
		for _, f := range bf.Value.Fields {
			if f.Key != "augment_metadata" {
				nb.Fields = append(nb.Fields, f)
			}
		}
		nbs.Fields = append(nbs.Fields, &Field{Key: bf.Key, Pos: bf.Pos, Value: nb})
		changed = true
	}
	if !changed {
		return pb, nil
	}
	out := &Value{Kind: KindMap, Pos: pb.Pos}
	for _, f := range pb.Fields {
		if f.Key == "branches" {
			f = &Field{Key: f.Key, Pos: f.Pos, Value: nbs}
		}
		out.Fields = append(out.Fields, f)
	}
	return out, nil
}

// installBranchAugments prepends the recorded augmentations to their
// branches' middleware.
func (om *obsMeta) installBranchAugments(gc *geCase) error {
	for k, entries := range om.branchAugments {
		g := gc.outer
		if k.graph != "" {
			g = gc.subgraphs[k.graph]
		}
		found := false
		for _, n := range g.nodes {
			if n.name != k.node || n.par == nil {
				continue
			}
			for _, b := range n.par.branches {
				if b.name == k.branch {
					b.mws = append([]*mwSpec{augmentMiddleware(entries)}, b.mws...)
					found = true
				}
			}
		}
		if !found {
			return schemaErrorf(gc.pos, "no branch %s of node %s for augment_metadata", k.branch, k.node)
		}
	}
	return nil
}

// augmentMiddleware adds entries to the invocation metadata of the
// context it runs in.
func augmentMiddleware(entries map[string]any) *mwSpec {
	return &mwSpec{typ: mwFunc, fn: graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		if err := graph.SetInvocationMetadata(ctx, entries); err != nil {
			return nil, err
		}
		return next(ctx, s)
	})}
}

// replaceField returns mapping v with key's value replaced.
func replaceField(v *Value, key string, nv *Value) *Value {
	out := &Value{Kind: KindMap, Pos: v.Pos}
	for _, f := range v.Fields {
		if f.Key == key {
			f = &Field{Key: f.Key, Pos: f.Pos, Value: nv}
		}
		out.Fields = append(out.Fields, f)
	}
	return out
}
