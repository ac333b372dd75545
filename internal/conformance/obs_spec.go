package conformance

import (
	"fmt"
	"slices"
	"strings"
)

// The observability suite's vocabulary (spec/observability, fixture 001's
// header): the graph part of a case is graph-engine / pipeline-utilities
// vocabulary and is parsed by the graph-engine parser; the keys below are
// the observability harness's own. A key the suite knows but does not
// implement yet makes the case not implemented, naming the key.
const capObs = "observability"

var (
	// obsCaseKeys are the case keys the suite implements; the graph keys
	// among them go on to the graph-engine parser.
	obsCaseKeys = vocab("name description state entry nodes edges initial_state subgraph subgraphs " +
		"expected expected_error caller_correlation_id invocations observers")
	// obsCaseNotBuilt are the observability case keys not implemented.
	obsCaseNotBuilt = strings.Fields("mock_llm mock_llm_stream disable_llm_spans " +
		"disable_provider_payload provider " +
		"disable_genai_semconv " +
		"checkpointer " +
		"first_run_expected_error first_run_expected resume invariants direct_call " +
		"typed_observers enable_metrics")
	// obsNodeNotBuilt are node directives of observability fixtures that
	// the graph-engine parser does not know and the suite does not
	// implement.
	obsNodeNotBuilt = strings.Fields("then_drop_for_current_invocation then_assert_bucket_absent_into calls_tool")
	// obsEdgeNotBuilt are edge keys of observability fixtures not
	// implemented (when: is rewritten by obs_determinism.go).
	obsEdgeNotBuilt = strings.Fields("")
	// obsExpectKeys are the expectations the suite checks.
	obsExpectKeys = vocab("span_tree invariants no_edge_spans invocation_count observer_event_invariants")
	// obsExpectNotBuilt are observability expectations not implemented.
	obsExpectNotBuilt = strings.Fields("no_llm_provider_span " +
		"response_usage llm_span_attributes " +
		"llm_span_attributes_absent direct_call_result observers " +
		"node_completed_event_carries_error metrics")
	// obsSpanNotBuilt are span-tree keys not implemented (payload and
	// link assertions).
	obsSpanNotBuilt = strings.Fields("attributes_present attribute_parses_as_messages " +
		"attribute_truncation attribute_does_not_contain attribute_parses_as_object")
)

// obsCase is a parsed observability case: the graph-engine case of its
// graph part plus the observability harness directives.
type obsCase struct {
	gc            *geCase
	correlationID string
	// runs is the number of invocations (invocations: N), 1 by default.
	runs   int
	expect *Value
	// spanTree, invariants and the flags are the expectations.
	spanTree    *Value
	invariants  []*Field
	noEdgeSpans *Value
	invCount    *Value
	// llm is the LLM and tool part (obs_llm.go), nil without one.
	llm *obsLLM
	// meta is the caller-supplied metadata harness (obs_meta.go).
	meta *obsMeta
	// eventInvariants are the observer_event_invariants, read over the
	// events of the case's observers: (graph-engine vocabulary).
	eventInvariants []*invariantUse
	// lf is the Langfuse part (obs_langfuse.go), nil without one.
	lf *obsLangfuse
}

