package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/otelobserver"
)

// OpenTelemetry capture (observability §4–§7): observers with behavior
// otel are real otelobserver.Observers on a private TracerProvider with
// an in-memory exporter; a case asserting span_tree gets an implicit one
// on the outermost graph. Node emits_log directives log through
// slog.InfoContext-style calls on a logger built with
// otelobserver.LogHandler over a capturing handler.

// implicitOTel names the implicit capture of span_tree cases.
const implicitOTel = "<span_tree>"

// otelCapture is one OTel observer with its private provider.
type otelCapture struct {
	exp *tracetest.InMemoryExporter
	tp  *sdktrace.TracerProvider
	obs *otelobserver.Observer
	// cfg is obs's configuration: suites adjust it (configure) before a
	// graph attaches the observer.
	cfg   otelobserver.Config
	order *startOrder
}

func newOTelCapture() (*otelCapture, error) {
	exp := tracetest.NewInMemoryExporter()
	order := &startOrder{seq: map[trace.SpanID]int{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(order), sdktrace.WithSyncer(exp))
	obs, err := otelobserver.New(otelobserver.Config{TracerProvider: tp})
	if err != nil {
		return nil, err
	}
	return &otelCapture{exp: exp, tp: tp, obs: obs, order: order}, nil
}

// startOrder records the order spans were started, so children are
// compared in start order even when timestamps tie.
type startOrder struct {
	mu  sync.Mutex
	seq map[trace.SpanID]int
}

func (s *startOrder) OnStart(_ context.Context, sp sdktrace.ReadWriteSpan) {
	s.mu.Lock()
	s.seq[sp.SpanContext().SpanID()] = len(s.seq)
	s.mu.Unlock()
}
func (s *startOrder) OnEnd(sdktrace.ReadOnlySpan)      {}
func (s *startOrder) Shutdown(context.Context) error   { return nil }
func (s *startOrder) ForceFlush(context.Context) error { return nil }

func (s *startOrder) of(id trace.SpanID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq[id]
}

// logRec is one captured log record.
type logRec struct {
	Message string
	Level   slog.Level
	Attrs   map[string]any
}

// logCapture is the slog.Handler under LogHandler.
type logCapture struct {
	mu    *sync.Mutex
	recs  *[]*logRec
	attrs []slog.Attr
}

func newLogCapture() *logCapture {
	return &logCapture{mu: &sync.Mutex{}, recs: &[]*logRec{}}
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := &logRec{Message: r.Message, Level: r.Level, Attrs: map[string]any{}}
	for _, a := range c.attrs {
		rec.Attrs[a.Key] = a.Value.Resolve().Any()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Resolve().Any()
		return true
	})
	c.mu.Lock()
	*c.recs = append(*c.recs, rec)
	c.mu.Unlock()
	return nil
}

func (c *logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	return &logCapture{mu: c.mu, recs: c.recs, attrs: append(slices.Clip(c.attrs), as...)}
}

func (c *logCapture) WithGroup(string) slog.Handler { return c }

func (c *logCapture) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(*c.recs)
}

func (c *logCapture) slice(from, to int) []*logRec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone((*c.recs)[from:to])
}

// otelState is an execution's OTel and log capture.
type otelState struct {
	captures map[string]*otelCapture
	logs     *logCapture
	logger   *slog.Logger
}

func newOTelState() *otelState {
	lc := newLogCapture()
	return &otelState{
		captures: map[string]*otelCapture{},
		logs:     lc,
		logger:   slog.New(otelobserver.LogHandler(lc)),
	}
}

func (s *otelState) shutdown() {
	for _, c := range s.captures {
		_ = c.tp.Shutdown(context.Background())
	}
}

// otelMark is a position in every capture, taken before a run.
type otelMark struct {
	spans map[string]int
	logs  int
}

func (s *otelState) mark() otelMark {
	m := otelMark{spans: map[string]int{}, logs: s.logs.count()}
	for name, c := range s.captures {
		m.spans[name] = len(c.exp.GetSpans())
	}
	return m
}

// otelRun is what one run emitted: the spans of each capture and the log
// records.
type otelRun struct {
	spans map[string]tracetest.SpanStubs
	order map[string]*startOrder
	logs  []*logRec
}

