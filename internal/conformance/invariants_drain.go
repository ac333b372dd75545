package conformance

import (
	"context"
	"fmt"
)

// Run predicates: checks over the executed case — its invocations, drain
// records and observer logs (graph-engine §6 Drain / Per-invocation drain).

// runBool adapts a boolean predicate over the executed case.
func runBool(pred func(ctx context.Context, env *invEnv) (bool, string, error)) invariantFunc {
	return func(ctx context.Context, env *invEnv, want *Value) error {
		got, detail, err := pred(ctx, env)
		if err != nil {
			return err
		}
		return compareBool(want, got, detail)
	}
}

// nodeDrains returns the invoke_drain_events_for records of the scope.
func (e *invEnv) nodeDrains() []*nodeDrainRec {
	var out []*nodeDrainRec
	for _, inv := range e.scope() {
		m := e.run.rec.nodeDrainsFor(inv.InvocationID)
		for _, k := range sortedKeys(m) {
			out = append(out, m[k])
		}
	}
	return out
}

func drainReturnedWithinTimeout(_ context.Context, env *invEnv) (bool, string, error) {
	var timed []drainRec
	for _, inv := range env.scope() {
		if inv.Drain != nil && inv.Drain.HasTimeout {
			timed = append(timed, *inv.Drain)
		}
	}
	for _, nd := range env.nodeDrains() {
		if nd.HasTimeout {
			timed = append(timed, nd.drainRec)
		}
	}
	if len(timed) == 0 {
		return false, "", fmt.Errorf("no drain with a timeout ran")
	}
	for _, d := range timed {
		if d.Elapsed > d.Timeout+drainSlack {
			return false, fmt.Sprintf("drain with timeout %v returned after %v", d.Timeout, d.Elapsed), nil
		}
	}
	return true, "", nil
}

