package graph

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/errcat"
)

// Branch is one branch of a parallel-branches node (pipeline-utilities
// §11.1.1): either a compiled Subgraph, with optional Inputs (subgraph
// field → parent field) and Outputs (parent field → subgraph field), or an
// inline Call over the parent state returning a parent-shaped update.
type Branch struct {
	// Name identifies the branch (BranchName on its events); unique and
	// non-empty.
	Name     string
	Subgraph *Graph
	Inputs   map[string]string
	Outputs  map[string]string
	Call     NodeFunc
	// Middleware wraps the branch's whole invocation. For a subgraph
	// branch it receives the branch's initial (subgraph) state and returns
	// the branch's result in subgraph field names, projected into the
	// parent through Outputs; for a Call branch it works on the parent
	// state and returns the parent-shaped contribution.
	Middleware []Middleware
	// When, if set, is evaluated once at dispatch on the parent state; a
	// false result skips the branch (no work, no events, no contribution).
	When func(ctx context.Context, s State) (bool, error)
}

// ParallelBranches configures a parallel-branches node (pipeline-utilities
// §11): every branch runs concurrently; their contributions are merged in
// branch order through the parent's reducers once all finished.
type ParallelBranches struct {
	Branches []Branch
	// ErrorPolicy is FailFast (default) or Collect. With Collect, failed
	// branches are recorded in ErrorsField (a parent list field), when
	// set, as {"branch_name", "category", "message"} records.
	ErrorPolicy ErrorPolicy
	ErrorsField string
}

// AddParallelBranches adds a parallel-branches node.
func (b *Builder) AddParallelBranches(name string, cfg ParallelBranches, opts ...NodeOption) *Builder {
	c := cfg
	c.Branches = make([]Branch, len(cfg.Branches))
	for i, br := range cfg.Branches {
		br.Inputs, br.Outputs = cloneMap(br.Inputs), cloneMap(br.Outputs)
		br.Middleware = append([]Middleware(nil), br.Middleware...)
		c.Branches[i] = br
	}
	return b.add(applyOptions(&node{name: name, par: &c}, opts))
}

// checkBranches validates a parallel-branches node and returns its
// round-trip warnings.
func checkBranches(parent *Schema, n *node) ([]Warning, error) {
	p := n.par
	bad := func(cat errcat.Category, field, format string, args ...any) error {
		return compileErr(cat, n.name, field, "parallel-branches node %q: "+format, append([]any{n.name}, args...)...)
	}
	if len(p.Branches) == 0 {
		return nil, bad(errcat.ParallelBranchesNoBranches, "", "no branches")
	}
	switch p.ErrorPolicy {
	case "", FailFast, Collect:
	default:
		return nil, bad(errcat.InvalidGraph, "", "unknown error policy %q", p.ErrorPolicy)
	}
	if p.ErrorsField != "" && (!parent.Has(p.ErrorsField) || !isListType(parent.Type(p.ErrorsField))) {
		return nil, bad(errcat.MappingReferencesUndeclaredField, p.ErrorsField, "errors field %q must be a declared list field", p.ErrorsField)
	}
	seen := map[string]bool{}
	var trips []string
	for _, br := range p.Branches {
		switch {
		case br.Name == "" || seen[br.Name]:
			return nil, bad(errcat.ParallelBranchesInvalidBranchSpec, "", "branch names must be unique and non-empty (%q)", br.Name)
		case (br.Subgraph == nil) == (br.Call == nil):
			return nil, bad(errcat.ParallelBranchesInvalidBranchSpec, "", "branch %q must set exactly one of Subgraph and Call", br.Name)
		case br.Call != nil && (br.Inputs != nil || br.Outputs != nil):
			return nil, bad(errcat.ParallelBranchesInvalidBranchSpec, "", "branch %q: Inputs and Outputs apply to subgraph branches only", br.Name)
		}
		seen[br.Name] = true
		for _, m := range br.Middleware {
			if m == nil {
				return nil, bad(errcat.InvalidGraph, "", "branch %q: nil middleware", br.Name)
			}
		}
		if br.Subgraph == nil {
			continue
		}
		sub := br.Subgraph.schema
		for _, sf := range sortedKeys(br.Inputs) {
			if !sub.Has(sf) {
				return nil, bad(errcat.MappingReferencesUndeclaredField, sf, "branch %q: field %q is not declared in the subgraph schema", br.Name, sf)
			}
			if pf := br.Inputs[sf]; !parent.Has(pf) {
				return nil, bad(errcat.MappingReferencesUndeclaredField, pf, "branch %q: field %q is not declared in the parent schema", br.Name, pf)
			}
		}
		for _, pf := range sortedKeys(br.Outputs) {
			if !parent.Has(pf) {
				return nil, bad(errcat.MappingReferencesUndeclaredField, pf, "branch %q: field %q is not declared in the parent schema", br.Name, pf)
			}
			sf := br.Outputs[pf]
			if !sub.Has(sf) {
				return nil, bad(errcat.MappingReferencesUndeclaredField, sf, "branch %q: field %q is not declared in the subgraph schema", br.Name, sf)
			}
			if br.Inputs[sf] == pf {
				trips = append(trips, pf)
			}
		}
	}
	return roundTripWarnings(parent, n.name, trips), nil
}

