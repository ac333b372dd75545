package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// The Langfuse mapping (observability §8) in the observability suite. A
// case with a Langfuse expectation gets a real langfuse.Observer on its
// outermost graph, next to the implicit OTel observer. In the default
// (and mode-b credentials) form the observer builds its own
// langfuse.Client from credentials pointing at a langfusetest.Server, an
// httptest stand-in for the public ingestion API that checks every
// request's authentication and event shape and rebuilds the traces from
// the events it accepted; so the fixtures exercise the whole exporter,
// batching and HTTP included. In mode a (langfuse_client: {mode:
// supplied}) the harness hands the observer a provider-faithful fake
// client instead (§6.4). The rebuilt traces are compared with
// langfuse_trace / langfuse_traces and read by the Langfuse invariants.

var (
	// lfCaseKeys are the case keys handled here.
	lfCaseKeys = vocab("langfuse_observer langfuse_observer_config langfuse_client caller_invocation_label session_id")
	// lfObserverKeys are the keys of langfuse_observer (and its
	// langfuse_observer_config spelling, 059).
	lfObserverKeys = []string{"disable_llm_spans", "disable_provider_payload", "disable_state_payload",
		"payload_byte_cap", "trace_input_from_state", "trace_output_from_state"}
	// lfExpectKeys are the expectations handled here.
	lfExpectKeys = vocab("langfuse_trace langfuse_traces no_langfuse_observations_on_global " +
		"no_langfuse_observations_on_private langfuse_observations_on_global")
	// lfTraceKeys are the keys of an expected trace.
	lfTraceKeys = []string{"id", "name", "metadata", "observations", "input", "output", "sessionId", "userId"}
	// lfObservationKeys are the keys of an expected observation.
	lfObservationKeys = []string{"type", "name", "metadata", "level", "statusMessage", "input", "output", "model",
		"modelParameters", "usage", "usageDetails", "children", "input_parses_as_messages",
		"input_is_raw_string_with_marker", "prompt_entity_link", "prompt_entity_link_absent"}
	// lfHooks are the harness hook mocks of trace_input_from_state /
	// trace_output_from_state (037).
	lfHooks = map[string]func(graph.State) any{
		"returns_job_input_summary":  func(graph.State) any { return map[string]any{"summary": "job-input"} },
		"returns_job_output_summary": func(graph.State) any { return map[string]any{"summary": "job-output"} },
		"returns_null":               func(graph.State) any { return nil },
		"returns_state_snapshot":     func(s graph.State) any { return s.Map() },
	}
)

// obsLangfuse is the Langfuse part of one observability case.
type obsLangfuse struct {
	cfg langfuse.Config
	// payloadSet: langfuse_observer sets disable_provider_payload (else
	// the case-level flag, when any, applies to both observers: 098).
	payloadSet bool
	// client is langfuse_client's mode ("" for the default credentials
	// path) and provider the supplied client's provider.
	client, provider string
	globalOTel       bool
	label            string
	// peeked case values the invariants read.
	callerMeta    map[string]any
	callerInvID   string
	sessionID     string
	expectedCat   string
	stateDisabled bool
	// raises are the error_type / message of the mock_embedding and
	// mock_rerank failures (150, 151).
	raises []map[string]any
	// sessions are the session ids of the invocations (session_id, or an
	// invocations: list of {session_id, initial_state}, 084); multi
	// marks the list form, whose langfuse_traces are one per invocation.
	sessions []string
	multi    bool
	// resume is a resume case's part (obs_langfuse_resume.go).
	resume *lfResume
	// innerMws are the middleware of the absorbed inner_subgraphs shape
	// (obs_langfuse_inner.go).
	innerMws lfInnerMws
	// expectations
	trace, traces, detachedCount, invocationID *Value
	onGlobal, noGlobal, noPrivate              *Value
	invariants                                 []*Field
}

// lfUsed reports whether the case has a Langfuse expectation.
func (lf *obsLangfuse) used() bool {
	return lf != nil && (lf.trace != nil || lf.traces != nil || lf.onGlobal != nil || lf.noGlobal != nil ||
		lf.noPrivate != nil || len(lf.invariants) > 0 || lf.resume != nil)
}

