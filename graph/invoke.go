package graph

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
)

// Status is an invocation's outcome category (graph-engine §3).
type Status int

// Invocation outcomes.
const (
	// Completed: the graph reached End; Result.State is the final state.
	Completed Status = iota + 1
	// Errored: a node, edge or merge failed; Result.Err says why and
	// Result.State is the recoverable state.
	Errored
	// Suspended: a node suspended the invocation awaiting a signal
	// (suspension capability; reserved).
	Suspended
)

// String returns "completed", "errored" or "suspended".
func (s Status) String() string {
	switch s {
	case Completed:
		return "completed"
	case Errored:
		return "errored"
	case Suspended:
		return "suspended"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Result is an invocation's outcome.
type Result struct {
	Status Status
	// State is the final state (Completed) or the outermost graph's
	// recoverable state at the failure (Errored).
	State State
	// InvocationID and CorrelationID are the ids the invocation ran with
	// (caller-supplied or minted).
	InvocationID  string
	CorrelationID string
	// Path lists the outermost graph's nodes dispatched, in order,
	// including the failing one.
	Path []string
	// Err is the failure when Status is Errored: a *NodeError (or a
	// *StateError for an invalid input), categorized per [errcat].
	Err error
	// Suspension describes a Suspended outcome.
	Suspension *Suspension
	// Start is the outermost state the run started from: for Invoke, the
	// defaults overlaid with the stored session and the input merged
	// through the reducers; for Resume, the paused state with the
	// payload overlaid. Comparing it with State tells what the run
	// added, e.g. the messages a chat turn appended (snapshots share
	// storage, so keeping it costs nothing).
	Start State
	// SessionOffsets reports, for an invocation that loaded list fields
	// of its session by their tails (SessionConfig.Tail), how many
	// leading items of each such field Start and State leave out: item
	// i of the list in State is item SessionOffsets[field]+i of the
	// stored one. Nil when every field was loaded whole.
	SessionOffsets map[string]int
}

// InvokeOption configures one invocation.
type InvokeOption func(*invokeConfig) error

type invokeConfig struct {
	invocationID  string
	correlationID string
	sessionID     string
	observers     []*observerReg
	check         SessionCheck
	marks         SessionMarks
	input         SessionInput
	hooks         SessionHooks
	metadata      Metadata
	// (the bools last and together, to keep the config small)
	resumed, refuseStale bool
}

// WithInvocationID supplies the invocation id (otherwise minted as a
// UUIDv4). It must be a non-empty URL-safe string.
func WithInvocationID(id string) InvokeOption {
	return func(c *invokeConfig) error {
		if !urlSafe(id) {
			return invalidOption("invocation id must be a non-empty URL-safe string")
		}
		c.invocationID = id
		return nil
	}
}

// WithCorrelationID supplies the cross-backend correlation id (otherwise
// minted as a UUIDv4). It must be a non-empty URL-safe string.
func WithCorrelationID(id string) InvokeOption {
	return func(c *invokeConfig) error {
		if !urlSafe(id) {
			return invalidOption("correlation id must be a non-empty URL-safe string")
		}
		c.correlationID = id
		return nil
	}
}

// WithObserver adds an invocation-scoped observer: it receives this
// invocation's events only, after the graph-attached observers.
func WithObserver(obs Observer, opts ...ObserverOption) InvokeOption {
	return func(c *invokeConfig) error {
		r, err := newObserverReg(obs, opts)
		if err != nil {
			return err
		}
		c.observers = append(c.observers, r)
		return nil
	}
}

func urlSafe(s string) bool {
	if s == "" || len(s) > 512 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || c == ':') {
			return false
		}
	}
	return true
}

// invocation is the per-invoke runtime shared by every frame.
type invocation struct {
	g         *Graph
	id        string
	corrID    string
	sessionID string
	sess      *binding // the session binding, when the graph has a store
	// resumeKey names the paused record a resumed run continues;
	// resumeToken is that record's suspension token (see pausedData).
	resumeKey   *checkpoint.Key
	resumeToken string
	// invEvents: some observer takes InvocationEvents.
	invEvents bool
	// ckpt is the checkpointing state (nil without a checkpointer).
	ckpt *ckptRun
	step atomic.Int64
	w    *worker
	// obs is the observer snapshot: obs[i] belongs to g.graphs[i].
	obs    []([]*observerReg)
	invObs []*observerReg

	// Inline storage, so a small invocation allocates once.
	res     Result
	top     frame
	root    scopeCtx
	obsBuf  [4][]*observerReg
	pathBuf [8]string
}

func (inv *invocation) graphObservers(g *Graph) []*observerReg {
	for i, gg := range inv.g.graphs {
		if gg == g {
			return inv.obs[i]
		}
	}
	return nil
}

