package conformance

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// Pipeline-utilities invariants: the fixture-specific predicates of the
// middleware, failure-isolation, fan-out and parallel-branches fixtures
// (each defined by its fixture's .md), checked against the harness's
// records of the run (pu recorder, side channels) and the final state.

// puCheck is a boolean predicate over one invocation of a
// pipeline-utilities case.
type puCheck func(c *puCtx) (bool, string)

// puCtx is what a pipeline-utilities predicate reads.
type puCtx struct {
	gc  *geCase
	st  *puState
	run *invocationRun
	// events are the node events the predicate reads (the invariant
	// block's observer, else the recording observer).
	events []*eventRec
	fis    []*graph.FailureIsolationEvent
	final  map[string]any
}

func puBool(check puCheck) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		c, err := newPUCtx(env)
		if err != nil {
			return err
		}
		got, detail := check(c)
		return compareBool(want, got, detail)
	}
}

func newPUCtx(env *invEnv) (*puCtx, error) {
	cr := env.run
	if cr.pu == nil || cr.gc == nil {
		return nil, fmt.Errorf("no pipeline-utilities records for this case")
	}
	run := env.inv
	if run == nil {
		if len(cr.invocations) != 1 {
			return nil, fmt.Errorf("the invariant needs one invocation, the case ran %d", len(cr.invocations))
		}
		run = cr.invocations[0]
	}
	c := &puCtx{gc: cr.gc, st: cr.pu, run: run, fis: cr.pu.fiEvents(run.InvocationID)}
	if env.hasEvents {
		c.events = env.events
	} else {
		c.events = cr.pu.nodeEvents(run.InvocationID)
	}
	c.final, _ = run.FinalState.(map[string]any)
	return c, nil
}

func (c *puCtx) completed() bool { return c.run.Status == "completed" && c.run.Err == nil }

func (c *puCtx) errored(cat errcat.Category) (bool, string) {
	if c.run.Err == nil {
		return false, "the invocation completed"
	}
	if got := errcat.Of(c.run.Err); got != cat {
		return false, fmt.Sprintf("the invocation failed with %s, want %s: %v", got, cat, c.run.Err)
	}
	return true, ""
}

// graphs lists the case's graphs, outer first.
func (c *puCtx) graphs() []*geGraph {
	return append([]*geGraph{c.gc.outer}, sortedGraphs(c.gc.subgraphs)...)
}

// chains lists every middleware chain of the case.
func (c *puCtx) chains() [][]*mwSpec {
	var out [][]*mwSpec
	for _, g := range c.graphs() {
		out = append(out, g.perGraph)
		for _, name := range sortedKeys(g.perNode) {
			out = append(out, g.perNode[name])
		}
		for _, n := range g.nodes {
			out = append(out, n.mws)
			if n.fan != nil {
				out = append(out, n.fan.instanceMws)
			}
			if n.par != nil {
				for _, b := range n.par.branches {
					out = append(out, b.mws)
				}
			}
		}
	}
	return out
}

// fiSpec returns the failure_isolation spec named event and its chain.
func (c *puCtx) fiSpec(event string) (*mwSpec, []*mwSpec) {
	for _, ch := range c.chains() {
		for _, m := range ch {
			if m.typ == "failure_isolation" && m.eventName == event {
				return m, ch
			}
		}
	}
	return nil, nil
}

func (c *puCtx) oneFI() (*graph.FailureIsolationEvent, string) {
	if len(c.fis) != 1 {
		return nil, fmt.Sprintf("want one failure-isolation event, got %d", len(c.fis))
	}
	return c.fis[0], ""
}

// degradedInFinal: every field of each failure-isolation event's
// degraded update reached the final state (node- and branch-level
// placements; a fan-out instance's update is subgraph-shaped).
func (c *puCtx) degradedInFinal() (bool, string) {
	if !c.completed() {
		return false, fmt.Sprintf("the invocation ended %s: %v", c.run.Status, c.run.Err)
	}
	if len(c.fis) == 0 {
		return false, "no failure-isolation event"
	}
	for _, ev := range c.fis {
		for k, v := range ev.PostState {
			if !deepEqual(c.final[k], v) {
				return false, fmt.Sprintf("final %s = %s, the degraded update set %s", k, formatValue(c.final[k]), formatValue(v))
			}
		}
	}
	return true, ""
}

// attemptsBeforeCatch counts the failed completed events of the node the
// event wraps delivered before the event.
func (c *puCtx) attemptsBeforeCatch(ev *graph.FailureIsolationEvent) (before, after int) {
	seen := false
	for _, pe := range c.st.eventsFor(c.run.InvocationID) {
		if pe.FI == ev {
			seen = true
			continue
		}
		if n := pe.Node; n != nil && n.Phase == "completed" && n.HasError && slices.Equal(n.Namespace, ev.Namespace) {
			if seen {
				after++
			} else {
				before++
			}
		}
	}
	return before, after
}