// splitObsLangfuse takes the Langfuse directives and expectations out of
// a case (nil when it has none).
func splitObsLangfuse(c *Case) (*Case, *obsLangfuse, error) {
	body := c.Body
	if body.Kind != KindMap {
		return c, nil, nil
	}
	exp, _ := body.Get("expected")
	hasLF := false
	for _, f := range body.Fields {
		if _, ok := lfCaseKeys[f.Key]; ok {
			hasLF = true
		}
	}
	if exp != nil {
		for _, f := range exp.Fields {
			if _, ok := lfExpectKeys[f.Key]; ok {
				hasLF = true
			}
		}
	}
	if !hasLF {
		return c, nil, nil
	}
	lf := &obsLangfuse{cfg: langfuse.Config{CaptureStatePayload: false}, stateDisabled: true}
	_, hasClient := body.Get("langfuse_client")
	body, err := lf.invocationList(body)
	if err != nil {
		return nil, nil, err
	}
	if body, err = lf.splitResume(body); err != nil {
		return nil, nil, err
	}
	if body, err = lf.absorbInner(body); err != nil {
		return nil, nil, err
	}
	out := &Value{Kind: KindMap, Pos: body.Pos}
	for _, f := range body.Fields {
		if _, ok := lfCaseKeys[f.Key]; ok {
			if err := lf.caseKey(f); err != nil {
				return nil, nil, err
			}
			continue
		}
		switch f.Key {
		case "caller_global_otel_active":
			if hasClient {
				if f.Value.Kind != KindBool {
					return nil, nil, schemaErrorf(f.Value.Pos, "caller_global_otel_active must be a bool")
				}
				lf.globalOTel = f.Value.Bool
				continue
			}
		case "disable_provider_payload":
			if f.Value.Kind == KindBool && !lf.payloadSet {
				lf.cfg.CaptureProviderPayload = !f.Value.Bool
			}
		case "caller_metadata":
			lf.callerMeta, _ = f.Value.Native().(map[string]any)
		case "caller_invocation_id":
			lf.callerInvID = f.Value.Str
		case "expected_error":
			if cat, ok := f.Value.Get("category"); ok {
				lf.expectedCat = cat.Str
			}
		case "mock_embedding", "mock_rerank":
			for _, it := range f.Value.Items {
				if r, ok := it.Get("raises"); ok {
					if m, ok := r.Native().(map[string]any); ok {
						lf.raises = append(lf.raises, m)
					}
				}
			}
		case "expected":
			nv, err := lf.expectKeys(f.Value)
			if err != nil {
				return nil, nil, err
			}
			f = &Field{Key: f.Key, Pos: f.Pos, Value: nv}
		}
		out.Fields = append(out.Fields, f)
	}
	nc := *c
	nc.Body = out
	return &nc, lf, nil
}

func (lf *obsLangfuse) caseKey(f *Field) error {
	v := f.Value
	switch f.Key {
	case "langfuse_observer", "langfuse_observer_config":
		if err := hcStrictKeys(v, f.Key, lfObserverKeys...); err != nil {
			return err
		}
		for _, o := range v.Fields {
			switch o.Key {
			case "payload_byte_cap":
				if o.Value.Kind != KindInt || o.Value.Int < langfuse.MinPayloadMaxBytes || o.Value.Int > 1<<30 {
					return schemaErrorf(o.Value.Pos, "payload_byte_cap must be an integer of at least %d", langfuse.MinPayloadMaxBytes)
				}
				lf.cfg.PayloadMaxBytes = int(o.Value.Int)
			case "trace_input_from_state", "trace_output_from_state":
				hook, ok := lfHooks[o.Value.Str]
				if o.Value.Kind != KindString || !ok {
					return &DirectiveUnknownError{Name: f.Key + "." + o.Key + " " + fmt.Sprint(o.Value.Native()), Pos: o.Value.Pos}
				}
				if o.Key == "trace_input_from_state" {
					lf.cfg.TraceInputFromState = hook
				} else {
					lf.cfg.TraceOutputFromState = hook
				}
			default:
				if o.Value.Kind != KindBool {
					return schemaErrorf(o.Value.Pos, "%s.%s must be a bool", f.Key, o.Key)
				}
				switch o.Key {
				case "disable_llm_spans":
					lf.cfg.DisableLLMSpans = o.Value.Bool
				case "disable_provider_payload":
					lf.cfg.CaptureProviderPayload, lf.payloadSet = !o.Value.Bool, true
				case "disable_state_payload":
					lf.cfg.CaptureStatePayload, lf.stateDisabled = !o.Value.Bool, o.Value.Bool
				}
			}
		}
	case "langfuse_client":
		if err := hcStrictKeys(v, f.Key, "mode", "provider"); err != nil {
			return err
		}
		mode, _ := v.Get("mode")
		if mode == nil || (mode.Str != "credentials" && mode.Str != "supplied") {
			return schemaErrorf(v.Pos, "langfuse_client.mode must be credentials or supplied")
		}
		lf.client, lf.provider = mode.Str, "global"
		if p, ok := v.Get("provider"); ok {
			if mode.Str != "supplied" || (p.Str != "global" && p.Str != "isolated") {
				return schemaErrorf(p.Pos, "langfuse_client.provider is global or isolated, for mode supplied only")
			}
			lf.provider = p.Str
		}
	case "caller_invocation_label":
		s, err := str(v, f.Key)
		if err != nil {
			return err
		}
		lf.label = s
	case "session_id":
		s, err := str(v, f.Key)
		if err != nil {
			return err
		}
		lf.sessionID, lf.sessions = s, []string{s}
	}
	return nil
}

