package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

// The suspension harness: every node body run and wrap_with_middleware
// step is logged per run, resume invocations are resolved and executed
// through Graph.Resume, and the harness-held checkpoint store is
// snapshotted after each run.

// mwWrap is the internal mwSpec type of a wrap_with_middleware entry. It
// is not a middleware type: fixture spelling (middlewareKeys does not
// list it).
const mwWrap = "wrap_with_middleware"

// runKey tags an invocation's context with its run index. Values of the
// context given to Invoke / Resume reach node bodies and middleware, so
// records made there are attributed to the run even though a resume
// reuses its invocation id.
type runKey struct{}

func withRunIndex(ctx context.Context, run int) context.Context {
	return context.WithValue(ctx, runKey{}, run)
}

// runIndex returns the run index ctx was tagged with, or -1.
func runIndex(ctx context.Context) int {
	if i, ok := ctx.Value(runKey{}).(int); ok {
		return i
	}
	return -1
}

// runTag identifies one run of an invocation id.
func runTag(ctx context.Context) string {
	return runTagOf(graph.InvocationID(ctx), runIndex(ctx))
}

func runTagOf(invocationID string, run int) string {
	return fmt.Sprintf("%s#%d", invocationID, run)
}

// Body outcomes.
const (
	bodyReturned  = "returned"
	bodyErrored   = "errored"
	bodySuspended = "suspended" // unwound by a successful Suspend
	bodyUnwound   = "unwound"   // did not return, without a Suspend call
)

// bodyRun is one node body execution.
type bodyRun struct {
	Seq, EndSeq  int64
	Run          int
	InvocationID string
	Node         string
	Namespace    []string
	FanOutIndex  *int
	BranchName   *string
	Pre          map[string]any
	Outcome      string
	Err          error
	// SuspendCalled is set when the body called graph.Suspend with
	// SuspendDesc; SuspendErr is what Suspend returned (nil when it
	// unwound the body).
	SuspendCalled bool
	SuspendDesc   graph.SignalDescriptor
	SuspendErr    error
}

// mwRec is one wrap_with_middleware step.
type mwRec struct {
	Seq          int64
	Run          int
	InvocationID string
	Middleware   string
	// Node is the wrapped node (as declared).
	Node string
	// Kind is pre, post or suspend; Marker the logged marker; Err what
	// Suspend returned (suspend).
	Kind   string
	Marker string
	Err    error
	// StateIn is the state the middleware received.
	StateIn any
}

// resumeCall is a resolved resume invocation.
type resumeCall struct {
	id      string
	payload map[string]any
	spec    *susResume
	// target is the earlier run a placeholder named (nil: literal id).
	target *invocationRun
}

// cpSnapshot is the harness checkpoint store's records for one invocation
// id, read right after a run.
type cpSnapshot struct {
	Suspended  *checkpoint.Record
	Checkpoint *checkpoint.Record
}

type susState struct {
	// cp is the store registered with graph.WithCheckpointStore
	// (checkpointer: in_memory, or the runner's Backend's); nil
	// otherwise. done releases it.
	cp   checkpoint.Store
	done func()

	mu     sync.Mutex
	seq    int64
	runs   int
	idRuns map[string]int
	bodies []*bodyRun
	mw     []*mwRec
}

func newSusState(ctx context.Context, gc *geCase) *susState {
	st := &susState{idRuns: map[string]int{}, done: func() {}}
	if !gc.checkpointer {
		return st
	}
	st.cp = checkpoint.NewMemoryStore(nil)
	if b, ok := ctx.Value(backendKey{}).(Backend); ok && b != nil {
		if cp, done, err := b.Checkpoints(ctx); err == nil {
			st.cp, st.done = cp, done
		} else {
			st.cp = failingCheckpoints{err} // the case fails with the backend's error
		}
	}
	return st
}

// failingCheckpoints stands for a backend store that could not be
// opened: every call fails with its error.
type failingCheckpoints struct{ err error }

func (f failingCheckpoints) Save(context.Context, checkpoint.Record) error { return f.err }
func (f failingCheckpoints) Load(context.Context, checkpoint.Key) (*checkpoint.Record, error) {
	return nil, f.err
}
func (f failingCheckpoints) Take(context.Context, checkpoint.Key) (*checkpoint.Record, error) {
	return nil, f.err
}
func (f failingCheckpoints) Delete(context.Context, checkpoint.Key) error { return f.err }
func (f failingCheckpoints) List(context.Context, checkpoint.ListRequest) (checkpoint.ListResponse, error) {
	return checkpoint.ListResponse{}, f.err
}

func (st *susState) nextRun() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.runs++
	return st.runs
}

// reused reports whether more than one run used the invocation id.
func (st *susState) reused(invocationID string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.idRuns[invocationID] > 1
}