// frame is one graph run within an invocation: the outermost graph, a
// subgraph, a fan-out instance or a parallel branch.
type frame struct {
	inv          *invocation
	g            *Graph
	prefix       []string
	parentStates []State
	obs          []*observerReg
	fanChain     []*int
	branchChain  []*string
	path         *[]string
	// started, when set, is signalled on the frame's first node event (or
	// when the unit ends without one): fan-out and parallel branches start
	// their units in order by waiting for it.
	started *startSignal
	// noSuspend, when set, says why Suspend is not allowed in this frame
	// (a unit of a collect-mode composite node).
	noSuspend string
	// inst is the checkpointed fan-out instance the frame runs in;
	// instTop marks the instance's own subgraph level.
	inst    *instRef
	instTop bool
}

type startSignal struct {
	once sync.Once
	ch   chan struct{}
	// grp and idx place the unit in its node's units (runUnits).
	grp *unitGroup
	idx int
	// head, when positive, is how long the unit runs after its first
	// event before the next unit starts (unless it ends first): its
	// first event arms a timer instead of signalling (an inline callable
	// branch, see runBranch).
	head  time.Duration
	armed atomic.Bool
}

// unitGroup is what the units of one fan-out or parallel-branches node
// share: under fail_fast, the first unit that failed.
type unitGroup struct {
	failFast bool
	first    atomic.Int64 // index + 1 of the first unit that failed; 0: none
}

// failed records that the unit failed. Under fail_fast the first
// failure wins the node's error, and no unit starts after it: a unit
// that fails as soon as it starts (an inline callable raising at once)
// marks itself here before it reports its failure, so the units after
// it, which it let start by starting, find the mark before they start.
func (s *startSignal) failed() {
	if s != nil && s.grp != nil && s.grp.failFast {
		s.grp.first.CompareAndSwap(0, int64(s.idx)+1)
	}
}

// stopped reports whether, under fail_fast, a unit of the group failed:
// a unit not yet started must not start.
func (s *startSignal) stopped() bool {
	return s != nil && s.grp != nil && s.grp.first.Load() != 0
}

// signal reports the unit's first event: the next unit may start (after
// head, when set).
func (s *startSignal) signal() {
	switch {
	case s == nil:
	case s.head > 0:
		if s.armed.CompareAndSwap(false, true) {
			time.AfterFunc(s.head, s.finish)
		}
	default:
		s.finish()
	}
}

// finish lets the next unit start at once: the unit ended, or its head
// elapsed.
func (s *startSignal) finish() {
	if s != nil {
		s.once.Do(func() { close(s.ch) })
	}
}

func (f *frame) namespace(n *node) []string {
	if len(f.prefix) == 0 {
		return n.ns
	}
	ns := make([]string, len(f.prefix)+1)
	copy(ns, f.prefix)
	ns[len(f.prefix)] = n.name
	return ns
}

// child returns the frame of a unit nested under dispatch node n: a
// subgraph, a fan-out instance (fanIdx set) or a branch (branch set).
func (f *frame) child(g *Graph, n string, pre State, fanIdx *int, branch *string) *frame {
	c := &frame{
		inv:          f.inv,
		g:            g,
		prefix:       append(slices.Clip(f.prefix), n),
		parentStates: append(slices.Clip(f.parentStates), pre),
		obs:          f.obs,
		fanChain:     append(slices.Clip(f.fanChain), fanIdx),
		branchChain:  append(slices.Clip(f.branchChain), branch),
		started:      f.started,
		noSuspend:    f.noSuspend,
		inst:         f.inst,
	}
	if g != nil {
		if own := f.inv.graphObservers(g); len(own) > 0 {
			c.obs = append(slices.Clip(f.obs), own...)
		}
	}
	return c
}

// instance returns a copy of f (a fan-out frame built by child) for the
// instance at fanIdx.
func (f *frame) instance(fanIdx *int, started *startSignal) *frame {
	c := *f
	c.fanChain = append(slices.Clip(f.fanChain[:len(f.fanChain)-1]), fanIdx)
	c.started = started
	return &c
}

// emit queues a non-node event for the frame's observers.
func (f *frame) emit(ev Event, phase uint8) {
	if w := f.inv.w; w != nil {
		w.emit(queued{ev: ev, phase: phase, graphs: f.obs, invoked: f.inv.invObs})
	}
	f.started.signal() // after queueing, so the next unit's events follow
}

// innermost returns the innermost non-nil entry of a lineage chain.
func innermost[T any](chain []*T) *T {
	for i := len(chain) - 1; i >= 0; i-- {
		if chain[i] != nil {
			return chain[i]
		}
	}
	return nil
}

// scope is what code running for a node (its body, its middleware, its
// edge) or for a fan-out instance or branch can learn from its context.
type scope struct {
	inv   *invocation
	fr    *frame
	node  *node // nil for a unit scope (fan-out instance, branch)
	d     *dispatchCtx
	step  int
	state State
	// lastAttempt is the attempt index of the latest attempt run in the
	// scope (what a failure caught outside a retry belongs to).
	lastAttempt int
}

