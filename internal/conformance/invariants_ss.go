package conformance

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// The sessions fixtures' invariants (each defined by its fixture's .md).
// They read the sessions harness: the store calls and records of each
// invocation, the migration mock runs, the node body runs and the
// subgraph events.

// ssCheck evaluates a boolean sessions predicate: the outcome and, when
// false, why.
type ssCheck func(env *invEnv) (bool, string)

func ssBool(check ssCheck) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		if env.run.ss == nil || env.run.gc == nil || env.run.gc.sess == nil {
			return fmt.Errorf("the case uses no sessions harness")
		}
		got, why := check(env)
		return compareBool(want, got, why)
	}
}

func registerSessionInvariants(r *invariantRegistry) {
	for name, check := range map[string]ssCheck{
		"second_invoke_loads_first_invoke_state":              secondLoadsFirst,
		"saved_record_overwrites_prior":                       savedOverwritesPrior,
		"scratch_field_never_persisted":                       scratchNeverPersisted,
		"projected_field_persists_across_invokes":             projectedPersists,
		"mid_invoke_save_survives_subsequent_crash":           midSaveSurvivesCrash,
		"single_migration_invocation":                         singleMigration,
		"migration_runs_before_projection_merge":              migrationBeforeMerge,
		"node_never_invoked":                                  nodeNeverInvoked,
		"no_invoke_attempted":                                 noInvokeAttempted,
		"subgraph_state_fields_match_subgraph_schema":         compositeFieldsMatch(false),
		"subgraph_does_not_see_session_state_directly":        compositeNoSessionState(false),
		"no_inner_session_load_or_save":                       compositeNoStoreCalls(false),
		"fan_out_instance_state_fields_match_subgraph_schema": compositeFieldsMatch(true),
		"fan_out_instances_do_not_see_session_state_directly": compositeNoSessionState(true),
		"no_per_instance_session_load_or_save":                compositeNoStoreCalls(true),
		"node_event_does_not_carry_session_id_field":          nodeEventHasNoSessionID,
	} {
		r.exact[name] = ssBool(check)
	}
	r.exact["error_category_not"] = errorCategoryNot
	// Sessions 012 (§11.1): session_id_uniform_across_span_tree and
	// all_logs_carry_session_id are registered by registerOTelInvariants.
}

// --- helpers ---------------------------------------------------------------

// projection returns the session fields: session_state.fields, else
// every outermost field (a full-state session).
func projection(gc *geCase) []string {
	if gc.sess.hasFields {
		return gc.sess.fields
	}
	out := make([]string, len(gc.outer.fields))
	for i, f := range gc.outer.fields {
		out[i] = f.name
	}
	return out
}

func finalMap(run *invocationRun) map[string]any {
	m, _ := run.FinalState.(map[string]any)
	return m
}

func supplied(run *invocationRun, field string) bool {
	_, ok := run.Initial[field]
	return ok
}

func recordState(rec *session.Record) (map[string]any, string) {
	if rec == nil {
		return nil, "no record"
	}
	st, err := decodeRecord(rec)
	if err != nil {
		return nil, err.Error()
	}
	return st, ""
}

// consecutive returns the pairs of consecutive invocations in scope
// bound to the same session.
func consecutive(env *invEnv) [][2]*invocationRun {
	invs := env.scope()
	var out [][2]*invocationRun
	for i := 1; i < len(invs); i++ {
		a, b := invs[i-1], invs[i]
		if a.Sess != nil && b.Sess != nil && a.Sess.SessionID != "" && a.Sess.SessionID == b.Sess.SessionID {
			out = append(out, [2]*invocationRun{a, b})
		}
	}
	return out
}

// loadOf returns the first load of the invocation's own session.
func loadOf(r *ssRun) *storeCall {
	for _, c := range r.loads() {
		if c.SessionID == r.SessionID {
			return c
		}
	}
	return nil
}

// loadedVersion reports whether load l resolved to stored version v.
func loadedVersion(l *storeCall, v int64) bool {
	switch l.Outcome {
	case "record":
		return l.Record.Version == v
	case "not_modified":
		return l.IfVersionNot == v
	}
	return false
}

// --- sessions 001 ----------------------------------------------------------