// invocationList rewrites an invocations: list of {session_id,
// initial_state} entries (084) into invocations: N, keeping the session
// ids for the invocation options and the entries' common initial state
// as the case's.
func (lf *obsLangfuse) invocationList(body *Value) (*Value, error) {
	invs, ok := body.Get("invocations")
	if !ok || invs.Kind != KindList {
		return body, nil
	}
	if len(invs.Items) == 0 || len(invs.Items) > 100 {
		return nil, schemaErrorf(invs.Pos, "invocations must list 1 to 100 invocations")
	}
	var initial *Value
	for i, it := range invs.Items {
		if err := hcStrictKeys(it, fmt.Sprintf("invocations[%d]", i), "session_id", "initial_state"); err != nil {
			return nil, err
		}
		sid := ""
		if s, ok := it.Get("session_id"); ok {
			var err error
			if sid, err = str(s, "session_id"); err != nil {
				return nil, err
			}
		}
		lf.sessions = append(lf.sessions, sid)
		if is, ok := it.Get("initial_state"); ok {
			if initial != nil && !deepEqual(normalize(initial.Native()), normalize(is.Native())) {
				return nil, notImplemented(capObs + " invocations with different initial states")
			}
			initial = is
		}
	}
	lf.multi = true
	out := &Value{Kind: KindMap, Pos: body.Pos}
	for _, f := range body.Fields {
		if f.Key == "invocations" {
			f = &Field{Key: f.Key, Pos: f.Pos, Value: &Value{Kind: KindInt, Pos: invs.Pos, Int: int64(len(invs.Items))}}
		}
		if f.Key == "initial_state" && initial != nil {
			continue
		}
		out.Fields = append(out.Fields, f)
	}
	if initial != nil {
		out.Fields = append(out.Fields, &Field{Key: "initial_state", Pos: initial.Pos, Value: initial})
	}
	return out, nil
}

// invokeOptions are invocation i's options: its session.
func (lf *obsLangfuse) invokeOptions(i int) []graph.InvokeOption {
	if lf == nil || len(lf.sessions) == 0 {
		return nil
	}
	s := lf.sessions[min(i, len(lf.sessions)-1)]
	if s == "" {
		return nil
	}
	return []graph.InvokeOption{graph.WithSessionID(s)}
}