// label is the name of the node (or unit) the scope belongs to.
func (s *scope) label() string {
	if s.node != nil {
		return s.node.name
	}
	if len(s.fr.prefix) > 0 {
		return s.fr.prefix[len(s.fr.prefix)-1]
	}
	return ""
}

// lineage returns the scope's event-source identity. A unit scope
// reports its dispatch node's namespace with the unit's own fan-out index
// or branch name.
func (s *scope) lineage() (ns []string, fanIdx *int, branch *string, fanChain []*int, branchChain []*string) {
	fr := s.fr
	if s.node != nil {
		return slices.Clone(fr.namespace(s.node)), innermost(fr.fanChain), innermost(fr.branchChain), fr.fanChain, fr.branchChain
	}
	ns = slices.Clone(fr.prefix)
	if k := len(fr.fanChain); k > 0 {
		fanChain, branchChain = fr.fanChain[:k-1], fr.branchChain[:k-1]
	}
	return ns, innermost(fr.fanChain), innermost(fr.branchChain), fanChain, branchChain
}

type scopeKey struct{}

// scopeCtx carries a scope; it is one allocation per node instead of a
// scope plus a context.WithValue node.
type scopeCtx struct {
	context.Context
	sc scope
	// d is the dispatch state of the node scope, allocated with it.
	d dispatchCtx
	// meta is the invocation metadata of the async context the scope
	// starts: set for the root and for fan-out instance and branch unit
	// scopes (observability §3.4).
	meta metaCell
}

func (c *scopeCtx) Value(key any) any {
	switch key {
	case scopeKey{}:
		return &c.sc
	case llm.CallObserverKey{}, retrieval.CallObserverKey{}:
		// LLM, embedding and rerank calls report typed events only when
		// someone listens.
		if c.sc.observesCalls() {
			return (*callHook)(&c.sc)
		}
	case metaKey{}:
		// The root scope and the unit scopes of fan-out instances and
		// branches own their async context's metadata (a unit's cell is
		// never empty); node scopes defer to the enclosing context.
		if c.meta.p.Load() != nil || c == &c.sc.inv.root {
			return &c.meta
		}
	}
	return c.Context.Value(key)
}

func scopeFrom(ctx context.Context) *scope {
	s, _ := ctx.Value(scopeKey{}).(*scope)
	return s
}

// InvocationID returns the id of the invocation ctx belongs to, or "".
// It is readable anywhere within the invocation: nodes, middleware, edges,
// and anything they call with their context.
func InvocationID(ctx context.Context) string {
	if s := scopeFrom(ctx); s != nil {
		return s.inv.id
	}
	return ""
}

// CorrelationID returns the correlation id of the invocation ctx belongs
// to, or "".
func CorrelationID(ctx context.Context) string {
	if s := scopeFrom(ctx); s != nil {
		return s.inv.corrID
	}
	return ""
}

// NodeInfo describes the node executing in a context.
type NodeInfo struct {
	// Name is the node's name in its immediate graph.
	Name string
	// Namespace is the path from the outermost graph to the node.
	Namespace []string
	// Step is the step of the node's latest attempt.
	Step int
	// AttemptIndex is the retry attempt (0 without retry middleware).
	AttemptIndex int
	// FanOutIndex and BranchName locate the innermost enclosing fan-out
	// instance and parallel branch (nil outside them).
	FanOutIndex *int
	BranchName  *string
}

// CurrentNode returns the node executing in ctx, if any.
func CurrentNode(ctx context.Context) (NodeInfo, bool) {
	s := scopeFrom(ctx)
	if s == nil || s.node == nil {
		return NodeInfo{}, false
	}
	ns, fi, bn, _, _ := s.lineage()
	return NodeInfo{Name: s.node.name, Namespace: ns, Step: s.step, AttemptIndex: AttemptIndex(ctx), FanOutIndex: fi, BranchName: bn}, true
}

// CurrentStep returns the name and step of the node executing in ctx
// (NodeInfo.Name and NodeInfo.Step), if any, without building the rest
// of its NodeInfo: it allocates nothing, for callers on a hot path such
// as a streamed chunk.
func CurrentStep(ctx context.Context) (name string, step int, ok bool) {
	s := scopeFrom(ctx)
	if s == nil || s.node == nil {
		return "", 0, false
	}
	return s.node.name, s.step, true
}