// retryAfter returns the max_attempts of the retry composed inside the
// failure isolation in its chain.
func retryAfter(fi *mwSpec, chain []*mwSpec) (int, bool) {
	i := slices.Index(chain, fi)
	for _, m := range chain[i+1:] {
		if m.typ == "retry" {
			return m.maxAttempts, true
		}
	}
	return 0, false
}

func (c *puCtx) retryExhaustedFirst() (bool, string) {
	ev, d := c.oneFI()
	if ev == nil {
		return false, d
	}
	spec, chain := c.fiSpec(ev.EventName)
	if spec == nil {
		return false, fmt.Sprintf("no failure_isolation middleware named %q", ev.EventName)
	}
	want, ok := retryAfter(spec, chain)
	if !ok {
		return false, "no retry inside the failure isolation"
	}
	before, after := c.attemptsBeforeCatch(ev)
	if before != want || after != 0 {
		return false, fmt.Sprintf("%d failed attempts before the catch and %d after, want %d and 0", before, after, want)
	}
	return true, ""
}

// firstNonCarrier returns the outermost non-carrier error of err's chain.
func firstNonCarrier(err error) error {
	for cur := err; cur != nil; cur = errors.Unwrap(cur) {
		if cr, ok := cur.(errcat.Carrier); ok && cr.Carrier() {
			continue
		}
		return cur
	}
	return nil
}

func derivedMatchesChain(ev *graph.FailureIsolationEvent) (bool, string) {
	ce := ev.CaughtException
	var cat errcat.Category
	msg, found := "", false
	for _, l := range ce.Chain {
		if l.Carrier {
			continue
		}
		if l.Category != "" {
			cat, msg, found = l.Category, l.Message, true
			break
		}
		if !found {
			msg, found = l.Message, true
		}
	}
	if ce.Category != cat || ce.Message != msg {
		return false, fmt.Sprintf("derived (%q, %q), the chain %v gives (%q, %q)", ce.Category, ce.Message, ce.Chain, cat, msg)
	}
	return true, ""
}

func countLinks(chain []errcat.Link, carrier bool) int {
	n := 0
	for _, l := range chain {
		if l.Carrier == carrier {
			n++
		}
	}
	return n
}

// --- fan-out slots ---------------------------------------------------------

// fanSlot locates the contribution slot of a degraded fan-out instance:
// the fan-out node, its item count and the instance index.
type fanSlot struct {
	fo    *geFanOut
	count int
	index int
	post  graph.Update
}

func (c *puCtx) fanSlots() ([]fanSlot, string) {
	var out []fanSlot
	for _, n := range c.gc.outer.nodes {
		if n.fan == nil {
			continue
		}
		count := -1
		for _, e := range c.events {
			if e.NodeName == n.name && len(e.Namespace) == 1 && e.FanOutItemCount >= 0 {
				count = e.FanOutItemCount
			}
		}
		for _, ev := range c.fis {
			if spec, _ := c.fiSpec(ev.EventName); spec == nil || !slices.Contains(n.fan.instanceMws, spec) {
				continue
			}
			if count < 0 {
				return nil, fmt.Sprintf("no event of fan-out %s carries its item count", n.name)
			}
			idx := 0
			switch {
			case ev.FanOutIndex != nil:
				idx = *ev.FanOutIndex
			case count != 1:
				return nil, fmt.Sprintf("the failure-isolation event of fan-out %s has no fan_out_index", n.name)
			}
			out = append(out, fanSlot{fo: n.fan, count: count, index: idx, post: ev.PostState})
		}
	}
	if len(out) == 0 {
		return nil, "no failure-isolation event of a fan-out instance"
	}
	return out, ""
}

// slotValue returns the value instance index contributed to parent list
// field (the last count elements are this fan-out's contributions).
func (c *puCtx) slotValue(field string, s fanSlot) (any, string) {
	l, ok := c.final[field].([]any)
	if !ok || len(l) < s.count {
		return nil, fmt.Sprintf("final %s = %s holds no %d contributions", field, formatValue(c.final[field]), s.count)
	}
	return l[len(l)-s.count+s.index], ""
}