func (s *otelState) since(m otelMark) *otelRun {
	r := &otelRun{spans: map[string]tracetest.SpanStubs{}, order: map[string]*startOrder{}}
	for name, c := range s.captures {
		all := c.exp.GetSpans()
		r.spans[name] = all[m.spans[name]:]
		r.order[name] = c.order
	}
	r.logs = s.logs.slice(m.logs, s.logs.count())
	return r
}

// spanNode is a span with its children in start order.
type spanNode struct {
	span     tracetest.SpanStub
	children []*spanNode
}

// forest builds the span trees of one capture, roots in start order.
func (r *otelRun) forest(capture string) []*spanNode {
	spans := r.spans[capture]
	order := r.order[capture]
	nodes := map[trace.SpanID]*spanNode{}
	for _, s := range spans {
		nodes[s.SpanContext.SpanID()] = &spanNode{span: s}
	}
	var roots []*spanNode
	for _, s := range spans {
		n := nodes[s.SpanContext.SpanID()]
		if p, ok := nodes[s.Parent.SpanID()]; ok && s.Parent.IsValid() {
			p.children = append(p.children, n)
		} else {
			roots = append(roots, n)
		}
	}
	var sortRec func(ns []*spanNode)
	sortRec = func(ns []*spanNode) {
		sort.SliceStable(ns, func(i, j int) bool {
			return order.of(ns[i].span.SpanContext.SpanID()) < order.of(ns[j].span.SpanContext.SpanID())
		})
		for _, n := range ns {
			sortRec(n.children)
		}
	}
	sortRec(roots)
	return roots
}

// allSpans returns every span of every capture of the run.
func (r *otelRun) allSpans() []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, name := range sortedKeys(r.spans) {
		out = append(out, r.spans[name]...)
	}
	return out
}

func spanAttrs(s tracetest.SpanStub) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = attrNative(kv.Value)
	}
	return m
}

func attrNative(v attribute.Value) any {
	switch v.Type() {
	case attribute.STRINGSLICE:
		return stringsToAny(v.AsStringSlice())
	case attribute.INT64SLICE:
		var out []any
		for _, x := range v.AsInt64Slice() {
			out = append(out, x)
		}
		return out
	case attribute.BOOLSLICE:
		var out []any
		for _, x := range v.AsBoolSlice() {
			out = append(out, x)
		}
		return out
	case attribute.FLOAT64SLICE:
		var out []any
		for _, x := range v.AsFloat64Slice() {
			out = append(out, x)
		}
		return out
	}
	return v.AsInterface()
}

func statusName(c codes.Code) string {
	switch c {
	case codes.Ok:
		return "OK"
	case codes.Error:
		return "ERROR"
	}
	return "UNSET"
}

// --- parsing ---------------------------------------------------------------

var (
	spanNodeKeys  = vocab("name status status_description exception_recorded attributes attributes_absent children links link_count")
	logRecordKeys = vocab("body level attributes attributes_absent")
)

func (p *geParser) parseSpanNode(v *Value, what string) error {
	if err := p.checkKeys(v, what, spanNodeKeys); err != nil {
		return err
	}
	if _, ok := v.Get("name"); !ok {
		return schemaErrorf(v.Pos, "%s needs a name", what)
	}
	if s, ok := v.Get("status"); ok {
		switch s.Str {
		case "OK", "ERROR", "UNSET":
		default:
			return &DirectiveUnknownError{Name: s.Str, Pos: s.Pos}
		}
	}
	if a, ok := v.Get("attributes"); ok && a.Kind != KindMap {
		return schemaErrorf(a.Pos, "%s.attributes must be a mapping", what)
	}
	if a, ok := v.Get("attributes_absent"); ok {
		if _, err := strList(a, what+".attributes_absent"); err != nil {
			return err
		}
	}
	if d, ok := v.Get("status_description"); ok {
		if _, err := str(d, what+".status_description"); err != nil {
			return err
		}
	}
	if x, ok := v.Get("exception_recorded"); ok && x.Kind != KindBool {
		return schemaErrorf(x.Pos, "%s.exception_recorded must be a bool", what)
	}
	if err := p.checkLinkKeys(v, what); err != nil {
		return err
	}
	if c, ok := v.Get("children"); ok {
		return p.parseSpanList(c, what+".children")
	}
	return nil
}

func (p *geParser) parseSpanList(v *Value, what string) error {
	if v.Kind != KindList {
		return schemaErrorf(v.Pos, "%s must be a list", what)
	}
	for i, it := range v.Items {
		if err := p.parseSpanNode(it, fmt.Sprintf("%s[%d]", what, i)); err != nil {
			return err
		}
	}
	return nil
}