// expectKeys takes the Langfuse expectations (and the Langfuse
// invariants) out of expected.
func (lf *obsLangfuse) expectKeys(e *Value) (*Value, error) {
	if e.Kind != KindMap {
		return e, nil
	}
	_, multi := e.Get("langfuse_traces")
	out := &Value{Kind: KindMap, Pos: e.Pos}
	for _, f := range e.Fields {
		v := f.Value
		switch f.Key {
		case "langfuse_trace":
			if err := checkLFTrace(v, "langfuse_trace"); err != nil {
				return nil, err
			}
			lf.trace = v
			continue
		case "langfuse_traces":
			if v.Kind != KindList || len(v.Items) == 0 {
				return nil, schemaErrorf(v.Pos, "langfuse_traces must be a non-empty list")
			}
			for i, t := range v.Items {
				if err := checkLFTrace(t, fmt.Sprintf("langfuse_traces[%d]", i)); err != nil {
					return nil, err
				}
			}
			lf.traces = v
			continue
		case "detached_trace_count":
			if multi {
				if v.Kind != KindInt {
					return nil, schemaErrorf(v.Pos, "detached_trace_count must be an integer")
				}
				lf.detachedCount = v
				continue
			}
		case "invocation_id":
			if v.Kind != KindString {
				return nil, schemaErrorf(v.Pos, "invocation_id must be a string")
			}
			lf.invocationID = v
			continue
		case "no_langfuse_observations_on_global", "no_langfuse_observations_on_private", "langfuse_observations_on_global":
			if v.Kind != KindBool {
				return nil, schemaErrorf(v.Pos, "%s must be a bool", f.Key)
			}
			switch f.Key {
			case "no_langfuse_observations_on_global":
				lf.noGlobal = v
			case "no_langfuse_observations_on_private":
				lf.noPrivate = v
			default:
				lf.onGlobal = v
			}
			continue
		case "invariants":
			if v.Kind != KindMap {
				break // the suite reports the shape
			}
			kept := &Value{Kind: KindMap, Pos: v.Pos}
			for _, inv := range v.Fields {
				if _, ok := lfInvariants[inv.Key]; ok {
					lf.invariants = append(lf.invariants, inv)
					continue
				}
				kept.Fields = append(kept.Fields, inv)
			}
			if len(kept.Fields) == 0 {
				continue
			}
			f = &Field{Key: f.Key, Pos: f.Pos, Value: kept}
		}
		out.Fields = append(out.Fields, f)
	}
	return out, nil
}

// checkLFTrace checks an expected trace's keys (and its observations').
func checkLFTrace(v *Value, what string) error {
	if err := hcStrictKeys(v, what, lfTraceKeys...); err != nil {
		return err
	}
	if obs, ok := v.Get("observations"); ok {
		return checkLFObservations(obs, what+".observations")
	}
	return nil
}

func checkLFObservations(v *Value, what string) error {
	if v.Kind != KindList {
		return schemaErrorf(v.Pos, "%s must be a list", what)
	}
	for i, o := range v.Items {
		p := fmt.Sprintf("%s[%d]", what, i)
		if err := hcStrictKeys(o, p, lfObservationKeys...); err != nil {
			return err
		}
		if c, ok := o.Get("children"); ok {
			if err := checkLFObservations(c, p+".children"); err != nil {
				return err
			}
		}
	}
	return nil
}

// --- run -------------------------------------------------------------------

// lfRun is what one invocation sent to Langfuse.
type lfRun struct {
	run    *obsRun
	events []langfusetest.Event
	traces []*langfusetest.Trace
}

// lfExec is the Langfuse side of one case's execution.
type lfExec struct {
	lf     *obsLangfuse
	srv    *langfusetest.Server
	obs    *langfuse.Observer
	fake   *providerFake
	global *globalOTel
	runs   []*lfRun
	mark   int
	x      *geExec
	om     *obsMeta
	lr     *obsLLMRun
}

// setup builds the observer (its client per langfuse_client) and
// attaches it to the outermost graph.
func (lf *obsLangfuse) setup(x *geExec, om *obsMeta, lr *obsLLMRun) (*lfExec, error) {
	if !lf.used() {
		return nil, nil
	}
	le := &lfExec{lf: lf, x: x, om: om, lr: lr}
	if lf.globalOTel {
		le.global = installGlobalOTel()
	}
	cfg := lf.cfg
	cfg.DetachedSubgraphs, cfg.DetachedFanOuts = om.detachedSubs, om.detachedFans
	if lf.label != "" {
		label := lf.label
		cfg.TraceName = func(*graph.InvocationEvent) string { return label }
	}
	switch lf.client {
	case "supplied":
		fake, err := newProviderFake(lf.provider, le.global)
		if err != nil {
			return le, err
		}
		le.fake, cfg.Exporter = fake, fake
	default:
		// Mode b (and the default): the observer builds and owns its
		// client from credentials; the server is the ingestion API.
		le.srv = langfusetest.NewServer()
		cfg.Client = le.srv.ClientConfig()
	}
	obs, err := langfuse.New(cfg)
	if err != nil {
		return le, err
	}
	le.obs = obs
	if _, err := x.outer.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		return le, fmt.Errorf("registering the Langfuse observer: %w", err)
	}
	return le, nil
}

func (le *lfExec) close() {
	if le == nil {
		return
	}
	if le.obs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = le.obs.Shutdown(ctx)
		cancel()
	}
	if le.srv != nil {
		le.srv.Close()
	}
	if le.global != nil {
		le.global.restore()
	}
}

