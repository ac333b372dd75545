package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/uuid"
)

// harnessSuite runs the harness fixtures: transmissions through
// harness.Harness.Handle.
type harnessSuite struct{}

// hcTx is one executed transmission.
type hcTx struct {
	name          string
	intent        harness.Intent
	callerSession string
	out           *harness.Outcome
	resp          harness.Response
	bodyFrom      int
	bodyTo        int
	loads, saves  int // store calls during the transmission
	payload       map[string]any
	resumeOf      string // the invocation id the placeholder named
}

// hcHarnessRun is an executed harness case.
type hcHarnessRun struct {
	hg  *hcGraph
	h   *harness.Harness
	txs []*hcTx
}

var hcTxKeys = []string{"name", "payload", "dispatch_intent", "signal_payload", "expected"}

var hcTxExpectKeys = []string{"dispatch_path", "invoke_args", "invoke_outcome", "final_state", "descriptor",
	"error_category", "error_bucket", "outbound_shape", "outbound_payload_includes",
	"harness_signal_subscription_registered", "signal_subscription_registered", "harness_did_not_block",
	"descriptor_read_from_outcome", "signal_correlation_resolved", "resolved_to_invocation_id",
	"harness_auto_retried", "session_store_load_calls", "session_store_save_calls"}

// RunCase runs one harness case.
func (harnessSuite) RunCase(ctx context.Context, c *Case) error {
	hg, err := buildHarnessGraph(c.Body, hcHarnessKeys)
	if err != nil {
		return err
	}
	h, err := harness.New(harness.Config{Graph: hg.g, Mode: hg.mode, Coordinator: hg.coord})
	if err != nil {
		return err
	}
	run := &hcHarnessRun{hg: hg, h: h}
	m := newMatcher()
	txs, ok := c.Body.Get("transmissions")
	if !ok || txs.Kind != KindList || len(txs.Items) == 0 {
		return schemaErrorf(c.Body.Pos, "transmissions: must be a non-empty list")
	}
	for i, item := range txs.Items {
		if err := hcStrictKeys(item, "transmission", hcTxKeys...); err != nil {
			return err
		}
		tx, err := run.transmit(ctx, item)
		if err != nil {
			return fmt.Errorf("transmission %d: %w", i, err)
		}
		run.txs = append(run.txs, tx)
		if ev, ok := item.Get("expected"); ok {
			if err := run.assert(ctx, m, tx, ev); err != nil {
				return fmt.Errorf("transmission %s: %w", tx.name, err)
			}
		}
	}
	return run.invariants(ctx, c.Body)
}

// transmit builds and handles one transmission.
func (r *hcHarnessRun) transmit(ctx context.Context, item *Value) (*hcTx, error) {
	tx := &hcTx{bodyFrom: r.hg.bodyRuns.count()}
	if n, ok := item.Get("name"); ok {
		tx.name = n.Str
	}
	var t harness.Transmission
	if iv, ok := item.Get("dispatch_intent"); ok {
		switch iv.Str {
		case "new_session":
			t.Intent = harness.IntentNewSession
		case "existing_session":
			t.Intent = harness.IntentContinue
		case "signal_resume":
			t.Intent = harness.IntentResume
		default:
			return nil, schemaErrorf(iv.Pos, "dispatch_intent %q", iv.Str)
		}
	}
	tx.intent = t.Intent
	payload := map[string]any{}
	if pv, ok := item.Get("payload"); ok {
		p, ok := pv.Native().(map[string]any)
		if !ok {
			return nil, schemaErrorf(pv.Pos, "payload: must be a mapping")
		}
		payload = p
	}
	tx.payload = payload
	if t.Intent == harness.IntentResume {
		ref := &harness.SignalRef{}
		if s, ok := payload["signal_id"].(string); ok {
			ref.SignalID = s
		}
		if s, ok := payload["invocation_id"].(string); ok {
			id, err := r.placeholder(s)
			if err != nil {
				return nil, err
			}
			ref.InvocationID, tx.resumeOf = id, id
		}
		t.Signal = ref
		if sp, ok := item.Get("signal_payload"); ok {
			p, ok := sp.Native().(map[string]any)
			if !ok {
				return nil, schemaErrorf(sp.Pos, "signal_payload: must be a mapping")
			}
			t.Payload = p
		}
	} else if s, ok := payload["session_id"].(string); ok {
		t.SessionID, tx.callerSession = s, s
	}
	l0, s0 := r.storeCounts()
	tx.out, _ = r.h.Handle(ctx, t)
	tx.resp = tx.out.Response()
	l1, s1 := r.storeCounts()
	tx.loads, tx.saves = l1-l0, s1-s0
	tx.bodyTo = r.hg.bodyRuns.count()
	return tx, nil
}