// secondLoadsFirst: invocation 2 loaded the record invocation 1 saved,
// and its entry state carries that record's fields.
func secondLoadsFirst(env *invEnv) (bool, string) {
	pairs := consecutive(env)
	if len(pairs) == 0 {
		return false, "needs two invocations under one session_id"
	}
	a, b := pairs[0][0], pairs[0][1]
	if a.Sess.Post == nil {
		return false, fmt.Sprintf("invocation %s left no record", a.Name)
	}
	l := loadOf(b.Sess)
	if l == nil {
		return false, fmt.Sprintf("invocation %s never loaded session %q", b.Name, b.Sess.SessionID)
	}
	if !loadedVersion(l, a.Sess.Post.Version) {
		return false, fmt.Sprintf("invocation %s's load (%s) did not resolve to version %d saved by invocation %s", b.Name, l.Outcome, a.Sess.Post.Version, a.Name)
	}
	saved, why := recordState(a.Sess.Post)
	if saved == nil {
		return false, why
	}
	entry := env.run.ss.entry(b.InvocationID)
	if entry == nil {
		return false, fmt.Sprintf("no node body ran in invocation %s", b.Name)
	}
	for _, k := range sortedKeys(saved) {
		if supplied(b, k) {
			continue
		}
		if !deepEqual(entry.Pre[k], saved[k]) {
			return false, fmt.Sprintf("invocation %s entered %s with %s = %s, the saved record has %s", b.Name, entry.Node, k, formatValue(entry.Pre[k]), formatValue(saved[k]))
		}
	}
	return true, ""
}

// savedOverwritesPrior: every later invocation of a session saved a new
// version holding exactly its final session fields (replacing, not
// merging with, the prior record), and the session still has one record.
func savedOverwritesPrior(env *invEnv) (bool, string) {
	pairs := consecutive(env)
	if len(pairs) == 0 {
		return false, "needs two invocations under one session_id"
	}
	fields := projection(env.run.gc)
	for _, p := range pairs {
		prev, cur := p[0].Sess, p[1].Sess
		if prev.Post == nil || cur.Post == nil {
			return false, "an invocation left no record"
		}
		if len(cur.writes()) == 0 {
			return false, fmt.Sprintf("invocation %s saved nothing", p[1].Name)
		}
		if cur.Post.Version <= prev.Post.Version {
			return false, fmt.Sprintf("record version %d after invocation %s is not newer than %d", cur.Post.Version, p[1].Name, prev.Post.Version)
		}
		st, why := recordState(cur.Post)
		if st == nil {
			return false, why
		}
		final := finalMap(p[1])
		want := map[string]any{}
		for _, f := range fields {
			if v, ok := final[f]; ok {
				want[f] = v
			}
		}
		if !deepEqual(st, want) {
			return false, fmt.Sprintf("record %s after invocation %s, its final session fields are %s", formatValue(st), p[1].Name, formatValue(want))
		}
		n := 0
		for _, s := range cur.ListAfter {
			if s.SessionID == cur.SessionID {
				n++
			}
		}
		if n != 1 {
			return false, fmt.Sprintf("%d records for session %q", n, cur.SessionID)
		}
	}
	return true, ""
}

// --- sessions 004 ----------------------------------------------------------

// scratchNeverPersisted: no write and no stored record ever holds a field
// outside the session_state projection.
func scratchNeverPersisted(env *invEnv) (bool, string) {
	gc := env.run.gc
	if !gc.sess.hasFields {
		return false, "the case declares no session_state projection"
	}
	proj := map[string]bool{}
	for _, f := range projection(gc) {
		proj[f] = true
	}
	scratch := 0
	for _, f := range gc.outer.fields {
		if !proj[f.name] {
			scratch++
		}
	}
	if scratch == 0 {
		return false, "every state field is in the projection"
	}
	writes := 0
	for _, inv := range env.scope() {
		if inv.Sess == nil {
			continue
		}
		for _, w := range inv.Sess.writes() {
			writes++
			for _, f := range w.Fields {
				if !proj[f] {
					return false, fmt.Sprintf("invocation %s wrote %s", inv.Name, f)
				}
			}
		}
		for _, rec := range []*session.Record{inv.Sess.Pre, inv.Sess.Post} {
			if rec == nil {
				continue
			}
			for f := range rec.State {
				if !proj[f] {
					return false, fmt.Sprintf("the record around invocation %s holds %s", inv.Name, f)
				}
			}
		}
	}
	if writes == 0 {
		return false, "no session save to check"
	}
	return true, ""
}