// Invoke runs the graph from its entry node on the default state overlaid
// with input (fields set directly, validated against their types). It
// returns when the graph reaches End or fails; observer delivery goes on
// in the background (see [Graph.Drain]).
//
// The error is also Result.Err. It is non-nil when the outcome is Errored,
// and for a Completed outcome whose session save at End failed
// (session_save_failed, or session_write_conflict for an optimistic
// session): the result stands, the store keeps the previous session
// state. Invalid options return a nil Result and an error wrapping
// ErrInvalidOption.
//
// With [WithSessionID] on a graph compiled [WithSessions], the invocation
// starts from the stored session (migrated if needed) with input merged
// through the reducers, and saves the session fields at End. A failed
// load is an Errored outcome (session_load_failed or a migration
// category) before any node runs; a missing record starts from the
// defaults.
func (g *Graph) Invoke(ctx context.Context, input Update, opts ...InvokeOption) (*Result, error) {
	if g == nil {
		return nil, ErrNilGraph
	}
	var cfg invokeConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	inv, res := g.newInvocation(ctx, cfg)
	defer inv.close()
	var (
		st  State
		err error
	)
	if cfg.sessionID != "" && g.sess != nil {
		// Session-bound: defaults, overlaid with the stored session, then
		// the input merged through the reducers (a chat turn appends its
		// message to the history).
		var base State
		var at loaded
		if base, at, err = g.sess.load(ctx, g.schema, cfg.sessionID, g.sess.tail != nil && !g.checkpointing); err == nil {
			inv.sess = &binding{s: g.sess, id: cfg.sessionID, inv: inv.id, at: at, check: cfg.check, marks: cfg.marks, hooks: cfg.hooks}
			st, err = base.Merge(input)
			if err == nil && (cfg.input != nil || cfg.hooks != nil) {
				var more Update
				info := SessionInfo{Exists: at.exists, MaySuspend: at.exists && (!at.written || at.suspended), Version: at.version, Offsets: at.offsets()}
				if cfg.input != nil {
					more, err = cfg.input(ctx, base, info)
				} else {
					more, err = cfg.hooks.SessionInput(ctx, base, info)
				}
				if err == nil {
					st, err = st.Merge(more)
				}
			}
		}
	} else {
		st, err = g.schema.New(input)
	}
	if err != nil {
		res.Status, res.State, res.Err = Errored, g.schema.Defaults(), err
		return res, err
	}
	fr := inv.topFrame()
	final, err := g.run(&inv.root, fr, st)
	return g.finish(ctx, inv, res, st, final, err)
}

// newInvocation prepares an invocation: ids, observer snapshot, delivery
// worker.
func (g *Graph) newInvocation(ctx context.Context, cfg invokeConfig) (*invocation, *Result) {
	inv := &invocation{g: g, id: cfg.invocationID, corrID: cfg.correlationID, sessionID: cfg.sessionID, invObs: cfg.observers}
	if g.checkpointing {
		inv.ckpt = &ckptRun{}
	}
	if inv.id == "" {
		inv.id = g.newID()
	}
	if inv.corrID == "" {
		inv.corrID = g.newID()
	}
	res := &inv.res
	res.InvocationID, res.CorrelationID = inv.id, inv.corrID
	observed := len(inv.invObs) > 0
	if len(g.graphs) <= len(inv.obsBuf) {
		inv.obs = inv.obsBuf[:len(g.graphs)]
	} else {
		inv.obs = make([][]*observerReg, len(g.graphs))
	}
	for i, gg := range g.graphs {
		inv.obs[i] = *gg.observers.Load()
		observed = observed || len(inv.obs[i]) > 0
	}
	if observed {
		sync, async := observerKinds(inv.invObs)
		for _, regs := range inv.obs {
			s, a := observerKinds(regs)
			sync, async = sync || s, async || a
		}
		if async {
			inv.w = g.startWorker(ctx, inv.id)
			inv.w.sync = sync
		} else {
			inv.w = directWorker(ctx, g, inv.id)
		}
	}
	inv.invEvents = wantsInvocationEvents(inv.obs[0]) || wantsInvocationEvents(inv.invObs)
	if inv.invEvents {
		inv.w.emit(queued{ev: &InvocationEvent{
			Phase: PhaseStarted, EntryNode: g.entry, Resumed: cfg.resumed, InvocationID: inv.id,
			CorrelationID: inv.corrID, SessionID: cfg.sessionID, Metadata: cfg.metadata, Time: g.now(),
		}, invocation: true, graphs: inv.obs[0], invoked: inv.invObs})
	}
	res.Path = inv.pathBuf[:0]
	inv.root = scopeCtx{Context: ctx}
	inv.root.sc = scope{inv: inv, fr: &inv.top}
	inv.root.meta.store(cfg.metadata)
	return inv, res
}

// topFrame returns the outermost graph's frame.
func (inv *invocation) topFrame() *frame {
	inv.top = frame{inv: inv, g: inv.g, obs: inv.obs[0], path: &inv.res.Path}
	return &inv.top
}

// observerKinds reports whether regs has synchronous observers and
// whether it has asynchronous ones.
func observerKinds(regs []*observerReg) (sync, async bool) {
	for _, r := range regs {
		if r.sync {
			sync = true
		} else {
			async = true
		}
	}
	return sync, async
}

func wantsInvocationEvents(regs []*observerReg) bool {
	for _, r := range regs {
		if r.invocations {
			return true
		}
	}
	return false
}

