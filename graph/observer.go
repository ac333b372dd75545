package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/armature-go/armature/errcat"
)

// Phase is a node event's phase.
type Phase string

// Node event phases (graph-engine §6). They are wire identifiers and must
// not change.
const (
	PhaseStarted   Phase = "started"
	PhaseCompleted Phase = "completed"
	PhaseSuspended Phase = "suspended"
)

func (p Phase) bit() uint8 {
	switch p {
	case PhaseStarted:
		return 1
	case PhaseCompleted:
		return 2
	case PhaseSuspended:
		return 4
	}
	return 0
}

const allPhases = 1 | 2 | 4

// Event is a value delivered to observers: a *NodeEvent, the
// *InvocationEvent and *SubgraphEvent extensions, or a typed call event
// (*LLMCompletionEvent, *LLMFailedEvent, *LLMTokenEvent, *ToolCallEvent,
// *ToolCallFailedEvent, *EmbeddingEvent, *EmbeddingFailedEvent,
// *RerankEvent, *RerankFailedEvent; see [CallSourceOf]). Observers select with a type
// switch; call events have no phase and are not filtered by [Phases].
type Event interface {
	// EventInvocationID returns the id of the invocation that emitted the
	// event.
	EventInvocationID() string
}

// NodeEvent describes one phase of one node attempt (graph-engine §6).
// Observers must treat every field as read-only; slices and states are
// shared with the engine and with other observers.
type NodeEvent struct {
	// Phase is started, completed or suspended.
	Phase Phase
	// NodeName is the node's name in its immediate graph.
	NodeName string
	// Namespace is the path of node names from the outermost graph down to
	// this node.
	Namespace []string
	// Step counts node executions within the outermost invocation,
	// starting at 0; subgraph nodes share the counter.
	Step int
	// PreState is the state the node received (its own graph's state).
	PreState State
	// PostState is the merged state; set only on successful completed
	// events (zero otherwise).
	PostState State
	// Err is the failure on a failed completed event; ErrorCategory is its
	// category.
	Err           error
	ErrorCategory errcat.Category
	// ParentStates are the containing graphs' states, outermost first,
	// captured when each entered the subgraph leading here;
	// len(ParentStates) == len(Namespace)-1.
	ParentStates []State
	// AttemptIndex is the 0-based retry attempt.
	AttemptIndex int
	// FanOutIndex and BranchName identify the innermost enclosing fan-out
	// instance and parallel branch; nil outside them.
	FanOutIndex *int
	BranchName  *string
	// FanOutIndexChain and BranchNameChain carry the full lineage, one
	// entry per enclosing dispatch boundary (len(Namespace)-1 entries; nil
	// where the boundary is not a fan-out instance or branch).
	FanOutIndexChain []*int
	BranchNameChain  []*string
	// Descriptor is the signal descriptor of a suspended event; nil on
	// started and completed events.
	Descriptor *SignalDescriptor
	// FanOutConfig is set on the events of a fan-out node;
	// ParallelBranchesConfig on those of a parallel-branches node.
	FanOutConfig           *FanOutConfig
	ParallelBranchesConfig *ParallelBranchesConfig
	// CallableBranch marks the synthetic started / completed pair of an
	// inline-callable parallel branch (graph-engine §6, pipeline-utilities
	// §11.1.1): NodeName is the branch's name and the branch is the event
	// source, with no registered node of its own. An observer rendering
	// spans renders the branch's dispatch unit and no node beneath it.
	CallableBranch bool
	// InvocationID and CorrelationID identify the outermost invocation.
	InvocationID  string
	CorrelationID string
	// Metadata is the invocation metadata in scope for the attempt
	// (observability §3.4): set only when an observer takes events.
	Metadata Metadata
	// Time is when the engine emitted the event (delivery is later and
	// asynchronous): a started event's Time is the attempt's start, a
	// terminal event's its end.
	Time time.Time
}