// projectedPersists: each later invocation of a session loaded the
// projected fields with the values the previous invocation ended with,
// and entered the graph with them.
func projectedPersists(env *invEnv) (bool, string) {
	pairs := consecutive(env)
	if len(pairs) == 0 {
		return false, "needs two invocations under one session_id"
	}
	for _, p := range pairs {
		prevFinal, cur := finalMap(p[0]), p[1]
		if loadOf(cur.Sess) == nil {
			return false, fmt.Sprintf("invocation %s never loaded its session", cur.Name)
		}
		pre, why := recordState(cur.Sess.Pre)
		if pre == nil {
			return false, fmt.Sprintf("before invocation %s: %s", cur.Name, why)
		}
		entry := env.run.ss.entry(cur.InvocationID)
		if entry == nil {
			return false, fmt.Sprintf("no node body ran in invocation %s", cur.Name)
		}
		for _, f := range projection(env.run.gc) {
			if !deepEqual(pre[f], prevFinal[f]) {
				return false, fmt.Sprintf("%s: stored %s, invocation %s ended with %s", f, formatValue(pre[f]), p[0].Name, formatValue(prevFinal[f]))
			}
			if !supplied(cur, f) && !deepEqual(entry.Pre[f], prevFinal[f]) {
				return false, fmt.Sprintf("%s: invocation %s entered with %s, want %s", f, cur.Name, formatValue(entry.Pre[f]), formatValue(prevFinal[f]))
			}
		}
	}
	return true, ""
}

// --- sessions 006 ----------------------------------------------------------

// midSaveSurvivesCrash: the invocation failed, wrote its session only
// from inside a node body (no auto-save at End), and the store holds
// exactly what the last explicit save wrote.
func midSaveSurvivesCrash(env *invEnv) (bool, string) {
	checked := 0
	for _, inv := range env.scope() {
		if inv.Sess == nil || inv.Sess.SessionID == "" {
			continue
		}
		checked++
		if inv.Status != "errored" {
			return false, fmt.Sprintf("invocation %s ended %s", inv.Name, inv.Status)
		}
		var last *storeCall
		for _, w := range inv.Sess.writes() {
			if !w.InNode {
				return false, fmt.Sprintf("invocation %s saved outside any node body (%s)", inv.Name, describeCalls(inv.Sess.Calls))
			}
			if w.Err == nil {
				last = w
			}
		}
		if last == nil {
			return false, fmt.Sprintf("invocation %s made no successful explicit save", inv.Name)
		}
		if inv.Sess.Post == nil {
			return false, "the store holds no record after the failure"
		}
		saved, _ := recordState(last.After)
		after, why := recordState(inv.Sess.Post)
		if after == nil {
			return false, why
		}
		if last.After.Version != inv.Sess.Post.Version || !deepEqual(saved, after) {
			return false, fmt.Sprintf("the store holds %s (version %d), the explicit save wrote %s (version %d)",
				formatValue(after), inv.Sess.Post.Version, formatValue(saved), last.After.Version)
		}
	}
	if checked == 0 {
		return false, "no session-bound invocation"
	}
	return true, ""
}

// --- sessions 007, 008, 009, 013 ---------------------------------------------

func singleMigration(env *invEnv) (bool, string) {
	var names []string
	for _, inv := range env.scope() {
		if inv.Sess == nil {
			continue
		}
		for _, m := range inv.Sess.Migrations {
			names = append(names, m.Name)
		}
	}
	return len(names) == 1, fmt.Sprintf("migrations run: %v", names)
}

// migrationBeforeMerge: the migration chain finished before the first
// node body ran, and the graph entered with the migrated values of the
// session fields (not the stored ones).
func migrationBeforeMerge(env *invEnv) (bool, string) {
	found := false
	proj := map[string]bool{}
	for _, f := range projection(env.run.gc) {
		proj[f] = true
	}
	for _, inv := range env.scope() {
		if inv.Sess == nil || len(inv.Sess.Migrations) == 0 {
			continue
		}
		found = true
		last := inv.Sess.Migrations[len(inv.Sess.Migrations)-1]
		if last.Err != nil {
			return false, fmt.Sprintf("migration %s failed: %v", last.Name, last.Err)
		}
		entry := env.run.ss.entry(inv.InvocationID)
		if entry == nil {
			return false, fmt.Sprintf("no node body ran in invocation %s", inv.Name)
		}
		if entry.Seq < last.Seq {
			return false, fmt.Sprintf("node %s ran before migration %s", entry.Node, last.Name)
		}
		for _, k := range sortedKeys(last.Out) {
			if !proj[k] || supplied(inv, k) {
				continue
			}
			if !deepEqual(entry.Pre[k], last.Out[k]) {
				return false, fmt.Sprintf("node %s entered with %s = %s, the migration produced %s", entry.Node, k, formatValue(entry.Pre[k]), formatValue(last.Out[k]))
			}
		}
	}
	if !found {
		return false, "no migration ran"
	}
	return true, ""
}