// close emits the invocation's completed event and ends event emission.
func (inv *invocation) close() {
	if inv.w == nil {
		return
	}
	if !inv.invEvents {
		inv.w.close()
		return
	}
	res := &inv.res
	ev := &InvocationEvent{
		Phase: PhaseCompleted, Status: res.Status, Err: res.Err, ErrorCategory: errcat.Of(res.Err), State: res.State,
		Suspension: res.Suspension, EntryNode: inv.g.entry, Resumed: inv.resumeKey != nil, InvocationID: inv.id,
		CorrelationID: inv.corrID, SessionID: inv.sessionID, Metadata: inv.root.meta.load(), Time: inv.g.now(),
	}
	inv.w.emit(queued{ev: ev, invocation: true, graphs: inv.obs[0], invoked: inv.invObs})
	inv.w.close()
}

// finish turns a run's end into the invocation's outcome: completed (and
// the session saved), errored, or suspended (and persisted).
func (g *Graph) finish(ctx context.Context, inv *invocation, res *Result, start, final State, err error) (*Result, error) {
	if inv.sess != nil && inv.sess.rebase != nil {
		// A resumed run whose session moved on: report and write its
		// states as the stored session plus what the run added.
		start, final = inv.sess.rebase.apply(start), inv.sess.rebase.apply(final)
	}
	res.Start = start
	if inv.sess != nil {
		res.SessionOffsets = inv.sess.offsets()
	}
	if sig, ok := err.(*suspendSignal); ok {
		if err := g.suspend(ctx, inv, sig, res); err != nil {
			return res, err
		}
		return res, nil
	}
	if err != nil {
		res.Status, res.Err = Errored, err
		res.State = start
		if ne, ok := err.(*NodeError); ok {
			res.State = ne.OutermostState()
		}
		if inv.resumeKey != nil {
			// A resumed invocation that errored is over: its paused
			// record is no longer resumable (suspension §7).
			g.retireResumed(ctx, inv)
		}
		return res, err
	}
	res.Status, res.State = Completed, final
	if inv.resumeKey != nil {
		if err := g.commitResume(ctx, inv, final); err != nil {
			if errcat.Of(err) == errcat.SuspensionRecordInvalid {
				res.Status = Errored
			}
			res.Err = err
			return res, err
		}
		return res, nil
	}
	if inv.sess != nil && !g.sess.cfg.DisableAutoSave {
		// The result stands even if the save fails (sessions §6.1): the
		// failure is reported alongside the completed outcome.
		if err := inv.sess.save(ctx, final, true); err != nil {
			if cerr, ok := unwrapCheck(err); ok {
				// The check refused the turn's effect: nothing is stored,
				// so the turn errored.
				res.Status, res.State, res.Err = Errored, start, cerr
				return res, cerr
			}
			res.Err = err
			return res, err
		}
	}
	return res, nil
}

// run executes g's nodes from its entry until End.
func (g *Graph) run(ctx context.Context, fr *frame, st State) (State, error) {
	return g.runFrom(ctx, fr, g.nodes[g.entry], st)
}

// runFrom executes g's nodes from cur until End. It returns a *NodeError,
// or at the outermost frame a *suspendSignal for a suspension.
func (g *Graph) runFrom(ctx context.Context, fr *frame, cur *node, st State) (State, error) {
	for {
		if err := ctx.Err(); err != nil {
			return st, fr.fail(errcat.InvocationCancelled, cur, st, fmt.Errorf("invocation cancelled before node %q: %w", cur.name, err))
		}
		if fr.path != nil {
			*fr.path = append(*fr.path, cur.name)
		}
		next, post, err := g.dispatch(ctx, fr, cur, st)
		if err != nil {
			if ne, ok := err.(*NodeError); ok {
				return ne.State, ne
			}
			return st, err
		}
		st = post
		if next == End {
			return st, nil
		}
		cur = g.nodes[next]
	}
}

// failFor wraps a failure raised by a node or its middleware: user errors
// in a node_exception carrier; framework failures (suspension, sessions)
// unwrapped, with their own category.
func (fr *frame) failFor(n *node, st State, err error) *NodeError {
	if cat := errcat.Of(err); frameworkCat(cat) {
		return fr.fail(cat, n, st, err)
	}
	return fr.fail(errcat.NodeException, n, st, err)
}

func (fr *frame) fail(cat errcat.Category, n *node, st State, cause error) *NodeError {
	return &NodeError{
		cat: cat, Node: n.name, Namespace: slices.Clone(fr.namespace(n)),
		State: st, ParentStates: fr.parentStates, Err: cause,
	}
}