// checkSlots checks, for every degraded instance, the slot of the
// collect field (collect) and/or of the extra outputs (extras); want
// selects which slots: "all", "absent" (only fields the degraded update
// omits, which must be null) or "present" (only fields it sets).
func (c *puCtx) checkSlots(collect, extras bool, want string) (bool, string) {
	slots, d := c.fanSlots()
	if slots == nil {
		return false, d
	}
	checked := 0
	for _, s := range slots {
		pairs := map[string]string{}
		if collect {
			pairs[s.fo.target] = s.fo.collect
		}
		if extras {
			for pf, sf := range s.fo.extraOutputs {
				pairs[pf] = sf
			}
		}
		for _, pf := range sortedKeys(pairs) {
			sf := pairs[pf]
			dv, has := s.post[sf]
			if (want == "absent" && has) || (want == "present" && !has) {
				continue
			}
			got, d := c.slotValue(pf, s)
			if d != "" {
				return false, d
			}
			if !deepEqual(got, dv) {
				return false, fmt.Sprintf("%s slot %d = %s, the degraded update's %s is %s", pf, s.index, formatValue(got), sf, formatValue(dv))
			}
			checked++
		}
	}
	if checked == 0 {
		return false, fmt.Sprintf("no %s slot to check", want)
	}
	return true, ""
}

// --- parallel branches -----------------------------------------------------

type branchRef struct {
	node string
	b    *geBranch
}

func (c *puCtx) branches() []branchRef {
	var out []branchRef
	for _, n := range c.gc.outer.nodes {
		if n.par != nil {
			for _, b := range n.par.branches {
				out = append(out, branchRef{n.name, b})
			}
		}
	}
	return out
}

func (c *puCtx) branch(name string) (branchRef, bool) {
	for _, r := range c.branches() {
		if r.b.name == name {
			return r, true
		}
	}
	return branchRef{}, false
}

// branchEvents selects the events of a branch by where they come from —
// the branch's callable, or a node of the branch's subgraph directly
// below the parallel-branches node — not by their branch_name.
func (c *puCtx) branchEvents(r branchRef) []*eventRec {
	var members []string
	if r.b.call != nil {
		members = []string{r.b.name}
	} else if g := c.gc.subgraphs[r.b.sub]; g != nil {
		for _, n := range g.nodes {
			members = append(members, n.name)
		}
	}
	var out []*eventRec
	for _, e := range c.events {
		if len(e.Namespace) >= 2 && e.Namespace[0] == r.node && slices.Contains(members, e.Namespace[1]) {
			out = append(out, e)
		}
	}
	return out
}

// dispatchPre returns the parallel-branches node's pre_state.
func (c *puCtx) dispatchPre(node string) (map[string]any, bool) {
	for _, e := range c.events {
		if e.NodeName == node && len(e.Namespace) == 1 && e.Phase == "started" {
			m, ok := e.PreState.(map[string]any)
			return m, ok
		}
	}
	return nil, false
}

// skipped reports whether a when: branch was skipped (its field was
// falsy at dispatch).
func (c *puCtx) skipped(r branchRef) (bool, bool) {
	if r.b.whenField == "" {
		return false, false
	}
	pre, ok := c.dispatchPre(r.node)
	if !ok {
		return false, false
	}
	return !truthy(pre[r.b.whenField]), true
}

func staticUpdate(n *geNode) map[string]any {
	out := map[string]any{}
	if n == nil {
		return out
	}
	for _, st := range n.steps {
		if st.kind == stepUpdate {
			for _, f := range st.update.Fields {
				out[f.Key] = f.Value.Native()
			}
		}
	}
	return out
}

// fanInner reports whether an event comes from inside a fan-out instance,
// by namespace: an enclosing namespace element is a fan-out node.
func (c *puCtx) fanInner(e *eventRec) bool {
	for _, name := range e.Namespace[:max(len(e.Namespace)-1, 0)] {
		for _, g := range c.graphs() {
			if n := g.node(name); n != nil && n.fan != nil {
				return true
			}
		}
	}
	return false
}

// --- registration ----------------------------------------------------------