// parseOTelExpect parses span_tree, otel_spans and log_records.
func (p *geParser) parseOTelExpect(f *Field, exp *geExpect, gc *geCase) error {
	v := f.Value
	switch f.Key {
	case "span_tree":
		if err := p.parseSpanList(v, "span_tree"); err != nil {
			return err
		}
		exp.spanTree = v
		gc.implicitOTel = true
	case "otel_spans":
		if v.Kind != KindMap {
			return schemaErrorf(v.Pos, "otel_spans must map otel observer names to span trees")
		}
		for _, of := range v.Fields {
			var err error
			if of.Value.Kind == KindList {
				err = p.parseSpanList(of.Value, "otel_spans."+of.Key)
			} else {
				err = p.parseSpanNode(of.Value, "otel_spans."+of.Key)
			}
			if err != nil {
				return err
			}
		}
		exp.otelSpans = v.Fields
	case "log_records":
		if v.Kind != KindList {
			return schemaErrorf(v.Pos, "log_records must be a list")
		}
		for _, it := range v.Items {
			if err := p.checkKeys(it, "log record", logRecordKeys); err != nil {
				return err
			}
			if a, ok := it.Get("attributes"); ok && a.Kind != KindMap {
				return schemaErrorf(a.Pos, "log record attributes must be a mapping")
			}
			if a, ok := it.Get("attributes_absent"); ok {
				if _, err := strList(a, "log record attributes_absent"); err != nil {
					return err
				}
			}
		}
		exp.logRecords = v
	}
	return nil
}

// parseEmitsLog parses emits_log{message, level}.
func (p *geParser) parseEmitsLog(d *Field) (*geStep, error) {
	if err := p.checkKeys(d.Value, "emits_log", emitsLogKeys); err != nil {
		return nil, err
	}
	st := &geStep{kind: stepLog, pos: d.Pos, level: slog.LevelInfo}
	m, ok := d.Value.Get("message")
	if !ok {
		return nil, schemaErrorf(d.Value.Pos, "emits_log needs a message")
	}
	var err error
	if st.message, err = str(m, "emits_log.message"); err != nil {
		return nil, err
	}
	if l, ok := d.Value.Get("level"); ok {
		s, err := str(l, "emits_log.level")
		if err != nil {
			return nil, err
		}
		if err := st.level.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
			return nil, &DirectiveUnknownError{Name: s, Pos: l.Pos}
		}
	}
	return st, nil
}

var emitsLogKeys = vocab("message level")

// --- assertions ------------------------------------------------------------

func (x *geExec) assertOTel(m *matcher, e *geExpect, run *invocationRun) error {
	var errs []error
	if e.spanTree != nil {
		errs = append(errs, matchSpanList(m, "span_tree", e.spanTree, run.otel.forest(implicitOTel)))
	}
	for _, f := range e.otelSpans {
		path := "otel_spans." + f.Key
		if _, ok := x.otel.captures[f.Key]; !ok {
			errs = append(errs, fmt.Errorf("%s: no observer %s with behavior otel", path, f.Key))
			continue
		}
		roots := run.otel.forest(f.Key)
		if f.Value.Kind == KindList {
			errs = append(errs, matchSpanList(m, path, f.Value, roots))
			continue
		}
		if len(roots) != 1 {
			errs = append(errs, fmt.Errorf("%s: want one root span, got %d (%s)", path, len(roots), spanNames(roots)))
			continue
		}
		errs = append(errs, matchSpan(m, path, f.Value, roots[0]))
	}
	if e.logRecords != nil {
		errs = append(errs, matchLogs(m, e.logRecords, run.otel.logs))
	}
	return joinErrs(errs)
}

func joinErrs(errs []error) error {
	var out []string
	for _, err := range errs {
		if err != nil {
			out = append(out, err.Error())
		}
	}
	if len(out) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(out, "\n"))
}

func spanNames(ns []*spanNode) string {
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.span.Name
	}
	return "[" + strings.Join(names, ", ") + "]"
}

func matchSpanList(m *matcher, path string, want *Value, got []*spanNode) error {
	if len(want.Items) != len(got) {
		return fmt.Errorf("%s: want %d spans, got %d %s", path, len(want.Items), len(got), spanNames(got))
	}
	for i, w := range want.Items {
		if err := matchSpan(m, fmt.Sprintf("%s[%d]", path, i), w, got[i]); err != nil {
			return err
		}
	}
	return nil
}