// runBranches is the work of a parallel-branches node.
func (d *dispatchCtx) runBranches(ctx context.Context, s State) (Update, error) {
	n, p := d.n, d.n.par
	pc := &ParallelBranchesConfig{ErrorPolicy: string(orDefault(p.ErrorPolicy, FailFast)), ParentNodeName: n.name}
	var active []*Branch
	var whenErr error
	for i := range p.Branches {
		br := &p.Branches[i]
		pc.BranchNames = append(pc.BranchNames, br.Name)
		if whenErr != nil {
			continue
		}
		if br.When != nil {
			ok, err := callWhen(ctx, br.When, s)
			if err != nil {
				whenErr = fmt.Errorf("branch %q condition: %w", br.Name, err)
				continue
			}
			if !ok {
				continue
			}
		}
		active = append(active, br)
	}
	pc.BranchCount = len(active)
	step, attempt := d.begin(ctx, s, nil, pc)
	if whenErr != nil {
		return nil, d.failPending(step, attempt, s, d.fr.fail(errcat.NodeException, n, s, whenErr), nil, pc)
	}

	results, first := runUnits(ctx, len(active), 0, p.ErrorPolicy, func(ctx context.Context, i int, started *startSignal) (_ Update, err error) {
		defer recoverSuspend(&err)
		return d.runBranch(ctx, active[i], s, started)
	})
	if first >= 0 {
		if sig, ok := results[first].err.(*suspendSignal); ok {
			d.rethrowSuspend(sig, "branch_name", active[first].Name)
		}
		cat := errcat.ParallelBranchesBranchFailed
		if c := errcat.Of(results[first].err); c.Framework() {
			cat = c
		}
		ne := d.fr.fail(cat, n, s, results[first].err)
		ne.BranchName = active[first].Name
		return nil, d.failPending(step, attempt, s, ne, nil, pc)
	}
	if i, err := frameworkFailure(results); err != nil {
		ne := d.fr.failFor(n, s, err)
		ne.BranchName = active[i].Name
		return nil, d.failPending(step, attempt, s, ne, nil, pc)
	}
	contrib := map[string][]any{}
	var order []string
	var records []any
	for i, r := range results {
		if !r.ran {
			continue
		}
		if r.err != nil {
			if p.ErrorsField != "" {
				records = append(records, map[string]any{"branch_name": active[i].Name, "category": string(errcat.Of(r.err)), "message": r.err.Error()})
			}
			continue
		}
		for _, k := range sortedKeys(r.upd) {
			if _, ok := contrib[k]; !ok {
				order = append(order, k)
			}
			contrib[k] = append(contrib[k], r.upd[k])
		}
	}
	upd := make(Update, len(order)+1)
	for _, k := range order {
		upd[k] = sequence(contrib[k])
	}
	if p.ErrorsField != "" {
		upd[p.ErrorsField] = s.schema.listUpdate(p.ErrorsField, records)
	}
	d.setPending(step, attempt, s, nil, pc)
	return upd, nil
}