func (st *susState) beginBody(ctx context.Context, name string, s graph.State) *bodyRun {
	pre, _ := normalize(s).(map[string]any)
	br := &bodyRun{Run: runIndex(ctx), InvocationID: graph.InvocationID(ctx), Node: name, Namespace: []string{name}, Pre: pre}
	if info, ok := graph.CurrentNode(ctx); ok {
		br.Namespace = slices.Clone(info.Namespace)
		if info.FanOutIndex != nil {
			v := *info.FanOutIndex
			br.FanOutIndex = &v
		}
		if info.BranchName != nil {
			v := *info.BranchName
			br.BranchName = &v
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	br.Seq = st.seq
	st.bodies = append(st.bodies, br)
	return br
}

func (st *susState) endBody(br *bodyRun, returned bool, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	br.EndSeq = st.seq
	switch {
	case !returned && br.SuspendCalled && br.SuspendErr == nil:
		br.Outcome = bodySuspended
	case !returned:
		br.Outcome = bodyUnwound
	case err != nil:
		br.Outcome, br.Err = bodyErrored, err
	default:
		br.Outcome = bodyReturned
	}
}

// suspend is the suspend_with_descriptor directive: a real graph.Suspend.
// It returns only when Suspend fails (suspension_in_unsupported_context).
func (x *geExec) suspend(ctx context.Context, br *bodyRun, d *susDescriptor) error {
	desc := d.descriptor()
	x.sus.mu.Lock()
	br.SuspendCalled, br.SuspendDesc = true, desc
	x.sus.mu.Unlock()
	err := graph.Suspend(ctx, desc, d.options()...)
	if err == nil {
		err = errors.New("conformance: graph.Suspend returned neither a suspension nor an error")
	}
	x.sus.mu.Lock()
	br.SuspendErr = err
	x.sus.mu.Unlock()
	return err
}

func (st *susState) logMw(ctx context.Context, m *mwSpec, kind, marker string, s graph.State) *mwRec {
	rec := &mwRec{Run: runIndex(ctx), InvocationID: graph.InvocationID(ctx), Middleware: m.name, Node: m.nodeName, Kind: kind, Marker: marker, StateIn: normalize(s)}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	rec.Seq = st.seq
	st.mw = append(st.mw, rec)
	return rec
}

// wrapMiddleware builds a wrap_with_middleware entry: a real middleware
// logging pre_log before next() and post_log after it returns, or calling
// graph.Suspend before next() (suspension 015; it must fail, and the
// failure is returned without calling next()).
func (x *geExec) wrapMiddleware(m *mwSpec) graph.Middleware {
	st := x.sus
	return graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		if m.suspendInMw != nil {
			rec := st.logMw(ctx, m, "suspend", "", s)
			err := graph.Suspend(ctx, m.suspendInMw.descriptor(), m.suspendInMw.options()...)
			if err == nil {
				err = errors.New("conformance: graph.Suspend returned neither a suspension nor an error")
			}
			st.mu.Lock()
			rec.Err = err
			st.mu.Unlock()
			return nil, err
		}
		if m.hasPre {
			st.logMw(ctx, m, "pre", m.preLog, s)
		}
		u, err := next(ctx, s)
		if m.hasPost {
			st.logMw(ctx, m, "post", m.postLog, s)
		}
		return u, err
	})
}

// bodiesOf returns a run's body executions in start order.
func (st *susState) bodiesOf(run int) []*bodyRun {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*bodyRun
	for _, b := range st.bodies {
		if b.Run == run {
			c := *b
			out = append(out, &c)
		}
	}
	return out
}

// mwOf returns a run's middleware records in order.
func (st *susState) mwOf(run int) []*mwRec {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*mwRec
	for _, r := range st.mw {
		if r.Run == run {
			c := *r
			out = append(out, &c)
		}
	}
	return out
}

// afterRun counts the run's invocation id and snapshots the checkpoint
// store for it.
func (st *susState) afterRun(ctx context.Context, run *invocationRun) {
	st.mu.Lock()
	st.idRuns[run.InvocationID]++
	st.mu.Unlock()
	if st.cp == nil || run.InvocationID == "" {
		return
	}
	snap := &cpSnapshot{}
	if rec, err := st.cp.Load(ctx, checkpoint.Key{InvocationID: run.InvocationID, Kind: checkpoint.KindSuspended}); err == nil {
		snap.Suspended = rec
	}
	if rec, err := st.cp.Load(ctx, checkpoint.Key{InvocationID: run.InvocationID, Kind: checkpoint.KindCheckpoint}); err == nil {
		snap.Checkpoint = rec
	}
	run.CP = snap
}

// resumeCall resolves a resume invocation's target. runs are the
// invocations executed so far (the earlier entries of invs).
func (x *geExec) resumeCall(r *susResume, invs []*geInvocation, runs []*invocationRun) (*resumeCall, error) {
	payload, _ := r.payload.Native().(map[string]any)
	if payload == nil {
		payload = map[string]any{}
	}
	rc := &resumeCall{id: r.raw, payload: payload, spec: r}
	if r.kind == resumeLiteral {
		return rc, nil
	}
	idx, err := resumeRef(r, invs[:len(runs)])
	if err != nil {
		return nil, err
	}
	target := runs[idx]
	want := "suspended"
	if r.kind == resumeCompleted {
		want = "completed"
	}
	if target.Status != want {
		return nil, fmt.Errorf("resume_invocation %q: invocation %s ended %s, not %s (%v)", r.raw, target.Name, target.Status, want, target.Err)
	}
	rc.id, rc.target = target.InvocationID, target
	return rc, nil
}