// parseObsCase validates the observability directives, rewrites the
// fixture-only node shorthands into graph-engine vocabulary and parses
// the rest with the graph-engine parser.
func parseObsCase(c *Case, reg *invariantRegistry) (*obsCase, error) {
	c, lf, err := splitObsLangfuse(c)
	if err != nil {
		return nil, err
	}
	if c.Body.Kind != KindMap {
		return nil, schemaErrorf(c.Body.Pos, "case must be a mapping")
	}
	meta := newObsMeta()
	// inner_subgraphs first (obs_inner.go): their nodes are graph nodes
	// for every part below.
	absorbed, err := meta.absorbInner(c.Body)
	if err != nil {
		return nil, err
	}
	if absorbed != c.Body {
		nc := *c
		nc.Body = absorbed
		c = &nc
	}
	c, ol, err := splitObsLLM(c)
	if err != nil {
		return nil, err
	}
	body := c.Body
	oc := &obsCase{runs: 1, llm: ol, meta: meta, lf: lf}
	body, err = oc.meta.extract(body)
	if err != nil {
		return nil, err
	}
	graphBody := &Value{Kind: KindMap, Pos: body.Pos}
	for _, f := range body.Fields {
		if _, ok := obsMetaCaseKeys[f.Key]; ok {
			if err := oc.meta.caseKey(f); err != nil {
				return nil, err
			}
			continue
		}
		if slices.Contains(obsCaseNotBuilt, f.Key) {
			return nil, notImplemented(fmt.Sprintf("%s %s", capObs, f.Key))
		}
		if _, ok := obsCaseKeys[f.Key]; !ok {
			return nil, &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
		switch f.Key {
		case "caller_correlation_id":
			s, err := str(f.Value, "caller_correlation_id")
			if err != nil {
				return nil, err
			}
			if s == "" {
				return nil, schemaErrorf(f.Value.Pos, "caller_correlation_id must not be empty")
			}
			oc.correlationID = s
		case "invocations":
			if f.Value.Kind == KindList {
				if err := oc.meta.invocationList(f.Value); err != nil {
					return nil, err
				}
				oc.runs = len(f.Value.Items)
				continue
			}
			if f.Value.Kind != KindInt {
				return nil, schemaErrorf(f.Value.Pos, "invocations must be a count or a list")
			}
			if f.Value.Int < 1 || f.Value.Int > 100 {
				return nil, schemaErrorf(f.Value.Pos, "invocations must be between 1 and 100")
			}
			oc.runs = int(f.Value.Int)
		case "expected":
			oc.expect = f.Value
		case "nodes", "subgraph", "subgraphs":
			v, err := rewriteObsGraphs(f.Key, f.Value)
			if err != nil {
				return nil, err
			}
			graphBody.Fields = append(graphBody.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: v})
		case "edges":
			if err := checkObsEdges(f.Value); err != nil {
				return nil, err
			}
			graphBody.Fields = append(graphBody.Fields, f)
		default:
			graphBody.Fields = append(graphBody.Fields, f)
		}
	}
	if oc.expect == nil {
		return nil, schemaErrorf(body.Pos, "observability case has no expected:")
	}
	if n := len(oc.meta.seq); n > 0 {
		oc.runs = n
	}
	p := &geParser{invariants: reg}
	if err := oc.parseExpect(p); err != nil {
		return nil, err
	}
	gc, err := p.parseCase(&Case{Fixture: c.Fixture, Name: c.Name, Index: c.Index, Pos: c.Pos, Body: graphBody})
	if err != nil {
		return nil, err
	}
	if err := oc.meta.install(gc); err != nil {
		return nil, err
	}
	if err := lf.installInner(gc); err != nil {
		return nil, err
	}
	if ol != nil {
		ol.lead = oc.meta.lead
	}
	oc.gc = gc
	return oc, nil
}