// dispatch runs one node: its middleware chain around its work (a node
// function, a subgraph, a fan-out, parallel branches), then the merge of
// the resulting update and the outgoing edge.
//
// Node events come from the innermost point of the chain: each call of a
// function node emits started, and completed at once on failure; the
// completed event of a successful call waits for the merge and the edge,
// so routing and merge failures land on it (graph-engine §3 step 3).
func (g *Graph) dispatch(ctx context.Context, fr *frame, n *node, pre State) (_ string, _ State, rerr error) {
	nctx := &scopeCtx{Context: ctx, sc: scope{inv: fr.inv, fr: fr, node: n, state: pre}}
	d := &nctx.d
	d.fr, d.n, d.sc = fr, n, &nctx.sc
	nctx.sc.d = d
	defer func() {
		if p := recover(); p != nil {
			sig, ok := p.(*suspendSignal)
			if !ok {
				panic(p)
			}
			rerr = fr.suspendedAt(n, pre, d, sig)
		}
	}()
	upd, err := d.run(nctx, n.chain, pre)
	if err != nil {
		ne, ok := err.(*NodeError) // the engine's own failure, passed through unchanged
		if !ok {
			ne = fr.failFor(n, pre, err)
		}
		d.complete(State{}, ne)
		if fr.inv.ckpt != nil {
			if ne.Namespace != nil && len(ne.Namespace) == len(fr.prefix)+1 {
				// The failing node itself runs again on resume.
				fr.nodeFailed(ctx, n, pre)
			}
			if d.fan != nil {
				fr.inv.ckpt.leaveFanOut(d.fan)
			}
		}
		return "", State{}, ne
	}
	post, merr := pre.merge(upd)
	if merr != nil {
		ne := fr.fail(merr.cat, n, pre, merr)
		ne.Field, ne.Reducer = merr.Field, merr.Reducer
		d.complete(State{}, ne)
		return "", State{}, ne
	}
	next, routeErr := g.route(nctx, fr, n, post)
	if routeErr != nil {
		d.complete(State{}, routeErr)
		return "", State{}, routeErr
	}
	d.complete(post, nil)
	if fr.inv.ckpt != nil {
		if d.fan != nil {
			fr.inv.ckpt.leaveFanOut(d.fan) // finalized: merged into post
		}
		if err := fr.nodeCompleted(ctx, d, post, next); err != nil {
			return "", State{}, fr.fail(errcat.CheckpointSaveFailed, n, post, err)
		}
	}
	return next, post, nil
}

// dispatchCtx tracks one dispatch's pending attempt: the innermost call
// that succeeded and whose completed event waits for the merge and edge.
type dispatchCtx struct {
	fr *frame
	n  *node
	sc *scope

	// stepped is set once the dispatch has its step. inBody is set
	// while the node function runs: the only place Suspend is allowed
	// (suspended is set by Suspend); atomic, as a goroutine the node left
	// behind may read it after the node returned. pending: see
	// setPending. (The bools are grouped to keep the struct, held inline
	// by every scope, small.)
	stepped, pending bool
	inBody           atomic.Bool
	step             int
	// The current attempt, for a suspended event.
	curState   State
	curAttempt int
	curFan     *FanOutConfig
	curPar     *ParallelBranchesConfig
	// cell is the metadata cell of the current attempt, read for its
	// events (set only when observed).
	cell      *metaCell
	suspended *suspendSignal
	pErr      *NodeError
	pUpd      Update
	pStep     int
	pAttempt  int
	pState    State
	pFan      *FanOutConfig
	pPar      *ParallelBranchesConfig
	// fan is the checkpointed progress of the node's fan-out attempt.
	fan *liveFanOut
}

// run calls the dispatch's work through chain. An attempt's fate is
// decided by the innermost middleware: when it returns an error, the
// pending attempt completes with that error at once, even if an outer
// middleware then recovers (a retry gave up, an outer isolation caught
// it); when it returns an update, the attempt completes after the merge
// (a recovered failure completes with the recovered post-state).
func (d *dispatchCtx) run(ctx context.Context, chain []Middleware, s State) (Update, error) {
	if len(chain) == 0 {
		return d.work(ctx, s)
	}
	last := chain[len(chain)-1]
	innermost := func(ctx context.Context, s State) (Update, error) {
		u, err := callMiddleware(ctx, last, s, d.work)
		if err != nil && d.pending {
			ne := d.pErr
			if ne == nil {
				if e, ok := err.(*NodeError); ok {
					ne = e
				} else {
					ne = d.fr.failFor(d.n, d.pState, err)
				}
			}
			d.complete(State{}, ne)
		}
		return u, err
	}
	return runChain(ctx, chain[:len(chain)-1], s, innermost)
}

// work is the innermost Next of a dispatch.
func (d *dispatchCtx) work(ctx context.Context, s State) (Update, error) {
	n := d.n
	switch {
	case n.sub != nil:
		return d.runSubgraph(ctx, s)
	case n.fan != nil:
		return d.runFanOut(ctx, s)
	case n.par != nil:
		return d.runBranches(ctx, s)
	}
	step, attempt := d.begin(ctx, s, nil, nil)
	d.inBody.Store(true)
	upd, err := callNode(ctx, n.fn, s)
	d.inBody.Store(false)
	if sig := d.suspended; sig != nil {
		// The body recovered the suspension's unwinding; it still stands.
		d.suspended = nil
		panic(sig)
	}
	d.setPending(step, attempt, s, nil, nil)
	if err != nil {
		d.pErr = d.fr.fail(errcat.NodeException, n, s, err)
		return nil, err
	}
	d.pUpd = upd
	return upd, nil
}

