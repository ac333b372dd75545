package conformance

import (
	"maps"
	"regexp"

	"github.com/armature-go/armature/graph"
)

// The suspension vocabulary (IMPLEMENTERS-NOTES §4, the suspension
// fixtures): suspend_with_descriptor / conditional_suspend node
// directives, wrap_with_middleware, resume invocations and their
// expectations.

// susDescriptor is a signal descriptor a node or middleware suspends
// with.
type susDescriptor struct {
	pos      Pos
	signalID string
	// metadata is the descriptor's metadata mapping (nil: none).
	metadata *Value
	// rerun is mark_node_completed: false (graph.RerunOnResume).
	rerun bool
}

// descriptor returns a fresh engine descriptor.
func (d *susDescriptor) descriptor() graph.SignalDescriptor {
	out := graph.SignalDescriptor{SignalID: d.signalID}
	if d.metadata != nil {
		if m, ok := d.metadata.Native().(map[string]any); ok {
			out.Metadata = maps.Clone(m)
		}
	}
	return out
}

func (d *susDescriptor) options() []graph.SuspendOption {
	if d.rerun {
		return []graph.SuspendOption{graph.RerunOnResume()}
	}
	return nil
}

// Resume targets: what a resume_invocation names.
const (
	// resumeLiteral: a literal invocation id.
	resumeLiteral = iota
	// resumeSuspended: an earlier invocation's suspended outcome
	// ("<from previous suspended outcome>", "<from NAME suspended outcome>").
	resumeSuspended
	// resumeCompleted: an earlier completed invocation
	// ("<invocation_id from initial completed invoke>").
	resumeCompleted
)

// susResume is an invocation's resume_invocation + signal_payload.
type susResume struct {
	pos  Pos
	raw  string
	kind int
	// ref names the earlier invocation: "previous", "initial" or an
	// invocation name ("" for a literal).
	ref string
	// payload is the signal_payload mapping (possibly empty).
	payload *Value
}

var (
	fromSuspendedRe = regexp.MustCompile(`^<from (\S+) suspended outcome>$`)
	fromCompletedRe = regexp.MustCompile(`^<invocation_id from (\S+) completed invoke>$`)
	placeholderRe   = regexp.MustCompile(`^<.*>$`)
)

// susExpect holds an invocation's suspension expectations.
type susExpect struct {
	suspendedState    *Value
	descriptor        *Value
	suspendingNode    *Value
	finalStateAtError *Value
	mwLog             *Value
	cpAssert          *Value
	cpPos             Pos
}

// parseDescriptor reads {signal_id, metadata[, mark_node_completed]}.
func (p *geParser) parseDescriptor(v *Value, what string, allowMark bool) (*susDescriptor, error) {
	keys := suspendKeys
	if !allowMark {
		keys = vocab("signal_id metadata")
	}
	if err := p.checkKeys(v, what, keys); err != nil {
		return nil, err
	}
	d := &susDescriptor{pos: v.Pos}
	var err error
	if d.signalID, err = str(mustGetOr(v, "signal_id"), what+".signal_id"); err != nil {
		return nil, err
	}
	if md, ok := v.Get("metadata"); ok && !md.IsNull() {
		if md.Kind != KindMap {
			return nil, schemaErrorf(md.Pos, "%s.metadata must be a mapping", what)
		}
		d.metadata = md
	}
	if mc, ok := v.Get("mark_node_completed"); ok {
		if err := boolValue(mc, what+".mark_node_completed"); err != nil {
			return nil, err
		}
		d.rerun = !mc.Bool
	}
	return d, nil
}

func (p *geParser) parseSuspendStep(d *Field) (*geStep, error) {
	desc, err := p.parseDescriptor(d.Value, "suspend_with_descriptor", true)
	if err != nil {
		return nil, err
	}
	return &geStep{kind: stepSuspend, pos: d.Pos, suspend: desc}, nil
}