// collect flushes the observer's client and records the events of the
// invocation just drained.
func (le *lfExec) collect(run *obsRun) (*lfRun, error) {
	if le == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := le.obs.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flushing the Langfuse client: %w", err)
	}
	if n := le.obs.OpenObservations(); n != 0 {
		return nil, fmt.Errorf("the Langfuse observer left %d observations open", n)
	}
	var all []langfusetest.Event
	if le.srv != nil {
		if p := le.srv.Problems(); len(p) > 0 {
			return nil, fmt.Errorf("the Langfuse ingestion API refused requests: %s", strings.Join(p, "; "))
		}
		all = le.srv.Events()
	} else {
		all = le.fake.rec.Events()
	}
	r := &lfRun{run: run, events: all[le.mark:]}
	le.mark = len(all)
	r.traces = langfusetest.Rebuild(r.events)
	le.runs = append(le.runs, r)
	return r, nil
}

// assembled returns the text of the case's last LLM response (a
// streamed one assembled from its deltas).
func (le *lfExec) assembled() string {
	if le.lr == nil {
		return ""
	}
	le.lr.mu.Lock()
	defer le.lr.mu.Unlock()
	if n := len(le.lr.responses); n > 0 {
		return le.lr.responses[n-1].Message.Text()
	}
	return ""
}

// assertRun checks one invocation's Langfuse output.
func (le *lfExec) assertRun(m *matcher, r *lfRun) error {
	if le == nil {
		return nil
	}
	lf := le.lf
	var errs []error
	m.bindings["<invocation_id_parent>"] = r.run.InvocationID
	if lf.invocationID != nil {
		errs = append(errs, m.match("invocation_id", lf.invocationID.Str, r.run.InvocationID, exact))
	}
	if lf.trace != nil {
		if len(r.traces) != 1 {
			errs = append(errs, fmt.Errorf("langfuse_trace: want one trace, got %d", len(r.traces)))
		} else {
			errs = append(errs, matchLFTrace(m, "langfuse_trace", lf.trace, r.traces[0]))
		}
	}
	if lf.traces != nil && len(le.lf.traces.Items) > 0 && !lf.multiInvocation() {
		if len(r.traces) < len(lf.traces.Items) {
			errs = append(errs, fmt.Errorf("langfuse_traces: want at least %d traces, got %d", len(lf.traces.Items), len(r.traces)))
		} else {
			for i, t := range lf.traces.Items {
				errs = append(errs, matchLFTrace(m, fmt.Sprintf("langfuse_traces[%d]", i), t, r.traces[i]))
			}
		}
		if lf.detachedCount != nil {
			if got := len(r.traces) - 1; int64(got) != lf.detachedCount.Int {
				errs = append(errs, fmt.Errorf("detached_trace_count: want %d, got %d", lf.detachedCount.Int, got))
			}
		}
	}
	return errors.Join(errs...)
}

// multiInvocation: langfuse_traces lists one trace per invocation (084)
// rather than one invocation's traces (033).
func (lf *obsLangfuse) multiInvocation() bool { return lf.multi }

// assertCase checks the Langfuse invariants and the provider-isolation
// expectations.
func (le *lfExec) assertCase(m *matcher) error {
	if le == nil {
		return nil
	}
	var errs []error
	if lf := le.lf; lf.traces != nil && lf.multiInvocation() {
		if len(lf.traces.Items) != len(le.runs) {
			errs = append(errs, fmt.Errorf("langfuse_traces: want %d, one per invocation, got %d invocations", len(lf.traces.Items), len(le.runs)))
		} else {
			for i, t := range lf.traces.Items {
				if len(le.runs[i].traces) != 1 {
					errs = append(errs, fmt.Errorf("langfuse_traces[%d]: invocation %d sent %d traces", i, i, len(le.runs[i].traces)))
					continue
				}
				errs = append(errs, matchLFTrace(m, fmt.Sprintf("langfuse_traces[%d]", i), t, le.runs[i].traces[0]))
			}
		}
	}
	for _, f := range le.lf.invariants {
		if err := lfInvariants[f.Key](m, le, f.Value); err != nil {
			errs = append(errs, fmt.Errorf("invariant %s: %w", f.Key, err))
		}
	}
	errs = append(errs, le.assertIsolation())
	return errors.Join(errs...)
}

// --- matching --------------------------------------------------------------