// nodeNeverInvoked: no node was dispatched and no node body ran.
func nodeNeverInvoked(env *invEnv) (bool, string) {
	invs := env.scope()
	if len(invs) == 0 {
		return false, "no invocation ran"
	}
	for _, inv := range invs {
		if len(inv.Path) > 0 {
			return false, fmt.Sprintf("invocation %s dispatched %v", inv.Name, inv.Path)
		}
		if bodies := env.run.ss.bodiesOf(inv.InvocationID); len(bodies) > 0 {
			return false, fmt.Sprintf("node %s ran in invocation %s", bodies[0].Node, inv.Name)
		}
	}
	return true, ""
}

// noInvokeAttempted: registration failed, so there was no graph to
// invoke, no invocation ran and the store saw no call.
func noInvokeAttempted(env *invEnv) (bool, string) {
	env.run.ss.mu.Lock()
	calls := len(env.run.ss.calls)
	env.run.ss.mu.Unlock()
	switch {
	case env.run.compiled:
		return false, "the graph compiled"
	case len(env.run.invocations) > 0:
		return false, fmt.Sprintf("%d invocation(s) ran", len(env.run.invocations))
	case calls > 0:
		return false, fmt.Sprintf("the store saw %d call(s)", calls)
	}
	return true, ""
}

// errorCategoryNot: the invocation failed with a category outside the
// listed ones.
func errorCategoryNot(_ context.Context, env *invEnv, want *Value) error {
	banned, err := wantList(want)
	if err != nil {
		return err
	}
	failed := 0
	for _, inv := range env.scope() {
		if inv.Err == nil {
			continue
		}
		failed++
		cat := string(errcat.Of(inv.Err))
		for _, b := range banned {
			if scalarEqual(b, cat) {
				return fmt.Errorf("invocation %s failed with %s: %v", inv.Name, cat, inv.Err)
			}
		}
	}
	if failed == 0 {
		return fmt.Errorf("no invocation failed")
	}
	return nil
}

// --- sessions 010, 011 -----------------------------------------------------

// compositeStates returns, for the invocations in scope, the states the
// composite's subgraph saw: the pre/post states of its events (fan-out
// instance events only when fanOut) and the inputs of its node bodies.
func compositeStates(env *invEnv, fanOut bool) (*geGraph, []map[string]any, int, string) {
	g, _, err := env.run.gc.compositeSubgraph(fanOut)
	if err != nil {
		return nil, nil, 0, err.Error()
	}
	var states []map[string]any
	events := 0
	for _, inv := range env.scope() {
		for _, ev := range env.run.ss.subEvents(g.name, inv.InvocationID) {
			if (ev.FanOutIndex != nil) != fanOut {
				continue
			}
			events++
			for _, st := range []any{ev.PreState, ev.PostState} {
				if m, ok := st.(map[string]any); ok {
					states = append(states, m)
				}
			}
		}
		for _, b := range env.run.ss.bodiesOf(inv.InvocationID) {
			if !b.Outer && g.node(b.Node) != nil {
				states = append(states, b.Pre)
			}
		}
	}
	if events == 0 {
		return g, nil, 0, fmt.Sprintf("subgraph %s delivered no event", g.name)
	}
	return g, states, events, ""
}

func fieldSet(g *geGraph) map[string]bool {
	out := map[string]bool{}
	for _, f := range g.fields {
		out[f.name] = true
	}
	return out
}