// observed returns what observer received during run: its invocation's
// events, limited to the run's deliveries when a resume reused the id.
func (x *geExec) observed(observer string, run *invocationRun) []*eventRec {
	if x.sus.reused(run.InvocationID) {
		return x.rec.eventsIn(observer, run.InvocationID, run.delivFrom, run.delivTo)
	}
	return x.rec.events(observer, run.InvocationID)
}

// runNodeEvents returns the node events the pipeline recording observer
// received during run (suspension cases run with it attached).
func (x *geExec) runNodeEvents(run *invocationRun) []*eventRec {
	return x.pu.nodeEventsOf(run.InvocationID, run.puFrom, run.puTo)
}

// descriptorView renders a descriptor as fixtures write it.
func descriptorView(d graph.SignalDescriptor) map[string]any {
	m := map[string]any{"signal_id": d.SignalID}
	if len(d.Metadata) > 0 {
		m["metadata"] = normalize(maps.Clone(d.Metadata))
	}
	return m
}

// assertSuspension checks an invocation's suspension expectations.
func (x *geExec) assertSuspension(m *matcher, e *geExpect, run *invocationRun) error {
	se := e.sus
	if se == nil {
		return nil
	}
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	suspended := func(what string) bool {
		if run.Status != "suspended" || run.Suspension == nil {
			fail(fmt.Errorf("%s: the invocation ended %s, not suspended (%v)", what, run.Status, run.Err))
			return false
		}
		return true
	}
	if se.suspendedState != nil && suspended("suspended_state") {
		fail(m.match("suspended_state", se.suspendedState.Native(), run.FinalState, exact))
	}
	if se.descriptor != nil && suspended("descriptor") {
		fail(matchDescriptor(m, se.descriptor, run.Suspension.Descriptor))
	}
	if se.suspendingNode != nil && suspended("suspending_node") {
		fail(m.match("suspending_node", se.suspendingNode.Str, run.Suspension.SuspendingNode, exact))
	}
	if se.finalStateAtError != nil {
		if run.Status != "errored" {
			fail(fmt.Errorf("final_state_at_error: the invocation ended %s, not errored", run.Status))
		} else {
			fail(m.match("final_state_at_error", se.finalStateAtError.Native(), run.FinalState, exact))
		}
	}
	if se.mwLog != nil {
		got := []any{}
		for _, r := range x.sus.mwOf(run.Run) {
			if r.Kind != "suspend" {
				got = append(got, r.Marker)
			}
		}
		fail(m.match("middleware_log_captured", se.mwLog.Native(), got, exact))
	}
	if se.cpAssert != nil {
		fail(checkCheckpointer(m, se.cpAssert, run))
	}
	return errors.Join(errs...)
}

// matchDescriptor compares descriptor{signal_id, metadata |
// metadata_includes}: metadata exactly, metadata_includes as a subset.
func matchDescriptor(m *matcher, want *Value, got graph.SignalDescriptor) error {
	if err := m.match("descriptor.signal_id", mustGet(want, "signal_id").Native(), got.SignalID, exact); err != nil {
		return err
	}
	meta := normalize(got.Metadata)
	if got.Metadata == nil {
		meta = map[string]any{}
	}
	if md, ok := want.Get("metadata"); ok {
		w := md.Native()
		if md.IsNull() {
			w = map[string]any{}
		}
		return m.match("descriptor.metadata", w, meta, exact)
	}
	if inc, ok := want.Get("metadata_includes"); ok {
		return m.match("descriptor.metadata_includes", inc.Native(), meta, subsetTop)
	}
	return nil
}

// checkCheckpointer asserts checkpointer_assertions against the store
// snapshot taken right after the run.
func checkCheckpointer(m *matcher, want *Value, run *invocationRun) error {
	snap := run.CP
	if snap == nil {
		return fmt.Errorf("checkpointer_assertions: no checkpoint store snapshot for the invocation")
	}
	if v, ok := want.Get("paused_invocation_record_exists"); ok {
		if got := snap.Suspended != nil; got != v.Bool {
			return fmt.Errorf("checkpointer_assertions.paused_invocation_record_exists: want %t, got %t", v.Bool, got)
		}
	}
	if v, ok := want.Get("record_type"); ok {
		var kinds []any
		for _, r := range []*checkpoint.Record{snap.Suspended, snap.Checkpoint} {
			if r != nil {
				kinds = append(kinds, string(r.Kind))
			}
		}
		if len(kinds) != 1 {
			return fmt.Errorf("checkpointer_assertions.record_type: want one record for invocation %s, the store holds kinds %s", run.InvocationID, formatValue(kinds))
		}
		return m.match("checkpointer_assertions.record_type", v.Str, kinds[0], exact)
	}
	return nil
}

// errCategory is the category of err ("" for nil).
func errCategory(err error) string {
	if err == nil {
		return ""
	}
	return string(errcat.Of(err))
}