func (r *hcHarnessRun) storeCounts() (int, int) {
	if r.hg.store == nil {
		return 0, 0
	}
	return r.hg.store.counts()
}

// placeholder resolves "<from previous suspended outcome>" and "<from
// <tx> suspended outcome>" to the invocation id of that suspension.
func (r *hcHarnessRun) placeholder(s string) (string, error) {
	if !strings.HasPrefix(s, "<from ") {
		return s, nil
	}
	ref := strings.TrimSuffix(strings.TrimPrefix(s, "<from "), ">")
	ref = strings.TrimSpace(strings.TrimSuffix(ref, "suspended outcome"))
	for i := len(r.txs) - 1; i >= 0; i-- {
		tx := r.txs[i]
		if tx.out.Status != graph.Suspended {
			continue
		}
		if ref == "previous" || ref == tx.name {
			return tx.out.InvocationID, nil
		}
	}
	return "", fmt.Errorf("placeholder %q names no suspended transmission", s)
}

// engineSessions returns the session ids the engine threaded into the
// node bodies of a transmission.
func (r *hcHarnessRun) engineSessions(tx *hcTx) []string {
	return r.hg.bodyRuns.sessionsSince(tx.bodyFrom)[:tx.bodyTo-tx.bodyFrom]
}

// assert checks a transmission's expected block.
func (r *hcHarnessRun) assert(ctx context.Context, m *matcher, tx *hcTx, ev *Value) error {
	if err := hcStrictKeys(ev, "expected", hcTxExpectKeys...); err != nil {
		return err
	}
	o := tx.out
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range ev.Fields {
		want := f.Value.Native()
		switch f.Key {
		case "dispatch_path":
			fail(m.match("dispatch_path", want, string(o.Path), exact))
		case "invoke_outcome":
			fail(m.match("invoke_outcome", want, hcStatus(o.Status), exact))
		case "final_state":
			fail(m.match("final_state", want, o.State().Map(), exact))
		case "descriptor":
			if o.Suspension == nil {
				fail(fmt.Errorf("descriptor: the outcome is %s, not suspended", hcStatus(o.Status)))
				continue
			}
			fail(m.match("descriptor", want, descriptorMap(o.Suspension.Descriptor), exact))
		case "error_category":
			fail(m.match("error_category", want, string(o.Category), exact))
			if o.Err != nil && !errors.Is(o.Err, errcat.Category(f.Value.Str)) {
				fail(fmt.Errorf("error_category: errors.Is(err, %s) is false", f.Value.Str))
			}
		case "error_bucket":
			fail(m.match("error_bucket", want, string(o.Bucket), exact))
		case "outbound_shape":
			fail(m.match("outbound_shape", want, string(tx.resp.Shape), exact))
		case "outbound_payload_includes":
			fail(m.match("outbound_payload_includes", want, tx.resp.Payload, subsetTop))
		case "harness_signal_subscription_registered", "signal_subscription_registered":
			fail(expectFlag(f.Key, f.Value, r.subscribed(ctx, o), "no subscription resolves to the paused invocation"))
		case "harness_did_not_block":
			fail(expectFlag(f.Key, f.Value, r.returnedSuspended(ctx, o), "Handle did not return a suspended outcome with its paused record stored"))
		case "descriptor_read_from_outcome":
			ok := o.Suspension != nil && o.Subscription != nil && o.Subscription.SignalID == o.Suspension.Descriptor.SignalID
			fail(expectFlag(f.Key, f.Value, ok, "the subscription does not carry the outcome's descriptor"))
		case "signal_correlation_resolved":
			ok := o.Path == harness.PathSignalResume && o.Subscription != nil && o.Subscription.InvocationID != ""
			fail(expectFlag(f.Key, f.Value, ok, "the signal was not correlated to a paused invocation"))
		case "resolved_to_invocation_id":
			id, err := r.placeholder(f.Value.Str)
			if err != nil {
				fail(err)
				continue
			}
			got := ""
			if o.Subscription != nil {
				got = o.Subscription.InvocationID
			}
			fail(m.match(f.Key, id, got, exact))
		case "harness_auto_retried":
			retried := tx.loads > 1 || tx.bodyTo-tx.bodyFrom > len(r.hg.g.Nodes())
			fail(expectFlag(f.Key, f.Value, retried, fmt.Sprintf("%d loads, %d node runs", tx.loads, tx.bodyTo-tx.bodyFrom)))
		case "session_store_load_calls":
			fail(m.match(f.Key, want, tx.loads, exact))
		case "session_store_save_calls":
			fail(m.match(f.Key, want, tx.saves, exact))
		case "invoke_args":
			fail(r.assertInvokeArgs(m, tx, f.Value))
		}
	}
	return errors.Join(errs...)
}