// parseCondSuspend parses conditional_suspend{suspend_on_item_index,
// descriptor} and the node's sibling on_other_indices (suspension 006; a
// mapping of node directives run by every other instance).
func (p *geParser) parseCondSuspend(node *Field, d *Field) (*geStep, error) {
	v := d.Value
	if err := p.checkKeys(v, "conditional_suspend", condSuspendKeys); err != nil {
		return nil, err
	}
	idx, ok := v.Get("suspend_on_item_index")
	if !ok || idx.Kind != KindInt || idx.Int < 0 {
		return nil, schemaErrorf(v.Pos, "conditional_suspend.suspend_on_item_index must be a non-negative integer")
	}
	dv, ok := v.Get("descriptor")
	if !ok {
		return nil, schemaErrorf(v.Pos, "conditional_suspend needs a descriptor")
	}
	desc, err := p.parseDescriptor(dv, "conditional_suspend.descriptor", true)
	if err != nil {
		return nil, err
	}
	st := &geStep{kind: stepCondSuspend, pos: d.Pos, suspend: desc, suspendIndex: idx.Int}
	if of, ok := node.Value.Field("on_other_indices"); ok {
		if of.Value.Kind != KindMap {
			return nil, schemaErrorf(of.Pos, "on_other_indices must be a mapping of node directives")
		}
		fb, err := p.parseNode(&Field{Key: node.Key + ".on_other_indices", Pos: of.Pos, Value: of.Value})
		if err != nil {
			return nil, err
		}
		if fb.composite() || len(fb.mws) > 0 || len(fb.wrap) > 0 {
			return nil, schemaErrorf(of.Pos, "on_other_indices takes behavior directives only")
		}
		st.otherwise = fb.steps
	}
	return st, nil
}

// parseWrap parses wrap_with_middleware: a list of {name, pre_log,
// post_log} loggers or {name, pre_next_calls_suspend_with_descriptor}.
func (p *geParser) parseWrap(node string, v *Value) ([]*mwSpec, error) {
	if v.Kind != KindList {
		return nil, schemaErrorf(v.Pos, "wrap_with_middleware must be a list")
	}
	var out []*mwSpec
	for _, it := range v.Items {
		if err := p.checkKeys(it, "wrap_with_middleware entry", wrapKeys); err != nil {
			return nil, err
		}
		m := &mwSpec{typ: mwWrap, pos: it.Pos, nodeName: node}
		var err error
		if n, ok := it.Get("name"); ok {
			if m.name, err = str(n, "wrap_with_middleware name"); err != nil {
				return nil, err
			}
		}
		if pl, ok := it.Get("pre_log"); ok {
			if m.preLog, err = str(pl, "pre_log"); err != nil {
				return nil, err
			}
			m.hasPre = true
		}
		if pl, ok := it.Get("post_log"); ok {
			if m.postLog, err = str(pl, "post_log"); err != nil {
				return nil, err
			}
			m.hasPost = true
		}
		if sd, ok := it.Get("pre_next_calls_suspend_with_descriptor"); ok {
			if m.suspendInMw, err = p.parseDescriptor(sd, "pre_next_calls_suspend_with_descriptor", false); err != nil {
				return nil, err
			}
			if m.hasPre || m.hasPost {
				return nil, schemaErrorf(it.Pos, "a suspending middleware takes no pre_log / post_log")
			}
		}
		if !m.hasPre && !m.hasPost && m.suspendInMw == nil {
			return nil, schemaErrorf(it.Pos, "wrap_with_middleware entry needs pre_log, post_log or pre_next_calls_suspend_with_descriptor")
		}
		out = append(out, m)
	}
	return out, nil
}

// parseResume reads an invocation's resume_invocation and signal_payload.
// A resume without signal_payload is a §10 checkpoint resume
// (IMPLEMENTERS-NOTES §6 item 7), not built.
func (p *geParser) parseResume(item *Value, inv *geInvocation, gc *geCase) error {
	rv, hasResume := item.Get("resume_invocation")
	pv, hasPayload := item.Get("signal_payload")
	switch {
	case !hasResume && !hasPayload:
		return nil
	case !hasResume:
		return schemaErrorf(pv.Pos, "signal_payload needs resume_invocation")
	case !hasPayload:
		p.need(capCheckpoint)
		return nil
	}
	raw, err := str(rv, "resume_invocation")
	if err != nil {
		return err
	}
	if pv.Kind != KindMap {
		return schemaErrorf(pv.Pos, "signal_payload must be a mapping")
	}
	if is, ok := item.Field("initial_state"); ok {
		return schemaErrorf(is.Pos, "a resume invocation takes no initial_state (the paused state is resumed)")
	}
	r := &susResume{pos: rv.Pos, raw: raw, payload: pv}
	switch {
	case fromSuspendedRe.MatchString(raw):
		r.kind, r.ref = resumeSuspended, fromSuspendedRe.FindStringSubmatch(raw)[1]
	case fromCompletedRe.MatchString(raw):
		r.kind, r.ref = resumeCompleted, fromCompletedRe.FindStringSubmatch(raw)[1]
	case placeholderRe.MatchString(raw):
		return &DirectiveUnknownError{Name: raw, Pos: rv.Pos}
	default:
		r.kind = resumeLiteral
	}
	if r.kind != resumeLiteral {
		if _, err := resumeRef(r, gc.invocations); err != nil {
			return err
		}
	}
	inv.resume = r
	return nil
}