// InvocationEvent marks the start and the end of an invocation (an
// Armature extension of the event union, for observers that need
// invocation boundaries, such as tracing). Only observers registered with
// [InvocationEvents] receive it. It is not a node event: it has no node
// identity and is not filtered by [Phases]. A started event is
// delivered before the invocation's first node event, a completed event
// after its last, whatever the outcome.
type InvocationEvent struct {
	// Phase is PhaseStarted or PhaseCompleted.
	Phase Phase
	// Status, Err, ErrorCategory, State and Suspension describe the
	// outcome on the completed event.
	Status        Status
	Err           error
	ErrorCategory errcat.Category
	State         State
	Suspension    *Suspension
	// EntryNode is the outermost graph's entry node.
	EntryNode string
	// Resumed is set for a resumed (previously suspended) invocation.
	Resumed       bool
	InvocationID  string
	CorrelationID string
	// SessionID is the bound session, if any.
	SessionID string
	// Metadata is the outermost context's invocation metadata: the
	// caller's on the started event, with the serial additions on the
	// completed one.
	Metadata Metadata
	Time     time.Time
}

// EventInvocationID returns the invocation id.
func (e *InvocationEvent) EventInvocationID() string { return e.InvocationID }

// SubgraphEvent marks the start and the end of one run of a subgraph
// node's child graph (an Armature extension of the event union, for
// observers that render subgraph spans, observability §4.3 / §5.3). The
// graph-engine §6 stream has no node events for subgraph wrappers, which
// take no step; this pair brackets the inner nodes' events instead. Only
// observers registered with [InvocationEvents] receive it, and it is not
// filtered by [Phases].
//
// A run that suspends has no completed event: the suspension ends the
// invocation, whose completed event closes it.
type SubgraphEvent struct {
	// Phase is PhaseStarted or PhaseCompleted.
	Phase Phase
	// NodeName is the subgraph node's name in its graph; Namespace its
	// path from the outermost graph (the inner nodes' namespaces extend
	// it).
	NodeName  string
	Namespace []string
	// SubgraphName is the child graph's name ([WithName]; "" when
	// unnamed) and EntryNode its entry node.
	SubgraphName string
	EntryNode    string
	// AttemptIndex is the subgraph node's retry attempt.
	AttemptIndex int
	// FanOutIndex, BranchName and the chains are the subgraph node's own
	// lineage, as on a NodeEvent of that node.
	FanOutIndex      *int
	BranchName       *string
	FanOutIndexChain []*int
	BranchNameChain  []*string
	// Err and ErrorCategory are set on a completed event when the
	// subgraph failed.
	Err           error
	ErrorCategory errcat.Category
	InvocationID  string
	CorrelationID string
	// Metadata is the invocation metadata in scope for the subgraph node.
	Metadata Metadata
	// Time is when the engine emitted the event.
	Time time.Time
}

// EventInvocationID returns the invocation id.
func (e *SubgraphEvent) EventInvocationID() string { return e.InvocationID }