// assertInvokeArgs checks what the harness passed into the engine, as
// observed inside the engine: the session id each node body saw, the
// resumed invocation, and the payload in the resumed run's start state.
func (r *hcHarnessRun) assertInvokeArgs(m *matcher, tx *hcTx, v *Value) error {
	if err := hcStrictKeys(v, "invoke_args", "session_id", "session_id_present", "session_id_auto_generated",
		"session_id_caller_supplied", "session_id_absent_verified", "resume_invocation", "signal_payload"); err != nil {
		return err
	}
	o := tx.out
	seen := r.engineSessions(tx)
	engineID := ""
	consistent := true
	for i, s := range seen {
		if i == 0 {
			engineID = s
		} else if s != engineID {
			consistent = false
		}
	}
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(seen) == 0 {
		fail(fmt.Errorf("invoke_args: no node body ran, so the engine's arguments were not observed"))
	}
	if !consistent {
		fail(fmt.Errorf("invoke_args: node bodies saw different session ids %q", seen))
	}
	for _, f := range v.Fields {
		switch f.Key {
		case "session_id":
			fail(m.match("invoke_args.session_id", f.Value.Native(), engineID, exact))
		case "session_id_present":
			fail(expectFlag(f.Key, f.Value, engineID != "", "the engine received no session id"))
		case "session_id_auto_generated":
			ok := o.SessionIDMinted && engineID == o.SessionID && uuid.Valid(engineID) && tx.callerSession == ""
			fail(expectFlag(f.Key, f.Value, ok, fmt.Sprintf("session id %q (minted %v)", engineID, o.SessionIDMinted)))
		case "session_id_caller_supplied":
			ok := !o.SessionIDMinted && tx.callerSession != "" && engineID == tx.callerSession
			fail(expectFlag(f.Key, f.Value, ok, fmt.Sprintf("engine session id %q, caller's %q", engineID, tx.callerSession)))
		case "session_id_absent_verified":
			ok := engineID == "" && o.SessionID == "" && tx.loads == 0 && tx.saves == 0
			fail(expectFlag(f.Key, f.Value, ok, fmt.Sprintf("engine session id %q, %d loads, %d saves", engineID, tx.loads, tx.saves)))
		case "resume_invocation":
			id, err := r.placeholder(f.Value.Str)
			if err != nil {
				fail(err)
				continue
			}
			if o.Path != harness.PathSignalResume {
				fail(fmt.Errorf("resume_invocation: the transmission took path %s", o.Path))
			}
			fail(m.match("invoke_args.resume_invocation", id, o.InvocationID, exact))
		case "signal_payload":
			want, ok := f.Value.Native().(map[string]any)
			if !ok || o.Result == nil || o.Result.Start.IsZero() {
				fail(fmt.Errorf("signal_payload: the resumed run's start state is unavailable"))
				continue
			}
			start := o.Result.Start.Map()
			for k, wv := range want {
				fail(m.match("invoke_args.signal_payload."+k, wv, start[k], exact))
			}
		}
	}
	return errors.Join(errs...)
}