// begin completes any earlier successful attempt (middleware may call
// next again after a success), allocates a step and emits the started
// event of a new attempt.
func (d *dispatchCtx) begin(ctx context.Context, s State, fc *FanOutConfig, pc *ParallelBranchesConfig) (step, attempt int) {
	if d.pending {
		// The earlier attempt's outcome is final: it failed, or middleware
		// called next again after it succeeded.
		post, err := State{}, d.pErr
		if err == nil {
			var merr *MergeError
			if post, merr = d.pState.merge(d.pUpd); merr != nil {
				post, err = State{}, d.fr.fail(merr.cat, d.n, d.pState, merr)
			}
		}
		d.complete(post, err)
	}
	// One step per dispatch: retried attempts share it (each attempt is
	// told apart by its attempt index).
	if !d.stepped {
		d.stepped, d.step = true, int(d.fr.inv.step.Add(1)-1)
		d.sc.step = d.step
	}
	step, attempt = d.step, AttemptIndex(ctx)
	d.sc.lastAttempt = attempt
	d.curState, d.curAttempt, d.curFan, d.curPar = s, attempt, fc, pc
	if d.fr.inst != nil {
		d.fr.instanceStarted()
	}
	if d.fr.inv.w != nil {
		d.cell = cellOf(ctx)
	}
	d.fr.emitNode(d.n, step, attempt, PhaseStarted, s, State{}, nil, fc, pc, d.cell)
	return step, attempt
}

// setPending records the latest attempt, whose completed event waits for
// the outcome of the whole chain: a failed attempt that middleware
// recovers completes with the recovered post-state (pipeline-utilities §5).
func (d *dispatchCtx) setPending(step, attempt int, s State, fc *FanOutConfig, pc *ParallelBranchesConfig) {
	d.pending, d.pStep, d.pAttempt, d.pState, d.pFan, d.pPar = true, step, attempt, s, fc, pc
	d.pErr, d.pUpd = nil, nil
}

// failPending records a failed composite attempt and returns its error.
func (d *dispatchCtx) failPending(step, attempt int, s State, ne *NodeError, fc *FanOutConfig, pc *ParallelBranchesConfig) error {
	d.setPending(step, attempt, s, fc, pc)
	d.pErr = ne
	return ne
}

// complete emits the completed event of the pending attempt, if any.
func (d *dispatchCtx) complete(post State, err *NodeError) {
	if !d.pending {
		return
	}
	d.pending = false
	if err != nil {
		post = State{}
	}
	d.fr.emitNode(d.n, d.pStep, d.pAttempt, PhaseCompleted, d.pState, post, err, d.pFan, d.pPar, d.cell)
}

func callNode(ctx context.Context, fn NodeFunc, s State) (u Update, err error) {
	defer func() {
		if p := recover(); p != nil {
			if sig, ok := p.(*suspendSignal); ok {
				panic(sig) // a suspension unwinds on to its dispatch
			}
			u, err = nil, newPanicError(p)
		}
	}()
	return fn(ctx, s)
}

func callRoute(ctx context.Context, fn RouteFunc, s State) (dest string, err error) {
	defer func() {
		if p := recover(); p != nil {
			if sig, ok := p.(*suspendSignal); ok {
				panic(sig)
			}
			dest, err = "", newPanicError(p)
		}
	}()
	return fn(ctx, s)
}

// route resolves n's outgoing edge against the post-update state.
func (g *Graph) route(ctx context.Context, fr *frame, n *node, post State) (string, *NodeError) {
	e := n.out
	if e == nil {
		return "", fr.fail(errcat.RoutingError, n, post, fmt.Errorf("node %q has no outgoing edge", n.name))
	}
	if e.route == nil {
		return e.to, nil
	}
	dest, err := callRoute(ctx, e.route, post)
	if err != nil {
		return "", fr.fail(errcat.EdgeException, n, post, err)
	}
	if dest != End && g.nodes[dest] == nil {
		return "", fr.fail(errcat.RoutingError, n, post, fmt.Errorf("conditional edge from %q returned %q, which is neither a declared node nor End", n.name, dest))
	}
	return dest, nil
}