// SignalDescriptor says what a suspended invocation waits for
// (suspension §4): a caller-chosen signal id and application metadata.
type SignalDescriptor struct {
	SignalID string         `json:"signal_id"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// PayloadSchema, when set, is the JSON Schema (draft 2020-12) a
	// resume payload must satisfy: Resume refuses any other payload with
	// suspension_resume_payload_invalid, and the invocation stays
	// suspended. An empty or absent payload is validated as {}.
	PayloadSchema json.RawMessage `json:"payload_schema,omitempty"`
}

// FanOutConfig is the resolved configuration of a fan-out node, carried on
// its events (graph-engine §6).
type FanOutConfig struct {
	ItemCount int `json:"item_count"`
	// Concurrency is the bound on concurrent instances; nil is unbounded.
	Concurrency    *int   `json:"concurrency"`
	ErrorPolicy    string `json:"error_policy"`
	ParentNodeName string `json:"parent_node_name"`
	// SubgraphName is the instance subgraph's name ([WithName]; "" when
	// unnamed), for the instance spans (an Armature extension: the
	// Langfuse mapping's instance observation carries it, observability
	// §8.4.2 subgraph_name).
	SubgraphName string `json:"subgraph_name,omitempty"`
}

// ParallelBranchesConfig is the resolved configuration of a
// parallel-branches node, carried on its events (graph-engine §6).
type ParallelBranchesConfig struct {
	BranchNames    []string `json:"branch_names"`
	BranchCount    int      `json:"branch_count"`
	ErrorPolicy    string   `json:"error_policy"`
	ParentNodeName string   `json:"parent_node_name"`
}

// EventInvocationID returns the invocation id.
func (e *NodeEvent) EventInvocationID() string { return e.InvocationID }

// Observer receives events. It runs on the invocation's delivery
// goroutine, strictly serially: no two observers see the same event at
// once and no observer sees event n+1 before every observer finished event
// n. An error or panic is logged and isolated: it never reaches the graph
// run or other observers. An asynchronous observer's ctx is cancelled
// when a [Graph.Drain] timeout abandons delivery, so slow observers
// should honour it; a [Synchronous] observer's is not (it is still called
// for the rest of the invocation).
//
// ctx is the invocation's delivery context: the same for every event of
// one invocation delivered to one kind of observer, and distinct for each
// invocation whose delivery can be cancelled (every invocation with an
// observer that is not [Synchronous]), even when two share an invocation
// id ([WithInvocationID]); the Synchronous observers of such an
// invocation share a ctx of their own, distinct too. It is cancelled,
// too, once the invocation's events are all delivered (for Synchronous
// observers: once the invocation ended). Observers may thus key
// per-invocation state by ctx.Done() and release state left behind with
// [context.AfterFunc].
type Observer func(ctx context.Context, ev Event) error

// ObserverOption configures an observer registration.
type ObserverOption func(*observerReg) error

// Phases restricts the node-event phases the observer receives (the
// default is all of them). An empty set is rejected with ErrInvalidOption.
// Events other than node events are not filtered.
func Phases(ps ...Phase) ObserverOption {
	return func(r *observerReg) error {
		if len(ps) == 0 {
			return invalidOption("observer phase set must not be empty")
		}
		var set uint8
		for _, p := range ps {
			b := p.bit()
			if b == 0 {
				return invalidOption("unknown observer phase %q", p)
			}
			set |= b
		}
		r.phases = set
		return nil
	}
}

type observerReg struct {
	fn     Observer
	phases uint8
	// invocations opts the observer into InvocationEvents.
	invocations bool
	// noTokens opts the observer out of LLMTokenEvents.
	noTokens bool
	// noCalls opts the observer out of the typed call events.
	noCalls bool
	// sync delivers on the emitting goroutine (Synchronous).
	sync bool
}

// Synchronous makes an observer receive each event on the goroutine that
// emits it, as it is emitted, instead of on a delivery goroutine: when
// the emitting code goes on, the event is observed. The observer sees an
// invocation's events in an order consistent with each emitting
// goroutine's (events of parallel branches interleave), one call at a
// time, and never after Invoke returned. It runs on the engine's path:
// it must be quick, must not block, and must not call back into the
// graph (Drain, DrainEventsFor). It is for observers that order the
// events with what nodes do (a server recording a turn's events among
// its streamed output), which an asynchronous observer can only do by
// waiting for its deliveries. An observer with real work per event (a
// tracer) is better left asynchronous: its work then overlaps the
// graph's on another core (measured: the OTel observer synchronous
// doubles what it adds to an in-memory turn). An invocation whose
// observers are all synchronous involves no delivery goroutine at all,
// and a drain has nothing to wait for.
func Synchronous() ObserverOption {
	return func(r *observerReg) error {
		r.sync = true
		return nil
	}
}

// WithoutTokenEvents makes the observer skip [LLMTokenEvent]s, one per
// chunk of a streamed model call. A call whose observers all skip them
// builds none: an observer that needs only node, invocation or whole-call
// events (a model's completion or failure) saves the engine an event per
// token.
func WithoutTokenEvents() ObserverOption {
	return func(r *observerReg) error {
		r.noTokens = true
		return nil
	}
}

// wantsTokenEvents reports whether a registration in regs receives
// LLMTokenEvents.
func wantsTokenEvents(regs []*observerReg) bool {
	for _, r := range regs {
		if !r.noTokens {
			return true
		}
	}
	return false
}

// WithoutCallEvents makes the observer skip the typed call events: those
// of model calls ([LLMCompletionEvent], [LLMFailedEvent],
// [LLMTokenEvent]), embedding and rerank calls ([EmbeddingEvent],
// [EmbeddingFailedEvent], [RerankEvent], [RerankFailedEvent]) and
// instrumented tool executions ([ToolCallEvent], [ToolCallFailedEvent]). A
// call whose observers all skip them is not instrumented at all: an
// observer that needs only node or invocation events (a server placing
// a turn's streamed output among its nodes) saves the engine the events
// and the snapshots of every call's request and response.
func WithoutCallEvents() ObserverOption {
	return func(r *observerReg) error {
		r.noCalls, r.noTokens = true, true
		return nil
	}
}

// wantsCallEvents reports whether a registration in regs receives the
// typed call events.
func wantsCallEvents(regs []*observerReg) bool {
	for _, r := range regs {
		if !r.noCalls {
			return true
		}
	}
	return false
}

// InvocationEvents makes the observer also receive [InvocationEvent]s,
// which mark the start and end of each invocation. Other observers never
// see them.
func InvocationEvents() ObserverOption {
	return func(r *observerReg) error {
		r.invocations = true
		return nil
	}
}

func newObserverReg(obs Observer, opts []ObserverOption) (*observerReg, error) {
	if obs == nil {
		return nil, invalidOption("nil observer")
	}
	r := &observerReg{fn: obs, phases: allPhases}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// AddObserver attaches obs to the graph: it receives the events of every
// later invocation of this graph, including runs of this graph as a
// subgraph of another. The returned function removes it (idempotently).
func (g *Graph) AddObserver(obs Observer, opts ...ObserverOption) (remove func(), err error) {
	if g == nil {
		return nil, ErrNilGraph
	}
	reg, err := newObserverReg(obs, opts)
	if err != nil {
		return nil, err
	}
	g.obsMu.Lock()
	next := append(slices.Clone(*g.observers.Load()), reg)
	g.observers.Store(&next)
	g.obsMu.Unlock()
	return func() {
		g.obsMu.Lock()
		defer g.obsMu.Unlock()
		cur := *g.observers.Load()
		if i := slices.Index(cur, reg); i >= 0 {
			next := slices.Delete(slices.Clone(cur), i, i+1)
			g.observers.Store(&next)
		}
	}, nil
}

// queued is one event waiting for delivery with its recipients: the
// graph-attached observers (outermost graph first) then the
// invocation-scoped ones.
type queued struct {
	ev         Event
	phase      uint8
	invocation bool // an InvocationEvent, for opted-in observers only
	token      bool // an LLMTokenEvent, not for observers opted out
	call       bool // a typed call event, not for observers opted out
	graphs     []*observerReg
	invoked    []*observerReg
	// notify is an Emit payload told when the event's delivery is over.
	notify DeliveryNotifier
}

// delivered tells q's payload, if it asked, that its delivery is over.
func (q *queued) delivered() {
	if q.notify != nil {
		q.notify.EmitDelivered()
	}
}

// worker is an invocation's observer delivery queue and goroutine.
type worker struct {
	g      *Graph
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	logger loggerLike

	// sync is set when the invocation has Synchronous observers (its
	// own or its graphs'); syncMu serializes their calls.
	sync bool
	// direct is set when every observer is Synchronous (directWorker):
	// the worker has no queue, goroutine, cancel or registration.
	direct     bool
	syncMu     sync.Mutex
	syncClosed bool // the invocation ended: no more synchronous calls
	// syncCtx is the Synchronous observers' context when the invocation
	// has asynchronous ones too (created with the first synchronous
	// call, guarded by syncMu): a drain timeout that abandons the
	// asynchronous delivery does not cancel it; close does.
	syncCtx    context.Context
	syncCancel context.CancelFunc

	mu sync.Mutex
	// queue[head:] are the events still to deliver; the delivered slots
	// before head are reused once the queue empties. It starts in qbuf:
	// an invocation's events are mostly delivered as they come, a few
	// at a time.
	queue     []queued
	qbuf      [4]queued
	head      int
	emitted   int64
	delivered int64
	closed    bool
	cancelled bool
	exited    bool
	waiters   []waiter
	done      chan struct{}

	// same is the next active worker of the same invocation id
	// (g.byID), guarded by g.activeMu.
	same *worker

	// scheduled reports, under g.dl.mu, that a delivery goroutine runs
	// this worker or that it waits in g.dl.ready for one.
	scheduled bool
}

// maxDeliverers bounds a graph's delivery goroutines. Each invocation's
// events are delivered in order by one goroutine at a time, and an
// invocation with nothing to deliver holds none; when observers render
// more slowly than invocations emit, the invocations beyond the bound
// wait in a FIFO with their queued events, not as parked goroutines
// (whose stacks the garbage collector would scan on every cycle). An
// invocation never waits for delivery.
const maxDeliverers = 64

// deliveryBatch is how many events a worker delivers before it yields
// its goroutine to a waiting worker, if any.
const deliveryBatch = 64

// deliveryIdle is the period in which a graph trims its idle delivery
// goroutines: those that no event needed for a whole period exit.
// Between the events of a turn, and between turns, the graph keeps its
// goroutines rather than starting a new one per event, whose stack would
// grow again (copied at each doubling) to the depth its observers need.
const deliveryIdle = 50 * time.Millisecond

// deliverers is a graph's pool of delivery goroutines.
type deliverers struct {
	mu sync.Mutex
	// running counts the goroutines, busy or idle; idle those waiting
	// for work that no kick has claimed yet, and minIdle the fewest of
	// them since the last trim.
	running, idle, minIdle int
	// ready[head:] are the workers waiting for a goroutine, oldest
	// first; the slots before head are reused once it empties.
	ready []*worker
	head  int
	// wake hands each idle goroutine its next step, one token per
	// goroutine taken off idle: true to run the ready workers, false to
	// exit. Created with the first goroutine.
	wake chan bool
	// trim, armed while goroutines run, calls trimDeliverers every
	// deliveryIdle.
	trim      *time.Timer
	trimArmed bool
}

type waiter struct {
	target int64
	ch     chan struct{}
}

type loggerLike interface {
	Warn(msg string, args ...any)
}

func (g *Graph) startWorker(parent context.Context, id string) *worker {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	w := &worker{
		g: g, id: id, ctx: ctx, cancel: cancel, logger: g.logger,
		done: make(chan struct{}),
	}
	g.activeMu.Lock()
	if head := g.byID[id]; head == nil {
		g.byID[id] = w
	} else {
		for head.same != nil {
			head = head.same
		}
		head.same = w
	}
	g.activeMu.Unlock()
	return w
}

// directWorker returns the worker of an invocation whose observers are
// all Synchronous: they are called as each event is emitted, so nothing
// is ever queued, no delivery goroutine runs it, and no drain waits for
// it (it is not registered with the graph).
func directWorker(parent context.Context, g *Graph, id string) *worker {
	return &worker{g: g, id: id, ctx: context.WithoutCancel(parent), logger: g.logger, sync: true, direct: true}
}

// emit delivers q to the synchronous observers and queues it for the
// asynchronous ones. It reports whether it took q: false once emission
// is closed (the invocation ended; a goroutine a node left behind emits
// after Invoke returned) or, without synchronous observers, delivery was
// abandoned. Once synchronous observers had q it was taken: a queue that
// refuses it then only ends its delivery.
func (w *worker) emit(q queued) bool {
	if w.sync {
		async, open := w.deliverSync(q)
		if !open {
			return false
		}
		if !async {
			q.delivered()
			return true // no asynchronous observer: nothing to queue
		}
	}
	w.mu.Lock()
	if w.cancelled || w.closed || w.exited {
		w.mu.Unlock()
		if w.sync {
			// The synchronous observers had q: it was taken, and
			// its payload learns that its delivery is over.
			q.delivered()
			return true
		}
		return false
	}
	if w.queue == nil {
		w.queue = w.qbuf[:0]
	}
	w.queue = append(w.queue, q)
	w.emitted++
	w.mu.Unlock()
	w.kick()
	return true
}

// close marks the end of emission; the worker exits once its queue is
// delivered.
func (w *worker) close() {
	if w.sync {
		w.syncMu.Lock()
		w.syncClosed = true
		cancel := w.syncCancel
		w.syncMu.Unlock()
		if cancel != nil {
			cancel()
		}
		if w.direct {
			return // nothing queued, nothing registered
		}
	}
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.kick()
}

// abort cancels delivery: the worker exits without delivering the rest.
func (w *worker) abort() {
	w.cancel()
	w.kick()
}

// kick schedules w on a delivery goroutine (FIFO): an idle one, else a
// new one while the graph runs fewer than maxDeliverers, else the next
// one to finish its worker.
func (w *worker) kick() {
	g := w.g
	d := &g.dl
	d.mu.Lock()
	if w.scheduled {
		d.mu.Unlock()
		return
	}
	w.scheduled = true
	d.ready = append(d.ready, w)
	switch {
	case d.idle > 0:
		d.idle--
		d.minIdle = min(d.minIdle, d.idle)
		d.mu.Unlock()
		d.wake <- true // never blocks: one token per idle goroutine
	case d.running < maxDeliverers:
		d.running++
		if d.wake == nil {
			d.wake = make(chan bool, maxDeliverers)
		}
		if !d.trimArmed {
			d.trimArmed = true
			if d.trim == nil {
				d.trim = time.AfterFunc(deliveryIdle, g.trimDeliverers)
			} else {
				d.trim.Reset(deliveryIdle)
			}
		}
		d.mu.Unlock()
		go g.deliverLoop()
	default:
		d.mu.Unlock()
	}
}

// trimDeliverers ends the goroutines that stayed idle for the whole
// period since the last trim, and re-arms the trim while goroutines
// remain.
func (g *Graph) trimDeliverers() {
	d := &g.dl
	d.mu.Lock()
	n := min(d.minIdle, d.idle)
	d.idle -= n
	d.running -= n
	d.minIdle = d.idle
	if d.running > 0 {
		d.trim.Reset(deliveryIdle)
	} else {
		d.trimArmed = false
	}
	d.mu.Unlock()
	for range n {
		d.wake <- false
	}
}

// deliverLoop is a delivery goroutine: it runs the workers waiting for
// one, then waits, idle, until a kick or a trim takes it off idle.
func (g *Graph) deliverLoop() {
	var w *worker
	for {
		if w = g.next(w); w != nil {
			w.run()
			continue
		}
		if !<-g.dl.wake {
			return
		}
	}
}

// next takes w (nil when none) off its goroutine, putting it back at the
// end of the FIFO if it has work again (events emitted, or its close,
// after run returned), and returns the worker to run next; nil after
// counting the goroutine idle.
func (g *Graph) next(w *worker) *worker {
	d := &g.dl
	d.mu.Lock()
	defer d.mu.Unlock()
	if w != nil {
		w.mu.Lock()
		more := !w.exited && (len(w.queue) > w.head || w.closed || w.cancelled || w.ctx.Err() != nil)
		w.mu.Unlock()
		if more {
			d.ready = append(d.ready, w)
		} else {
			w.scheduled = false
		}
	}
	if d.head == len(d.ready) {
		d.ready, d.head = d.ready[:0], 0
		d.idle++
		return nil
	}
	n := d.ready[d.head]
	d.ready[d.head] = nil
	d.head++
	return n
}

// run delivers w's queued events in order, at most deliveryBatch of
// them, and exits w once it is closed and delivered, or cancelled.
func (w *worker) run() {
	for range deliveryBatch {
		w.mu.Lock()
		if w.exited {
			w.mu.Unlock()
			return
		}
		if w.ctx.Err() != nil {
			w.cancelled = true
		}
		if w.cancelled || (len(w.queue) == w.head && w.closed) {
			w.mu.Unlock()
			w.exit()
			return
		}
		if len(w.queue) == w.head {
			w.mu.Unlock()
			return
		}
		item := w.queue[w.head]
		w.queue[w.head] = queued{}
		w.head++
		if w.head == len(w.queue) {
			w.queue, w.head = w.queue[:0], 0
		}
		w.mu.Unlock()

		w.deliver(item)

		w.mu.Lock()
		w.delivered++
		w.notifyLocked()
		w.mu.Unlock()
	}
}

func (w *worker) notifyLocked() {
	kept := w.waiters[:0]
	for _, wt := range w.waiters {
		if w.delivered >= wt.target {
			close(wt.ch)
			continue
		}
		kept = append(kept, wt)
	}
	w.waiters = kept
}

func (w *worker) exit() {
	w.mu.Lock()
	w.exited = true
	w.cancelled = w.cancelled || w.ctx.Err() != nil
	for _, wt := range w.waiters {
		close(wt.ch)
	}
	w.waiters = nil
	var abandoned []queued
	for _, q := range w.queue[w.head:] {
		if q.notify != nil {
			abandoned = append(abandoned, q)
		}
	}
	w.queue, w.head = nil, 0
	clear(w.qbuf[:]) // an abandoned delivery's events
	w.mu.Unlock()
	for i := range abandoned {
		abandoned[i].delivered()
	}
	w.g.activeMu.Lock()
	switch head := w.g.byID[w.id]; {
	case head == w && w.same == nil:
		delete(w.g.byID, w.id)
	case head == w:
		w.g.byID[w.id] = w.same
	default:
		for p := head; p != nil; p = p.same {
			if p.same == w {
				p.same = w.same
				break
			}
		}
	}
	w.same = nil
	w.g.activeMu.Unlock()
	w.cancel()
	close(w.done)
}

// deliverSync delivers item to its synchronous observers, one event at
// a time, and reports whether it has asynchronous ones to queue it for;
// open is false, and nothing delivered, once the invocation ended (a
// goroutine a node left behind emits after Invoke returned).
func (w *worker) deliverSync(item queued) (async, open bool) {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	if w.syncClosed {
		return false, false
	}
	ctx := w.ctx
	if !w.direct {
		if w.syncCtx == nil {
			w.syncCtx, w.syncCancel = context.WithCancel(context.WithoutCancel(w.ctx))
		}
		ctx = w.syncCtx
	}
	for _, list := range [2][]*observerReg{item.graphs, item.invoked} {
		for _, r := range list {
			if !r.sync {
				async = true
				continue
			}
			if !r.wants(item) {
				continue
			}
			if err := callObserver(ctx, r.fn, item.ev); err != nil {
				w.logger.Warn("graph: observer failed", "invocation_id", w.id, "error", err)
			}
		}
	}
	return async, true
}

// wants reports whether the observer receives item.
func (r *observerReg) wants(item queued) bool {
	return (item.phase == 0 || r.phases&item.phase != 0) && (!item.invocation || r.invocations) &&
		(!item.token || !r.noTokens) && (!item.call || !r.noCalls)
}

func (w *worker) deliver(item queued) {
	defer item.delivered()
	for _, list := range [2][]*observerReg{item.graphs, item.invoked} {
		for _, r := range list {
			if r.sync || !r.wants(item) {
				continue
			}
			if w.ctx.Err() != nil {
				return
			}
			if err := callObserver(w.ctx, r.fn, item.ev); err != nil {
				w.logger.Warn("graph: observer failed", "invocation_id", w.id, "error", err)
			}
		}
	}
}

func callObserver(ctx context.Context, fn Observer, ev Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = newPanicError(p)
		}
	}()
	return fn(ctx, ev)
}

func (w *worker) pending() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.emitted - w.delivered
}

// DrainSummary reports the outcome of a drain: how many events were still
// undelivered when it returned, and whether its timeout was reached.
type DrainSummary struct {
	Undelivered    int
	TimeoutReached bool
}

// DrainOption configures a drain.
type DrainOption func(*drainConfig) error

type drainConfig struct {
	timeout    time.Duration
	hasTimeout bool
}

// DrainTimeout bounds a drain: it returns no later than d after the call.
// A negative d is rejected with ErrInvalidOption; 0 returns immediately
// with whatever is still pending.
func DrainTimeout(d time.Duration) DrainOption {
	return func(c *drainConfig) error {
		if d < 0 {
			return invalidOption("drain timeout must not be negative, got %s", d)
		}
		c.timeout, c.hasTimeout = d, true
		return nil
	}
}

func drainOptions(opts []DrainOption) (drainConfig, error) {
	var c drainConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Drain waits until every observer event of the invocations of this graph
// that are active when it is called has been delivered. Invocations
// started later are not covered.
//
// With [DrainTimeout] it returns no later than the timeout; if events are
// still pending then, their delivery is abandoned (the workers are
// cancelled, their observers see a cancelled context), they are counted
// as undelivered, and TimeoutReached is set. The graph stays usable. The
// worst case without a timeout is the sum of all pending observer work;
// short-lived processes (CLIs, serverless functions) should set one.
//
// If ctx ends first, Drain returns the pending count and ctx's error
// without cancelling delivery.
func (g *Graph) Drain(ctx context.Context, opts ...DrainOption) (DrainSummary, error) {
	if g == nil {
		return DrainSummary{}, ErrNilGraph
	}
	cfg, err := drainOptions(opts)
	if err != nil {
		return DrainSummary{}, err
	}
	g.activeMu.Lock()
	workers := make([]*worker, 0, len(g.byID))
	for w := range maps.Values(g.byID) {
		for ; w != nil; w = w.same {
			workers = append(workers, w)
		}
	}
	g.activeMu.Unlock()

	var deadline <-chan time.Time
	if cfg.hasTimeout {
		t := time.NewTimer(cfg.timeout)
		defer t.Stop()
		deadline = t.C
	}
	for _, w := range workers {
		select {
		case <-w.done:
		case <-deadline:
			var n int64
			for _, w := range workers {
				n += w.pending()
				w.abort()
			}
			return DrainSummary{Undelivered: int(n), TimeoutReached: true}, nil
		case <-ctx.Done():
			var n int64
			for _, w := range workers {
				n += w.pending()
			}
			return DrainSummary{Undelivered: int(n)}, ctx.Err()
		}
	}
	return DrainSummary{}, nil
}

// DrainEventsFor waits until the observer events of one invocation emitted
// before the call have been delivered. Events emitted after the call are
// not waited for, so a node may call it for its own invocation (it never
// waits for its own completed event). A timeout never cancels delivery:
// the worker goes on after the call returns. An unknown or finished
// invocation returns immediately with a zero summary.
func (g *Graph) DrainEventsFor(ctx context.Context, invocationID string, opts ...DrainOption) (DrainSummary, error) {
	if g == nil {
		return DrainSummary{}, ErrNilGraph
	}
	cfg, err := drainOptions(opts)
	if err != nil {
		return DrainSummary{}, err
	}
	var w *worker
	if sc := scopeFrom(ctx); sc != nil && sc.inv.id == invocationID && sc.inv.w != nil {
		w = sc.inv.w
	} else {
		g.activeMu.Lock()
		w = g.byID[invocationID]
		g.activeMu.Unlock()
	}
	if w == nil {
		return DrainSummary{}, nil
	}
	w.mu.Lock()
	target := w.emitted
	if w.delivered >= target || w.cancelled {
		n := target - w.delivered
		w.mu.Unlock()
		return DrainSummary{Undelivered: int(max(n, 0))}, nil
	}
	ch := make(chan struct{})
	w.waiters = append(w.waiters, waiter{target: target, ch: ch})
	w.mu.Unlock()

	undelivered := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return int(max(target-w.delivered, 0))
	}
	var deadline <-chan time.Time
	if cfg.hasTimeout {
		t := time.NewTimer(cfg.timeout)
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-ch:
		return DrainSummary{Undelivered: undelivered()}, nil
	case <-deadline:
		return DrainSummary{Undelivered: undelivered(), TimeoutReached: true}, nil
	case <-ctx.Done():
		return DrainSummary{Undelivered: undelivered()}, ctx.Err()
	}
}

func (s DrainSummary) String() string {
	return fmt.Sprintf("undelivered=%d timeout_reached=%t", s.Undelivered, s.TimeoutReached)
}