func registerPipelineInvariants(r *invariantRegistry) {
	exact := map[string]puCheck{
		// failure isolation, node level (058-063)
		// The engine never saw the caught failure: the invocation went on
		// to completion with the degraded update merged. (A failed retry
		// attempt inside the isolation still emits its own failed
		// completed event, fixture 061's expected_attempt_events.)
		"engine_does_not_see_exception": (*puCtx).degradedInFinal,
		"engine_sees_degraded_return":   (*puCtx).degradedInFinal,
		"event_is_distinct_from_node_event": func(c *puCtx) (bool, string) {
			if len(c.fis) == 0 {
				return false, "no failure-isolation event was delivered"
			}
			for _, e := range c.events {
				for _, fi := range c.fis {
					if e.NodeName == fi.EventName {
						return false, fmt.Sprintf("a node event is named after the catch site %q", fi.EventName)
					}
				}
			}
			return true, ""
		},
		"event_name_is_caller_supplied": func(c *puCtx) (bool, string) {
			if len(c.fis) == 0 {
				return false, "no failure-isolation event"
			}
			for _, ev := range c.fis {
				if spec, _ := c.fiSpec(ev.EventName); ev.EventName == "" || spec == nil {
					return false, fmt.Sprintf("event name %q is not a configured event_name", ev.EventName)
				}
			}
			return true, ""
		},
		"callable_receives_pre_merge_state": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			c.st.mu.Lock()
			ins := slices.Clone(c.st.degradeIn)
			c.st.mu.Unlock()
			if len(ins) != 1 {
				return false, fmt.Sprintf("the degraded callable ran %d times", len(ins))
			}
			var started any
			for _, e := range c.events {
				if e.Phase == "started" && slices.Equal(e.Namespace, ev.Namespace) {
					started = e.PreState
					break
				}
			}
			if !deepEqual(ins[0], normalize(ev.PreState)) || !deepEqual(ins[0], started) {
				return false, fmt.Sprintf("the callable received %s; the node received %s", formatValue(ins[0]), formatValue(started))
			}
			return true, ""
		},
		"callable_return_merges_via_reducer": (*puCtx).degradedInFinal,
		"matching_exception_caught": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			spec, _ := c.fiSpec(ev.EventName)
			if spec == nil || !spec.hasPredicate {
				return false, "the catch site has no predicate"
			}
			if string(ev.CaughtException.Category) != spec.predicateCat {
				return false, fmt.Sprintf("caught %s, the predicate matches %s", ev.CaughtException.Category, spec.predicateCat)
			}
			return c.degradedInFinal()
		},
		"non_matching_exception_propagates": func(c *puCtx) (bool, string) {
			if ok, d := c.errored(errcat.NodeException); !ok {
				return false, d
			}
			if len(c.fis) != 0 {
				return false, fmt.Sprintf("%d failure-isolation event(s)", len(c.fis))
			}
			return true, ""
		},
		"no_event_when_predicate_does_not_match":  noFIEvent,
		"no_event_when_catch_does_not_match":      noFIEvent,
		"retry_exhausts_before_isolation_catches": (*puCtx).retryExhaustedFirst,
		"outer_to_inner_ordering_load_bearing": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			spec, chain := c.fiSpec(ev.EventName)
			if spec == nil {
				return false, "unknown catch site"
			}
			if _, ok := retryAfter(spec, chain); !ok {
				return false, "the retry is not inside the failure isolation"
			}
			return c.retryExhaustedFirst()
		},
		"on_caught_fires_exactly_once": func(c *puCtx) (bool, string) {
			n := len(c.caught())
			return n == 1, fmt.Sprintf("on_caught fired %d times", n)
		},
		"on_caught_receives_original_exception": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			cs := c.caught()
			if len(cs) != 1 {
				return false, fmt.Sprintf("on_caught fired %d times", len(cs))
			}
			if cs[0].Err != ev.CaughtException.Err {
				return false, fmt.Sprintf("on_caught received %v, the middleware caught %v", cs[0].Err, ev.CaughtException.Err)
			}
			cat, msg := errcat.Derived(cs[0].Err)
			if cat != ev.CaughtException.Category || msg != ev.CaughtException.Message {
				return false, fmt.Sprintf("on_caught's error is (%s, %q), the event's (%s, %q)", cat, msg, ev.CaughtException.Category, ev.CaughtException.Message)
			}
			return true, ""
		},
		"framework_event_still_emits_with_on_caught": func(c *puCtx) (bool, string) {
			n, f := len(c.caught()), len(c.fis)
			return n >= 1 && f == n, fmt.Sprintf("on_caught fired %d times, %d failure-isolation event(s)", n, f)
		},
		"degraded_return_reaches_engine_with_on_caught": func(c *puCtx) (bool, string) {
			if len(c.caught()) == 0 {
				return false, "on_caught never fired"
			}
			return c.degradedInFinal()
		},
		"default_predicate_catches_bare_exception": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			spec, _ := c.fiSpec(ev.EventName)
			if spec == nil || spec.hasPredicate || len(spec.catch) > 0 {
				return false, "the catch site configures a predicate or catch set"
			}
			if errcat.Of(ev.CaughtException.Err) != "" {
				return false, fmt.Sprintf("the caught error is categorized (%s)", errcat.Of(ev.CaughtException.Err))
			}
			return c.degradedInFinal()
		},
		"caught_exception_category_null_for_non_categorized": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			for _, l := range ev.CaughtException.Chain {
				if !l.Carrier && l.Category != "" {
					return false, fmt.Sprintf("the chain has a categorized link %s", l.Category)
				}
			}
			return ev.CaughtException.Category == "", fmt.Sprintf("category %q", ev.CaughtException.Category)
		},
		"caught_exception_message_captures_str_exc": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			raw := firstNonCarrier(ev.CaughtException.Err)
			if raw == nil {
				return false, "no non-carrier error in the chain"
			}
			m := ev.CaughtException.Message
			return m != "" && m == raw.Error(), fmt.Sprintf("message %q, the error's text %q", m, raw.Error())
		},
		// cause fidelity and chains (064, 066, 068)
		"category_resolves_through_node_exception_wrapper": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			ch := ev.CaughtException.Chain
			if len(ch) < 2 || !ch[0].Carrier || ch[0].Category != errcat.NodeException {
				return false, fmt.Sprintf("the caught error is not a node_exception carrier: %v", ch)
			}
			if ok, d := derivedMatchesChain(ev); !ok {
				return false, d
			}
			return ev.CaughtException.Category != "", "derived category is null"
		},
		"category_not_masked_as_node_exception": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			cat := ev.CaughtException.Category
			return cat != "" && cat != errcat.NodeException && cat != errcat.ParallelBranchesBranchFailed,
				fmt.Sprintf("derived category %q", cat)
		},
		"derived_category_is_outermost_non_carrier_with_category": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			if ev.CaughtException.Category == "" {
				return false, "derived category is null"
			}
			return derivedMatchesChain(ev)
		},
		"chain_includes_carrier_and_originating": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			ch := ev.CaughtException.Chain
			if len(ch) == 0 || !ch[0].Carrier {
				return false, fmt.Sprintf("no outermost carrier link: %v", ch)
			}
			for _, l := range ch[1:] {
				if !l.Carrier && l.Category == ev.CaughtException.Category && l.Category != "" {
					return true, ""
				}
			}
			return false, fmt.Sprintf("no originating link of category %s: %v", ev.CaughtException.Category, ch)
		},
		"node_level_chain_is_single_non_carrier_link": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			ch := ev.CaughtException.Chain
			return len(ch) == 1 && !ch[0].Carrier, fmt.Sprintf("chain %v", ch)
		},
		"uncategorized_cause_yields_null_derived_category": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			if ev.CaughtException.Category != "" {
				return false, fmt.Sprintf("derived category %q", ev.CaughtException.Category)
			}
			return derivedMatchesChain(ev)
		},
		"chain_has_two_non_carrier_links": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			n := countLinks(ev.CaughtException.Chain, false)
			return n == 2, fmt.Sprintf("%d non-carrier links in %v", n, ev.CaughtException.Chain)
		},
		// catch gate (072)
		"catch_matches_through_node_exception_carrier": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			spec, _ := c.fiSpec(ev.EventName)
			if spec == nil || len(spec.catch) == 0 {
				return false, "the catch site has no catch set"
			}
			if errcat.Of(ev.CaughtException.Err) != errcat.NodeException {
				return false, fmt.Sprintf("the surface error is %s, not a node_exception carrier", errcat.Of(ev.CaughtException.Err))
			}
			if !slices.Contains(spec.catch, string(ev.CaughtException.Category)) {
				return false, fmt.Sprintf("derived %s is not in the catch set %v", ev.CaughtException.Category, spec.catch)
			}
			return c.completed(), fmt.Sprintf("the invocation ended %s", c.run.Status)
		},
		"catch_non_matching_propagates": func(c *puCtx) (bool, string) {
			if ok, d := c.errored(errcat.NodeException); !ok {
				return false, d
			}
			if len(c.fis) != 0 {
				return false, fmt.Sprintf("%d failure-isolation event(s)", len(c.fis))
			}
			cat, _ := errcat.Derived(c.run.Err)
			for _, ch := range c.chains() {
				for _, m := range ch {
					if m.typ == "failure_isolation" && slices.Contains(m.catch, string(cat)) {
						return false, fmt.Sprintf("the failure's derived category %s is in catch set %v", cat, m.catch)
					}
				}
			}
			return true, ""
		},
		// fan-out degrade contributions (065, 069, 071)
		"contribution_is_the_degraded_update": func(c *puCtx) (bool, string) {
			if !c.completed() {
				return false, fmt.Sprintf("the invocation ended %s", c.run.Status)
			}
			return c.checkSlots(true, true, "all")
		},
		"extra_outputs_read_by_subgraph_field_name": func(c *puCtx) (bool, string) { return c.checkSlots(false, true, "present") },
		"omitted_collect_field_yields_null_slot":    func(c *puCtx) (bool, string) { return c.checkSlots(true, false, "absent") },
		"absent_collect_field_yields_null_slot":     func(c *puCtx) (bool, string) { return c.checkSlots(true, false, "absent") },
		"extra_outputs_omission_is_null_slot":       func(c *puCtx) (bool, string) { return c.checkSlots(false, true, "absent") },
		"degrade_path_does_not_raise":               (*puCtx).degradedCompleted,
		"fan_in_does_not_raise":                     (*puCtx).degradedCompleted,
		"strict_reducer_null_slot_raises": func(c *puCtx) (bool, string) {
			if ok, d := c.errored(errcat.ReducerError); !ok {
				return false, d
			}
			var ne *graph.NodeError
			if !errors.As(c.run.Err, &ne) {
				return false, "the reducer error is not attributed to a node"
			}
			n := c.gc.outer.node(ne.Node)
			return n != nil && n.fan != nil, fmt.Sprintf("raised from %q, not a fan-out node", ne.Node)
		},
		"degrade_does_not_suppress_reducer_error": func(c *puCtx) (bool, string) {
			if len(c.fis) == 0 {
				return false, "no instance was degraded"
			}
			return c.errored(errcat.ReducerError)
		},
		// branch degrade (065 case 4)
		"uncovered_projected_field_skipped": (*puCtx).uncoveredKept,
		"parent_keeps_prior_value":          (*puCtx).uncoveredKept,
		// callable and conditional branches (073-075)
		"callable_branches_run_without_subgraph": func(c *puCtx) (bool, string) {
			calls := 0
			for _, r := range c.branches() {
				if r.b.call == nil {
					continue
				}
				calls++
				var started, completed int
				for _, e := range c.branchEvents(r) {
					if len(e.Namespace) != 2 {
						return false, fmt.Sprintf("branch %s has a nested event %v", r.b.name, e.Namespace)
					}
					switch {
					case e.Phase == "started":
						started++
					case e.Phase == "completed" && !e.HasError:
						completed++
					}
				}
				if started != 1 || completed != 1 {
					return false, fmt.Sprintf("branch %s: %d started and %d clean completed events, want one pair", r.b.name, started, completed)
				}
			}
			return calls > 0 && c.completed(), "no callable branch ran"
		},
		"contributions_merge_via_parent_reducer": func(c *puCtx) (bool, string) {
			if !c.completed() {
				return false, fmt.Sprintf("the invocation ended %s", c.run.Status)
			}
			for _, r := range c.branches() {
				for k, v := range staticUpdate(r.b.call) {
					if !deepEqual(c.final[k], v) {
						return false, fmt.Sprintf("branch %s set %s = %s, final %s", r.b.name, k, formatValue(v), formatValue(c.final[k]))
					}
				}
			}
			return true, ""
		},
		"when_false_branch_skipped":     func(c *puCtx) (bool, string) { return c.whenBranches(true, false, false) },
		"skipped_branch_emits_no_event": func(c *puCtx) (bool, string) { return c.whenBranches(true, false, false) },
		"skipped_branch_no_contribution": func(c *puCtx) (bool, string) {
			return c.whenBranches(true, true, false)
		},
		"when_true_branch_dispatches": func(c *puCtx) (bool, string) { return c.whenBranches(false, false, true) },
		"callable_branch_failure_isolated_and_degraded": func(c *puCtx) (bool, string) {
			ev, d := c.oneFI()
			if ev == nil {
				return false, d
			}
			found := false
			for _, r := range c.branches() {
				for _, m := range r.b.mws {
					if m.typ == "failure_isolation" && m.eventName == ev.EventName && r.b.call != nil {
						found = true
					}
				}
			}
			if !found {
				return false, "the catch site is not a callable branch's middleware"
			}
			return c.degradedInFinal()
		},
		"sibling_branch_completed": func(c *puCtx) (bool, string) {
			siblings := 0
			for _, r := range c.branches() {
				isolated := false
				for _, m := range r.b.mws {
					isolated = isolated || m.typ == "failure_isolation"
				}
				if isolated {
					continue
				}
				siblings++
				ok := false
				for _, e := range c.branchEvents(r) {
					if e.Phase == "completed" && !e.HasError {
						ok = true
					}
				}
				if !ok {
					return false, fmt.Sprintf("branch %s has no clean completed event", r.b.name)
				}
			}
			return siblings > 0, "no sibling branch"
		},
		// event-stream predicates (020, 037, 038)
		"inner_events_have_fan_out_index": func(c *puCtx) (bool, string) {
			n := 0
			for _, e := range c.events {
				if len(e.Namespace) > 1 {
					n++
					if e.FanOutIndex == nil {
						return false, fmt.Sprintf("inner event of %s has no fan_out_index", e.NodeName)
					}
				}
			}
			return n > 0, "no inner events"
		},
		"fan_out_inner_events_carry_both_branch_name_and_fan_out_index": func(c *puCtx) (bool, string) {
			n := 0
			for _, e := range c.events {
				if c.fanInner(e) {
					n++
					if e.FanOutIndex == nil || e.BranchName == nil {
						return false, fmt.Sprintf("fan-out inner event of %s lacks fan_out_index or branch_name", e.NodeName)
					}
				}
			}
			return n > 0, "no fan-out inner events"
		},
	}
	for name, check := range exact {
		r.exact[name] = puBool(check)
	}
	r.exact["inner_events_attempt_indices_seen"] = puSeen(func(c *puCtx, e *eventRec) (any, bool) {
		return e.AttemptIndex, len(e.Namespace) > 1
	})
	r.exact["fan_out_indices_seen"] = puSeen(func(c *puCtx, e *eventRec) (any, bool) { return ptrVal(e.FanOutIndex) })
	r.exact["fan_out_inner_fan_out_indices_seen"] = puSeen(func(c *puCtx, e *eventRec) (any, bool) {
		if !c.fanInner(e) {
			return nil, false
		}
		return ptrVal(e.FanOutIndex)
	})
	r.exact["fan_out_inner_branch_name_seen"] = puSeen(func(c *puCtx, e *eventRec) (any, bool) {
		if !c.fanInner(e) {
			return nil, false
		}
		return ptrVal(e.BranchName)
	})
	r.exact["inner_event_pair_count_per_instance"] = innerPairCount
	r.exact["branch_started_event_order"] = branchStartedOrder

	fam := func(pattern string, build func(group string) invariantFunc) {
		r.families = append(r.families, invariantFamily{
			re:    regexp.MustCompile(pattern),
			build: func(g []string) invariantFunc { return build(g[0]) },
		})
	}
	// <branch>_inner_*: the events of one branch (by origin, see
	// branchEvents).
	fam(`^(.+)_inner_attempt_indices_seen$`, func(b string) invariantFunc {
		return puBranchSeen(b, func(e *eventRec) (any, bool) { return e.AttemptIndex, true })
	})
	fam(`^(.+)_inner_branch_name_seen$`, func(b string) invariantFunc {
		return puBranchSeen(b, func(e *eventRec) (any, bool) { return ptrVal(e.BranchName) })
	})
	fam(`^(.+)_inner_events_carry_branch_name_but_no_fan_out_index$`, func(b string) invariantFunc {
		return puBool(func(c *puCtx) (bool, string) {
			r, ok := c.branch(b)
			if !ok {
				return false, fmt.Sprintf("no branch %q", b)
			}
			evs := c.branchEvents(r)
			for _, e := range evs {
				if e.BranchName == nil || *e.BranchName != b || e.FanOutIndex != nil {
					return false, fmt.Sprintf("event of %s: branch_name %s, fan_out_index %s", e.NodeName, formatValue(e.BranchName), formatValue(e.FanOutIndex))
				}
			}
			return len(evs) > 0, "no events for the branch"
		})
	})
}