// pairsComplete reports whether every started event has a completed
// event of the same identity and step, and vice versa.
func pairsComplete(evs []*eventRec) bool {
	count := map[string]int{}
	for _, e := range evs {
		k := e.sourceKey()
		switch e.Phase {
		case "started":
			count[k]++
		case "completed", "suspended":
			count[k]--
		}
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// allObserversComplete reports whether every observer subscribed to both
// phases received a non-empty, pair-complete event stream for inv.
func allObserversComplete(env *invEnv, invocationID string) (bool, string) {
	checked := 0
	for _, o := range env.run.observers {
		if !o.AllPhases {
			continue
		}
		evs := env.run.rec.events(o.Name, invocationID)
		if len(evs) == 0 {
			return false, fmt.Sprintf("observer %q received no events", o.Name)
		}
		if !pairsComplete(evs) {
			return false, fmt.Sprintf("observer %q is missing started or completed events", o.Name)
		}
		checked++
	}
	if checked == 0 {
		return false, "no observer subscribed to both phases"
	}
	return true, ""
}

func graphIntactAfterTimeout(ctx context.Context, env *invEnv) (bool, string, error) {
	var timedOut *invocationRun
	for _, inv := range env.scope() {
		if inv.Drain != nil && inv.Drain.TimeoutReached {
			timedOut = inv
			break
		}
	}
	if timedOut == nil {
		return false, "", fmt.Errorf("no process-wide drain timed out")
	}
	again, err := env.run.reinvoke(ctx, timedOut.Initial)
	if err != nil {
		return false, "", err
	}
	if again.Status != "completed" {
		return false, fmt.Sprintf("re-invocation ended %s: %v", again.Status, again.Err), nil
	}
	if again.FullDrainErr != nil {
		return false, fmt.Sprintf("draining the re-invocation failed: %v", again.FullDrainErr), nil
	}
	if !deepEqual(again.FinalState, timedOut.FinalState) {
		return false, fmt.Sprintf("re-invocation final state %s differs from %s", formatValue(again.FinalState), formatValue(timedOut.FinalState)), nil
	}
	if ok, detail := allObserversComplete(env, again.InvocationID); !ok {
		return false, "re-invocation: " + detail, nil
	}
	return true, "", nil
}

func secondDrainIndependent(_ context.Context, env *invEnv) (bool, string, error) {
	if len(env.run.invocations) < 2 {
		return false, "", fmt.Errorf("needs at least two invocations")
	}
	first, second := env.run.invocations[0], env.run.invocations[1]
	if first.Drain == nil || second.Drain == nil {
		return false, "", fmt.Errorf("both invocations need a drain directive")
	}
	if !first.Drain.TimeoutReached {
		return false, "the first invocation's drain did not time out", nil
	}
	d := second.Drain
	if d.Err != nil || d.TimeoutReached || d.Undelivered != 0 {
		return false, fmt.Sprintf("second drain: timeout_reached=%t undelivered=%d err=%v", d.TimeoutReached, d.Undelivered, d.Err), nil
	}
	if second.Status != "completed" {
		return false, "the second invocation did not complete", nil
	}
	if total := env.run.rec.deliveredCount(second.InvocationID); d.DeliveredAtReturn != total {
		return false, fmt.Sprintf("second drain returned with %d of %d deliveries done", d.DeliveredAtReturn, total), nil
	}
	// No residue of the first invocation is delivered once the second's
	// deliveries have begun.
	log := env.run.rec.deliveryLog("")
	began := false
	for _, dl := range log {
		switch dl.Event.InvocationID {
		case second.InvocationID:
			began = true
		case first.InvocationID:
			if began {
				return false, fmt.Sprintf("an event of the first invocation was delivered to %q during the second", dl.Observer), nil
			}
		}
	}
	if ok, detail := allObserversComplete(env, second.InvocationID); !ok {
		return false, detail, nil
	}
	return true, "", nil
}

func drainWaitedForAll(_ context.Context, env *invEnv) (bool, string, error) {
	n := 0
	for _, inv := range env.scope() {
		d := inv.Drain
		if d == nil || d.HasTimeout {
			continue
		}
		n++
		if d.Err != nil || d.TimeoutReached || d.Undelivered != 0 {
			return false, fmt.Sprintf("drain: timeout_reached=%t undelivered=%d err=%v", d.TimeoutReached, d.Undelivered, d.Err), nil
		}
		if total := env.run.rec.deliveredCount(inv.InvocationID); d.DeliveredAtReturn != total {
			return false, fmt.Sprintf("drain returned with %d of %d deliveries done", d.DeliveredAtReturn, total), nil
		}
	}
	if n == 0 {
		return false, "", fmt.Errorf("no drain without a timeout ran")
	}
	return true, "", nil
}

// snapshotIsPrefix checks that a node drain's snapshot is exactly the
// observer's final bucket up to and including the draining node's own
// started event — every event emitted before the drain call, nothing after.
func snapshotIsPrefix(env *invEnv, nd *nodeDrainRec) (bool, string) {
	final := env.run.rec.events(nd.Observer, nd.InvocationID)
	idx := -1
	for i, e := range final {
		if e.NodeName == nd.Node && e.Phase == "started" {
			idx = i
		}
	}
	if idx < 0 {
		return false, fmt.Sprintf("observer %q never received %q's started event", nd.Observer, nd.Node)
	}
	want := final[:idx+1]
	if len(nd.Snapshot) != len(want) {
		return false, fmt.Sprintf("snapshot at drain return has %d events, want the %d emitted before the drain", len(nd.Snapshot), len(want))
	}
	for i := range want {
		if nd.Snapshot[i].occurrence() != want[i].occurrence() {
			return false, fmt.Sprintf("snapshot event %d is %s %q, want %s %q", i, nd.Snapshot[i].Phase, nd.Snapshot[i].NodeName, want[i].Phase, want[i].NodeName)
		}
	}
	return true, ""
}

func cleanSummary(nd *nodeDrainRec) (bool, string) {
	if nd.Err != nil || nd.TimeoutReached || nd.Undelivered != 0 {
		return false, fmt.Sprintf("drain_events_for in %q: timeout_reached=%t undelivered=%d err=%v", nd.Node, nd.TimeoutReached, nd.Undelivered, nd.Err)
	}
	return true, ""
}

func requireNodeDrains(env *invEnv) ([]*nodeDrainRec, error) {
	nds := env.nodeDrains()
	if len(nds) == 0 {
		return nil, fmt.Errorf("no invoke_drain_events_for ran")
	}
	return nds, nil
}

func nodeDrainSynchronized(_ context.Context, env *invEnv) (bool, string, error) {
	nds, err := requireNodeDrains(env)
	if err != nil {
		return false, "", err
	}
	for _, nd := range nds {
		if ok, detail := cleanSummary(nd); !ok {
			return false, detail, nil
		}
		if ok, detail := snapshotIsPrefix(env, nd); !ok {
			return false, detail, nil
		}
	}
	return true, "", nil
}

func nodeDrainNotBlocked(_ context.Context, env *invEnv) (bool, string, error) {
	nds, err := requireNodeDrains(env)
	if err != nil {
		return false, "", err
	}
	for _, nd := range nds {
		if ok, detail := cleanSummary(nd); !ok {
			return false, detail, nil
		}
		for _, e := range nd.Snapshot {
			if e.NodeName == nd.Node && e.Phase == "completed" {
				return false, fmt.Sprintf("snapshot already holds %q's own completed event", nd.Node), nil
			}
		}
		found := false
		for _, e := range env.run.rec.events(nd.Observer, nd.InvocationID) {
			if e.NodeName == nd.Node && e.Phase == "completed" {
				found = true
			}
		}
		if !found {
			return false, fmt.Sprintf("%q's completed event was never delivered after the drain", nd.Node), nil
		}
	}
	return true, "", nil
}

func intactAfterNodeDrainTimeout(_ context.Context, env *invEnv) (bool, string, error) {
	inv := env.inv
	if inv == nil {
		inv = env.run.invocations[len(env.run.invocations)-1]
	}
	earlier := false
	for _, prev := range env.run.invocations[:max(env.run.indexOf(inv), 0)] {
		for _, nd := range env.run.rec.nodeDrainsFor(prev.InvocationID) {
			if nd.TimeoutReached {
				earlier = true
			}
		}
	}
	if !earlier {
		return false, "", fmt.Errorf("no earlier invocation's drain_events_for timed out")
	}
	if inv.Status != "completed" || inv.Err != nil {
		return false, fmt.Sprintf("invocation %q ended %s: %v", inv.Name, inv.Status, inv.Err), nil
	}
	if ok, detail := allObserversComplete(env, inv.InvocationID); !ok {
		return false, detail, nil
	}
	return true, "", nil
}

func workersNotCancelled(_ context.Context, env *invEnv) (bool, string, error) {
	var timedOut []*nodeDrainRec
	for _, nd := range env.nodeDrains() {
		if nd.TimeoutReached {
			timedOut = append(timedOut, nd)
		}
	}
	if len(timedOut) == 0 {
		return false, "", fmt.Errorf("no drain_events_for timed out")
	}
	for _, nd := range timedOut {
		final := env.run.rec.events(nd.Observer, nd.InvocationID)
		if len(final) < len(nd.Snapshot)+nd.Undelivered {
			return false, fmt.Sprintf("observer %q ended with %d events; %d were delivered at the timeout and %d undelivered, so workers dropped events",
				nd.Observer, len(final), len(nd.Snapshot), nd.Undelivered), nil
		}
		if !pairsComplete(final) {
			return false, fmt.Sprintf("observer %q never received some of the timed-out invocation's events", nd.Observer), nil
		}
	}
	return true, "", nil
}

func uniqueInvocationIDs(_ context.Context, env *invEnv) (bool, string, error) {
	if len(env.run.invocations) < 2 {
		return false, "", fmt.Errorf("needs at least two invocations")
	}
	seen := map[string]bool{}
	for _, inv := range env.run.invocations {
		if inv.InvocationID == "" {
			return false, fmt.Sprintf("invocation %q has no invocation id", inv.Name), nil
		}
		if seen[inv.InvocationID] {
			return false, fmt.Sprintf("invocation id %s is reused", inv.InvocationID), nil
		}
		seen[inv.InvocationID] = true
	}
	for _, d := range env.run.rec.deliveryLog("") {
		if !seen[d.Event.InvocationID] {
			return false, fmt.Sprintf("an event carries invocation id %q, which no invocation returned", d.Event.InvocationID), nil
		}
	}
	return true, "", nil
}

func nodeDrainScoped(_ context.Context, env *invEnv) (bool, string, error) {
	nds, err := requireNodeDrains(env)
	if err != nil {
		return false, "", err
	}
	for _, nd := range nds {
		if ok, detail := cleanSummary(nd); !ok {
			return false, detail, nil
		}
		for _, e := range nd.Snapshot {
			if e.InvocationID != nd.InvocationID {
				return false, fmt.Sprintf("snapshot holds an event of invocation %s", e.InvocationID), nil
			}
		}
		if ok, detail := snapshotIsPrefix(env, nd); !ok {
			return false, detail, nil
		}
	}
	return true, "", nil
}

// nodeDrainCovers checks that each node drain's snapshot covers every
// value of key (fan_out_index / branch_name) the invocation produced, all
// under the drained invocation id.
func nodeDrainCovers(key func(e *eventRec) (any, bool), what string) func(context.Context, *invEnv) (bool, string, error) {
	return func(_ context.Context, env *invEnv) (bool, string, error) {
		nds, err := requireNodeDrains(env)
		if err != nil {
			return false, "", err
		}
		for _, nd := range nds {
			var inSnap, inFinal []any
			for _, e := range nd.Snapshot {
				if e.InvocationID != nd.InvocationID {
					return false, fmt.Sprintf("snapshot holds an event of invocation %s", e.InvocationID), nil
				}
				if v, ok := key(e); ok {
					inSnap = append(inSnap, v)
				}
			}
			for _, e := range env.run.rec.events(nd.Observer, nd.InvocationID) {
				if v, ok := key(e); ok {
					inFinal = append(inFinal, v)
				}
			}
			if len(inFinal) == 0 {
				return false, fmt.Sprintf("no event carries %s", what), nil
			}
			if !sameSet(inFinal, inSnap) {
				return false, fmt.Sprintf("snapshot covers %s %s, the invocation produced %s", what, formatValue(dedupe(inSnap)), formatValue(dedupe(inFinal))), nil
			}
		}
		return true, "", nil
	}
}