// subscribed reports whether the coordinator resolves the outcome's
// signal to its invocation.
func (r *hcHarnessRun) subscribed(ctx context.Context, o *harness.Outcome) bool {
	if o.Suspension == nil {
		return false
	}
	sub, err := r.hg.coord.Resolve(ctx, harness.SignalRef{SignalID: o.Suspension.Descriptor.SignalID, SessionID: o.SessionID})
	return err == nil && sub.InvocationID == o.InvocationID
}

// returnedSuspended reports that Handle returned a suspended outcome
// whose paused record is stored (nothing waits on the turn).
func (r *hcHarnessRun) returnedSuspended(ctx context.Context, o *harness.Outcome) bool {
	if o.Status != graph.Suspended {
		return false
	}
	return pausedRecordExists(ctx, r.hg, o.InvocationID)
}

// pausedRecordExists reports whether the graph's record store holds the
// invocation's paused record.
func pausedRecordExists(ctx context.Context, hg *hcGraph, invocationID string) bool {
	_, err := hg.records.Load(ctx, checkpointKeyOf(invocationID))
	return err == nil
}

func hcStatus(s graph.Status) string {
	switch s {
	case graph.Completed:
		return "completed"
	case graph.Suspended:
		return "suspended"
	case graph.Errored:
		return "errored"
	}
	return fmt.Sprintf("status(%d)", s)
}

func descriptorMap(d graph.SignalDescriptor) map[string]any {
	m := map[string]any{"signal_id": d.SignalID}
	if d.Metadata != nil {
		m["metadata"] = d.Metadata
	}
	return m
}

// hcFlag is an invariant over the whole run.
type hcFlag func(ctx context.Context) error