func noFIEvent(c *puCtx) (bool, string) {
	return len(c.fis) == 0, fmt.Sprintf("%d failure-isolation event(s)", len(c.fis))
}

func (c *puCtx) caught() []*caughtRec {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	var out []*caughtRec
	for _, r := range c.st.caught {
		if r.InvocationID == c.run.InvocationID {
			out = append(out, r)
		}
	}
	return out
}

func (c *puCtx) degradedCompleted() (bool, string) {
	if len(c.fis) == 0 {
		return false, "no instance was degraded"
	}
	return c.completed(), fmt.Sprintf("the invocation ended %s: %v", c.run.Status, c.run.Err)
}

// uncoveredKept: a branch-middleware degrade that does not cover a
// projected outputs field leaves the parent's prior value.
func (c *puCtx) uncoveredKept() (bool, string) {
	if !c.completed() {
		return false, fmt.Sprintf("the invocation ended %s: %v", c.run.Status, c.run.Err)
	}
	checked := 0
	for _, ev := range c.fis {
		for _, r := range c.branches() {
			spec, _ := c.fiSpec(ev.EventName)
			if spec == nil || !slices.Contains(r.b.mws, spec) {
				continue
			}
			pre, ok := c.dispatchPre(r.node)
			if !ok {
				return false, fmt.Sprintf("no started event for %s", r.node)
			}
			for _, pf := range sortedKeys(r.b.outputs) {
				if _, covered := ev.PostState[r.b.outputs[pf]]; covered {
					continue
				}
				checked++
				if !deepEqual(c.final[pf], pre[pf]) {
					return false, fmt.Sprintf("%s changed from %s to %s", pf, formatValue(pre[pf]), formatValue(c.final[pf]))
				}
			}
		}
	}
	return checked > 0, "no uncovered projected field"
}