func matchSpan(m *matcher, path string, want *Value, got *spanNode) error {
	name := mustGet(want, "name").Str
	if got.span.Name != name {
		return fmt.Errorf("%s.name: want %q, got %q", path, name, got.span.Name)
	}
	path = fmt.Sprintf("%s(%s)", path, name)
	if s, ok := want.Get("status"); ok {
		if g := statusName(got.span.Status.Code); g != s.Str {
			return fmt.Errorf("%s.status: want %s, got %s %q", path, s.Str, g, got.span.Status.Description)
		}
	}
	if d, ok := want.Get("status_description"); ok && got.span.Status.Description != d.Str {
		return fmt.Errorf("%s.status_description: want %q, got %q", path, d.Str, got.span.Status.Description)
	}
	if x, ok := want.Get("exception_recorded"); ok {
		recorded := slices.ContainsFunc(got.span.Events, func(e sdktrace.Event) bool { return e.Name == "exception" })
		if recorded != x.Bool {
			return fmt.Errorf("%s.exception_recorded: want %t, got %t", path, x.Bool, recorded)
		}
	}
	attrs := spanAttrs(got.span)
	if a, ok := want.Get("attributes"); ok {
		if err := m.match(path+".attributes", a.Native(), attrs, subsetTop); err != nil {
			return err
		}
	}
	if a, ok := want.Get("attributes_absent"); ok {
		for _, k := range a.Items {
			if v, present := attrs[k.Str]; present {
				return fmt.Errorf("%s.attributes: %s must be absent, got %s", path, k.Str, formatValue(v))
			}
		}
	}
	if err := matchLinks(m, path, want, got); err != nil {
		return err
	}
	if c, ok := want.Get("children"); ok {
		return matchSpanList(m, path+".children", c, got.children)
	}
	return nil
}

func matchLogs(m *matcher, want *Value, got []*logRec) error {
	if len(want.Items) != len(got) {
		var bodies []string
		for _, r := range got {
			bodies = append(bodies, r.Message)
		}
		return fmt.Errorf("log_records: want %d records, got %d %q", len(want.Items), len(got), bodies)
	}
	for i, w := range want.Items {
		path := fmt.Sprintf("log_records[%d]", i)
		r := got[i]
		if b, ok := w.Get("body"); ok && b.Str != r.Message {
			return fmt.Errorf("%s.body: want %q, got %q", path, b.Str, r.Message)
		}
		if l, ok := w.Get("level"); ok {
			var lv slog.Level
			if err := lv.UnmarshalText([]byte(strings.ToUpper(l.Str))); err != nil || lv != r.Level {
				return fmt.Errorf("%s.level: want %s, got %s", path, l.Str, r.Level)
			}
		}
		if a, ok := w.Get("attributes"); ok {
			if err := m.match(path+".attributes", a.Native(), r.Attrs, subsetTop); err != nil {
				return err
			}
		}
		if a, ok := w.Get("attributes_absent"); ok {
			for _, k := range a.Items {
				if v, present := r.Attrs[k.Str]; present {
					return fmt.Errorf("%s.attributes: %s must be absent, got %s", path, k.Str, formatValue(v))
				}
			}
		}
	}
	return nil
}

// --- invariants ------------------------------------------------------------

func registerOTelInvariants(r *invariantRegistry) {
	r.exact["session_id_uniform_across_span_tree"] = sessionIDOnEverySpan
	r.exact["all_logs_carry_session_id"] = sessionIDOnEveryLog
	r.exact["invocation_span_carries_outcome_suspended"] = otelBool(invocationSpanSuspended)
	r.exact["node_span_carries_suspension_attributes"] = otelBool(nodeSpanSuspensionAttrs)
	r.exact["otel_status_code_is_OK_per_4_2_mapping"] = otelBool(statusPer42)
	for _, name := range []string{
		"session_id_uniform_across_span_tree", "all_logs_carry_session_id",
		"invocation_span_carries_outcome_suspended", "node_span_carries_suspension_attributes",
		"otel_status_code_is_OK_per_4_2_mapping",
	} {
		delete(r.notBuilt, name)
	}
}

func wantString(want *Value) (string, error) {
	if want == nil || want.Kind != KindString {
		return "", fmt.Errorf("want a string value")
	}
	return want.Str, nil
}