// resumeRef returns the index of the earlier invocation a placeholder
// names: "previous" is the last one before it, "initial" the first,
// anything else an invocation name.
func resumeRef(r *susResume, earlier []*geInvocation) (int, error) {
	if len(earlier) == 0 {
		return 0, schemaErrorf(r.pos, "resume_invocation %q: no earlier invocation", r.raw)
	}
	switch r.ref {
	case "previous":
		return len(earlier) - 1, nil
	case "initial":
		return 0, nil
	}
	for i, e := range earlier {
		if e.name == r.ref {
			return i, nil
		}
	}
	return 0, schemaErrorf(r.pos, "resume_invocation %q: no earlier invocation named %q", r.raw, r.ref)
}

// parseSuspensionExpect parses one suspension expectation key of an
// expected: block.
func (p *geParser) parseSuspensionExpect(f *Field, exp *geExpect) error {
	if exp.sus == nil {
		exp.sus = &susExpect{}
	}
	e := exp.sus
	v := f.Value
	switch f.Key {
	case "suspended_state", "final_state_at_error":
		if v.Kind != KindMap {
			return schemaErrorf(v.Pos, "%s must be a mapping", f.Key)
		}
		if f.Key == "suspended_state" {
			e.suspendedState = v
		} else {
			e.finalStateAtError = v
		}
	case "descriptor":
		if err := p.checkKeys(v, "descriptor", descriptorKeys); err != nil {
			return err
		}
		if _, err := str(mustGetOr(v, "signal_id"), "descriptor.signal_id"); err != nil {
			return err
		}
		_, hasMeta := v.Get("metadata")
		inc, hasInc := v.Get("metadata_includes")
		if hasMeta && hasInc {
			return schemaErrorf(v.Pos, "descriptor: metadata and metadata_includes are exclusive")
		}
		if hasInc && inc.Kind != KindMap {
			return schemaErrorf(inc.Pos, "descriptor.metadata_includes must be a mapping")
		}
		e.descriptor = v
	case "suspending_node":
		if _, err := str(v, "suspending_node"); err != nil {
			return err
		}
		e.suspendingNode = v
	case "middleware_log_captured":
		if _, err := strList(v, "middleware_log_captured"); err != nil {
			return err
		}
		e.mwLog = v
	case "checkpointer_assertions":
		if err := p.checkKeys(v, "checkpointer_assertions", cpAssertKeys); err != nil {
			return err
		}
		if x, ok := v.Get("paused_invocation_record_exists"); ok {
			if err := boolValue(x, "paused_invocation_record_exists"); err != nil {
				return err
			}
		}
		if x, ok := v.Get("record_type"); ok {
			if _, err := str(x, "record_type"); err != nil {
				return err
			}
		}
		e.cpAssert, e.cpPos = v, f.Pos
	}
	return nil
}

// parseSuspensionCase reads the case-level checkpointer and checks the
// references between suspension directives.
func (p *geParser) parseSuspensionCase(body *Value, gc *geCase) error {
	if v, ok := body.Get("checkpointer"); ok {
		s, err := str(v, "checkpointer")
		if err != nil {
			return err
		}
		switch s {
		case "in_memory":
			gc.checkpointer = true
		case "sqlite":
			// The structural-intermediate backend of the §10.12 fixtures.
			p.need(capCheckpoint)
		default:
			return &DirectiveUnknownError{Name: s, Pos: v.Pos}
		}
	}
	for _, inv := range gc.invocations {
		if e := inv.expect.sus; e != nil && e.cpAssert != nil && !gc.checkpointer {
			return schemaErrorf(e.cpPos, "checkpointer_assertions need a checkpointer")
		}
	}
	return nil
}

// usesSuspension reports whether a case (or any mapping in it) uses a
// suspend directive or a signal_payload.
func usesSuspension(v *Value) bool {
	if v == nil {
		return false
	}
	for _, f := range v.Fields {
		switch f.Key {
		case "suspend_with_descriptor", "conditional_suspend", "signal_payload":
			return true
		}
		if usesSuspension(f.Value) {
			return true
		}
	}
	for _, it := range v.Items {
		if usesSuspension(it) {
			return true
		}
	}
	return false
}