// whenBranches checks the when: branches: skipped ones (wantSkipped) emit
// no event (and, with contribution, leave their fields at the dispatch
// value); dispatched ones complete cleanly.
func (c *puCtx) whenBranches(wantSkipped, contribution, wantDispatched bool) (bool, string) {
	n := 0
	for _, r := range c.branches() {
		skipped, isWhen := c.skipped(r)
		if !isWhen {
			continue
		}
		evs := c.branchEvents(r)
		switch {
		case wantSkipped && skipped:
			n++
			if len(evs) > 0 {
				return false, fmt.Sprintf("skipped branch %s emitted %d event(s)", r.b.name, len(evs))
			}
			for _, e := range c.events {
				if e.BranchName != nil && *e.BranchName == r.b.name {
					return false, fmt.Sprintf("an event carries the skipped branch's name %s", r.b.name)
				}
			}
			if contribution {
				pre, _ := c.dispatchPre(r.node)
				for k := range staticUpdate(r.b.call) {
					if !deepEqual(c.final[k], pre[k]) {
						return false, fmt.Sprintf("skipped branch %s: %s changed to %s", r.b.name, k, formatValue(c.final[k]))
					}
				}
			}
		case wantDispatched && !skipped:
			n++
			ok := false
			for _, e := range evs {
				if e.Phase == "completed" && !e.HasError {
					ok = true
				}
			}
			if !ok {
				return false, fmt.Sprintf("branch %s did not complete", r.b.name)
			}
			for k, v := range staticUpdate(r.b.call) {
				if !deepEqual(c.final[k], v) {
					return false, fmt.Sprintf("branch %s: final %s = %s, want %s", r.b.name, k, formatValue(c.final[k]), formatValue(v))
				}
			}
		}
	}
	return n > 0, "no matching when: branch"
}