func sessionIDOnEverySpan(_ context.Context, env *invEnv, want *Value) error {
	sid, err := wantString(want)
	if err != nil {
		return err
	}
	n := 0
	for _, run := range env.scope() {
		for _, s := range run.otel.allSpans() {
			n++
			if got, ok := spanAttrs(s)[otelobserver.AttrSessionID]; !ok || got != sid {
				return fmt.Errorf("span %s: %s = %v, want %q", s.Name, otelobserver.AttrSessionID, got, sid)
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("no spans were emitted")
	}
	return nil
}

func sessionIDOnEveryLog(_ context.Context, env *invEnv, want *Value) error {
	sid, err := wantString(want)
	if err != nil {
		return err
	}
	n := 0
	for _, run := range env.scope() {
		for _, r := range run.otel.logs {
			n++
			if got, ok := r.Attrs[otelobserver.AttrSessionID]; !ok || got != sid {
				return fmt.Errorf("log %q: %s = %v, want %q", r.Message, otelobserver.AttrSessionID, got, sid)
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("no log records were emitted")
	}
	return nil
}

type otelCheck func(env *invEnv) (bool, string)

func otelBool(check otelCheck) invariantFunc {
	return func(_ context.Context, env *invEnv, want *Value) error {
		got, why := check(env)
		return compareBool(want, got, why)
	}
}

// invocationSpans returns a run's openarmature.invocation spans.
func invocationSpans(run *invocationRun) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range run.otel.allSpans() {
		if s.Name == otelobserver.InvocationSpanName {
			out = append(out, s)
		}
	}
	return out
}

func invocationSpanSuspended(env *invEnv) (bool, string) {
	runs := suspendedRuns(env)
	if len(runs) == 0 {
		return false, "no invocation ended suspended"
	}
	for _, run := range runs {
		spans := invocationSpans(run)
		if len(spans) == 0 {
			return false, fmt.Sprintf("invocation %s emitted no invocation span", run.Name)
		}
		for _, s := range spans {
			if got := spanAttrs(s)[otelobserver.AttrOutcome]; got != "suspended" {
				return false, fmt.Sprintf("invocation %s: span outcome %v", run.Name, got)
			}
		}
	}
	return true, ""
}

func nodeSpanSuspensionAttrs(env *invEnv) (bool, string) {
	runs := suspendedRuns(env)
	if len(runs) == 0 {
		return false, "no invocation ended suspended"
	}
	for _, run := range runs {
		d := run.Suspension.Descriptor
		want := map[string]any{}
		for _, kv := range otelobserver.SuspensionAttributes(d) {
			want[string(kv.Key)] = attrNative(kv.Value)
		}
		found := false
		for _, s := range run.otel.allSpans() {
			a := spanAttrs(s)
			if s.Name != run.Suspension.NodeName || a[otelobserver.AttrOutcome] != "suspended" {
				continue
			}
			found = true
			for k, v := range want {
				if !deepEqual(normalize(a[k]), normalize(v)) {
					return false, fmt.Sprintf("span %s: %s = %s, want %s", s.Name, k, formatValue(a[k]), formatValue(v))
				}
			}
		}
		if !found {
			return false, fmt.Sprintf("invocation %s: no suspended span for node %s", run.Name, run.Suspension.NodeName)
		}
	}
	return true, ""
}

// statusPer42: every span is OK, except a span carrying an error
// category, which is ERROR.
func statusPer42(env *invEnv) (bool, string) {
	n := 0
	for _, run := range env.scope() {
		for _, s := range run.otel.allSpans() {
			n++
			want := codes.Ok
			if _, failed := spanAttrs(s)[otelobserver.AttrErrorCategory]; failed {
				want = codes.Error
			}
			if s.Status.Code != want {
				return false, fmt.Sprintf("span %s: status %s, want %s", s.Name, statusName(s.Status.Code), statusName(want))
			}
		}
	}
	if n == 0 {
		return false, "no spans were emitted"
	}
	return true, ""
}

// logStep runs an emits_log directive.
func (x *geExec) logStep(ctx context.Context, st *geStep) {
	x.otel.logger.Log(ctx, st.level, st.message)
}

// otelObserverOptions are the registration options of an otel observer.
func otelObserverOptions(o *geObserver) []graph.ObserverOption {
	if o.behavior != "otel" {
		return nil
	}
	return []graph.ObserverOption{graph.InvocationEvents()}
}
