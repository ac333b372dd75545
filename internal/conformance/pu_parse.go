package conformance

import (
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Parsing of the pipeline-utilities directives: middleware specs
// (fixtures 001-016, 058-075), failure mocks (conformance-adapter §5.1),
// fan-out and parallel-branches nodes (§5.4) and their expectations.

var (
	traceRecordKeys   = vocab("state_in state_seen_in_post_phase partial_update_returned pre_seen post_seen")
	timingRecordKeys  = vocab("node_name duration_ms outcome exception_category")
	observerEventKeys = vocab("node_name phase post_state pre_state error_absent")
	attemptEventKeys  = vocab("attempt_index phase node_name error_category")
	fiEventKeys       = vocab("event_name wrapped_node_lineage pre_state post_state caught_exception")
	fiLineageKeys     = vocab("namespace attempt_index fan_out_index branch_name")
	caughtKeys        = vocab("category message chain")
	chainLinkKeys     = vocab("category message carrier")
)

func (p *geParser) parseClockStub(v *Value) (*clockStub, error) {
	if err := p.checkKeys(v, "clock_stub", clockStubKeys); err != nil {
		return nil, err
	}
	typ, err := str(mustGet(v, "type"), "clock_stub.type")
	if err != nil {
		return nil, err
	}
	if typ != "deterministic_monotonic" {
		return nil, &DirectiveUnknownError{Name: typ, Pos: v.Pos}
	}
	adv, ok := v.Get("advance_ms_per_call")
	if !ok {
		return nil, schemaErrorf(v.Pos, "clock_stub needs advance_ms_per_call")
	}
	d, err := millis(adv, "advance_ms_per_call")
	if err != nil {
		return nil, err
	}
	return &clockStub{step: d}, nil
}

// parseMiddlewareBlock reads {per_graph: [...], per_node: {node: [...]}}
// into g.
func (p *geParser) parseMiddlewareBlock(v *Value, g *geGraph) error {
	if err := p.checkKeys(v, "middleware", middlewareBlockKeys); err != nil {
		return err
	}
	if pg, ok := v.Get("per_graph"); ok {
		mws, err := p.parseMiddlewareList(pg)
		if err != nil {
			return err
		}
		g.perGraph = mws
	}
	if pn, ok := v.Get("per_node"); ok {
		if pn.Kind != KindMap {
			return schemaErrorf(pn.Pos, "middleware.per_node must map node names to middleware lists")
		}
		g.perNode = map[string][]*mwSpec{}
		for _, nf := range pn.Fields {
			mws, err := p.parseMiddlewareList(nf.Value)
			if err != nil {
				return err
			}
			g.perNode[nf.Key] = mws
		}
	}
	return nil
}

func (p *geParser) parseMiddlewareList(v *Value) ([]*mwSpec, error) {
	if v.Kind != KindList {
		return nil, schemaErrorf(v.Pos, "a middleware chain must be a list, got %s", v.Kind)
	}
	out := make([]*mwSpec, 0, len(v.Items))
	for _, it := range v.Items {
		m, err := p.parseMiddleware(it)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (p *geParser) parseMiddleware(v *Value) (*mwSpec, error) {
	if v.Kind != KindMap {
		return nil, schemaErrorf(v.Pos, "middleware entry must be a mapping, got %s", v.Kind)
	}
	tv, ok := v.Get("type")
	if !ok && len(v.Fields) == 1 && v.Fields[0].Value.Kind == KindMap {
		// The shorthand {<type>: {<config>}} (pipeline-utilities 053).
		if _, known := middlewareKeys[v.Fields[0].Key]; known {
			f := v.Fields[0]
			cfg := &Value{Kind: KindMap, Pos: f.Value.Pos, Fields: append([]*Field{{Key: "type", Pos: f.Pos,
				Value: &Value{Kind: KindString, Str: f.Key, Pos: f.Pos}}}, f.Value.Fields...)}
			return p.parseMiddleware(cfg)
		}
	}
	if !ok {
		return nil, schemaErrorf(v.Pos, "middleware entry has no type:")
	}
	typ, err := str(tv, "middleware type")
	if err != nil {
		return nil, err
	}
	keys, known := middlewareKeys[typ]
	if !known {
		return nil, &DirectiveUnknownError{Name: typ, Pos: tv.Pos}
	}
	if err := p.checkKeys(v, typ+" middleware", keys); err != nil {
		return nil, err
	}
	m := &mwSpec{typ: typ, pos: v.Pos}
	if n, ok := v.Get("name"); ok {
		if m.name, err = str(n, "middleware name"); err != nil {
			return nil, err
		}
	}
	optStr := func(key string) (string, error) {
		x, ok := v.Get(key)
		if !ok {
			return "", nil
		}
		return str(x, typ+"."+key)
	}
	switch typ {
	case "trace_recorder":
		if m.preMarker, err = optStr("pre_marker"); err != nil {
			return nil, err
		}
		if m.postMarker, err = optStr("post_marker"); err != nil {
			return nil, err
		}
		_, hasPre := v.Get("pre_marker")
		_, hasPost := v.Get("post_marker")
		m.hasMarkers = hasPre || hasPost
	case "short_circuit", "error_recovery":
		pu, ok := v.Get("partial_update")
		if !ok || pu.Kind != KindMap {
			return nil, schemaErrorf(v.Pos, "%s needs a partial_update mapping", typ)
		}
		m.partial = pu
	case "error_raiser":
		if m.message, err = optStr("message"); err != nil {
			return nil, err
		}
	case "retry":
		m.maxAttempts = 3
		if ma, ok := v.Get("max_attempts"); ok {
			if ma.Kind != KindInt || ma.Int < 1 || ma.Int > 100 {
				return nil, schemaErrorf(ma.Pos, "retry.max_attempts must be an integer between 1 and 100")
			}
			m.maxAttempts = int(ma.Int)
		}
		if bo, ok := v.Get("backoff"); ok {
			if err := p.checkKeys(bo, "retry.backoff", backoffKeys); err != nil {
				return nil, err
			}
			bt, err := str(mustGet(bo, "type"), "retry.backoff.type")
			if err != nil {
				return nil, err
			}
			if bt != "deterministic" {
				return nil, &DirectiveUnknownError{Name: bt, Pos: bo.Pos}
			}
			if sv, ok := bo.Get("seconds"); ok {
				d, has, err := seconds(sv, "retry.backoff.seconds")
				if err != nil {
					return nil, err
				}
				if has {
					m.backoff = d
				}
			}
		}
		if cl, ok := v.Get("classifier"); ok {
			if err := p.checkKeys(cl, "retry.classifier", classifierKeys); err != nil {
				return nil, err
			}
			if tc, ok := cl.Get("transient_categories"); ok {
				// Retry exactly the failures of the listed categories.
				if _, has := cl.Get("type"); has {
					return nil, schemaErrorf(cl.Pos, "retry.classifier: type and transient_categories are exclusive")
				}
				if m.transientCats, err = strList(tc, "retry.classifier.transient_categories"); err != nil {
					return nil, err
				}
			} else {
				ct, err := str(mustGet(cl, "type"), "retry.classifier.type")
				if err != nil {
					return nil, err
				}
				if ct != "state_aware_max_retries_remaining" {
					return nil, &DirectiveUnknownError{Name: ct, Pos: cl.Pos}
				}
				m.classifier = ct
			}
		}
	case "timing":
		if m.nodeName, err = optStr("node_name"); err != nil {
			return nil, err
		}
		oc, ok := v.Get("on_complete")
		if !ok {
			return nil, schemaErrorf(v.Pos, "timing needs on_complete")
		}
		if err := p.checkKeys(oc, "timing.on_complete", onCompleteKeys); err != nil {
			return nil, err
		}
		if m.captureTo, err = str(mustGet(oc, "capture_to"), "on_complete.capture_to"); err != nil {
			return nil, err
		}
		if m.captureTo != "timing_records" {
			return nil, &DirectiveUnknownError{Name: m.captureTo, Pos: oc.Pos}
		}
	case "failure_isolation":
		if err := p.parseFailureIsolation(v, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (p *geParser) parseFailureIsolation(v *Value, m *mwSpec) error {
	var err error
	if m.eventName, err = str(mustGet(v, "event_name"), "failure_isolation.event_name"); err != nil {
		return err
	}
	du, ok := v.Get("degraded_update")
	if !ok || du.Kind != KindMap {
		return schemaErrorf(v.Pos, "failure_isolation needs a degraded_update mapping")
	}
	if _, callable := du.Get("callable"); callable {
		if err := p.checkKeys(du, "degraded_update", degradedFuncKeys); err != nil {
			return err
		}
		c, err := str(mustGet(du, "callable"), "degraded_update.callable")
		if err != nil {
			return err
		}
		if c != "state_derived" {
			return &DirectiveUnknownError{Name: c, Pos: du.Pos}
		}
		if m.degradedTmpl, err = str(mustGet(du, "template"), "degraded_update.template"); err != nil {
			return err
		}
		if m.degradedTarget, err = str(mustGet(du, "target_field"), "degraded_update.target_field"); err != nil {
			return err
		}
	} else {
		m.degraded = du
	}
	if pv, ok := v.Get("predicate"); ok {
		if err := p.checkKeys(pv, "failure_isolation.predicate", predicateKeys); err != nil {
			return err
		}
		if m.predicateCat, err = str(mustGet(pv, "matches_category"), "predicate.matches_category"); err != nil {
			return err
		}
		m.hasPredicate = true
	}
	if cv, ok := v.Get("catch"); ok {
		if m.catch, err = strList(cv, "failure_isolation.catch"); err != nil {
			return err
		}
	}
	if oc, ok := v.Get("on_caught"); ok {
		if err := p.checkKeys(oc, "failure_isolation.on_caught", onCaughtKeys); err != nil {
			return err
		}
		kind, err := str(mustGet(oc, "kind"), "on_caught.kind")
		if err != nil {
			return err
		}
		if kind != "record_to_state_side_channel" {
			return &DirectiveUnknownError{Name: kind, Pos: oc.Pos}
		}
		spec := &onCaughtSpec{}
		if spec.incrementField, err = str(mustGet(oc, "increment_field"), "on_caught.increment_field"); err != nil {
			return err
		}
		if spec.messageField, err = str(mustGet(oc, "capture_message_field"), "on_caught.capture_message_field"); err != nil {
			return err
		}
		m.onCaught = spec
	}
	return nil
}

// parseFlaky parses the flaky / flaky_by_index / flaky_instance_only
// failure mocks (conformance-adapter §5.1).
func (p *geParser) parseFlaky(kind string, v *Value) (*flakySpec, error) {
	fs := &flakySpec{kind: kind}
	var err error
	switch kind {
	case "flaky":
		if err := p.checkKeys(v, kind, flakyKeys); err != nil {
			return nil, err
		}
		if seq, ok := v.Get("failure_sequence"); ok {
			if seq.Kind != KindList {
				return nil, schemaErrorf(seq.Pos, "failure_sequence must be a list")
			}
			for _, it := range seq.Items {
				if it.IsNull() {
					fs.seq = append(fs.seq, nil)
					continue
				}
				fe, err := p.parseFailEntry(it, failureEntryKeys, 0)
				if err != nil {
					return nil, err
				}
				fs.seq = append(fs.seq, fe)
			}
			fs.success, _ = v.Get("success_update")
		} else {
			fo, ok := v.Get("fail_first_invocation_only")
			if !ok || fo.Kind != KindBool {
				return nil, schemaErrorf(v.Pos, "flaky needs failure_sequence or fail_first_invocation_only")
			}
			fs.compact, fs.firstInvocationOnly = true, fo.Bool
			fs.success, _ = v.Get("on_success")
		}
	case "flaky_by_index":
		if err := p.checkKeys(v, kind, flakyByIndexKeys); err != nil {
			return nil, err
		}
		fw, hasWhen := v.Get("fail_when_idx")
		fc, hasCount := v.Get("fail_count_per_idx")
		switch {
		case hasWhen == hasCount:
			return nil, schemaErrorf(v.Pos, "flaky_by_index needs exactly one of fail_when_idx and fail_count_per_idx")
		case hasWhen:
			if fw.Kind != KindInt {
				return nil, schemaErrorf(fw.Pos, "fail_when_idx must be an integer")
			}
			idx := fw.Int
			fs.failWhenIdx = &idx
		default:
			if fc.Kind != KindInt || fc.Int < 0 || fc.Int > 100 {
				return nil, schemaErrorf(fc.Pos, "fail_count_per_idx must be an integer between 0 and 100")
			}
			fs.failCount = int(fc.Int)
		}
		fs.success, _ = v.Get("success_compute")
	case "flaky_per_index":
		if err := p.checkKeys(v, kind, flakyPerIndexKeys); err != nil {
			return nil, err
		}
		ff, hasFirst := v.Get("fail_first_run_indices")
		fa, hasAlways := v.Get("always_fail_indices")
		if hasFirst == hasAlways {
			return nil, schemaErrorf(v.Pos, "flaky_per_index needs exactly one of fail_first_run_indices and always_fail_indices")
		}
		list := ff
		if hasAlways {
			list, fs.alwaysFail = fa, true
		}
		if list.Kind != KindList {
			return nil, schemaErrorf(list.Pos, "flaky_per_index indices must be a list of integers")
		}
		for _, it := range list.Items {
			if it.Kind != KindInt {
				return nil, schemaErrorf(it.Pos, "flaky_per_index indices must be integers")
			}
			fs.perIndex = append(fs.perIndex, it.Int)
		}
		fs.success, _ = v.Get("success_compute")
	case "flaky_resume_aware":
		if err := p.checkKeys(v, kind, flakyResumeKeys); err != nil {
			return nil, err
		}
		for key, dst := range map[string]*int{"fail_first_invocation_count": &fs.failCount, "fail_resumed_invocation_count": &fs.resumedCount} {
			c, ok := v.Get(key)
			if !ok || c.Kind != KindInt || c.Int < 0 || c.Int > 100 {
				return nil, schemaErrorf(v.Pos, "flaky_resume_aware.%s must be an integer between 0 and 100", key)
			}
			*dst = int(c.Int)
		}
		fs.success, _ = v.Get("on_success")
	case "flaky_instance_only":
		if err := p.checkKeys(v, kind, flakyInstanceKeys); err != nil {
			return nil, err
		}
		fc, ok := v.Get("fail_count_per_instance")
		if !ok || fc.Kind != KindInt || fc.Int < 0 || fc.Int > 100 {
			return nil, schemaErrorf(v.Pos, "fail_count_per_instance must be an integer between 0 and 100")
		}
		fs.failCount = int(fc.Int)
		fs.success, _ = v.Get("success_compute")
	}
	if c, ok := v.Get("category"); ok && !c.IsNull() {
		if fs.category, err = str(c, kind+".category"); err != nil {
			return nil, err
		}
	}
	if fs.success != nil && !fs.success.IsNull() && fs.success.Kind != KindMap {
		return nil, schemaErrorf(fs.success.Pos, "%s success update must be a mapping", kind)
	}
	return fs, nil
}

// parseFailEntry parses a failure_sequence entry or a cause: link.
func (p *geParser) parseFailEntry(v *Value, keys keySet, depth int) (*failEntry, error) {
	if depth > 32 {
		return nil, schemaErrorf(v.Pos, "cause chain too deep")
	}
	if err := p.checkKeys(v, "failure", keys); err != nil {
		return nil, err
	}
	fe := &failEntry{}
	var err error
	if t, ok := v.Get("transient"); ok {
		if t.Kind != KindBool {
			return nil, schemaErrorf(t.Pos, "transient must be a bool")
		}
		fe.transient = t.Bool
	}
	if c, ok := v.Get("category"); ok && !c.IsNull() {
		if fe.category, err = str(c, "category"); err != nil {
			return nil, err
		}
	}
	if m, ok := v.Get("message"); ok && !m.IsNull() {
		if fe.message, err = str(m, "message"); err != nil {
			return nil, err
		}
	}
	if c, ok := v.Get("cause"); ok && !c.IsNull() {
		if fe.cause, err = p.parseFailEntry(c, causeKeys, depth+1); err != nil {
			return nil, err
		}
	}
	return fe, nil
}

func (p *geParser) parseFanOut(v *Value) (*geFanOut, error) {
	if err := p.checkKeys(v, "fan_out", fanOutKeys); err != nil {
		return nil, err
	}
	fo := &geFanOut{pos: v.Pos}
	var err error
	strField := func(key string, dst *string) error {
		x, ok := v.Get(key)
		if !ok {
			return nil
		}
		s, err := str(x, "fan_out."+key)
		*dst = s
		return err
	}
	for key, dst := range map[string]*string{
		"subgraph": &fo.sub, "items_field": &fo.itemsField, "item_field": &fo.itemField,
		"collect_field": &fo.collect, "target_field": &fo.target, "error_policy": &fo.errorPolicy,
		"errors_field": &fo.errorsField, "concurrent_mode": &fo.concurrentMode, "on_empty": &fo.onEmpty,
		"count_field": &fo.countField,
	} {
		if err := strField(key, dst); err != nil {
			return nil, err
		}
	}
	if fo.sub == "" {
		return nil, schemaErrorf(v.Pos, "fan_out needs a subgraph")
	}
	for key, allowed := range map[string][]string{
		"error_policy": {"", "fail_fast", "collect"}, "on_empty": {"", "raise", "noop"},
		"concurrent_mode": {"", "serial", "concurrent"},
	} {
		val := map[string]string{"error_policy": fo.errorPolicy, "on_empty": fo.onEmpty, "concurrent_mode": fo.concurrentMode}[key]
		if !slices.Contains(allowed, val) {
			x, _ := v.Get(key)
			return nil, &DirectiveUnknownError{Name: val, Pos: x.Pos}
		}
	}
	if c, ok := v.Get("count"); ok {
		if fo.count, err = p.parseIntSource(c, "count"); err != nil {
			return nil, err
		}
		if fo.count.null {
			return nil, schemaErrorf(c.Pos, "fan_out.count cannot be null")
		}
	}
	if c, ok := v.Get("concurrency"); ok {
		if fo.concurrency, err = p.parseIntSource(c, "concurrency"); err != nil {
			return nil, err
		}
	}
	for key, dst := range map[string]*map[string]string{"inputs": &fo.inputs, "extra_outputs": &fo.extraOutputs} {
		if m, ok := v.Get(key); ok {
			if *dst, err = stringMap(m, "fan_out."+key); err != nil {
				return nil, err
			}
		}
	}
	if m, ok := v.Get("mapping"); ok {
		if err := p.fanOutMapping(m, fo); err != nil {
			return nil, err
		}
	}
	if a, ok := v.Get("abort_after_instance"); ok {
		if a.Kind != KindInt || a.Int < 0 {
			return nil, schemaErrorf(a.Pos, "abort_after_instance must be a non-negative integer")
		}
		idx := int(a.Int)
		fo.abortAfter = &idx
	}
	if im, ok := v.Get("instance_middleware"); ok {
		if fo.instanceMws, err = p.parseMiddlewareList(im); err != nil {
			return nil, err
		}
	}
	// Fixture mismatch absorption: suspension 007 declares an items-mode
	// fan-out with target_field but no collect_field, which §9 requires
	// (the engine rejects it at compile time); the fixture exercises a
	// run-time rejection, so the item field is used as the collect field
	// (the item is the instance's result, of the target list's element
	// type).
	if fo.collect == "" && fo.target != "" && fo.itemField != "" {
		if _, mapped := v.Get("mapping"); !mapped {
			fo.collect = fo.itemField
		}
	}
	return fo, nil
}

// fanOutItemPlaceholder is the mapping input value that names the
// instance's item (sessions 011).
const fanOutItemPlaceholder = "<fan_out_item>"

// fanOutMapping maps a fan_out mapping{inputs, outputs} block (sessions
// 011) onto the pipeline-utilities form: the input fed from
// <fan_out_item> is the item_field, the other inputs are inputs
// (subgraph field: parent field); the first output (parent field:
// subgraph field) is target_field / collect_field, the rest
// extra_outputs.
func (p *geParser) fanOutMapping(m *Value, fo *geFanOut) error {
	if err := p.checkKeys(m, "fan_out.mapping", mappingKeys); err != nil {
		return err
	}
	if in, ok := m.Get("inputs"); ok {
		if _, err := stringMap(in, "fan_out.mapping.inputs"); err != nil {
			return err
		}
		for _, f := range in.Fields {
			src := f.Value.Str
			switch {
			case src == fanOutItemPlaceholder:
				if fo.itemField != "" {
					return schemaErrorf(f.Pos, "fan_out: the item field is given twice (item_field and mapping)")
				}
				fo.itemField = f.Key
			case strings.HasPrefix(src, "<") && strings.HasSuffix(src, ">"):
				return &DirectiveUnknownError{Name: src, Pos: f.Value.Pos}
			default:
				if _, dup := fo.inputs[f.Key]; dup {
					return schemaErrorf(f.Pos, "fan_out: input %s given twice", f.Key)
				}
				if fo.inputs == nil {
					fo.inputs = map[string]string{}
				}
				fo.inputs[f.Key] = src
			}
		}
	}
	if out, ok := m.Get("outputs"); ok {
		if _, err := stringMap(out, "fan_out.mapping.outputs"); err != nil {
			return err
		}
		for _, f := range out.Fields {
			if fo.target == "" && fo.collect == "" {
				fo.target, fo.collect = f.Key, f.Value.Str
				continue
			}
			if f.Key == fo.target {
				return schemaErrorf(f.Pos, "fan_out: output %s given twice", f.Key)
			}
			if _, dup := fo.extraOutputs[f.Key]; dup {
				return schemaErrorf(f.Pos, "fan_out: output %s given twice", f.Key)
			}
			if fo.extraOutputs == nil {
				fo.extraOutputs = map[string]string{}
			}
			fo.extraOutputs[f.Key] = f.Value.Str
		}
	}
	return nil
}

// parseIntSource parses a fan-out count / concurrency: an int, null, or
// {callable: state_field_read, field} / {callable: queue_chunk, field,
// chunk_size} (pipeline-utilities 022).
func (p *geParser) parseIntSource(v *Value, what string) (*intSource, error) {
	src := &intSource{pos: v.Pos}
	switch v.Kind {
	case KindNull:
		src.null = true
		return src, nil
	case KindInt:
		if v.Int < math.MinInt32 || v.Int > math.MaxInt32 {
			return nil, schemaErrorf(v.Pos, "%s out of range", what)
		}
		src.literal = int(v.Int)
		return src, nil
	case KindMap:
	default:
		return nil, schemaErrorf(v.Pos, "%s must be an integer, null or a callable mapping", what)
	}
	if err := p.checkKeys(v, what, intSourceKeys); err != nil {
		return nil, err
	}
	var err error
	if src.callable, err = str(mustGet(v, "callable"), what+".callable"); err != nil {
		return nil, err
	}
	if src.field, err = str(mustGet(v, "field"), what+".field"); err != nil {
		return nil, err
	}
	switch src.callable {
	case "state_field_read":
		if _, ok := v.Get("chunk_size"); ok {
			return nil, schemaErrorf(v.Pos, "state_field_read takes no chunk_size")
		}
	case "queue_chunk":
		cs, ok := v.Get("chunk_size")
		if !ok || cs.Kind != KindInt || cs.Int < 1 || cs.Int > math.MaxInt32 {
			return nil, schemaErrorf(v.Pos, "queue_chunk needs a positive chunk_size")
		}
		src.chunk = int(cs.Int)
	default:
		return nil, &DirectiveUnknownError{Name: src.callable, Pos: v.Pos}
	}
	return src, nil
}

func stringMap(v *Value, what string) (map[string]string, error) {
	if v.Kind != KindMap {
		return nil, schemaErrorf(v.Pos, "%s must be a mapping of field names", what)
	}
	out := make(map[string]string, len(v.Fields))
	for _, f := range v.Fields {
		s, err := str(f.Value, what+" entry")
		if err != nil {
			return nil, err
		}
		out[f.Key] = s
	}
	return out, nil
}

func (p *geParser) parseBranches(v *Value) (*geBranches, error) {
	if err := p.checkKeys(v, "parallel_branches", branchesKeys); err != nil {
		return nil, err
	}
	pb := &geBranches{pos: v.Pos}
	var err error
	if ep, ok := v.Get("error_policy"); ok {
		if pb.errorPolicy, err = str(ep, "error_policy"); err != nil {
			return nil, err
		}
		if pb.errorPolicy != "fail_fast" && pb.errorPolicy != "collect" {
			return nil, &DirectiveUnknownError{Name: pb.errorPolicy, Pos: ep.Pos}
		}
	}
	if ef, ok := v.Get("errors_field"); ok {
		if pb.errorsField, err = str(ef, "errors_field"); err != nil {
			return nil, err
		}
	}
	bv, ok := v.Get("branches")
	if !ok || bv.Kind != KindMap {
		return nil, schemaErrorf(v.Pos, "parallel_branches needs a branches mapping")
	}
	for _, bf := range bv.Fields {
		if err := p.checkKeys(bf.Value, "branch "+bf.Key, branchKeys); err != nil {
			return nil, err
		}
		b := &geBranch{name: bf.Key, pos: bf.Pos}
		if sv, ok := bf.Value.Get("subgraph"); ok {
			if b.sub, err = str(sv, "branch subgraph"); err != nil {
				return nil, err
			}
		}
		for key, dst := range map[string]*map[string]string{"inputs": &b.inputs, "outputs": &b.outputs} {
			if m, ok := bf.Value.Get(key); ok {
				if *dst, err = stringMap(m, "branch "+key); err != nil {
					return nil, err
				}
			}
		}
		if cv, ok := bf.Value.Get("call"); ok {
			// The inline callable is a node body over the parent state,
			// named after the branch.
			call, err := p.parseNode(&Field{Key: bf.Key, Pos: bf.Pos, Value: cv})
			if err != nil {
				return nil, err
			}
			if call.composite() || len(call.mws) > 0 {
				return nil, schemaErrorf(cv.Pos, "branch %s: call: takes node behavior directives only", bf.Key)
			}
			b.call = call
		}
		if mv, ok := bf.Value.Get("middleware"); ok {
			if b.mws, err = p.parseMiddlewareList(mv); err != nil {
				return nil, err
			}
		}
		if wv, ok := bf.Value.Get("when"); ok {
			if err := p.checkKeys(wv, "when", whenKeys); err != nil {
				return nil, err
			}
			if b.whenField, err = str(mustGet(wv, "field"), "when.field"); err != nil {
				return nil, err
			}
		}
		pb.branches = append(pb.branches, b)
	}
	return pb, nil
}

// checkFIEvent validates an expected_failure_isolation_event block.
func (p *geParser) checkFIEvent(v *Value) error {
	if err := p.checkKeys(v, "expected_failure_isolation_event", fiEventKeys); err != nil {
		return err
	}
	if l, ok := v.Get("wrapped_node_lineage"); ok {
		if err := p.checkKeys(l, "wrapped_node_lineage", fiLineageKeys); err != nil {
			return err
		}
	}
	if c, ok := v.Get("caught_exception"); ok {
		if err := p.checkKeys(c, "caught_exception", caughtKeys); err != nil {
			return err
		}
		if ch, ok := c.Get("chain"); ok {
			if ch.Kind != KindList {
				return schemaErrorf(ch.Pos, "caught_exception.chain must be a list")
			}
			for _, l := range ch.Items {
				if err := p.checkKeys(l, "chain link", chainLinkKeys); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// clockNow returns the stub's reading function: every call advances the
// clock by one step.
func (c *clockStub) clockNow() func() time.Time {
	var mu sync.Mutex
	base := time.Unix(0, 0)
	n := 0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		n++
		return base.Add(time.Duration(n) * c.step)
	}
}