func puSeen(key func(c *puCtx, e *eventRec) (any, bool)) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		c, err := newPUCtx(env)
		if err != nil {
			return err
		}
		var w []any
		if want.Kind == KindList {
			w = want.Native().([]any)
		} else {
			w = []any{want.Native()}
		}
		var got []any
		for _, e := range c.events {
			if v, ok := key(c, e); ok {
				got = append(got, v)
			}
		}
		if len(got) == 0 || !sameSet(w, got) {
			return fmt.Errorf("want the set %s, got %s", formatValue(w), formatValue(dedupe(got)))
		}
		return nil
	}
}

func puBranchSeen(branch string, key func(e *eventRec) (any, bool)) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		c, err := newPUCtx(env)
		if err != nil {
			return err
		}
		r, ok := c.branch(branch)
		if !ok {
			return fmt.Errorf("no branch %q", branch)
		}
		var w []any
		if want.Kind == KindList {
			w = want.Native().([]any)
		} else {
			w = []any{want.Native()}
		}
		var got []any
		for _, e := range c.branchEvents(r) {
			if v, ok := key(e); ok {
				got = append(got, v)
			}
		}
		if len(got) == 0 || !sameSet(w, got) {
			return fmt.Errorf("branch %s: want the set %s, got %s", branch, formatValue(w), formatValue(dedupe(got)))
		}
		return nil
	}
}