func (oc *obsCase) parseExpect(p *geParser) error {
	e := oc.expect
	if e.Kind != KindMap {
		return schemaErrorf(e.Pos, "expected must be a mapping")
	}
	for _, f := range e.Fields {
		if _, ok := obsMetaExpectKeys[f.Key]; ok {
			if err := oc.meta.expectKey(p, f); err != nil {
				return err
			}
			continue
		}
		if slices.Contains(obsExpectNotBuilt, f.Key) {
			return notImplemented(fmt.Sprintf("%s expected.%s", capObs, f.Key))
		}
		if _, ok := obsExpectKeys[f.Key]; !ok {
			return &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
	}
	for _, f := range e.Fields {
		switch f.Key {
		case "span_tree":
			if err := checkObsSpans(f.Value); err != nil {
				return err
			}
			if err := p.parseSpanList(f.Value, "span_tree"); err != nil {
				return err
			}
			oc.spanTree = f.Value
		case "invariants":
			if f.Value.Kind != KindMap {
				return schemaErrorf(f.Value.Pos, "invariants must be a mapping")
			}
			for _, inv := range f.Value.Fields {
				if _, ok := obsInvariants[inv.Key]; !ok && !isMetaInvariant(inv.Key) {
					return notImplemented(fmt.Sprintf("%s invariant %s", capObs, inv.Key))
				}
			}
			oc.invariants = f.Value.Fields
		case "no_edge_spans":
			if f.Value.Kind != KindBool {
				return schemaErrorf(f.Value.Pos, "no_edge_spans must be a bool")
			}
			oc.noEdgeSpans = f.Value
		case "invocation_count":
			if f.Value.Kind != KindInt {
				return schemaErrorf(f.Value.Pos, "invocation_count must be an integer")
			}
			oc.invCount = f.Value
		case "observer_event_invariants":
			uses, err := p.resolveInvariants(f.Value, f.Value.Pos)
			if err != nil {
				return err
			}
			oc.eventInvariants = uses
		}
	}
	return nil
}

// checkObsSpans reports span-tree keys that are not implemented.
func checkObsSpans(v *Value) error {
	if v.Kind != KindList {
		return nil // parseSpanList reports the shape
	}
	for _, s := range v.Items {
		if s.Kind != KindMap {
			continue
		}
		for _, f := range s.Fields {
			if slices.Contains(obsSpanNotBuilt, f.Key) {
				return notImplemented(fmt.Sprintf("%s span_tree %s", capObs, f.Key))
			}
		}
		if c, ok := s.Get("children"); ok {
			if err := checkObsSpans(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkObsEdges reports edge keys that are not implemented.
func checkObsEdges(v *Value) error {
	if v.Kind != KindList {
		return nil
	}
	for _, e := range v.Items {
		for _, k := range obsEdgeNotBuilt {
			if _, ok := e.Get(k); ok {
				return notImplemented(fmt.Sprintf("%s edge %s: condition", capObs, k))
			}
		}
	}
	return nil
}

// rewriteObsGraphs rewrites the node shorthands of a nodes:, subgraph:
// or subgraphs: value.
func rewriteObsGraphs(key string, v *Value) (*Value, error) {
	switch key {
	case "nodes":
		return rewriteObsNodes(v)
	case "subgraph":
		return rewriteObsGraph(v)
	}
	if v.Kind != KindMap {
		return v, nil
	}
	out := &Value{Kind: KindMap, Pos: v.Pos}
	for _, f := range v.Fields {
		g, err := rewriteObsGraph(f.Value)
		if err != nil {
			return nil, err
		}
		out.Fields = append(out.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: g})
	}
	return out, nil
}

func rewriteObsGraph(v *Value) (*Value, error) {
	if v.Kind != KindMap {
		return v, nil
	}
	out := &Value{Kind: KindMap, Pos: v.Pos}
	for _, f := range v.Fields {
		val := f.Value
		switch f.Key {
		case "nodes":
			var err error
			if val, err = rewriteObsNodes(val); err != nil {
				return nil, err
			}
		case "edges":
			if err := checkObsEdges(val); err != nil {
				return nil, err
			}
		}
		out.Fields = append(out.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: val})
	}
	return out, nil
}

// rewriteObsNodes rewrites each node's shorthands:
//
//   - update_pure_from_state: {target: <source>_times_two} (fixtures 006,
//     008: "target = source * 2") is update_from_field {target: source,
//     multiplier: 2};
//   - flaky: {fail_count: N, category: C, on_success: U} (fixture 007:
//     the first N attempts fail with C, later ones return U) is flaky
//     {failure_sequence: N failures of category C, success_update: U}.
//
// Node directives of observability fixtures the graph-engine parser does
// not know make the case not implemented; emits_log on a composite node
// (which has no body to log from) too.
func rewriteObsNodes(v *Value) (*Value, error) {
	if v.Kind != KindMap {
		return v, nil
	}
	out := &Value{Kind: KindMap, Pos: v.Pos}
	for _, nf := range v.Fields {
		n := nf.Value
		if n.Kind != KindMap {
			out.Fields = append(out.Fields, nf)
			continue
		}
		rn := &Value{Kind: KindMap, Pos: n.Pos}
		composite := false
		for _, k := range []string{"subgraph", "fan_out", "parallel_branches"} {
			if _, ok := n.Get(k); ok {
				composite = true
			}
		}
		for _, d := range n.Fields {
			if slices.Contains(obsNodeNotBuilt, d.Key) {
				return nil, notImplemented(fmt.Sprintf("%s node %s", capObs, d.Key))
			}
			switch d.Key {
			case "emits_log":
				if composite {
					return nil, notImplemented(capObs + " emits_log on a composite node")
				}
			case "update_pure_from_state":
				rd, err := rewritePureFromState(d)
				if err != nil {
					return nil, err
				}
				d = rd
			case "flaky":
				rd, err := rewriteFlakyCount(d)
				if err != nil {
					return nil, err
				}
				d = rd
			case "subgraph_call":
				// 039: {subgraph, inputs, outputs} is the graph-engine
				// subgraph node with its projections.
				if d.Value.Kind != KindMap {
					return nil, schemaErrorf(d.Value.Pos, "subgraph_call must be a mapping")
				}
				for _, sf := range d.Value.Fields {
					switch sf.Key {
					case "subgraph", "inputs", "outputs":
						rn.Fields = append(rn.Fields, sf)
					default:
						return nil, &DirectiveUnknownError{Name: sf.Key, Pos: sf.Pos}
					}
				}
				continue
			case "subgraph":
				// An inline subgraph declaration is a graph of its own.
				if d.Value.Kind == KindMap {
					g, err := rewriteObsGraph(d.Value)
					if err != nil {
						return nil, err
					}
					d = &Field{Key: d.Key, Pos: d.Pos, Value: g}
				}
			}
			rn.Fields = append(rn.Fields, d)
		}
		out.Fields = append(out.Fields, &Field{Key: nf.Key, Pos: nf.Pos, Value: rn})
	}
	return out, nil
}

func rewritePureFromState(d *Field) (*Field, error) {
	if d.Value.Kind != KindMap || len(d.Value.Fields) == 0 {
		return nil, schemaErrorf(d.Value.Pos, "update_pure_from_state must map target fields to computations")
	}
	out := &Value{Kind: KindMap, Pos: d.Value.Pos}
	for _, f := range d.Value.Fields {
		comp, err := str(f.Value, "update_pure_from_state computation")
		if err != nil {
			return nil, err
		}
		src, ok := strings.CutSuffix(comp, "_times_two")
		if !ok || src == "" {
			return nil, notImplemented(fmt.Sprintf("%s update_pure_from_state computation %s", capObs, comp))
		}
		out.Fields = append(out.Fields, &Field{Key: f.Key, Pos: f.Pos, Value: &Value{Kind: KindString, Pos: f.Value.Pos, Str: src}})
	}
	out.Fields = append(out.Fields, &Field{Key: "multiplier", Pos: d.Value.Pos, Value: &Value{Kind: KindInt, Pos: d.Value.Pos, Int: 2}})
	return &Field{Key: "update_from_field", Pos: d.Pos, Value: out}, nil
}

// maxFailCount bounds a flaky fail_count (999 is the fixtures' "always").
const maxFailCount = 1000

func rewriteFlakyCount(d *Field) (*Field, error) {
	v := d.Value
	fc, ok := v.Get("fail_count")
	if !ok {
		return d, nil // the graph-engine flaky forms
	}
	for _, f := range v.Fields {
		switch f.Key {
		case "fail_count", "category", "on_success":
		default:
			return nil, &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
	}
	if fc.Kind != KindInt || fc.Int < 0 || fc.Int > maxFailCount {
		return nil, schemaErrorf(fc.Pos, "flaky.fail_count must be an integer between 0 and %d", maxFailCount)
	}
	entry := &Value{Kind: KindMap, Pos: v.Pos}
	if c, ok := v.Get("category"); ok {
		entry.Fields = append(entry.Fields, &Field{Key: "category", Pos: c.Pos, Value: c})
	}
	seq := &Value{Kind: KindList, Pos: fc.Pos}
	for range fc.Int {
		seq.Items = append(seq.Items, entry)
	}
	out := &Value{Kind: KindMap, Pos: v.Pos, Fields: []*Field{{Key: "failure_sequence", Pos: fc.Pos, Value: seq}}}
	if s, ok := v.Get("on_success"); ok {
		out.Fields = append(out.Fields, &Field{Key: "success_update", Pos: s.Pos, Value: s})
	}
	return &Field{Key: d.Key, Pos: d.Pos, Value: out}, nil
}