// invariants evaluates the case's invariants by name.
func (r *hcHarnessRun) invariants(ctx context.Context, body *Value) error {
	iv, ok := body.Get("invariants")
	if !ok {
		return nil
	}
	first := func() *hcTx { return r.txs[0] }
	last := func() *hcTx { return r.txs[len(r.txs)-1] }
	check := func(ok bool, format string, args ...any) error {
		if ok {
			return nil
		}
		return fmt.Errorf(format, args...)
	}
	bucket := func(b harness.Bucket) hcFlag {
		return func(context.Context) error {
			o := last().out
			return check(o.Status == graph.Errored && o.Bucket == b, "outcome %s in bucket %q, want %q", hcStatus(o.Status), o.Bucket, b)
		}
	}
	shape := func(s harness.Shape) hcFlag {
		return func(context.Context) error {
			return check(last().resp.Shape == s, "outbound shape %q, want %q", last().resp.Shape, s)
		}
	}
	payloadFlag := func(key string) hcFlag {
		return func(context.Context) error {
			return check(last().resp.Payload[key] == true, "outbound %s is %v", key, last().resp.Payload[key])
		}
	}
	suspendedAndSubscribed := func(ctx context.Context) error {
		for _, tx := range r.txs {
			if tx.out.Status == graph.Suspended {
				return check(r.subscribed(ctx, tx.out) || r.laterResumed(tx), "the suspended turn has no subscription")
			}
		}
		return fmt.Errorf("no transmission suspended")
	}
	resumed := func(ctx context.Context) error {
		tx := last()
		return check(tx.out.Path == harness.PathSignalResume && tx.out.Status == graph.Completed && tx.out.Subscription != nil,
			"the last transmission took path %s with outcome %s", tx.out.Path, hcStatus(tx.out.Status))
	}
	distinctShapes := func(context.Context) error {
		s := last().resp.Shape
		n := 0
		for _, x := range []harness.Shape{harness.ShapeCompletion, harness.ShapeError, harness.ShapeSuspended} {
			if x == s {
				n++
			}
		}
		return check(n == 1 && s != "", "outbound shape %q is not exactly one of the three", s)
	}
	notBlocked := func(ctx context.Context) error {
		for _, tx := range r.txs {
			if tx.out.Status == graph.Suspended {
				return check(tx.out.Subscription != nil, "the suspended transmission returned without a subscription")
			}
		}
		return fmt.Errorf("no transmission suspended")
	}
	storeUntouched := func(context.Context) error {
		if r.hg.store == nil {
			return fmt.Errorf("no session store is registered")
		}
		l, s := r.hg.store.counts()
		return check(l == 0 && s == 0, "the session store saw %d loads and %d saves", l, s)
	}
	flags := map[string]hcFlag{
		"harness_classified_as_new_session_path": func(context.Context) error {
			return check(first().out.Path == harness.PathNewSession, "path %s", first().out.Path)
		},
		"harness_auto_generated_session_id": func(context.Context) error {
			o := first().out
			return check(o.SessionIDMinted && uuid.Valid(o.SessionID), "session id %q minted=%v", o.SessionID, o.SessionIDMinted)
		},
		"engine_received_session_id": func(context.Context) error {
			s := r.engineSessions(first())
			return check(len(s) > 0 && s[0] == first().out.SessionID && s[0] != "", "node bodies saw session ids %q", s)
		},
		"harness_classified_first_as_new_second_as_existing": func(context.Context) error {
			return check(len(r.txs) >= 2 && r.txs[0].out.Path == harness.PathNewSession && r.txs[1].out.Path == harness.PathExistingSession,
				"paths %s, %s", r.txs[0].out.Path, last().out.Path)
		},
		"harness_threaded_caller_session_id_verbatim": func(context.Context) error {
			for _, tx := range r.txs {
				for _, s := range r.engineSessions(tx) {
					if s != tx.callerSession {
						return fmt.Errorf("transmission %s: engine saw %q, caller sent %q", tx.name, s, tx.callerSession)
					}
				}
			}
			return nil
		},
		"engine_loaded_prior_session_state_on_second_invoke": func(context.Context) error {
			if len(r.txs) < 2 {
				return fmt.Errorf("fewer than two transmissions")
			}
			a, b := r.txs[0].out.State().Map(), r.txs[1].out.Result
			if b == nil {
				return fmt.Errorf("the second transmission did not invoke")
			}
			start := b.Start.Map()
			for k, v := range a {
				if k == "" {
					continue
				}
				// The second run started from the first's saved state plus
				// its input: every list field's prior items are a prefix.
				if l, ok := v.([]any); ok {
					sl, _ := start[k].([]any)
					if len(sl) < len(l) || !deepEqual(normalize(sl[:len(l)]), normalize(l)) {
						return fmt.Errorf("field %s: second run started from %v, first ended with %v", k, start[k], v)
					}
				}
			}
			return check(tx2Loads(r) > 0, "the second transmission loaded nothing")
		},
		"first_invoke_suspended_and_signal_subscribed":            suspendedAndSubscribed,
		"suspend_registered_subscription":                         suspendedAndSubscribed,
		"suspended_outcome_registered_subscription":               suspendedAndSubscribed,
		"second_invoke_classified_as_signal_resume":               resumed,
		"resume_invocation_completed_the_graph":                   resumed,
		"signal_arrival_correlated_to_paused_invocation":          resumed,
		"end_to_end_signal_roundtrip_succeeded":                   func(ctx context.Context) error { return errors.Join(suspendedAndSubscribed(ctx), resumed(ctx)) },
		"resume_threaded_signal_payload_into_engine":              r.payloadThreaded,
		"harness_did_not_block_between_suspend_and_signal":        notBlocked,
		"harness_did_not_block_on_suspended_turn":                 notBlocked,
		"completed_outcome_surfaced_as_completion_response_shape": shape(harness.ShapeCompletion),
		"outbound_shape_distinct_from_error_or_suspended":         distinctShapes,
		"suspended_outcome_distinct_outbound_shape": func(ctx context.Context) error {
			return errors.Join(shape(harness.ShapeSuspended)(ctx), distinctShapes(ctx))
		},
		"errored_outcome_categorized_into_retryable_transient_bucket": bucket(harness.RetryableTransient),
		"provider_unavailable_classified_as_retryable_transient":      bucket(harness.RetryableTransient),
		"session_load_failed_classified_as_terminating":               bucket(harness.SessionTerminating),
		"provider_invalid_request_classified_as_user_correctable":     bucket(harness.UserCorrectable),
		"outbound_shape_is_error_response":                            shape(harness.ShapeError),
		"outbound_includes_category_and_bucket": func(context.Context) error {
			p := last().resp.Payload
			return check(p["category"] != "" && p["category"] != nil && p["bucket"] != "" && p["bucket"] != nil, "payload %v", p)
		},
		"harness_did_not_auto_retry": func(context.Context) error {
			tx := last()
			return check(tx.loads <= 1 && tx.bodyTo-tx.bodyFrom <= len(r.hg.g.Nodes()), "%d loads, %d node runs", tx.loads, tx.bodyTo-tx.bodyFrom)
		},
		"outbound_marked_intervention_required": payloadFlag("intervention_required"),
		"outbound_marked_retry_safe":            payloadFlag("retry_safe"),
		"outbound_marks_user_action_required":   payloadFlag("user_action_required"),
		"outbound_includes_diagnostic_message": func(context.Context) error {
			d, _ := last().resp.Payload["diagnostic_message"].(string)
			return check(d != "", "no diagnostic_message in %v", last().resp.Payload)
		},
		"stateless_harness_classified_via_path_3_0": func(context.Context) error {
			return check(last().out.Path == harness.PathStateless, "path %s", last().out.Path)
		},
		"stateless_harness_did_not_resolve_session_id": func(context.Context) error {
			o := last().out
			return check(o.SessionID == "" && !o.SessionIDMinted, "session id %q", o.SessionID)
		},
		"engine_did_not_invoke_session_store": storeUntouched,
		"session_store_completely_untouched":  storeUntouched,
	}
	uses, err := hcInvariantUses(iv)
	if err != nil {
		return err
	}
	for _, u := range uses {
		f, ok := flags[u.Key]
		if !ok {
			return &DirectiveUnknownError{Name: "invariant " + u.Key, Pos: u.Pos}
		}
		if err := f(ctx); err != nil {
			return fmt.Errorf("invariant %s: %w", u.Key, err)
		}
	}
	return nil
}