// compositeFieldsMatch: every state the subgraph (instance) saw has
// exactly the subgraph's declared fields; for a fan-out, one instance ran
// per item.
func compositeFieldsMatch(fanOut bool) ssCheck {
	return func(env *invEnv) (bool, string) {
		g, states, _, why := compositeStates(env, fanOut)
		if states == nil {
			return false, why
		}
		want := sortedKeys(fieldSet(g))
		for _, st := range states {
			if got := sortedKeys(st); !slices.Equal(got, want) {
				return false, fmt.Sprintf("a %s state has fields %v, the schema declares %v", g.name, got, want)
			}
		}
		if fanOut {
			return instancesPerItem(env, g)
		}
		return true, ""
	}
}

// instancesPerItem checks one instance per item of the fan-out's items
// field, each entering with its own item.
func instancesPerItem(env *invEnv, g *geGraph) (bool, string) {
	_, node, err := env.run.gc.compositeSubgraph(true)
	if err != nil {
		return false, err.Error()
	}
	fo := node.fan
	if fo.itemsField == "" || fo.itemField == "" {
		return true, ""
	}
	for _, inv := range env.scope() {
		items, _ := finalMap(inv)[fo.itemsField].([]any)
		var starts []*eventRec
		for _, ev := range env.run.ss.subEvents(g.name, inv.InvocationID) {
			if ev.Phase == "started" && ev.NodeName == g.entry && ev.FanOutIndex != nil && ev.AttemptIndex == 0 {
				starts = append(starts, ev)
			}
		}
		if len(starts) != len(items) {
			return false, fmt.Sprintf("%d instance(s) started for %d item(s)", len(starts), len(items))
		}
		for _, ev := range starts {
			i := *ev.FanOutIndex
			pre, _ := ev.PreState.(map[string]any)
			if i < 0 || i >= len(items) || !deepEqual(pre[fo.itemField], items[i]) {
				return false, fmt.Sprintf("instance %d entered with %s = %s", i, fo.itemField, formatValue(pre[fo.itemField]))
			}
		}
	}
	return true, ""
}

// compositeNoSessionState: no state the subgraph (instance) saw holds a
// field outside its schema, in particular no outer session field it does
// not declare.
func compositeNoSessionState(fanOut bool) ssCheck {
	return func(env *invEnv) (bool, string) {
		g, states, _, why := compositeStates(env, fanOut)
		if states == nil {
			return false, why
		}
		declared := fieldSet(g)
		for _, st := range states {
			for k := range st {
				if !declared[k] {
					return false, fmt.Sprintf("a %s state holds undeclared field %s", g.name, k)
				}
			}
		}
		if fanOut {
			return instancesPerItem(env, g)
		}
		return true, ""
	}
}

// compositeNoStoreCalls: the store saw only the outermost graph's load
// at entry and save at End — no call from inside the subgraph
// (instances), no other session.
func compositeNoStoreCalls(fanOut bool) ssCheck {
	return func(env *invEnv) (bool, string) {
		if _, _, _, why := compositeStates(env, fanOut); why != "" {
			return false, why
		}
		for _, inv := range env.scope() {
			r := inv.Sess
			if r == nil {
				continue
			}
			loads, saves := 0, 0
			for _, c := range r.Calls {
				switch {
				case c.InNode && len(c.Namespace) > 1:
					return false, fmt.Sprintf("the store saw %s from inside %s", c.Op, strings.Join(c.Namespace, "/"))
				case c.SessionID != r.SessionID:
					return false, fmt.Sprintf("the store saw %s for session %q", c.Op, c.SessionID)
				case c.Op == "load":
					loads++
				case c.write():
					saves++
				}
			}
			if loads > 1 || saves > 1 {
				return false, describeCalls(r.Calls)
			}
		}
		return true, ""
	}
}

// --- sessions 012 ----------------------------------------------------------

// nodeEventHasNoSessionID: §6 NodeEvent has no session id field, and no
// delivered event exposes one.
func nodeEventHasNoSessionID(env *invEnv) (bool, string) {
	t := reflect.TypeFor[graph.NodeEvent]()
	for i := 0; i < t.NumField(); i++ {
		if strings.Contains(strings.ToLower(t.Field(i).Name), "session") {
			return false, fmt.Sprintf("graph.NodeEvent has field %s", t.Field(i).Name)
		}
	}
	if env.hasEvents {
		for _, ev := range env.events {
			if _, ok := ev.view()["session_id"]; ok {
				return false, "a delivered event carries session_id"
			}
		}
	}
	return true, ""
}
