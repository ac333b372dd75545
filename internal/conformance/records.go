package conformance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/armature-go/armature/graph"
)

// eventRec is an engine-independent copy of one delivered node event, in
// the vocabulary fixtures assert on (graph-engine §6 NodeEvent).
type eventRec struct {
	Phase        string
	NodeName     string
	Namespace    []string
	Step         int
	PreState     any // normalized mapping, nil when absent
	PostState    any // normalized mapping, nil when absent
	HasPostState bool
	// ErrCategory and ErrMessage describe the event's error, if any.
	HasError    bool
	ErrCategory string
	ErrMessage  string
	// ErrCause is the derived category of the error's cause chain
	// (pipeline-utilities §6.4), "" when none.
	ErrCause     string
	ParentStates []any
	AttemptIndex int
	FanOutIndex  *int
	BranchName   *string
	// FanOutIndexChain and BranchNameChain hold nil for a boundary that
	// is not a fan-out instance / parallel branch.
	FanOutIndexChain []*int
	BranchNameChain  []*string
	InvocationID     string
	CorrelationID    string
	// FanOutItemCount is the item count of a fan-out node's events (-1
	// for other nodes).
	FanOutItemCount int
	// Descriptor is a suspended event's signal descriptor, rendered
	// {signal_id, metadata} (nil on other events).
	Descriptor map[string]any
}

// view renders the event as the mapping fixtures describe; absent
// optional fields are omitted.
func (e *eventRec) view() map[string]any {
	m := map[string]any{
		"phase":               e.Phase,
		"node_name":           e.NodeName,
		"namespace":           stringsToAny(e.Namespace),
		"step":                int64(e.Step),
		"pre_state":           e.PreState,
		"parent_states":       append([]any{}, e.ParentStates...),
		"attempt_index":       int64(e.AttemptIndex),
		"invocation_id":       e.InvocationID,
		"fan_out_index_chain": e.fanOutChain(),
		"branch_name_chain":   e.branchChain(),
	}
	if e.CorrelationID != "" {
		m["correlation_id"] = e.CorrelationID
	}
	if e.HasPostState {
		m["post_state"] = e.PostState
	}
	if e.HasError {
		m["error"] = map[string]any{"category": e.ErrCategory, "message": e.ErrMessage}
	}
	if e.FanOutIndex != nil {
		m["fan_out_index"] = int64(*e.FanOutIndex)
	}
	if e.BranchName != nil {
		m["branch_name"] = *e.BranchName
	}
	if e.Descriptor != nil {
		m["descriptor"] = e.Descriptor
	}
	return m
}

// fanOutChain renders FanOutIndexChain as fixtures write it (null for a
// boundary that is not a fan-out instance).
func (e *eventRec) fanOutChain() []any {
	out := make([]any, len(e.FanOutIndexChain))
	for i, p := range e.FanOutIndexChain {
		if p != nil {
			out[i] = int64(*p)
		}
	}
	return out
}

// branchChain renders BranchNameChain as fixtures write it.
func (e *eventRec) branchChain() []any {
	out := make([]any, len(e.BranchNameChain))
	for i, p := range e.BranchNameChain {
		if p != nil {
			out[i] = *p
		}
	}
	return out
}

// identity is the event-source identity tuple of graph-engine §6
// (namespace, fan_out_index, branch_name, attempt_index, phase), with
// the lineage chains instead of the scalars when chains is true.
func (e *eventRec) identity(chains bool) string {
	ns := strings.Join(e.Namespace, "\x1f")
	if chains {
		return fmt.Sprintf("%s|%s|%s|%d|%s", ns, formatValue(e.fanOutChain()), formatValue(e.branchChain()), e.AttemptIndex, e.Phase)
	}
	return fmt.Sprintf("%s|%s|%s|%d|%s", ns, formatValue(e.FanOutIndex), formatValue(e.BranchName), e.AttemptIndex, e.Phase)
}

// occurrence identifies one event within an invocation (identity plus
// step), for comparing snapshots with later observer state.
func (e *eventRec) occurrence() string {
	return fmt.Sprintf("%s|%d", e.identity(true), e.Step)
}

// sourceKey identifies one node attempt (identity without the phase, plus
// the step): its started and completed/suspended events share it.
func (e *eventRec) sourceKey() string {
	return fmt.Sprintf("%s|%s|%s|%d|%d", strings.Join(e.Namespace, "\x1f"),
		formatValue(e.fanOutChain()), formatValue(e.branchChain()), e.AttemptIndex, e.Step)
}

