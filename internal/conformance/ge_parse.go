package conformance

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// geParser turns a case's YAML into a geCase. It records the first
// missing capability instead of failing, so unknown directives anywhere
// in the case are still reported first.
type geParser struct {
	invariants *invariantRegistry
	missing    []string
}

func (p *geParser) need(capability string) {
	if !slices.Contains(p.missing, capability) {
		p.missing = append(p.missing, capability)
	}
}

// checkKeys validates v's keys against ks.
func (p *geParser) checkKeys(v *Value, what string, ks keySet) error {
	if v.Kind != KindMap {
		return schemaErrorf(v.Pos, "%s must be a mapping, got %s", what, v.Kind)
	}
	for _, f := range v.Fields {
		role, ok := ks.lookup(f.Key)
		if !ok {
			return &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
		if role != "" {
			p.need(role)
		}
	}
	return nil
}

// lookup finds key in ks; an entry ending in "*" matches every key with
// that prefix (loaded_invoke_state_for_<field>).
func (ks keySet) lookup(key string) (string, bool) {
	if role, ok := ks[key]; ok {
		return role, true
	}
	for k, role := range ks {
		if prefix, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(key, prefix) && len(key) > len(prefix) {
			return role, true
		}
	}
	return "", false
}

// resolveInvariants resolves an invariants block, noting the capability
// of any invariant that is known but not built yet.
func (p *geParser) resolveInvariants(block *Value, where Pos) ([]*invariantUse, error) {
	uses, err := p.invariants.resolve(block, where)
	if err != nil {
		return nil, err
	}
	for _, u := range uses {
		if u.needs != "" {
			p.need(u.needs)
		}
	}
	return uses, nil
}

func str(v *Value, what string) (string, error) {
	if v == nil || v.Kind != KindString {
		return "", schemaErrorf(posOf(v), "%s must be a string, got %s", what, kindOf(v))
	}
	return v.Str, nil
}

func strList(v *Value, what string) ([]string, error) {
	if v.Kind != KindList {
		return nil, schemaErrorf(v.Pos, "%s must be a list of strings, got %s", what, v.Kind)
	}
	out := make([]string, 0, len(v.Items))
	for _, it := range v.Items {
		s, err := str(it, what+" entry")
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func posOf(v *Value) Pos {
	if v == nil {
		return Pos{}
	}
	return v.Pos
}

func kindOf(v *Value) string {
	if v == nil {
		return "nothing"
	}
	return v.Kind.String()
}

// seconds converts a timeout_seconds value; null means no timeout.
func seconds(v *Value, what string) (time.Duration, bool, error) {
	if v.IsNull() {
		return 0, false, nil
	}
	var f float64
	switch v.Kind {
	case KindInt:
		f = float64(v.Int)
	case KindFloat:
		f = v.Float
	default:
		return 0, false, schemaErrorf(v.Pos, "%s must be a number or null, got %s", what, v.Kind)
	}
	if math.IsNaN(f) || f < 0 || f > 3600 {
		return 0, false, schemaErrorf(v.Pos, "%s must be between 0 and 3600, got %v", what, f)
	}
	return time.Duration(f * float64(time.Second)), true, nil
}

func millis(v *Value, what string) (time.Duration, error) {
	if v.Kind != KindInt || v.Int < 0 || v.Int > 600_000 {
		return 0, schemaErrorf(v.Pos, "%s must be a non-negative integer of milliseconds", what)
	}
	return time.Duration(v.Int) * time.Millisecond, nil
}

// parseCase parses and validates a graph-engine case. It returns a
// *DirectiveUnknownError or *SchemaInvalidError for a bad fixture and a
// *NotImplementedError when the case is valid but needs a capability that
// is not built yet.
func (p *geParser) parseCase(c *Case) (*geCase, error) {
	body := c.Body
	if err := p.checkKeys(body, "case", caseKeys); err != nil {
		return nil, err
	}
	// checkpointer: alone registers the store paused-invocation records
	// go to (suspension §8.5, fixture 013); a case that neither suspends
	// nor resumes a suspension uses it for §10 checkpointing.
	if _, ok := body.Get("checkpointer"); ok && !usesSuspension(body) {
		return p.parseCheckpointCase(body)
	}
	// A checkpointing or migration case is written in the §10 vocabulary
	// throughout (record assertions, resume blocks, §10 invariants); it is
	// reported as not implemented before the rest is validated.
	for _, c := range []string{capMigration, capCheckpoint} {
		if slices.Contains(p.missing, c) {
			return nil, notImplemented(c)
		}
	}
	gc := &geCase{pos: body.Pos, runCount: 1, subgraphs: map[string]*geGraph{}}
	if cs, ok := body.Get("clock_stub"); ok {
		clk, err := p.parseClockStub(cs)
		if err != nil {
			return nil, err
		}
		gc.clock = clk
	}
	if rc, ok := body.Get("run_count"); ok {
		if rc.Kind != KindInt || rc.Int < 1 || rc.Int > 100 {
			return nil, schemaErrorf(rc.Pos, "run_count must be an integer between 1 and 100")
		}
		gc.runCount = int(rc.Int)
	}

	graphSrc := body
	wrapper, wrapped := body.Get("graph")
	if wrapped {
		if err := p.checkKeys(wrapper, "graph", graphWrapperKeys); err != nil {
			return nil, err
		}
		for _, k := range []string{"state", "entry", "nodes", "edges"} {
			if f, ok := body.Field(k); ok {
				return nil, schemaErrorf(f.Pos, "%s: given both inside graph: and at case level", k)
			}
		}
		graphSrc = wrapper
	}
	for _, src := range []*Value{body, wrapper} {
		if src == nil {
			continue
		}
		if err := p.parseSubgraphs(src, gc); err != nil {
			return nil, err
		}
	}
	outer, err := p.parseGraph("", graphSrc, false)
	if err != nil {
		return nil, err
	}
	if mb, ok := body.Get("middleware"); ok {
		if err := p.parseMiddlewareBlock(mb, outer); err != nil {
			return nil, err
		}
	}
	gc.outer = outer

	if obs, ok := body.Get("observers"); ok {
		if gc.observers, err = p.parseObservers(obs); err != nil {
			return nil, err
		}
	}
	if v, ok := body.Get("expected_compile_error"); ok {
		gc.compileError = v
	}
	if v, ok := body.Get("expected_compile_warning"); ok {
		gc.compileWarn = v
	}
	if v, ok := body.Get("invariants"); ok {
		if gc.invariants, err = p.resolveInvariants(v, v.Pos); err != nil {
			return nil, err
		}
	}

	if invs, ok := body.Field("invocations"); ok {
		// A case-level initial_state is the default for invocations that
		// declare none (graph-engine 030); run-time expectations belong to
		// the invocations.
		for _, k := range []string{"invoke", "invoke_with", "expected", "expected_error"} {
			if f, ok := body.Field(k); ok {
				return nil, schemaErrorf(f.Pos, "%s: not allowed beside invocations:", k)
			}
		}
		if invs.Value.Kind != KindList || len(invs.Value.Items) == 0 {
			return nil, schemaErrorf(invs.Pos, "invocations: must be a non-empty list")
		}
		shared, _ := body.Get("initial_state")
		if shared != nil {
			if err := checkInitial(shared); err != nil {
				return nil, err
			}
		}
		for i, item := range invs.Value.Items {
			inv, err := p.parseInvocation(item, i, gc)
			if err != nil {
				return nil, err
			}
			if inv.initial == nil && inv.resume == nil {
				inv.initial = shared
			}
			gc.invocations = append(gc.invocations, inv)
		}
	} else {
		inv, err := p.parseSingleInvocation(body, gc)
		if err != nil {
			return nil, err
		}
		gc.single = true
		gc.invocations = []*geInvocation{inv}
	}

	if wrapped {
		gc.compileOnly = true
		for _, k := range []string{"initial_state", "invoke", "invoke_with", "expected", "expected_error", "invocations", "observers"} {
			if _, ok := body.Get(k); ok {
				gc.compileOnly = false
			}
		}
	}
	for _, inv := range gc.invocations {
		if inv.expect.maxInFlight != nil {
			gc.probeConcurrency = true
		}
	}
	if err := p.parseSessions(body, gc); err != nil {
		return nil, err
	}
	if err := p.parseSuspensionCase(body, gc); err != nil {
		return nil, err
	}
	if err := p.crossCheck(gc); err != nil {
		return nil, err
	}
	if len(p.missing) > 0 {
		return gc, notImplemented(p.missing[0])
	}
	return gc, nil
}

func (p *geParser) parseSubgraphs(src *Value, gc *geCase) error {
	add := func(name string, v *Value, pos Pos) error {
		if _, dup := gc.subgraphs[name]; dup {
			return schemaErrorf(pos, "subgraph %q declared twice", name)
		}
		g, err := p.parseGraph(name, v, true)
		if err != nil {
			return err
		}
		gc.subgraphs[name] = g
		return nil
	}
	if f, ok := src.Field("subgraph"); ok {
		if f.Value.Kind != KindMap {
			return schemaErrorf(f.Pos, "subgraph: must be a mapping")
		}
		name, err := str(mustGet(f.Value, "name"), "subgraph name")
		if err != nil {
			return err
		}
		if err := add(name, f.Value, f.Pos); err != nil {
			return err
		}
	}
	// Fixture mismatch absorption: pipeline-utilities 022 declares its
	// second subgraph under a file-level subgraph_with_idx: key (the same
	// shape as subgraph:, with a name:) rather than under subgraphs:.
	if f, ok := src.Field("subgraph_with_idx"); ok {
		if f.Value.Kind != KindMap {
			return schemaErrorf(f.Pos, "subgraph_with_idx: must be a mapping")
		}
		name, err := str(mustGet(f.Value, "name"), "subgraph name")
		if err != nil {
			return err
		}
		if err := add(name, f.Value, f.Pos); err != nil {
			return err
		}
	}
	if f, ok := src.Field("subgraphs"); ok {
		if f.Value.Kind != KindMap {
			return schemaErrorf(f.Pos, "subgraphs: must be a mapping of name: subgraph")
		}
		for _, sf := range f.Value.Fields {
			if err := add(sf.Key, sf.Value, sf.Pos); err != nil {
				return err
			}
		}
	}
	return nil
}

func mustGet(v *Value, key string) *Value {
	out, _ := v.Get(key)
	return out
}

// parseGraph parses state/entry/nodes/edges from src (a case, a graph:
// wrapper or a subgraph declaration).
func (p *geParser) parseGraph(name string, src *Value, isSub bool) (*geGraph, error) {
	if isSub {
		if err := p.checkKeys(src, "subgraph "+name, subgraphKeys); err != nil {
			return nil, err
		}
	}
	g := &geGraph{name: name, pos: src.Pos}
	if st, ok := src.Get("state"); ok {
		if err := p.checkKeys(st, "state", stateKeys); err != nil {
			return nil, err
		}
		fields, ok := st.Get("fields")
		if !ok || fields.Kind != KindMap {
			return nil, schemaErrorf(st.Pos, "state.fields must be a mapping")
		}
		for _, ff := range fields.Fields {
			fs, err := p.parseField(ff)
			if err != nil {
				return nil, err
			}
			g.fields = append(g.fields, fs)
		}
		if sv, ok := st.Get("schema_version"); ok {
			v, err := versionString(sv, "state.schema_version")
			if err != nil {
				return nil, err
			}
			g.schemaVersion = v
		}
	} else {
		return nil, schemaErrorf(src.Pos, "graph has no state:")
	}
	if e, ok := src.Get("entry"); ok {
		s, err := str(e, "entry")
		if err != nil {
			return nil, err
		}
		g.entry = s
	}
	if nodes, ok := src.Get("nodes"); ok {
		if nodes.Kind != KindMap {
			return nil, schemaErrorf(nodes.Pos, "nodes must be a mapping")
		}
		for _, nf := range nodes.Fields {
			n, err := p.parseNode(nf)
			if err != nil {
				return nil, err
			}
			g.nodes = append(g.nodes, n)
		}
	}
	if isSub {
		if mb, ok := src.Get("middleware"); ok {
			if err := p.parseMiddlewareBlock(mb, g); err != nil {
				return nil, err
			}
		}
	}
	if edges, ok := src.Get("edges"); ok {
		if edges.Kind != KindList {
			return nil, schemaErrorf(edges.Pos, "edges must be a list")
		}
		for _, ev := range edges.Items {
			e, err := p.parseEdge(ev)
			if err != nil {
				return nil, err
			}
			g.edges = append(g.edges, e)
		}
	}
	return g, nil
}

func (p *geParser) parseField(f *Field) (*geField, error) {
	if err := p.checkKeys(f.Value, "field "+f.Key, fieldKeys); err != nil {
		return nil, err
	}
	typ, err := str(mustGet(f.Value, "type"), "field "+f.Key+" type")
	if err != nil {
		return nil, err
	}
	fs := &geField{name: f.Key, pos: f.Pos, typ: typ}
	if d, ok := f.Value.Get("default"); ok {
		fs.def = d
	}
	if r, ok := f.Value.Get("required"); ok {
		if r.Kind != KindBool {
			return nil, schemaErrorf(r.Pos, "field %s: required must be a bool", f.Key)
		}
		fs.required = r.Bool
	}
	for _, k := range []string{"reducer", "alt_reducer"} {
		if rv, ok := f.Value.Get(k); ok {
			r, err := p.parseReducer(rv)
			if err != nil {
				return nil, err
			}
			fs.reducers = append(fs.reducers, r)
		}
	}
	return fs, nil
}

func (p *geParser) parseReducer(v *Value) (*geReducer, error) {
	switch v.Kind {
	case KindString:
		if !slices.Contains(reducerNames, v.Str) {
			return nil, &DirectiveUnknownError{Name: v.Str, Pos: v.Pos}
		}
		return &geReducer{name: v.Str, pos: v.Pos}, nil
	case KindMap:
		if len(v.Fields) != 1 {
			return nil, schemaErrorf(v.Pos, "a factory reducer is a single-key mapping {factory: {kwargs}}")
		}
		f := v.Fields[0]
		r := &geReducer{name: f.Key, pos: f.Pos}
		args := f.Value
		if args.IsNull() {
			args = &Value{Kind: KindMap, Pos: f.Pos}
		}
		if args.Kind != KindMap {
			return nil, schemaErrorf(args.Pos, "%s arguments must be a mapping", f.Key)
		}
		switch f.Key {
		case "bounded_append":
			if err := p.checkKeys(args, f.Key, keySet{"max_len": ""}); err != nil {
				return nil, err
			}
			ml, ok := args.Get("max_len")
			if !ok || ml.Kind != KindInt || ml.Int < math.MinInt32 || ml.Int > math.MaxInt32 {
				return nil, schemaErrorf(args.Pos, "bounded_append needs an integer max_len")
			}
			r.maxLen = int(ml.Int)
		case "dedupe_append", "merge_by_key":
			if err := p.checkKeys(args, f.Key, keySet{"key": ""}); err != nil {
				return nil, err
			}
			if k, ok := args.Get("key"); ok && !k.IsNull() {
				s, err := str(k, f.Key+" key")
				if err != nil {
					return nil, err
				}
				r.key, r.hasKey = s, true
			}
		default:
			return nil, &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
		return r, nil
	}
	return nil, schemaErrorf(v.Pos, "reducer must be a name or a factory mapping, got %s", v.Kind)
}

func (p *geParser) parseNode(f *Field) (*geNode, error) {
	n := &geNode{name: f.Key, pos: f.Pos}
	if f.Value.IsNull() {
		return n, nil
	}
	if err := p.checkKeys(f.Value, "node "+f.Key, nodeKeys); err != nil {
		return nil, err
	}
	var sub *geSubUse
	subKeys := false
	for _, d := range f.Value.Fields {
		v := d.Value
		switch d.Key {
		case "update", "update_pure":
			if v.Kind != KindMap {
				return nil, schemaErrorf(v.Pos, "%s must be a mapping of field: value", d.Key)
			}
			n.steps = append(n.steps, &geStep{kind: stepUpdate, pos: d.Pos, update: v})
		case "emits_log":
			st, err := p.parseEmitsLog(d)
			if err != nil {
				return nil, err
			}
			n.steps = append(n.steps, st)
		case "update_from_field":
			if v.Kind != KindMap {
				return nil, schemaErrorf(v.Pos, "update_from_field must be a mapping {target: source, multiplier: n}")
			}
			st := &geStep{kind: stepUpdateFromField, pos: d.Pos}
			for _, tf := range v.Fields {
				if tf.Key == "multiplier" {
					if tf.Value.Kind != KindInt && tf.Value.Kind != KindFloat {
						return nil, schemaErrorf(tf.Pos, "multiplier must be a number")
					}
					st.multiplier = tf.Value
					continue
				}
				src, err := str(tf.Value, "update_from_field source")
				if err != nil {
					return nil, err
				}
				st.targets = append(st.targets, tf.Key)
				st.sources = append(st.sources, src)
			}
			if len(st.targets) == 0 {
				return nil, schemaErrorf(v.Pos, "update_from_field names no target")
			}
			n.steps = append(n.steps, st)
		case "raises":
			st := &geStep{kind: stepRaise, pos: d.Pos}
			switch v.Kind {
			case KindString:
				st.message = v.Str
			case KindMap:
				if err := p.checkKeys(v, "raises", raisesKeys); err != nil {
					return nil, err
				}
				var err error
				if c, ok := v.Get("category"); ok && !c.IsNull() {
					if st.category, err = str(c, "raises.category"); err != nil {
						return nil, err
					}
				} else if _, hasKind := v.Get("exception_kind"); !hasKind {
					return nil, schemaErrorf(v.Pos, "raises needs a category or an exception_kind")
				}
				if m, ok := v.Get("message"); ok && !m.IsNull() {
					if st.message, err = str(m, "raises.message"); err != nil {
						return nil, err
					}
				}
				if k, ok := v.Get("exception_kind"); ok {
					// A language exception kind (ValueError): an
					// uncategorized error, so it only needs to be a name.
					if _, err := str(k, "raises.exception_kind"); err != nil {
						return nil, err
					}
				}
			default:
				return nil, schemaErrorf(v.Pos, "raises must be a message or {category, message}")
			}
			n.steps = append(n.steps, st)
		case "invoke_drain_events_for":
			if err := p.checkKeys(v, d.Key, nodeDrainKeys); err != nil {
				return nil, err
			}
			st := &geStep{kind: stepDrainEventsFor, pos: d.Pos}
			var err error
			if t, ok := v.Get("timeout_seconds"); ok {
				if st.timeout, st.hasTimeout, err = seconds(t, "timeout_seconds"); err != nil {
					return nil, err
				}
			}
			if st.observer, err = str(mustGet(v, "snapshot_observer"), "snapshot_observer"); err != nil {
				return nil, err
			}
			n.steps = append(n.steps, st)
		case "subgraph":
			name, err := str(v, "subgraph")
			if err != nil {
				return nil, err
			}
			sub = &geSubUse{name: name, pos: d.Pos}
		case "sleep_ms":
			dur, err := millis(v, "sleep_ms")
			if err != nil {
				return nil, err
			}
			n.steps = append(n.steps, &geStep{kind: stepSleep, pos: d.Pos, sleep: dur})
		case "flaky", "flaky_by_index", "flaky_instance_only", "flaky_per_index", "flaky_resume_aware":
			fs, err := p.parseFlaky(d.Key, v)
			if err != nil {
				return nil, err
			}
			n.steps = append(n.steps, &geStep{kind: stepFlaky, pos: d.Pos, flaky: fs})
		case "error_category":
			// Pipeline-utilities 013: the category carried by the node's
			// raises: error (applied below, whatever the key order).
		case "middleware":
			mws, err := p.parseMiddlewareList(v)
			if err != nil {
				return nil, err
			}
			n.mws = mws
		case "fan_out":
			fo, err := p.parseFanOut(v)
			if err != nil {
				return nil, err
			}
			n.fan = fo
		case "parallel_branches":
			pb, err := p.parseBranches(v)
			if err != nil {
				return nil, err
			}
			n.par = pb
		case "suspend_with_descriptor":
			st, err := p.parseSuspendStep(d)
			if err != nil {
				return nil, err
			}
			n.steps = append(n.steps, st)
		case "conditional_suspend":
			st, err := p.parseCondSuspend(f, d)
			if err != nil {
				return nil, err
			}
			n.steps = append(n.steps, st)
		case "on_other_indices":
			// The fallback of conditional_suspend (suspension 006 writes it
			// as a sibling key); parsed there.
			if _, ok := f.Value.Get("conditional_suspend"); !ok {
				return nil, schemaErrorf(d.Pos, "node %s: on_other_indices needs conditional_suspend", f.Key)
			}
		case "wrap_with_middleware":
			mws, err := p.parseWrap(f.Key, v)
			if err != nil {
				return nil, err
			}
			n.wrap = mws
		case "explicit_save_session":
			if v.Kind != KindBool {
				return nil, schemaErrorf(v.Pos, "explicit_save_session must be a bool")
			}
			if v.Bool {
				n.steps = append(n.steps, &geStep{kind: stepSaveSession, pos: d.Pos})
			}
		case "inputs", "outputs", "projects_in", "projects_out", "mapping":
			subKeys = true
		}
	}
	if ec, ok := f.Value.Get("error_category"); ok {
		cat, err := str(ec, "error_category")
		if err != nil {
			return nil, err
		}
		found := false
		for _, st := range n.steps {
			if st.kind == stepRaise {
				st.category, found = cat, true
			}
		}
		if !found {
			return nil, schemaErrorf(ec.Pos, "node %s: error_category needs raises:", f.Key)
		}
	}
	if (n.fan != nil || n.par != nil) && (len(n.steps) > 0 || sub != nil) {
		return nil, schemaErrorf(f.Pos, "node %s: fan_out / parallel_branches cannot be combined with other behavior", f.Key)
	}
	if n.fan != nil && n.par != nil {
		return nil, schemaErrorf(f.Pos, "node %s: both fan_out and parallel_branches", f.Key)
	}
	if subKeys && sub == nil {
		return nil, schemaErrorf(f.Pos, "node %s: inputs/outputs/projects_in/projects_out/mapping need subgraph:", f.Key)
	}
	if sub != nil {
		if len(n.steps) > 0 {
			return nil, schemaErrorf(f.Pos, "node %s: subgraph: cannot be combined with behavior directives", f.Key)
		}
		setMap := func(d *Field) error {
			if d.Value.Kind != KindMap {
				return schemaErrorf(d.Pos, "%s must be a mapping of field names", d.Key)
			}
			for _, mf := range d.Value.Fields {
				if _, err := str(mf.Value, d.Key+" entry"); err != nil {
					return err
				}
			}
			if (d.Key == "inputs" && sub.hasInputs) || (d.Key == "outputs" && sub.hasOutputs) {
				return schemaErrorf(d.Pos, "node %s: %s given both directly and in mapping:", f.Key, d.Key)
			}
			if d.Key == "inputs" {
				sub.inputs, sub.hasInputs = d.Value.Fields, true
			} else {
				sub.outputs, sub.hasOutputs = d.Value.Fields, true
			}
			return nil
		}
		for _, d := range f.Value.Fields {
			switch d.Key {
			case "inputs", "outputs":
				if err := setMap(d); err != nil {
					return nil, err
				}
			case "mapping":
				// Sessions 010: mapping{inputs, outputs} is the subgraph
				// projection (graph-engine §2 inputs / outputs).
				if err := p.checkKeys(d.Value, "mapping", mappingKeys); err != nil {
					return nil, err
				}
				for _, mf := range d.Value.Fields {
					if err := setMap(mf); err != nil {
						return nil, err
					}
				}
			case "projects_in", "projects_out":
				names, err := strList(d.Value, d.Key)
				if err != nil {
					return nil, err
				}
				if d.Key == "projects_in" {
					sub.projectsIn, sub.hasIn = names, true
				} else {
					sub.projectsOut, sub.hasOut = names, true
				}
			}
		}
		n.sub = sub
	}
	return n, nil
}

func (p *geParser) parseEdge(v *Value) (*geEdge, error) {
	if err := p.checkKeys(v, "edge", edgeKeys); err != nil {
		return nil, err
	}
	from, err := str(mustGet(v, "from"), "edge from")
	if err != nil {
		return nil, err
	}
	e := &geEdge{pos: v.Pos, from: from}
	if to, ok := v.Get("to"); ok {
		if e.to, err = str(to, "edge to"); err != nil {
			return nil, err
		}
	}
	cv, ok := v.Get("condition")
	if !ok {
		if e.to == "" {
			return nil, schemaErrorf(v.Pos, "edge from %s has neither to: nor condition:", from)
		}
		return e, nil
	}
	if err := p.checkKeys(cv, "condition", conditionKeys); err != nil {
		return nil, err
	}
	c := &geCond{}
	if cf, ok := cv.Get("callable"); ok {
		if c.callable, err = str(cf, "condition.callable"); err != nil {
			return nil, err
		}
		switch c.callable {
		case "state_field_read":
			if c.field, err = str(mustGet(cv, "field"), "condition.field"); err != nil {
				return nil, err
			}
		case "edge_raises":
			if m, ok := cv.Get("message"); ok {
				if c.message, err = str(m, "condition.message"); err != nil {
					return nil, err
				}
			}
		default:
			return nil, &DirectiveUnknownError{Name: c.callable, Pos: cf.Pos}
		}
	} else {
		if c.ifField, err = str(mustGet(cv, "if_field"), "condition.if_field"); err != nil {
			return nil, err
		}
		if gt, ok := cv.Get("gt"); ok {
			c.gt = gt
		} else {
			c.equals = mustGet(cv, "equals")
		}
		if c.then, err = str(mustGet(cv, "then"), "condition.then"); err != nil {
			return nil, err
		}
		if c.els, err = str(mustGet(cv, "else"), "condition.else"); err != nil {
			return nil, err
		}
		if e.to != "" {
			return nil, schemaErrorf(v.Pos, "an if_field condition takes no to:")
		}
	}
	e.cond = c
	return e, nil
}

func (p *geParser) parseObservers(v *Value) ([]*geObserver, error) {
	if v.Kind != KindList {
		return nil, schemaErrorf(v.Pos, "observers must be a list")
	}
	var out []*geObserver
	seen := map[string]bool{}
	for _, item := range v.Items {
		if err := p.checkKeys(item, "observer", observerKeys); err != nil {
			return nil, err
		}
		name, err := str(mustGet(item, "name"), "observer name")
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, schemaErrorf(item.Pos, "observer %q declared twice", name)
		}
		seen[name] = true
		o := &geObserver{name: name, pos: item.Pos, attach: "graph", target: "outer", behavior: "record"}
		if a, ok := item.Get("attach"); ok {
			if o.attach, err = str(a, "attach"); err != nil {
				return nil, err
			}
			if o.attach != "graph" && o.attach != "invocation" {
				return nil, &DirectiveUnknownError{Name: o.attach, Pos: a.Pos}
			}
		}
		if t, ok := item.Get("target"); ok {
			if o.target, err = str(t, "target"); err != nil {
				return nil, err
			}
		}
		if b, ok := item.Get("behavior"); ok {
			if o.behavior, err = str(b, "behavior"); err != nil {
				return nil, err
			}
			switch o.behavior {
			case "record", "accumulate", "raise":
			case "otel":
			default:
				return nil, &DirectiveUnknownError{Name: o.behavior, Pos: b.Pos}
			}
		}
		if s, ok := item.Get("sleep_ms_per_event"); ok {
			switch s.Kind {
			case KindInt:
				if o.sleepAll, err = millis(s, "sleep_ms_per_event"); err != nil {
					return nil, err
				}
				o.sleepNext = o.sleepAll
			case KindMap:
				if err := p.checkKeys(s, "sleep_ms_per_event", sleepKeys); err != nil {
					return nil, err
				}
				o.sleepSeq = true
				if fv, ok := s.Get("first_invocation"); ok {
					if o.sleepAll, err = millis(fv, "first_invocation"); err != nil {
						return nil, err
					}
				}
				if nv, ok := s.Get("subsequent_invocations"); ok {
					if o.sleepNext, err = millis(nv, "subsequent_invocations"); err != nil {
						return nil, err
					}
				}
			default:
				return nil, schemaErrorf(s.Pos, "sleep_ms_per_event must be an integer or {first_invocation, subsequent_invocations}")
			}
		}
		if ph, ok := item.Get("phases"); ok {
			if o.phases, err = strList(ph, "phases"); err != nil {
				return nil, err
			}
			o.hasPhases = true
		}
		out = append(out, o)
	}
	return out, nil
}

func (p *geParser) parseSingleInvocation(body *Value, gc *geCase) (*geInvocation, error) {
	inv := &geInvocation{pos: body.Pos}
	if is, ok := body.Get("initial_state"); ok {
		if err := checkInitial(is); err != nil {
			return nil, err
		}
		inv.initial = is
	}
	var invoke *Value
	for _, k := range []string{"invoke", "invoke_with"} {
		if v, ok := body.Get(k); ok {
			if invoke != nil {
				return nil, schemaErrorf(v.Pos, "both invoke: and invoke_with: given")
			}
			invoke = v
		}
	}
	if invoke != nil && !invoke.IsNull() {
		if err := p.checkKeys(invoke, "invoke", invokeKeys); err != nil {
			return nil, err
		}
		if d, ok := invoke.Get("drain"); ok {
			dr, err := p.parseDrain(d)
			if err != nil {
				return nil, err
			}
			inv.drain = dr
		}
	}
	exp, err := p.parseExpectations(body, gc)
	if err != nil {
		return nil, err
	}
	inv.expect = exp
	return inv, nil
}

func (p *geParser) parseInvocation(item *Value, i int, gc *geCase) (*geInvocation, error) {
	if err := p.checkKeys(item, "invocation", invocationKeys); err != nil {
		return nil, err
	}
	inv := &geInvocation{pos: item.Pos, name: fmt.Sprintf("#%d", i)}
	if sid, ok := item.Get("session_id"); ok {
		s, err := str(sid, "session_id")
		if err != nil {
			return nil, err
		}
		inv.sessionID = s
	}
	if n, ok := item.Get("name"); ok {
		s, err := str(n, "invocation name")
		if err != nil {
			return nil, err
		}
		inv.name = s
	}
	if is, ok := item.Get("initial_state"); ok {
		if err := checkInitial(is); err != nil {
			return nil, err
		}
		inv.initial = is
	}
	if err := p.parseResume(item, inv, gc); err != nil {
		return nil, err
	}
	if d, ok := item.Get("drain"); ok {
		dr, err := p.parseDrain(d)
		if err != nil {
			return nil, err
		}
		inv.drain = dr
	}
	exp, err := p.parseExpectations(item, gc)
	if err != nil {
		return nil, err
	}
	inv.expect = exp
	for _, f := range item.Fields {
		if err := p.parseSessionExpect(f, exp, inv); err != nil {
			return nil, err
		}
	}
	if v, ok := item.Get("invariants"); ok {
		if inv.invariants, err = p.resolveInvariants(v, v.Pos); err != nil {
			return nil, err
		}
	}
	return inv, nil
}

func checkInitial(v *Value) error {
	if !v.IsNull() && v.Kind != KindMap {
		return schemaErrorf(v.Pos, "initial_state must be a mapping, got %s", v.Kind)
	}
	return nil
}

// parseDrain parses a drain: directive; drain: null means "no drain".
func (p *geParser) parseDrain(v *Value) (*geDrain, error) {
	if v.IsNull() {
		return nil, nil
	}
	if err := p.checkKeys(v, "drain", drainKeys); err != nil {
		return nil, err
	}
	d := &geDrain{pos: v.Pos}
	if t, ok := v.Get("timeout_seconds"); ok {
		var err error
		if d.timeout, d.hasTimeout, err = seconds(t, "timeout_seconds"); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// parseExpectations reads the expected: block of holder plus a sibling
// expected_error: (both spellings are used by fixtures).
func (p *geParser) parseExpectations(holder *Value, gc *geCase) (*geExpect, error) {
	exp := &geExpect{pos: holder.Pos}
	if ee, ok := holder.Get("expected_error"); ok {
		e, err := p.parseErrorExpect(ee)
		if err != nil {
			return nil, err
		}
		exp.expectedError = e
	}
	v, ok := holder.Get("expected")
	if !ok || v.IsNull() {
		return exp, nil
	}
	if err := p.checkKeys(v, "expected", expectKeys); err != nil {
		return nil, err
	}
	exp.pos = v.Pos
	var err error
	for _, f := range v.Fields {
		fv := f.Value
		switch f.Key {
		case "final_state":
			if fv.Kind != KindMap {
				return nil, schemaErrorf(fv.Pos, "final_state must be a mapping")
			}
			exp.finalState = fv
		case "execution_order":
			if _, err := strList(fv, "execution_order"); err != nil {
				return nil, err
			}
			exp.executionOrder = fv
		case "outcome":
			s, err := str(fv, "outcome")
			if err != nil {
				return nil, err
			}
			if s != "completed" && s != "errored" && s != "suspended" {
				return nil, &DirectiveUnknownError{Name: s, Pos: fv.Pos}
			}
			exp.outcome = fv
		case "error":
			switch fv.Kind {
			case KindString:
			case KindMap:
				if err := p.checkKeys(fv, "error", outcomeErrorKeys); err != nil {
					return nil, err
				}
			default:
				return nil, schemaErrorf(fv.Pos, "error must be a category or {category, message}")
			}
			exp.errorCategory = fv
		case "expected_error":
			if exp.expectedError != nil {
				return nil, schemaErrorf(f.Pos, "expected_error given twice")
			}
			if exp.expectedError, err = p.parseErrorExpect(fv); err != nil {
				return nil, err
			}
		case "expected_compile_error":
			gc.compileError = fv
		case "expected_compile_warning":
			gc.compileWarn = fv
		case "observer_events":
			if fv.Kind == KindList {
				// Pipeline-utilities 011: the bare-list form asserts the
				// outermost graph's full event stream (the harness's own
				// recording observer).
				if err := p.eventList(fv, "observer_events"); err != nil {
					return nil, err
				}
				exp.observerEventList = fv
				continue
			}
			if exp.observerEvents, err = p.eventLists(fv, "observer_events"); err != nil {
				return nil, err
			}
		case "trace_records":
			if fv.Kind != KindMap {
				return nil, schemaErrorf(fv.Pos, "trace_records must map recorder names to record lists")
			}
			for _, rf := range fv.Fields {
				if rf.Value.Kind != KindList {
					return nil, schemaErrorf(rf.Pos, "trace_records.%s must be a list", rf.Key)
				}
				for _, it := range rf.Value.Items {
					if err := p.checkKeys(it, "trace record", traceRecordKeys); err != nil {
						return nil, err
					}
				}
			}
			exp.traceRecords = fv.Fields
		case "timing_records":
			if fv.Kind != KindList {
				return nil, schemaErrorf(fv.Pos, "timing_records must be a list")
			}
			for _, it := range fv.Items {
				if err := p.checkKeys(it, "timing record", timingRecordKeys); err != nil {
					return nil, err
				}
			}
			exp.timingRecords = fv
		case "expected_observer_event":
			if err := p.checkKeys(fv, f.Key, observerEventKeys); err != nil {
				return nil, err
			}
			exp.observerEvent = fv
		case "expected_attempt_events":
			if fv.Kind != KindList {
				return nil, schemaErrorf(fv.Pos, "expected_attempt_events must be a list")
			}
			for _, it := range fv.Items {
				if err := p.checkKeys(it, "attempt event", attemptEventKeys); err != nil {
					return nil, err
				}
			}
			exp.attemptEvents = fv
		case "expected_failure_isolation_event":
			if err := p.checkFIEvent(fv); err != nil {
				return nil, err
			}
			exp.fiEvent = fv
		case "no_failure_isolation_event":
			if fv.Kind != KindBool {
				return nil, schemaErrorf(fv.Pos, "%s must be a bool", f.Key)
			}
			exp.noFIEvent = fv
		case "concurrency_invariant":
			if err := p.checkKeys(fv, f.Key, concurrencyInvKeys); err != nil {
				return nil, err
			}
			mf, ok := fv.Get("max_in_flight")
			if !ok || mf.Kind != KindInt || mf.Int < 1 {
				return nil, schemaErrorf(fv.Pos, "concurrency_invariant.max_in_flight must be a positive integer")
			}
			exp.maxInFlight = mf
		case "recoverable_state":
			if fv.Kind != KindMap {
				return nil, schemaErrorf(fv.Pos, "recoverable_state must be a mapping")
			}
			exp.recoverableState = fv
		case "final_accumulator_state":
			if exp.finalAccumulator, err = p.eventLists(fv, "final_accumulator_state"); err != nil {
				return nil, err
			}
		case "delivery_order":
			if fv.Kind != KindList {
				return nil, schemaErrorf(fv.Pos, "delivery_order must be a list")
			}
			for _, it := range fv.Items {
				if err := p.checkKeys(it, "delivery_order entry", deliveryKeys); err != nil {
					return nil, err
				}
			}
			exp.deliveryOrder = fv
		case "drain_summary":
			if err := p.checkKeys(fv, "drain_summary", drainSummaryKeys); err != nil {
				return nil, err
			}
			exp.drainSummary = fv
		case "node_drain_summaries":
			if fv.Kind != KindMap {
				return nil, schemaErrorf(fv.Pos, "node_drain_summaries must map node names to summaries")
			}
			for _, nf := range fv.Fields {
				if err := p.checkKeys(nf.Value, "node drain summary", drainSummaryKeys); err != nil {
					return nil, err
				}
			}
			exp.nodeDrainSummaries = fv.Fields
		case "node_accumulator_snapshots":
			if fv.Kind != KindMap {
				return nil, schemaErrorf(fv.Pos, "node_accumulator_snapshots must map node names to observers")
			}
			for _, nf := range fv.Fields {
				if _, err := p.eventLists(nf.Value, "node_accumulator_snapshots."+nf.Key); err != nil {
					return nil, err
				}
			}
			exp.nodeSnapshots = fv.Fields
		case "node_accumulator_snapshot_invariants":
			if fv.Kind != KindMap {
				return nil, schemaErrorf(fv.Pos, "node_accumulator_snapshot_invariants must map node names to observers")
			}
			for _, nf := range fv.Fields {
				if nf.Value.Kind != KindMap {
					return nil, schemaErrorf(nf.Pos, "node_accumulator_snapshot_invariants.%s must map observers to invariants", nf.Key)
				}
				for _, of := range nf.Value.Fields {
					uses, err := p.resolveInvariants(of.Value, of.Pos)
					if err != nil {
						return nil, err
					}
					exp.nodeSnapshotInvariants = append(exp.nodeSnapshotInvariants,
						&geSnapshotInvariants{node: nf.Key, observer: of.Key, pos: of.Pos, uses: uses})
				}
			}
		case "span_tree", "otel_spans", "log_records":
			if err := p.parseOTelExpect(f, exp, gc); err != nil {
				return nil, err
			}
		case "loaded_session_state", "saved_session_assertions", "store_after", "expected_final_state",
			"no_session_load", "no_session_save", "store_untouched", "no_auto_save_on_end",
			"inner_pre_state", "instance_pre_states", "migrations_run":
			if err := p.parseSessionExpect(f, exp, nil); err != nil {
				return nil, err
			}
		case "suspended_state", "descriptor", "suspending_node", "final_state_at_error",
			"middleware_log_captured", "checkpointer_assertions":
			if err := p.parseSuspensionExpect(f, exp); err != nil {
				return nil, err
			}
		case "no_propagated_error", "empty_phases_raises_at_registration":
			if fv.Kind != KindBool {
				return nil, schemaErrorf(fv.Pos, "%s must be a bool", f.Key)
			}
			if f.Key == "no_propagated_error" {
				exp.noPropagatedError = fv
			} else {
				exp.emptyPhases = fv
			}
		case "invariants":
			if exp.invariants, err = p.resolveInvariants(fv, fv.Pos); err != nil {
				return nil, err
			}
		case "observer_event_invariants":
			if exp.observerInvariants, err = p.resolveInvariants(fv, fv.Pos); err != nil {
				return nil, err
			}
		}
	}
	return exp, nil
}

// eventLists validates an {observer: [event, ...]} mapping.
func (p *geParser) eventLists(v *Value, what string) ([]*Field, error) {
	if v.Kind != KindMap {
		return nil, schemaErrorf(v.Pos, "%s must map observer names to event lists", what)
	}
	for _, f := range v.Fields {
		if err := p.eventList(f.Value, what+"."+f.Key); err != nil {
			return nil, err
		}
	}
	return v.Fields, nil
}

// eventList validates a list of expected events.
func (p *geParser) eventList(v *Value, what string) error {
	if v.Kind != KindList {
		return schemaErrorf(v.Pos, "%s must be a list of events", what)
	}
	for _, ev := range v.Items {
		if err := p.checkKeys(ev, "event", eventKeys); err != nil {
			return err
		}
		if e, ok := ev.Get("error"); ok && e.Kind == KindMap {
			if err := p.checkKeys(e, "event error", eventErrorKeys); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *geParser) parseErrorExpect(v *Value) (*geErrorExpect, error) {
	if err := p.checkKeys(v, "expected_error", errorExpectKeys); err != nil {
		return nil, err
	}
	e := &geErrorExpect{pos: v.Pos}
	e.category, _ = v.Get("category")
	e.raisedFrom, _ = v.Get("raised_from")
	e.message, _ = v.Get("message")
	e.recoverableState, _ = v.Get("recoverable_state")
	e.executionOrder, _ = v.Get("execution_order")
	e.carries, _ = v.Get("carries")
	e.flakyCallCount, _ = v.Get("flaky_call_count")
	e.fanOutCategory, _ = v.Get("fan_out_category")
	e.branchName, _ = v.Get("branch_name")
	e.causeMessage, _ = v.Get("cause_message")
	if c, ok := v.Get("cause"); ok {
		if err := p.checkKeys(c, "expected_error.cause", errCauseKeys); err != nil {
			return nil, err
		}
		if _, err := str(mustGet(c, "exception_type"), "cause.exception_type"); err != nil {
			return nil, err
		}
		e.cause = c
	}
	if ra, ok := v.Get("raised_at"); ok {
		s, err := str(ra, "raised_at")
		if err != nil {
			return nil, err
		}
		if s != "registration" {
			return nil, &DirectiveUnknownError{Name: s, Pos: ra.Pos}
		}
		e.raisedAt = s
	}
	if e.flakyCallCount != nil && e.flakyCallCount.Kind != KindInt {
		return nil, schemaErrorf(e.flakyCallCount.Pos, "flaky_call_count must be an integer")
	}
	if e.carries != nil && e.carries.Kind != KindMap {
		return nil, schemaErrorf(e.carries.Pos, "carries must be a mapping")
	}
	return e, nil
}

// crossCheck validates references between parts of the case: subgraph
// names, observer names and targets.
func (p *geParser) crossCheck(gc *geCase) error {
	graphs := append([]*geGraph{gc.outer}, sortedGraphs(gc.subgraphs)...)
	for _, g := range graphs {
		for name := range g.perNode {
			if g.node(name) == nil {
				return schemaErrorf(g.pos, "middleware.per_node names undeclared node %q", name)
			}
		}
		for _, n := range g.nodes {
			for _, ref := range n.subgraphNames() {
				if _, ok := gc.subgraphs[ref.name]; !ok {
					return schemaErrorf(ref.pos, "node %s references undeclared subgraph %q", n.name, ref.name)
				}
			}
			for _, st := range n.steps {
				if st.kind == stepDrainEventsFor && !gc.hasObserver(st.observer, "accumulate") {
					return schemaErrorf(st.pos, "snapshot_observer %q is not a declared accumulate observer", st.observer)
				}
			}
		}
	}
	for _, o := range gc.observers {
		if _, err := gc.targetGraph(o); err != nil {
			return err
		}
		if o.attach == "invocation" && o.target != "outer" {
			return schemaErrorf(o.pos, "observer %q: invocation-scoped observers can only target outer", o.name)
		}
	}
	for _, inv := range gc.invocations {
		e := inv.expect
		for _, lists := range [][]*Field{e.observerEvents, e.finalAccumulator} {
			for _, f := range lists {
				if !gc.hasObserver(f.Key, "") {
					return schemaErrorf(f.Pos, "undeclared observer %q", f.Key)
				}
			}
		}
		for _, nf := range e.nodeSnapshots {
			for _, of := range nf.Value.Fields {
				if !gc.hasObserver(of.Key, "") {
					return schemaErrorf(of.Pos, "undeclared observer %q", of.Key)
				}
			}
		}
		for _, si := range e.nodeSnapshotInvariants {
			if !gc.hasObserver(si.observer, "") {
				return schemaErrorf(si.pos, "undeclared observer %q", si.observer)
			}
		}
	}
	return nil
}

func (gc *geCase) hasObserver(name, behavior string) bool {
	for _, o := range gc.observers {
		if o.name == name && (behavior == "" || o.behavior == behavior) {
			return true
		}
	}
	return false
}

// targetGraph resolves an observer's target: "outer" is the case graph
// (returned as nil), a subgraph name that subgraph, and "inner" the only
// subgraph (or the one named "inner").
func (gc *geCase) targetGraph(o *geObserver) (*geGraph, error) {
	switch o.target {
	case "outer":
		return nil, nil
	case "inner":
		if g, ok := gc.subgraphs["inner"]; ok {
			return g, nil
		}
		if len(gc.subgraphs) == 1 {
			for _, g := range gc.subgraphs {
				return g, nil
			}
		}
		return nil, schemaErrorf(o.pos, "observer %q: target inner is ambiguous with %d subgraphs", o.name, len(gc.subgraphs))
	}
	if g, ok := gc.subgraphs[o.target]; ok {
		return g, nil
	}
	return nil, schemaErrorf(o.pos, "observer %q: unknown target %q", o.name, o.target)
}

func sortedGraphs(m map[string]*geGraph) []*geGraph {
	out := make([]*geGraph, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}