// runSubgraph is the work of a subgraph node: project in, run the child
// graph, project out. Subgraph wrappers emit no node events and take no
// step; observers opted into InvocationEvents get a SubgraphEvent pair.
func (d *dispatchCtx) runSubgraph(ctx context.Context, s State) (Update, error) {
	n := d.n
	d.emitSubgraph(ctx, PhaseStarted, nil)
	init, err := projectIn(n, s)
	if err != nil {
		ne := d.fr.fail(errcat.StateValidationError, n, s, err)
		d.emitSubgraph(ctx, PhaseCompleted, ne)
		return nil, ne
	}
	final, err := n.sub.run(ctx, d.fr.child(n.sub, n.name, s, nil, nil), init)
	d.emitSubgraph(ctx, PhaseCompleted, err)
	if err != nil {
		return nil, err
	}
	return projectOut(n, final, s.schema), nil
}

// emitSubgraph queues a SubgraphEvent for the observers that take
// invocation events; it does nothing when none does.
func (d *dispatchCtx) emitSubgraph(ctx context.Context, phase Phase, err error) {
	fr := d.fr
	inv := fr.inv
	if !inv.invEvents {
		return
	}
	if _, suspended := err.(*suspendSignal); suspended {
		// The enclosing spans end with the suspended invocation.
		return
	}
	ev := &SubgraphEvent{
		Phase: phase, NodeName: d.n.name, Namespace: fr.namespace(d.n), AttemptIndex: AttemptIndex(ctx),
		SubgraphName: d.n.sub.name, EntryNode: d.n.sub.entry,
		FanOutIndex: innermost(fr.fanChain), BranchName: innermost(fr.branchChain),
		FanOutIndexChain: fr.fanChain, BranchNameChain: fr.branchChain,
		InvocationID: inv.id, CorrelationID: inv.corrID, Metadata: cellOf(ctx).load(), Time: inv.g.now(),
	}
	if err != nil {
		ev.Err, ev.ErrorCategory = err, errcat.Of(err)
	}
	inv.w.emit(queued{ev: ev, invocation: true, graphs: fr.obs, invoked: inv.invObs})
}

// projectIn builds the subgraph's initial state from its defaults and the
// node's input projection.
func projectIn(n *node, parent State) (State, error) {
	p := &n.proj
	var in Update
	switch {
	case p.declared:
		in = pick(parent, p.in, nil)
	case p.hasInputs:
		in = pick(parent, nil, p.inputs)
	}
	st, err := n.sub.schema.New(in)
	if err != nil {
		return State{}, fmt.Errorf("projecting into subgraph: %w", err)
	}
	return st, nil
}

// projectOut builds the parent update from the subgraph's final state.
func projectOut(n *node, final State, parent *Schema) Update {
	p := &n.proj
	switch {
	case p.declared:
		return pick(final, p.out, nil)
	case p.hasOutputs:
		return pick(final, nil, p.outputs)
	}
	u := make(Update)
	for i, f := range final.schema.fields {
		if parent.Has(f.name) {
			u[f.name] = unwrapList(final.vals[i])
		}
	}
	return u
}

// pick copies fields of src into an update: the same-name fields, and the
// renamed pairs (update field → src field).
func pick(src State, same []string, renamed map[string]string) Update {
	u := make(Update, len(same)+len(renamed))
	for _, f := range same {
		u[f], _ = src.Get(f)
	}
	for dst, from := range renamed {
		u[dst], _ = src.Get(from)
	}
	return u
}

// emitNode queues a node event for the frame's observers.
func (fr *frame) emitNode(n *node, step, attempt int, phase Phase, pre, post State, err *NodeError, fc *FanOutConfig, pc *ParallelBranchesConfig, cell *metaCell) {
	if fr.inv.w == nil { // nobody observes: build nothing
		fr.started.signal()
		return
	}
	ev := &NodeEvent{
		Phase: phase, NodeName: n.name, Step: step, PreState: pre, PostState: post, AttemptIndex: attempt,
		FanOutConfig: fc, ParallelBranchesConfig: pc, Metadata: cell.load(),
	}
	if err != nil {
		ev.Err, ev.ErrorCategory = err, err.cat
	}
	fr.emitNodeEvent(n, ev)
}

// emitNodeEvent fills the frame-derived fields of ev (namespace, parent
// states, lineage, ids) and queues it.
func (fr *frame) emitNodeEvent(n *node, ev *NodeEvent) {
	inv := fr.inv
	if inv.w == nil {
		fr.started.signal()
		return
	}
	defer fr.started.signal() // after queueing, so the next unit's events follow
	ev.Namespace = fr.namespace(n)
	ev.ParentStates = fr.parentStates
	if ev.ParentStates == nil {
		ev.ParentStates = []State{}
	}
	ev.FanOutIndex, ev.BranchName = innermost(fr.fanChain), innermost(fr.branchChain)
	ev.FanOutIndexChain, ev.BranchNameChain = fr.fanChain, fr.branchChain
	ev.InvocationID, ev.CorrelationID = inv.id, inv.corrID
	ev.CallableBranch = n.callable
	ev.Time = inv.g.now()
	inv.w.emit(queued{ev: ev, phase: ev.Phase.bit(), graphs: fr.obs, invoked: inv.invObs})
}