// laterResumed reports whether a later transmission resumed tx's
// invocation (its subscription is then released).
func (r *hcHarnessRun) laterResumed(tx *hcTx) bool {
	for _, t := range r.txs {
		if t.out.Path == harness.PathSignalResume && t.out.InvocationID == tx.out.InvocationID && t.out.Subscription != nil {
			return true
		}
	}
	return false
}

// payloadThreaded checks the resumed run started from the payload.
func (r *hcHarnessRun) payloadThreaded(context.Context) error {
	for _, tx := range r.txs {
		if tx.out.Path != harness.PathSignalResume {
			continue
		}
		if tx.out.Result == nil || tx.out.Result.Start.IsZero() {
			return fmt.Errorf("the resumed run did not start")
		}
		return nil
	}
	return fmt.Errorf("no signal-resume transmission")
}

func tx2Loads(r *hcHarnessRun) int { return r.txs[1].loads }

// hcInvariantUses returns the invariants set to true, failing on any
// other value (the suites only declare boolean invariants).
func hcInvariantUses(iv *Value) ([]*Field, error) {
	if iv.Kind != KindMap {
		return nil, schemaErrorf(iv.Pos, "invariants: must be a mapping")
	}
	for _, f := range iv.Fields {
		if f.Value.Kind != KindBool || !f.Value.Bool {
			return nil, schemaErrorf(f.Pos, "invariant %s: only true is defined", f.Key)
		}
	}
	return iv.Fields, nil
}

// checkpointKeyOf is the paused-record key of an invocation.
func checkpointKeyOf(id string) checkpoint.Key {
	return checkpoint.Key{InvocationID: id, Kind: checkpoint.KindSuspended}
}