// runBranch runs one branch inside its middleware and returns its
// parent-shaped contribution.
func (d *dispatchCtx) runBranch(ctx context.Context, br *Branch, parent State, started *startSignal) (Update, error) {
	n := d.n
	name := br.Name
	if br.Call != nil {
		if started.stopped() {
			return nil, context.Canceled // an earlier branch failed (fail_fast) before this one started
		}
		// An inline callable is its own event source: a synthetic node
		// named after the branch, one level below the dispatch node.
		fr := d.fr.child(nil, n.name, parent, nil, &name)
		// The next branch starts when this callable returns, or once it
		// has run for the graph's callable head after its started event
		// (WithCallableBranchHead): a callable
		// that finishes or fails at once (nothing to wait for) does so
		// before the next branch starts, as a single-threaded scheduler
		// runs a callable until it first waits, so under fail_fast the
		// branches after one that raises at once never start; one that
		// waits lets the next branch start soon after.
		if started != nil {
			started.head = d.fr.g.callableHead
		}
		fr.started = started
		d.forbidSuspendInCollect(fr)
		syn := &node{name: name, fn: br.Call, ns: []string{name}, callable: true}
		uctx := &scopeCtx{Context: ctx, sc: scope{inv: fr.inv, fr: fr, node: syn, state: parent}}
		uctx.ownMeta(ctx)
		bd := &dispatchCtx{fr: fr, n: syn, sc: &uctx.sc}
		uctx.sc.d = bd
		defer func() {
			if p := recover(); p != nil {
				if sig, ok := p.(*suspendSignal); ok && sig.owner == bd {
					bd.emitSuspended(sig.desc) // the branch's own pair ends suspended
				}
				panic(p)
			}
		}()
		upd, err := bd.run(uctx, br.Middleware, parent)
		if err != nil {
			started.failed()           // before reporting it: the next branch must not start
			ne, ok := err.(*NodeError) // the engine's own failure, passed through unchanged
			if !ok {
				ne = fr.fail(errcat.NodeException, syn, parent, err)
			}
			bd.complete(State{}, ne)
			return nil, ne
		}
		post, merr := parent.merge(upd)
		if merr != nil {
			ne := fr.fail(merr.cat, syn, parent, merr)
			bd.complete(State{}, ne)
			return nil, ne
		}
		bd.complete(post, nil)
		return upd, nil
	}
	sub := br.Subgraph
	fr := d.fr.child(sub, n.name, parent, nil, &name)
	fr.started = started
	d.forbidSuspendInCollect(fr)
	in := make(Update, len(br.Inputs))
	for sf, pf := range br.Inputs {
		in[sf], _ = parent.Get(pf)
	}
	init, err := sub.schema.New(in)
	if err != nil {
		return nil, d.fr.fail(errcat.StateValidationError, n, parent, fmt.Errorf("branch %q: %w", name, err))
	}
	uctx := &scopeCtx{Context: ctx, sc: scope{inv: fr.inv, fr: fr, state: init}}
	uctx.ownMeta(ctx)
	// Branch middleware works in subgraph field names, like fan-out
	// instance middleware: it sees the branch's initial state and returns
	// the branch's result, which Outputs then projects into the parent. A
	// field the result does not cover contributes nothing (a degraded
	// branch skips it, §11.7).
	inner := func(ctx context.Context, is State) (Update, error) {
		uctx.sc.lastAttempt = AttemptIndex(ctx)
		final, err := sub.run(ctx, fr, is)
		if err != nil {
			return nil, err
		}
		u := make(Update, len(br.Outputs))
		for _, sf := range br.Outputs {
			u[sf], _ = final.Get(sf)
		}
		return u, nil
	}
	res, err := runChain(uctx, br.Middleware, init, inner)
	if err != nil {
		return nil, err
	}
	contrib := make(Update, len(br.Outputs))
	for pf, sf := range br.Outputs {
		if v, ok := res[sf]; ok {
			contrib[pf] = v
		}
	}
	return contrib, nil
}

// forbidSuspendInCollect marks a branch frame of a collect-mode node:
// suspension there is unsupported (suspension §8.3).
func (d *dispatchCtx) forbidSuspendInCollect(fr *frame) {
	if d.n.par.ErrorPolicy == Collect {
		fr.noSuspend = fmt.Sprintf("a branch of collect-mode parallel-branches node %q", d.n.name)
	}
}

func callWhen(ctx context.Context, fn func(context.Context, State) (bool, error), s State) (ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			ok, err = false, newPanicError(p)
		}
	}()
	return fn(ctx, s)
}