// matchLFTrace compares an expected trace with a rebuilt one.
func matchLFTrace(m *matcher, path string, want *Value, got *langfusetest.Trace) error {
	for _, f := range want.Fields {
		p := joinPath(path, f.Key)
		switch f.Key {
		case "observations":
			if err := matchLFObservations(m, p, f.Value, got.Observations); err != nil {
				return err
			}
		case "metadata":
			if err := m.match(p, f.Value.Native(), got.Fields["metadata"], subsetTop); err != nil {
				return err
			}
		case "id":
			if err := m.match(p, f.Value.Native(), got.ID, exact); err != nil {
				return err
			}
		default:
			if err := m.match(p, f.Value.Native(), got.Fields[f.Key], exact); err != nil {
				return err
			}
		}
	}
	return nil
}

// matchLFObservations matches an expected observation list with the
// actual siblings in any order (concurrent units start in any order),
// restoring the matcher's bindings after a failed pairing.
func matchLFObservations(m *matcher, path string, want *Value, got []*langfusetest.Observation) error {
	if len(want.Items) != len(got) {
		return fmt.Errorf("%s: want %d observations, got %d %s", path, len(want.Items), len(got), lfNames(got))
	}
	used := make([]bool, len(got))
	var firstErr error
	var try func(i int) bool
	try = func(i int) bool {
		if i == len(want.Items) {
			return true
		}
		for j, g := range got {
			if used[j] {
				continue
			}
			saved := cloneBindings(m)
			if err := matchLFObservation(m, fmt.Sprintf("%s[%d]", path, i), want.Items[i], g); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				m.bindings = saved
				continue
			}
			used[j] = true
			if try(i + 1) {
				return true
			}
			used[j] = false
			m.bindings = saved
		}
		return false
	}
	if try(0) {
		return nil
	}
	if len(got) == 1 && firstErr != nil {
		return firstErr
	}
	return fmt.Errorf("%s: no pairing of the expected observations with %s (first difference: %v)", path, lfNames(got), firstErr)
}

func cloneBindings(m *matcher) map[string]any {
	b := make(map[string]any, len(m.bindings))
	for k, v := range m.bindings {
		b[k] = v
	}
	return b
}

func lfNames(os []*langfusetest.Observation) string {
	var out []string
	for _, o := range os {
		out = append(out, o.Type+":"+o.Name())
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// matchLFObservation compares one expected observation.
func matchLFObservation(m *matcher, path string, want *Value, got *langfusetest.Observation) error {
	for _, f := range want.Fields {
		p := joinPath(path, f.Key)
		var err error
		switch f.Key {
		case "type":
			err = m.match(p, f.Value.Native(), got.Type, exact)
		case "children":
			err = matchLFObservations(m, p, f.Value, got.Children)
		case "metadata":
			err = m.match(p, f.Value.Native(), got.Metadata(), subsetTop)
		case "input_parses_as_messages":
			err = matchMessagesInput(m, p, f.Value, got.Fields["input"])
		case "input_is_raw_string_with_marker":
			s, isStr := got.Fields["input"].(string)
			ok := isStr && strings.Contains(s, "…[truncated, ") && strings.HasSuffix(s, " bytes total]")
			err = compareBool(f.Value, ok, fmt.Sprintf("input %s", formatValue(got.Fields["input"])))
		case "prompt_entity_link":
			err = m.match(p, f.Value.Native(), got.Fields["promptName"], exact)
		case "prompt_entity_link_absent":
			_, linked := got.Fields["promptName"]
			err = compareBool(f.Value, !linked, fmt.Sprintf("linked to prompt %v", got.Fields["promptName"]))
		default:
			err = m.match(p, f.Value.Native(), got.Fields[f.Key], exact)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), path) {
				err = fmt.Errorf("%s: %w", p, err)
			}
			return err
		}
	}
	return nil
}

// matchMessagesInput: the generation input is the message list (§8.7),
// each message carrying at least the expected keys.
func matchMessagesInput(m *matcher, path string, want *Value, got any) error {
	msgs, ok := got.([]any)
	if !ok {
		return fmt.Errorf("%s: input %s is not a message list", path, formatValue(got))
	}
	if len(msgs) != len(want.Items) {
		return fmt.Errorf("%s: want %d messages, got %s", path, len(want.Items), formatValue(got))
	}
	for i, w := range want.Items {
		if err := m.match(fmt.Sprintf("%s[%d]", path, i), w.Native(), msgs[i], subsetTop); err != nil {
			return err
		}
	}
	return nil
}