// isInner reports whether the event comes from inside a fan-out instance
// or a parallel branch.
func (e *eventRec) isInner() bool {
	if e.FanOutIndex != nil || e.BranchName != nil {
		return true
	}
	for _, p := range e.FanOutIndexChain {
		if p != nil {
			return true
		}
	}
	for _, p := range e.BranchNameChain {
		if p != nil {
			return true
		}
	}
	return false
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// delivery is one observer delivery, in delivery order.
type delivery struct {
	Observer string
	Event    *eventRec
}

// drainRec records one drain call (process-wide or per-invocation).
type drainRec struct {
	HasTimeout     bool
	Timeout        time.Duration
	Elapsed        time.Duration
	Undelivered    int
	TimeoutReached bool
	Err            error
	// DeliveredAtReturn is how many of the invocation's events had been
	// delivered (to any observer) when the drain returned.
	DeliveredAtReturn int
}

// nodeDrainRec records an invoke_drain_events_for directive's drain.
type nodeDrainRec struct {
	drainRec
	Node         string
	Observer     string
	InvocationID string
	// Snapshot is the observer's bucket for InvocationID at drain return.
	Snapshot []*eventRec
}

// observerInfo describes one harness observer of a case.
type observerInfo struct {
	Name     string
	Behavior string
	Target   string
	// AllPhases is true when the observer subscribes to both started and
	// completed (the default).
	AllPhases bool
}

// recorder is the shared, concurrency-safe log of everything the harness
// observers receive in one case, plus the node drain records.
type recorder struct {
	mu         sync.Mutex
	deliveries []delivery
	received   map[string][]*eventRec
	nodeDrains map[string]map[string]*nodeDrainRec // invocation id -> node -> record
}

func newRecorder() *recorder {
	return &recorder{
		received:   map[string][]*eventRec{},
		nodeDrains: map[string]map[string]*nodeDrainRec{},
	}
}

func (r *recorder) deliver(observer string, ev *eventRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = append(r.deliveries, delivery{Observer: observer, Event: ev})
	r.received[observer] = append(r.received[observer], ev)
}

// events returns what observer received, optionally only for one
// invocation id ("" = all).
func (r *recorder) events(observer, invocationID string) []*eventRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*eventRec
	for _, ev := range r.received[observer] {
		if invocationID == "" || ev.InvocationID == invocationID {
			out = append(out, ev)
		}
	}
	return out
}

// deliveryLog returns the delivery log, optionally only for one invocation.
func (r *recorder) deliveryLog(invocationID string) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delivery
	for _, d := range r.deliveries {
		if invocationID == "" || d.Event.InvocationID == invocationID {
			out = append(out, d)
		}
	}
	return out
}

// deliveredTotal is the length of the delivery log.
func (r *recorder) deliveredTotal() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.deliveries)
}

// eventsIn returns what observer received for invocationID among the
// deliveries [from, to).
func (r *recorder) eventsIn(observer, invocationID string, from, to int) []*eventRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*eventRec
	for _, d := range r.deliveries[from:min(to, len(r.deliveries))] {
		if d.Observer == observer && d.Event.InvocationID == invocationID {
			out = append(out, d.Event)
		}
	}
	return out
}

func (r *recorder) deliveredCount(invocationID string) int {
	return len(r.deliveryLog(invocationID))
}

func (r *recorder) addNodeDrain(rec *nodeDrainRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.nodeDrains[rec.InvocationID]
	if m == nil {
		m = map[string]*nodeDrainRec{}
		r.nodeDrains[rec.InvocationID] = m
	}
	m[rec.Node] = rec
}

func (r *recorder) nodeDrainsFor(invocationID string) map[string]*nodeDrainRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.nodeDrains[invocationID])
}

// invocationRun is the outcome of one invocation of a case.
type invocationRun struct {
	Name         string
	InvocationID string
	Status       string // "completed", "errored", "suspended"
	Err          error
	// FinalState is the normalized final (or recoverable) state.
	FinalState any
	Path       []string
	Initial    map[string]any
	// Drain is the explicit process-wide drain, if the invocation had one.
	Drain *drainRec
	// FullDrainErr is the error of the unconditional full drain.
	FullDrainErr error
	// Sess is what the invocation did to its session (sessions cases).
	Sess *ssRun
	// Run is the run index the invocation's context was tagged with.
	Run int
	// Suspension is the suspended outcome's description (nil unless
	// suspended); Resume is set for a resume invocation.
	Suspension *graph.Suspension
	Resume     *resumeCall
	// CP is the harness checkpoint store right after the run
	// (checkpointer: cases).
	CP *cpSnapshot
	// delivFrom/delivTo and puFrom/puTo delimit the run's deliveries in
	// the recorder and the pipeline recording observer: a resume reuses
	// its invocation id, so the id alone does not identify a run's
	// events.
	delivFrom, delivTo int
	puFrom, puTo       int
	// otel is what the run emitted to the OTel captures and the log
	// capture.
	otel *otelRun
}

// caseRun is everything one executed case recorded; invariants read it.
type caseRun struct {
	rec         *recorder
	pu          *puState
	gc          *geCase
	observers   []observerInfo
	invocations []*invocationRun
	// ss is the sessions harness; compiled is false when the case failed
	// at registration (no graph to invoke).
	ss       *ssState
	compiled bool
	// x is the execution, for the suspension invariants (body and
	// middleware logs per run, per-run events).
	x *geExec
	// reinvoke runs the case's compiled graph once more with initial
	// state and drains fully (graph_state_intact_after_timeout).
	reinvoke func(ctx context.Context, initial map[string]any) (*invocationRun, error)
}

// defaultObserver is the observer whose events event-stream invariants
// read when the fixture does not name one: the first record or accumulate
// observer targeting the outermost graph, else the first such observer.
func (cr *caseRun) defaultObserver() (string, bool) {
	for _, outerOnly := range []bool{true, false} {
		for _, o := range cr.observers {
			if (o.Behavior == "record" || o.Behavior == "accumulate") && (!outerOnly || o.Target == "outer") {
				return o.Name, true
			}
		}
	}
	return "", false
}

// indexOf returns the position of inv in the run, or -1.
func (cr *caseRun) indexOf(inv *invocationRun) int {
	return slices.Index(cr.invocations, inv)
}