func innerPairCount(_ context.Context, env *invEnv, want *Value) error {
	c, err := newPUCtx(env)
	if err != nil {
		return err
	}
	w, err := wantInt(want)
	if err != nil {
		return err
	}
	per := map[int]int{}
	for _, e := range c.events {
		if len(e.Namespace) > 1 && e.FanOutIndex != nil {
			per[*e.FanOutIndex]++
		}
	}
	if len(per) == 0 {
		return fmt.Errorf("no fan-out inner events")
	}
	for idx, n := range per {
		if n != w {
			return fmt.Errorf("instance %d has %d inner events, want %d", idx, n, w)
		}
	}
	return nil
}

func branchStartedOrder(_ context.Context, env *invEnv, want *Value) error {
	c, err := newPUCtx(env)
	if err != nil {
		return err
	}
	w, err := wantList(want)
	if err != nil {
		return err
	}
	var order []string
	for _, e := range c.events {
		if e.Phase == "started" && e.BranchName != nil && !slices.Contains(order, *e.BranchName) {
			order = append(order, *e.BranchName)
		}
	}
	if !deepEqual(w, stringsToAny(order)) {
		return fmt.Errorf("branches started in order [%s], want %s", strings.Join(order, ", "), formatValue(w))
	}
	return nil
}
