package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armature-go/armature/internal/jsonstr"
	"github.com/armature-go/armature/internal/jsonvalid"
)

// RecorderConfig configures a Recorder. Only Store is required.
type RecorderConfig struct {
	// Store persists runs and events (required).
	Store Store
	// Broker receives every stored event; default a new Broker with the
	// default buffer (see Recorder.Broker).
	Broker *Broker
	// Now is the clock for run and event times; default time.Now.
	Now func() time.Time
	// NewID mints run ids; default NewRunID with Now (26 base32 chars,
	// in the order they were minted).
	NewID func() string
	// Logger receives write failures the caller cannot see; default
	// discards.
	Logger *slog.Logger
	// FlushEvery is how many buffered events trigger a write in the
	// middle of a turn; default 64.
	FlushEvery int
	// WriteTimeout bounds each store write; default 10s. Writes are
	// detached from the caller's cancellation (see Recorder).
	WriteTimeout time.Duration

	// Synchronous turns group commit off: every turn writes its run's
	// start at Begin and its events and end at its end, on its own
	// path, as turns with a live subscriber do.
	Synchronous bool
	// Linger is how long the flusher lets the oldest queued record wait
	// for others to join its group commit; default 1ms, negative for
	// none. Keep it at a few milliseconds at most: it delays when queued
	// runs appear in the store.
	Linger time.Duration
	// BatchTurns and BatchEvents bound one group commit: at most that
	// many records (a record is a turn, or a part of a turn with more
	// than FlushEvery events) and, unless one record has more, events;
	// defaults 256 and 4096.
	BatchTurns, BatchEvents int
	// QueueTurns bounds the records waiting for the flusher; default
	// 1024. When the queue is full, a turn's end waits for room: records
	// are never dropped.
	QueueTurns int

	// RetryRefused is how long after the store refused the records of a
	// run that ended (a full disk, a database that went away, a write
	// that timed out) the Recorder writes them again; it waits twice as
	// long after each refusal, up to a minute, until the store takes
	// them or Close. Meanwhile the run shows as started. Default 1s;
	// negative for never: the run then stays started until
	// [Recorder.Reconcile] at the next start.
	RetryRefused time.Duration
}

// Validate reports a configuration NewRecorder cannot use.
func (c RecorderConfig) Validate() error {
	switch {
	case c.Store == nil:
		return fmt.Errorf("%w: Store is required", ErrInvalidConfig)
	case c.FlushEvery < 0:
		return fmt.Errorf("%w: negative FlushEvery", ErrInvalidConfig)
	case c.WriteTimeout < 0:
		return fmt.Errorf("%w: negative WriteTimeout", ErrInvalidConfig)
	case c.BatchTurns < 0 || c.BatchEvents < 0 || c.QueueTurns < 0:
		return fmt.Errorf("%w: negative BatchTurns, BatchEvents or QueueTurns", ErrInvalidConfig)
	}
	return nil
}

// Recorder records turns as runs: it starts the run, buffers the turn's
// events, writes them in batches, publishes every stored event to its
// Broker, and tracks live turns so that they can be cancelled. It is
// safe for concurrent use. Call [Recorder.Close] when the server stops
// taking turns: it writes what is still queued.
//
// # Cost
//
// A turn whose session nobody watches (no live subscriber on the Broker
// at Begin, at each Emit and at its end) writes nothing on its own path:
// Begin hands the run's start (and its started event) to a background
// flusher, Emit buffers events, and the turn's end hands its events and
// final status over. The flusher writes everything queued (up to
// BatchTurns records and about BatchEvents events) in one store
// transaction when the Store is a [BatchWriter] (group commit across
// sessions), letting the oldest record wait up to Linger for others to
// join; other stores get StartRun and Append per record from the
// flusher. A turn with more than FlushEvery events hands them over every
// FlushEvery events. So a turn's run and events appear in the store, and
// are published to the Broker with their store-assigned IDs, a bounded
// delay after they were handed over (the linger plus one commit);
// [Turn.Flush] waits for a turn's records, [Recorder.Flush] for all,
// and a wait cuts the linger short (the records still share the commit
// with whatever else is queued). The queue is bounded by QueueTurns:
// when it is full, a turn waits for room rather than dropping records.
//
// While the session has a live subscriber, the turn writes on its own
// path as it always did: the run's start at Begin and each event (and
// publication) as it is emitted, so the stream is live. A turn whose
// session gains a subscriber midway ([Recorder.Subscribe], or an Emit
// that finds one) first waits for the session's queued records, then
// writes its buffered events and goes on live; a turn starting live
// waits for them too. So within a session event IDs still increase in
// the order the turns ran, whichever path wrote them. With
// RecorderConfig.Synchronous, or after Close, an unwatched turn costs
// two writes on its own path: StartRun at Begin, and one Append storing
// its events and its final status together at its end.
//
// # Crash semantics
//
// A run's start reaches the store within a linger of Begin (at once
// with [Turn.Flush]), so a turn in flight when the process dies leaves
// its run in status started, with the events handed over so far;
// [Recorder.Reconcile], called at startup, ends it as its turn really
// ended — completed or suspended if the turn committed (the caller's
// Resolver tells, typically from the session store), failed with
// [CategoryInterrupted] otherwise. A crash loses the records not yet
// written: the events buffered or queued since the last write, and the
// final status of a turn that ended within the last linger and commit —
// which Reconcile restores from the session store. A server that
// answers a turn only after its Turn.Flush never answers a turn whose
// run record is not durable. The end of a run is atomic: its final
// status is stored together with its last events, so a finished run
// always has its terminal event.
//
// # Errors
//
// A turn's end reports its write's failure only when it wrote on its
// own path; the flusher logs a failed write and reports it to the
// turn's [Turn.Flush] and to the next [Recorder.Flush] or
// [Recorder.Close]. The records of an ended run that the store refused
// (its start too, if it was refused) are kept and written again, with
// backoff, until the store takes them (RecorderConfig.RetryRefused):
// until then a run whose start was refused is missing, and one whose
// end was refused shows as started; a process that stops first leaves
// the run to Reconcile. Events refused in the middle of a turn whose
// end is then written are lost (the run is finished without them).
//
// # Cancellation
//
// Store writes are detached from the caller's context (they keep its
// values, not its cancellation) and bounded by WriteTimeout, so that a
// cancelled turn is still recorded as cancelled. The flusher's writes
// carry no caller's values.
type Recorder struct {
	store        Store
	broker       *Broker
	pub          pubLocks // a session's writes and publications, in id order
	now          func() time.Time
	newID        func() string
	log          *slog.Logger
	flushEvery   int
	writeTimeout time.Duration

	mu   sync.Mutex
	live map[runKey]*Turn // turns not ended, and ended turns still queued
	// settledTurn is, by {tenant, session id}, the session's turn that
	// settled (let the session go) last and has not recorded its end:
	// the session's next turn records nothing before that end (follow).
	settledTurn map[runKey]*Turn
	// retired, when not nil, is closed (and set to nil) when a turn
	// leaves live: PurgeSession waits on it for settled turns.
	retired chan struct{}
	// purging holds the purges under way, by session (purge.go).
	purging map[runKey]*purging
	// settling counts the purges in awaitSettled: an ended turn wakes
	// them when its end is queued, and not otherwise.
	settling atomic.Int32
	// elsewhere holds the sessions watched on other servers
	// (WatchElsewhere).
	elsewhere elsewhere

	// group commit (flusher.go)
	batching                            bool
	linger                              time.Duration
	batchTurns, batchEvents, queueTurns int
	closing                             atomic.Bool // Close was called

	qmu          sync.Mutex
	queue        []*queued      // FIFO
	queuedEvents int            // events in queue
	perSession   map[runKey]int // records queued or being written, by {tenant, session id}
	enq, done    uint64         // records queued / written (or failed), ever
	flushTo      uint64         // a Flush waits for the records up to here: no linger
	running      bool           // a flusher goroutine runs
	writing      bool           // a batch is being written (by the flusher or a Flush): one at a time, in queue order
	closed       bool
	changed      chan struct{} // closed and replaced when done advances or Close is called
	kick         chan struct{} // ends the linger early
	failures     []failure
	flushers     sync.WaitGroup

	redo redo // refused records, written again (redo.go)
}

// NewRecorder returns a Recorder.
func NewRecorder(cfg RecorderConfig) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Recorder{
		store: cfg.Store, broker: cfg.Broker, now: cfg.Now, newID: cfg.NewID, log: cfg.Logger,
		flushEvery: cfg.FlushEvery, writeTimeout: cfg.WriteTimeout, live: map[runKey]*Turn{}, purging: map[runKey]*purging{},
		batching: !cfg.Synchronous, linger: cfg.Linger, batchTurns: cfg.BatchTurns, batchEvents: cfg.BatchEvents,
		queueTurns: cfg.QueueTurns, perSession: map[runKey]int{}, changed: make(chan struct{}), kick: make(chan struct{}, 1),
	}
	switch {
	case r.linger == 0:
		r.linger = time.Millisecond
	case r.linger < 0:
		r.linger = 0
	}
	if r.batchTurns == 0 {
		r.batchTurns = 256
	}
	if r.batchEvents == 0 {
		r.batchEvents = 4096
	}
	if r.queueTurns == 0 {
		r.queueTurns = 1024
	}
	if r.broker == nil {
		r.broker = NewBroker(BrokerConfig{})
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.newID == nil {
		now := r.now
		r.newID = func() string { return NewRunID(now()) }
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.flushEvery == 0 {
		r.flushEvery = 64
	}
	if r.writeTimeout == 0 {
		r.writeTimeout = 10 * time.Second
	}
	switch r.redo.first = cfg.RetryRefused; {
	case r.redo.first == 0:
		r.redo.first = time.Second
	case r.redo.first < 0:
		r.redo.first = 0
	}
	return r, nil
}

// Broker returns the Broker the Recorder publishes to.
func (r *Recorder) Broker() *Broker { return r.broker }

// Durable reports whether the Recorder's store keeps records across a
// restart (it is not [Volatile]): only then does waiting for a turn's
// records ([Turn.Flush]) make them survive a crash. Readers of
// [Recorder.Store] see every record handed over either way.
func (r *Recorder) Durable() bool {
	v, ok := r.store.(Volatile)
	return !ok || !v.Volatile()
}

// Store returns the Recorder's Store as its readers should see it,
// with read-your-writes: Run, Events and ListRuns first wait for the
// records queued before the call (see [Recorder.Flush]; no wait when
// nothing is queued), so that a turn that has ended is readable, and
// Run also returns this Recorder's turns in flight whose start is still
// buffered (status started), so that they can be found to be
// cancelled. ListRuns and Events do not show a turn before it is
// written. Writes go straight to the store. RecorderConfig.Store is
// the store itself.
func (r *Recorder) Store() Store { return readStore{Store: r.store, r: r} }

// BeginRequest is the argument of [Recorder.Begin].
type BeginRequest struct {
	Tenant    string
	SessionID string
	AgentID   string
	// ParentID is the suspended run a resumed turn continues.
	ParentID      string
	CorrelationID string
	// ConversationID is the caller's conversation (sub-thread) id, if
	// any: Run.ConversationID.
	ConversationID string
	// Adapter names the backend adapter that runs the turn (default
	// "armature", the native backend): the adapter field of every
	// agent.* event the Turn records.
	Adapter string
	// MessageID is the client's id of the message the turn answers, if
	// it gave one (an idempotency key): the runtime.request.started
	// event carries it as messageId, so that a client whose request got
	// no answer (a dropped connection) knows its turn on the session's
	// stream from another client's. One longer than MaxIDLength is left
	// out. A valid id ([ValidMessageID]) is also recorded on the run
	// (Run.MessageID, which ListRunsRequest.MessageIDPrefix finds);
	// another (control characters, not UTF-8) is on the event only: it
	// never fails Begin.
	MessageID string
}

// Begin starts a run for a turn. It returns the Turn and a context
// derived from ctx that [Recorder.Cancel] cancels (with cause
// [ErrCancelled]) and that is cancelled when the turn ends: run the turn
// under it. The caller must end every Turn with one of Complete, Fail,
// Suspend or Cancelled. The run's runtime.request.started event is
// recorded once the turn is accepted ([Turn.Accept]), or before the
// first other event the turn records.
//
// The run's start is handed to the flusher at once (or written on the
// turn's own path, see Recorder), so that a crash while the turn waits
// for its session or in the middle of it leaves the run in status
// started for [Recorder.Reconcile] rather than no record at all;
// [Turn.Flush] waits for it.
func (r *Recorder) Begin(ctx context.Context, req BeginRequest) (*Turn, context.Context, error) {
	if err := checkIDs("tenant", req.Tenant, "session id", req.SessionID, "agent id", req.AgentID,
		"parent id", req.ParentID, "correlation id", req.CorrelationID, "conversation id", req.ConversationID); err != nil {
		return nil, nil, fmt.Errorf("runtime: begin: %w", err)
	}
	run := Run{
		ID: r.newID(), Tenant: req.Tenant, SessionID: req.SessionID, AgentID: req.AgentID,
		ParentID: req.ParentID, CorrelationID: req.CorrelationID, ConversationID: req.ConversationID,
		Status: StatusStarted, StartedAt: r.now(),
	}
	if ValidMessageID(req.MessageID) {
		run.MessageID = req.MessageID
	}
	t := &Turn{rec: r, run: run, adapter: req.Adapter}
	if t.adapter == "" {
		t.adapter = NativeAdapter
	}
	if len(req.MessageID) <= MaxIDLength {
		// Event data only (JSON-escaped, never a stored column): any
		// text the chat harness took as a message id is fine.
		t.startData = startedData(req.MessageID)
	}
	// One buffer for the turn's events, its start (once accepted) first.
	// The run itself is stored now, so that a crash while the turn waits
	// for its session still ends it (Reconcile). Handed to the flusher,
	// the run's start keeps the buffer's first element: Accept puts the
	// runtime.request.started event there while the start is still
	// queued (an uncontended session's turn), so both are written in
	// one record, as durable as each other.
	t.buf = make([]Event, 0, 1+turnEvents)
	if !r.batching || r.watched(run.Tenant, run.SessionID) || r.closing.Load() || !t.handStart() {
		r.waitSession(t.session())
		if err := r.store.StartRun(ctx, run); err != nil {
			return nil, nil, fmt.Errorf("runtime: begin: %w", err)
		}
		t.live, t.handed = true, true
	}
	tctx, cancel := context.WithCancelCause(ctx)
	t.cancel = cancel
	r.mu.Lock()
	r.live[runKey{run.Tenant, run.ID}] = t
	r.mu.Unlock()
	return t, tctx, nil
}

// startedData is the data of a runtime.request.started event for a
// turn answering the message messageID: {"messageId": messageID}, or
// none when it is empty.
func startedData(messageID string) json.RawMessage {
	if messageID == "" {
		return nil
	}
	b := jsonstr.Append(append(make([]byte, 0, len(messageID)+16), `{"messageId":`...), messageID)
	return append(b, '}')
}

// Subscribe subscribes to the tenant's session on the Broker (see
// [Broker.Subscribe]) and brings the session's turns in flight live: the
// events they buffered so far are written (and published) before it
// returns, and their later events are written as they happen. So a
// subscriber that joins in the middle of a turn, and then replays the
// session from the store ([Recorder.Store]) after its Last-Event-ID,
// gets the turn's events so far from the replay and the rest live,
// without a gap; it skips live events whose ID is not above the last
// one replayed, so it gets none twice.
func (r *Recorder) Subscribe(ctx context.Context, tenant, sessionID string) (events <-chan Event, cancel func()) {
	events, cancel = r.broker.Subscribe(tenant, sessionID)
	r.bringLive(ctx, runKey{tenant, sessionID})
	return events, cancel
}

// Cancel cancels the live turn of the tenant's run: its context is
// cancelled with cause ErrCancelled, and the turn ends as cancelled
// (runtime.request.cancelled) even if its owner then calls Fail. It
// reports whether the cancel reached a live turn; a run that is unknown,
// of another tenant, already ended or run by another process is not. A
// turn that had committed its work when the cancel came (its owner calls
// Complete or Suspend) still ends so: the run's final status, not this
// report, says how it ended.
func (r *Recorder) Cancel(ctx context.Context, tenant, runID string) bool {
	r.mu.Lock()
	t := r.live[runKey{tenant, runID}]
	r.mu.Unlock()
	if t == nil || t.ended.Load() {
		return false
	}
	t.cancelled.Store(true)
	t.cancel(ErrCancelled)
	r.log.InfoContext(ctx, "runtime: run cancelled", "run", runID)
	return true
}

// CancelAll cancels every live turn of this Recorder, as Cancel does
// each but with cause [ErrShutdown], and reports how many it cancelled:
// a server whose graceful shutdown runs out of time calls it so that the
// turns it abandons end as cancelled runs rather than staying started.
func (r *Recorder) CancelAll(ctx context.Context) int {
	r.mu.Lock()
	turns := make([]*Turn, 0, len(r.live))
	for _, t := range r.live {
		turns = append(turns, t)
	}
	r.mu.Unlock()
	n := 0
	for _, t := range turns {
		if t.ended.Load() {
			continue
		}
		t.cancelled.Store(true)
		t.cancel(ErrShutdown)
		n++
	}
	if n > 0 {
		r.log.InfoContext(ctx, "runtime: runs cancelled", "runs", n)
	}
	return n
}

// CategoryInterrupted is the RunError category of a run that
// [Recorder.Reconcile] failed: the process stopped before the run ended,
// and its turn did not commit.
// It is a wire identifier (an Armature extension) and must not change.
const CategoryInterrupted = "run_interrupted"

// Recover fails the runs a previous process left in status started:
// it is [Recorder.Reconcile] without a Resolver, so every such run gets
// a runtime.request.failed event and status failed with category
// [CategoryInterrupted], bucket retryable_transient. It returns how
// many runs it failed.
func (r *Recorder) Recover(ctx context.Context) (int, error) {
	s, err := r.Reconcile(ctx, nil)
	return s.Failed, err
}

// Resolution is what a [Resolver] learned about the turn of a run left
// in status started: whether it committed, and with which outcome.
type Resolution struct {
	// Status is StatusCompleted or StatusSuspended when the turn is
	// known to have committed with that outcome (its session write is
	// durable). Any other value means it did not commit: the run fails
	// as interrupted.
	Status Status
	// Output is a completed turn's output, as Turn.Complete takes it,
	// or a suspended turn's, as Turn.SuspendOutput takes it (nil: none).
	Output any
	// InvocationID, Signal and Approval describe a suspended turn, as
	// Turn.Suspend takes them; InvocationID is required.
	InvocationID     string
	Signal, Approval any
}

// Resolver tells what became of the turn of a run that a previous
// process left in status started, typically by asking the session store
// whether the turn's write committed (the chat harness records the
// outcome under a key with the session write, atomically). An error
// leaves the run started for a later Reconcile.
type Resolver func(ctx context.Context, run Run) (Resolution, error)

// Reconciled counts what [Recorder.Reconcile] did: runs it completed,
// suspended and failed, and runs it left started because their
// Resolver failed.
type Reconciled struct {
	Completed, Suspended, Failed, Left int
}

// Total is the number of runs Reconcile finished.
func (s Reconciled) Total() int { return s.Completed + s.Suspended + s.Failed }

// Reconcile ends the runs a previous process left in status started
// (their turns died with it, or their final records were lost) with what
// really became of their turns. For each such run it asks resolve: a
// turn that committed ends its run as it would have ended (the
// runtime.request.completed event and status completed with the output,
// or runtime.request.suspended and runtime.approval.requested and
// status suspended with the invocation id); any other run gets a
// runtime.request.failed event and status failed with category
// [CategoryInterrupted], bucket retryable_transient. A nil resolve
// fails every such run. The run's events that were lost with the
// process stay lost: the terminal events follow whatever was written.
//
// Call it once at startup, before serving; it works whether or not
// anybody is subscribed, and it skips this Recorder's live turns, but
// not the live turns of other processes sharing the store: the run of
// such a turn that it fails as interrupted still takes the turn's own
// end, which replaces it ([Writable]), so that a turn that commits
// after Reconcile looked is not recorded as failed. It needs a
// [Recoverable] Store and does nothing otherwise. A run whose Resolver
// fails is left started (counted in Left) and the errors are returned,
// joined, after the other runs are reconciled.
func (r *Recorder) Reconcile(ctx context.Context, resolve Resolver) (Reconciled, error) {
	return r.reconcile(ctx, resolve, false)
}

// ReconcileAbandoned is Reconcile for the runs of other processes that
// are gone (UnfinishedRequest.Abandoned), safe to call while this
// process serves: on a store shared by replicas (store/postgres), the
// survivors of a replica killed mid-turn end its runs as their turns
// ended, without waiting for a restart. A store that one process owns
// has no such runs.
func (r *Recorder) ReconcileAbandoned(ctx context.Context, resolve Resolver) (Reconciled, error) {
	return r.reconcile(ctx, resolve, true)
}

func (r *Recorder) reconcile(ctx context.Context, resolve Resolver, abandoned bool) (Reconciled, error) {
	var sum Reconciled
	rs, ok := r.store.(Recoverable)
	if !ok {
		return sum, nil
	}
	rerr := RunError{Bucket: "retryable_transient", Category: CategoryInterrupted,
		Message: "the run was interrupted: the server stopped before it ended"}
	cutoff, skipped := r.now(), map[runKey]bool{}
	var errs []error
	for {
		runs, err := rs.UnfinishedRuns(ctx, UnfinishedRequest{StartedBefore: cutoff, Limit: MaxPageSize, Abandoned: abandoned})
		if err != nil {
			return sum, errors.Join(append(errs, fmt.Errorf("runtime: reconcile: %w", err))...)
		}
		progress := false
		for _, run := range runs {
			k := runKey{run.Tenant, run.ID}
			r.mu.Lock()
			live := r.live[k] != nil
			r.mu.Unlock()
			if live || skipped[k] {
				continue
			}
			var res Resolution
			if resolve != nil {
				if res, err = resolve(ctx, run); err != nil {
					skipped[k] = true
					sum.Left++
					if len(errs) < 8 {
						errs = append(errs, fmt.Errorf("runtime: reconcile run %q: %w", run.ID, err))
					}
					continue
				}
			}
			// A run that recorded nothing (its turn waited for its
			// session, or its records were lost with the process) gets
			// its start, so that runtime.request.started still comes
			// first.
			evs, err := r.store.Events(ctx, EventsRequest{Tenant: run.Tenant, RunID: run.ID, Limit: 1})
			req, err := reconciliation(run, res, rerr, r.now(), err == nil && len(evs) == 0)
			if err != nil {
				return sum, errors.Join(append(errs, err)...)
			}
			_, err = r.store.Append(ctx, req)
			switch {
			case errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound):
				skipped[k] = true // finished meanwhile
			case err != nil:
				return sum, errors.Join(append(errs, fmt.Errorf("runtime: reconcile run %q: %w", run.ID, err))...)
			default:
				progress = true
				switch req.Finish.Status {
				case StatusCompleted:
					sum.Completed++
				case StatusSuspended:
					sum.Suspended++
				default:
					sum.Failed++
				}
				r.log.InfoContext(ctx, "runtime: reconciled a run left started", "run", run.ID, "status", req.Finish.Status)
			}
		}
		if !progress {
			return sum, errors.Join(errs...)
		}
	}
}

// reconciliation is the Append that ends run as res says: the terminal
// events and the final status a Turn would have recorded.
func reconciliation(run Run, res Resolution, interrupted RunError, now time.Time, start bool) (AppendRequest, error) {
	req := AppendRequest{Tenant: run.Tenant, RunID: run.ID}
	if start {
		req.Events = append(req.Events, Event{Type: EventRequestStarted, Time: run.StartedAt, Data: startedData(run.MessageID)})
	}
	var evs []ending
	switch res.Status {
	case StatusCompleted:
		out, err := marshal(res.Output)
		if err != nil {
			return req, fmt.Errorf("runtime: reconcile run %q: %w: %w", run.ID, ErrInvalidRequest, err)
		}
		if out == nil {
			out = json.RawMessage("null")
		}
		req.Finish = &FinishRequest{Status: StatusCompleted, Output: out}
		evs = []ending{{EventRequestCompleted, completedEvent(out)}}
	case StatusSuspended:
		if err := checkID("invocation id", res.InvocationID, false); err != nil {
			return req, fmt.Errorf("runtime: reconcile run %q: %w", run.ID, err)
		}
		req.Finish = &FinishRequest{Status: StatusSuspended, InvocationID: res.InvocationID}
		if res.Output != nil {
			out, err := marshal(res.Output)
			if err != nil {
				return req, fmt.Errorf("runtime: reconcile run %q: %w: %w", run.ID, ErrInvalidRequest, err)
			}
			req.Finish.Output = out
		}
		evs = []ending{{EventRequestSuspended, suspendedData{InvocationID: res.InvocationID, Signal: res.Signal}},
			{EventApprovalRequested, approvalData{Approval: res.Approval}}}
	default:
		e := interrupted
		req.Finish = &FinishRequest{Status: StatusFailed, Error: &e}
		evs = []ending{{EventRequestFailed, failedData{Error: e}}}
	}
	req.Finish.EndedAt = now
	for _, e := range evs {
		raw, err := e.encode()
		if err != nil {
			return req, fmt.Errorf("runtime: reconcile run %q: %w: %w", run.ID, ErrInvalidRequest, err)
		}
		req.Events = append(req.Events, Event{Type: e.typ, Time: now, Data: raw})
	}
	return req, nil
}

// Turn records one turn. Its methods are safe for concurrent use; events
// are stored in the order the calls return.
type Turn struct {
	rec     *Recorder
	run     Run    // identity; immutable
	adapter string // the adapter field of agent.* events
	cancel  context.CancelCauseFunc

	cancelled atomic.Bool // set by Recorder.Cancel
	ended     atomic.Bool // set under mu
	settled   atomic.Bool // set by Settle

	mu  sync.Mutex
	buf []Event
	// accepted: the run's runtime.request.started is in buf or written
	// (Accept); startData is its data. startQ is the queued record of
	// the run's start, until Accept (see handStart).
	accepted  bool
	startData json.RawMessage
	startQ    *queued
	// after is the session's turn before this one whose end its records
	// wait for (follow), set by accept; done is closed once this turn's
	// end is recorded, for the session's next turn (Settle).
	after *Turn
	done  chan struct{}
	// live: the run is in the store, and the turn writes on its own
	// path. Otherwise its records go to the flusher, and handed tells
	// whether its start already went.
	live, handed bool
	// last is the queue position of the turn's last record handed to
	// the flusher (0: none), for Flush.
	last uint64
	// endErr is the failure of the end's write on the turn's own path.
	endErr error

	// werr is the first failure of the flusher to write one of the
	// turn's records (guarded by wmu, not mu: the flusher must never
	// wait for a turn).
	wmu  sync.Mutex
	werr error
}

// wroteAll reports whether no write of the turn's records failed so far:
// a run the store does not have then was stored and is gone (purged),
// not one whose start was refused.
func (t *Turn) wroteAll() bool {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.werr == nil
}

// writeFailed records the flusher's failure to write one of the turn's
// records.
func (t *Turn) writeFailed(err error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.werr == nil {
		t.werr = err
	}
}

// Flush waits until every record of the turn so far — its start, its
// events and, once it ended, its final status — is in the store (and
// published), cutting the flusher's linger short; it returns at once
// for a turn that wrote on its own path. It returns ctx's error if ctx
// ends first, and otherwise the failure of a write of the turn's
// records, if any. A server answers a turn only after its Flush, so
// that an acknowledged turn always has its run record (and its final
// status) even if the process dies right after. Waiting costs about
// one store commit: the records of many turns still share that commit.
// When no write is under way, Flush writes the queued records itself
// (rather than wake the flusher and wait to be woken); a write it began
// runs to its end (bounded by the write timeout) even if ctx ends.
func (t *Turn) Flush(ctx context.Context) error {
	t.mu.Lock()
	last, err := t.last, t.endErr
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if last > 0 {
		if err := t.rec.waitSeq(ctx, last); err != nil {
			return err
		}
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.werr
}

// Sync makes the turn's records so far durable, its buffered events
// included, and waits for them as Flush does: an event a crash must not
// lose (the result of a call a human approved, whose effect the
// session keeps from then on) is in the store once Sync returns nil.
// Otherwise a turn's events wait in its buffer until it ends or the
// buffer fills, and a process killed meanwhile loses them.
func (t *Turn) Sync(ctx context.Context) error {
	t.mu.Lock()
	var err error
	if len(t.buf) > 0 && !t.ended.Load() && !(t.queueing() && t.hand(nil, false)) {
		// Not queued for the flusher (the turn writes on its own path,
		// or the Recorder is closing): written here.
		if !t.live {
			err = t.goLive(ctx)
		}
		if err == nil {
			err = t.flush(ctx, nil)
		}
	}
	t.mu.Unlock()
	if err != nil {
		return err
	}
	return t.Flush(ctx)
}

// session is the key of the turn's session.
func (t *Turn) session() runKey { return runKey{t.run.Tenant, t.run.SessionID} }

// queueing reports whether the turn's records go to the flusher now:
// it is not live and nobody watches its session. t.mu is held.
func (t *Turn) queueing() bool {
	return !t.live && !t.rec.closing.Load() && !t.rec.watched(t.run.Tenant, t.run.SessionID)
}

// record is the turn's buffered records (its start, if not handed yet,
// and its events) with f; the buffered events pass to the record, which
// a store may keep (see MemoryStore.adoptTurns). t.mu is held.
func (t *Turn) record(f *FinishRequest) TurnRecord {
	evs := t.buf[:len(t.buf):len(t.buf)]
	rec := TurnRecord{Append: AppendRequest{Tenant: t.run.Tenant, RunID: t.run.ID, Events: evs, Finish: f}, encoded: true}
	if !t.handed {
		run := t.run
		rec.Start = &run
	}
	return rec
}

// hand queues the buffered records with f for the flusher. It reports
// false, changing nothing, when the Recorder closed. t.mu is held.
func (t *Turn) hand(f *FinishRequest, final bool) bool {
	t.follow()
	q := &queued{rec: t.record(f), key: t.session(), turn: t, final: final}
	if !t.rec.enqueue(q) {
		return false
	}
	// The buffer's free room stays the turn's: later events fill it
	// without touching the ones handed over.
	t.handed, t.buf, t.last = true, t.buf[len(t.buf):], q.seq
	return true
}

// handStart hands the run's start to the flusher, with room for its
// runtime.request.started event (see mergeStart). It reports false,
// changing nothing, when the Recorder closed. t.mu is held, or the turn
// is not shared yet.
func (t *Turn) handStart() bool {
	run := t.run
	q := &queued{rec: TurnRecord{Start: &run, Append: AppendRequest{Tenant: t.run.Tenant, RunID: t.run.ID, Events: t.buf[:0:1]}, encoded: true},
		key: t.session(), turn: t}
	if !t.rec.enqueue(q) {
		return false
	}
	t.handed, t.buf, t.last, t.startQ = true, t.buf[1:1], q.seq, q
	return true
}

// mergeStart puts ev in the room the run's start left for it when that
// start is still queued (not yet taken by the flusher), and reports
// whether it did. t.mu is held.
func (t *Turn) mergeStart(ev Event) bool {
	q := t.startQ
	if q == nil {
		return false
	}
	t.startQ = nil
	r := t.rec
	r.qmu.Lock()
	defer r.qmu.Unlock()
	if len(r.queue) == 0 || r.queue[0].seq > q.seq {
		return false // taken: being written, or written
	}
	// The queue holds consecutive positions. A record of the session
	// queued after the start (an earlier turn's events or end) is
	// written before the turn's start event must be: no merge then.
	for _, o := range r.queue[q.seq-r.queue[0].seq+1:] {
		if o.key == q.key {
			return false
		}
	}
	q.rec.Append.Events = append(q.rec.Append.Events, ev) // its own element: no allocation
	q.events++
	r.queuedEvents++
	return true
}

// goLive moves a turn from the flusher to its own path: it waits for
// its session's queued records (its own among them), then starts the
// run unless its start was handed over. t.mu is held.
func (t *Turn) goLive(ctx context.Context) error {
	t.rec.waitSession(t.session())
	if !t.handed {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.rec.writeTimeout)
		defer cancel()
		if err := t.rec.store.StartRun(wctx, t.run); err != nil {
			return fmt.Errorf("runtime: record the start of run %q: %w", t.run.ID, err)
		}
		t.handed = true
	}
	t.live = true
	return nil
}

// Settle marks the turn done with its session: the turn's session
// write is committed, it holds the session's lock no longer and writes
// nothing more to its conversation; only its end remains to be
// recorded. A server calls it from the chat harness's release hook
// (chat.WithOnRelease), under the session's lock. A purge of the
// session ([Recorder.PurgeSession]), which runs under that lock next,
// then waits for the turn's end and purges its run with the
// conversation it belonged to, rather than keep it as a turn in flight
// (which would outlive the delete once its end is written). And, for a
// turn that was accepted ([Turn.Accept]: it held the session), the
// records of the session's next turn of this Recorder wait for this
// turn's end, which its owner records after the session is let go, so
// that the session's events are stored in the order its turns held it.
// Settle is safe to call more than once.
func (t *Turn) Settle() {
	if t.settled.Swap(true) {
		return
	}
	t.mu.Lock()
	accepted := t.accepted
	t.mu.Unlock()
	if !accepted {
		// It never held the session (a run that resolves another), or
		// holds it without Accept: not the session's turn to follow.
		return
	}
	r := t.rec
	r.mu.Lock()
	if !t.ended.Load() {
		t.done = make(chan struct{})
		if r.settledTurn == nil {
			r.settledTurn = map[runKey]*Turn{}
		}
		r.settledTurn[t.session()] = t
	}
	r.mu.Unlock()
}

// maxFollowWait bounds how long a turn's records wait for the end of the
// session's turn before it (follow): an owner that never ends its turn
// delays the next turn's records by this much, once.
const maxFollowWait = 2 * time.Second

// follow waits, before the turn's events are handed over or written,
// until the session's turn before it has recorded its end, so that a
// session's events are stored in the order its turns held it: the turn
// before let the session go (Settle) before recording its last events
// and its end. t.mu is held.
func (t *Turn) follow() {
	prev := t.after
	if prev == nil {
		return
	}
	t.after = nil
	tm := time.NewTimer(maxFollowWait)
	defer tm.Stop()
	select {
	case <-prev.done:
	case <-tm.C:
		t.rec.log.Warn("runtime: the session's earlier turn did not record its end in time; this turn's events may precede it",
			"run", t.run.ID, "earlier_run", prev.run.ID)
	}
}

// endSettled ends the wait of the session's next turn for t (see
// follow), once t's end is handed over or written.
func (t *Turn) endSettled() {
	if !t.settled.Load() {
		return // no Settle, no done (a Settle from now on sees the turn ended)
	}
	r := t.rec
	r.mu.Lock()
	done := t.done
	if r.settledTurn[t.session()] == t {
		delete(r.settledTurn, t.session())
	}
	r.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// ID returns the run id (the events' requestId).
func (t *Turn) ID() string { return t.run.ID }

// Run returns the run as it was started.
func (t *Turn) Run() Run { return t.run }

// reserved are the types only the Recorder emits, because they start or
// end the run.
var reserved = map[string]bool{
	EventRequestStarted: true, EventRequestCompleted: true, EventRequestFailed: true,
	EventRequestCancelled: true, EventRequestSuspended: true,
}

// Emit records an event of the given type with data marshalled as its
// JSON payload (nil for none). The types that start or end a run are
// reserved for Begin and the Turn's ending methods. The event is
// buffered and written with the next batch, or at once while the
// session has a live subscriber (see Recorder).
func (t *Turn) Emit(ctx context.Context, typ string, data any) error {
	if typ == "" || reserved[typ] {
		return fmt.Errorf("runtime: emit %q: %w: not an event type a turn may emit", typ, ErrInvalidRequest)
	}
	raw, err := marshal(data)
	if err != nil {
		return fmt.Errorf("runtime: emit %q: %w: %w", typ, ErrInvalidRequest, err)
	}
	return t.emitRaw(ctx, typ, raw)
}

// EmitJSON is Emit with data already encoded: data must be valid JSON
// (else ErrInvalidRequest, and nothing is recorded), and is recorded as
// given, byte for byte (nil records no payload). The Turn keeps data
// until it is written: the caller must not change it. A caller that
// emits the same payload on every turn encodes it once.
func (t *Turn) EmitJSON(ctx context.Context, typ string, data json.RawMessage) error {
	if typ == "" || reserved[typ] {
		return fmt.Errorf("runtime: emit %q: %w: not an event type a turn may emit", typ, ErrInvalidRequest)
	}
	if data != nil && !jsonvalid.Valid(data) {
		return fmt.Errorf("runtime: emit %q: %w: the data is not valid JSON", typ, ErrInvalidRequest)
	}
	return t.emitRaw(ctx, typ, data)
}

// turnEvents is the room a turn's event buffer has after its start: the
// events a tool turn records (handoff, tool start and result, the
// answer's text, node completions, its end), grown beyond it as needed.
const turnEvents = 8

// Accept records the run's runtime.request.started: the turn was
// accepted, validated and holding its session's lock (PROTOCOLS.md), so
// a turn that waited behind another one's shows its start after that
// turn's events, not among them. A server calls it once the turn holds
// the session (chat.WithOnLocked). A turn that records an event or ends
// before it was accepted (a resume's first event, a turn cancelled while
// it waited) records its start first, so runtime.request.started is
// always the run's first event. Accept is idempotent; once the turn has
// ended it returns ErrTurnEnded.
func (t *Turn) Accept(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended.Load() {
		return fmt.Errorf("runtime: accept run %q: %w", t.run.ID, ErrTurnEnded)
	}
	if t.accepted {
		return nil
	}
	return t.recordLocked(ctx, Event{})
}

// accept records the run's start unless it was: with the run's queued
// start when it can, else buffered. It is stamped at (the clock's now
// when zero): the time of the event or ending that records it, if any,
// so that a run's event times never go backwards. t.mu is held.
func (t *Turn) accept(at time.Time) {
	if t.accepted {
		return
	}
	t.accepted = true
	r := t.rec
	r.mu.Lock()
	if prev := r.settledTurn[t.session()]; prev != nil && prev != t {
		t.after = prev
	}
	r.mu.Unlock()
	if at.IsZero() {
		at = r.now()
	}
	ev := Event{Type: EventRequestStarted, Time: at, Data: t.startData}
	if t.after != nil || !t.mergeStart(ev) {
		t.buf = append(t.buf, ev)
	}
}

// emitRaw is Emit of data already encoded.
func (t *Turn) emitRaw(ctx context.Context, typ string, raw json.RawMessage) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended.Load() {
		return fmt.Errorf("runtime: emit %q on run %q: %w", typ, t.run.ID, ErrTurnEnded)
	}
	return t.recordLocked(ctx, Event{Type: typ, Time: t.rec.now(), Data: raw})
}

// recordLocked buffers ev (none when its Type is empty) after the run's
// start, and writes the buffer when the turn writes on its own path and
// it is full or somebody watches. t.mu is held.
func (t *Turn) recordLocked(ctx context.Context, ev Event) error {
	if t.buf == nil {
		t.buf = make([]Event, 0, turnEvents) // a turn's events, in one allocation
	}
	// Not with the run's start (written already, or an earlier turn's
	// records queued after it), the start event is buffered: it goes
	// with the turn's next records, which the session's earlier turns'
	// records precede.
	t.accept(ev.Time)
	if ev.Type != "" {
		t.buf = append(t.buf, ev)
	}
	if t.queueing() && (len(t.buf) < t.rec.flushEvery || t.hand(nil, false)) {
		return nil // else the Recorder closed meanwhile: write on the turn's path
	}
	if !t.live {
		if err := t.goLive(ctx); err != nil {
			return err
		}
	}
	if len(t.buf) >= t.rec.flushEvery || t.rec.watched(t.run.Tenant, t.run.SessionID) {
		return t.flush(ctx, nil)
	}
	return nil
}

func marshal(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// Adapter records a runtime.adapter.event whose payload is
// {"event": data + {"phase": phase, "adapter": <the turn's adapter>}}
// (phase one of the Phase* constants); data's own adapter field, when
// set, wins.
func (t *Turn) Adapter(ctx context.Context, phase string, data map[string]any) error {
	raw, err := adapterPayload(t.adapter, phase, data)
	if err != nil {
		return fmt.Errorf("runtime: emit %q: %w: %w", EventAdapterEvent, ErrInvalidRequest, err)
	}
	return t.emitRaw(ctx, EventAdapterEvent, raw)
}

// Field is one field of an agent.* event's data, for
// [Turn.AdapterFields]: a string (TextField), or a JSON value
// (JSONField).
type Field struct {
	Key  string
	Text string
	// JSON, when not nil, is the value, encoded: it must be valid JSON,
	// and is recorded as json.Marshal records a json.RawMessage
	// (compacted, HTML-escaped).
	JSON json.RawMessage
}

// TextField is a field whose value is the string value.
func TextField(key, value string) Field { return Field{Key: key, Text: value} }

// JSONField is a field whose value is value, encoded JSON (nil for
// null).
func JSONField(key string, value json.RawMessage) Field {
	if value == nil {
		value = json.RawMessage("null")
	}
	return Field{Key: key, JSON: value}
}

// AdapterJSON returns the payload AdapterFields records for the fields
// on a turn of the given adapter: a payload every turn records alike is
// encoded once, then recorded with EmitJSON(ctx, EventAdapterEvent, …).
// A JSON field that is not valid JSON is ErrInvalidRequest.
func AdapterJSON(adapter, phase string, fields ...Field) (json.RawMessage, error) {
	raw, err := fieldsPayload(adapter, phase, fields)
	if err != nil {
		return nil, fmt.Errorf("runtime: %w: %w", ErrInvalidRequest, err)
	}
	return raw, nil
}

// AdapterFields is Adapter for data given as fields rather than a map:
// it records the same event as Adapter with the map of fields (the last
// of a repeated key winning), without building the map or boxing its
// values. The text deltas, node completions and tool progress a server
// records for every turn go through it. A JSON field that is not valid
// JSON is ErrInvalidRequest, as with Adapter.
func (t *Turn) AdapterFields(ctx context.Context, phase string, fields ...Field) error {
	raw, err := fieldsPayload(t.adapter, phase, fields)
	if err != nil {
		return fmt.Errorf("runtime: emit %q: %w: %w", EventAdapterEvent, ErrInvalidRequest, err)
	}
	return t.emitRaw(ctx, EventAdapterEvent, raw)
}

// adapterPayload encodes Adapter's payload as json.Marshal encodes the
// map {"event": data + {"adapter": adapter, "phase": phase}} (data's
// adapter wins, phase wins over data's; keys sorted), without building
// the maps: every agent.* event of a turn goes through it.
func adapterPayload(adapter, phase string, data map[string]any) (json.RawMessage, error) {
	var small [8]string
	keys := append(small[:0], "phase")
	_, ownAdapter := data["adapter"]
	if !ownAdapter {
		keys = append(keys, "adapter")
	}
	for k := range data {
		if k != "phase" {
			keys = append(keys, k)
		}
	}
	return encodePayload(adapter, phase, keys, ownAdapter, func(buf []byte, k string) ([]byte, error) {
		v := data[k]
		if str, ok := v.(string); ok {
			return jsonstr.Append(buf, str), nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return append(buf, b...), nil
	})
}

// fieldsPayload is adapterPayload for AdapterFields' fields.
func fieldsPayload(adapter, phase string, fields []Field) (json.RawMessage, error) {
	var small [8]string
	keys := append(small[:0], "phase")
	ownAdapter := false
	for _, f := range fields {
		ownAdapter = ownAdapter || f.Key == "adapter"
		if !slices.Contains(keys, f.Key) {
			keys = append(keys, f.Key)
		}
	}
	if !ownAdapter {
		keys = append(keys, "adapter")
	}
	return encodePayload(adapter, phase, keys, ownAdapter, func(buf []byte, k string) ([]byte, error) {
		var f Field
		for _, g := range fields {
			if g.Key == k {
				f = g
			}
		}
		if f.JSON == nil {
			return jsonstr.Append(buf, f.Text), nil
		}
		out, ok := jsonstr.AppendRaw(buf, f.JSON)
		if !ok || len(f.JSON) == 0 { // json.Marshal refuses an empty RawMessage
			return nil, fmt.Errorf("field %q is not valid JSON", k)
		}
		return out, nil
	})
}

// encodePayload writes {"event":{...}} with keys (each once, "phase"
// among them) sorted: phase as phase, adapter as adapter unless the data
// has its own, and every other key's value as value appends it.
func encodePayload(adapter, phase string, keys []string, ownAdapter bool, value func(buf []byte, k string) ([]byte, error)) (json.RawMessage, error) {
	slices.Sort(keys)
	buf := make([]byte, 0, 64+32*len(keys))
	buf = append(buf, `{"event":{`...)
	var err error
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(jsonstr.Append(buf, k), ':')
		// phase and adapter are appended as strings, not boxed in an
		// interface (an allocation each).
		switch {
		case k == "phase":
			buf = jsonstr.Append(buf, phase)
			continue
		case k == "adapter" && !ownAdapter:
			buf = jsonstr.Append(buf, adapter)
			continue
		}
		if buf, err = value(buf, k); err != nil {
			return nil, err
		}
	}
	return append(buf, `}}`...), nil
}

// Resolved records runtime.approval.resolved{approval, decision}: the
// first event of a resumed turn after its start.
func (t *Turn) Resolved(ctx context.Context, approval, decision any) error {
	return t.Emit(ctx, EventApprovalResolved, map[string]any{"approval": approval, "decision": decision})
}

type (
	failedData struct {
		Error RunError `json:"error"`
	}
	cancelledData struct {
		Reason string      `json:"reason,omitempty"`
		Cause  CancelCause `json:"cause,omitempty"`
	}
	suspendedData struct {
		InvocationID string `json:"invocationId"`
		Signal       any    `json:"signal,omitempty"`
	}
	approvalData struct {
		Approval any `json:"approval"`
	}
)

// Complete ends the turn as completed with output (marshalled to JSON):
// runtime.request.completed{output}.
func (t *Turn) Complete(ctx context.Context, output any) error {
	out, err := marshal(output)
	if err != nil {
		return fmt.Errorf("runtime: complete run %q: %w: %w", t.run.ID, ErrInvalidRequest, err)
	}
	if out == nil {
		out = json.RawMessage("null")
	}
	return t.end(ctx, FinishRequest{Status: StatusCompleted, Output: out}, ending{EventRequestCompleted, completedEvent(out)})
}

// CompleteJSON is Complete with the output already encoded: output must
// be valid JSON (else ErrInvalidRequest, and the turn goes on), and is
// recorded as given, byte for byte. A caller that writes its output by
// hand saves the encoding's reflection and its second pass.
func (t *Turn) CompleteJSON(ctx context.Context, output json.RawMessage) error {
	if !jsonvalid.Valid(output) {
		return fmt.Errorf("runtime: complete run %q: %w: the output is not valid JSON", t.run.ID, ErrInvalidRequest)
	}
	return t.end(ctx, FinishRequest{Status: StatusCompleted, Output: output}, ending{EventRequestCompleted, completedEvent(output)})
}

// encoded is an ending's data already encoded as JSON.
type encoded []byte

// completedEvent is runtime.request.completed's data, {"output": out},
// as json.Marshal encodes completedData for the compact, escaped out
// that marshal returns, without scanning out again.
func completedEvent(out json.RawMessage) encoded {
	b := make([]byte, 0, len(`{"output":}`)+len(out))
	return append(append(append(b, `{"output":`...), out...), '}')
}

// Fail ends the turn as failed: runtime.request.failed{error}. A turn
// cancelled by [Recorder.Cancel] ends as cancelled instead.
func (t *Turn) Fail(ctx context.Context, e RunError) error {
	if t.cancelled.Load() {
		return t.CancelledFor(ctx, CauseRequested, "cancelled by request")
	}
	e = e.storable()
	return t.end(ctx, FinishRequest{Status: StatusFailed, Error: &e}, ending{EventRequestFailed, failedData{Error: e}})
}

// Cancelled ends the turn as cancelled: runtime.request.cancelled{reason}.
func (t *Turn) Cancelled(ctx context.Context, reason string) error {
	return t.CancelledFor(ctx, "", reason)
}

// CancelledFor ends the turn as cancelled for cause, with reason (text
// for people): runtime.request.cancelled{reason, cause}. A client tells
// the ends apart by cause, never by reason.
func (t *Turn) CancelledFor(ctx context.Context, cause CancelCause, reason string) error {
	return t.end(ctx, FinishRequest{Status: StatusCancelled}, ending{EventRequestCancelled, cancelledData{Reason: reason, Cause: cause}})
}

// CancelCause says why a run was cancelled, in runtime.request.cancelled's
// "cause" (the event's "reason" says it in words).
type CancelCause string

// The causes of a cancelled run.
const (
	// CauseRequested: the run was stopped while it ran, by a cancel
	// request or by the server's shutdown past its grace.
	CauseRequested CancelCause = "requested"
	// CauseSessionBusy: another turn held the session for longer than the
	// server's session wait; the run did nothing (a resumed turn's
	// decision still awaits being given).
	CauseSessionBusy CancelCause = "session_busy"
	// CauseApprovalCancelled: the run records a suspended run closed
	// unanswered by a cancel (the run it names as its parent).
	CauseApprovalCancelled CancelCause = "approval_cancelled"
	// CauseSuperseded: the run records a suspended run closed unanswered
	// because the user sent a new message instead.
	CauseSuperseded CancelCause = "superseded"
)

// Suspend ends the turn as suspended on invocationID (the resume key):
// runtime.request.suspended{invocationId, signal} then
// runtime.approval.requested{approval}. The turn that resumes it is a
// new run whose BeginRequest.ParentID is this run's id.
func (t *Turn) Suspend(ctx context.Context, invocationID string, signal, approval any) error {
	return t.SuspendOutput(ctx, invocationID, signal, approval, nil)
}

// SuspendOutput is Suspend recording output as the suspended run's
// output (Run.Output): what the turn did before it suspended, such as
// its model calls' usage. A nil output records none.
func (t *Turn) SuspendOutput(ctx context.Context, invocationID string, signal, approval, output any) error {
	if err := checkID("invocation id", invocationID, false); err != nil {
		return fmt.Errorf("runtime: suspend run %q: %w", t.run.ID, err)
	}
	f := FinishRequest{Status: StatusSuspended, InvocationID: invocationID}
	if output != nil {
		raw, err := marshal(output)
		if err != nil {
			return fmt.Errorf("runtime: suspend run %q: %w: %w", t.run.ID, ErrInvalidRequest, err)
		}
		f.Output = raw
	}
	return t.end(ctx, f,
		ending{EventRequestSuspended, suspendedData{InvocationID: invocationID, Signal: signal}},
		ending{EventApprovalRequested, approvalData{Approval: approval}})
}

type ending struct {
	typ  string
	data any
}

// encode is the ending's event data: data as JSON, or as given when it
// is already encoded.
func (e ending) encode() (json.RawMessage, error) {
	if enc, ok := e.data.(encoded); ok {
		return json.RawMessage(enc), nil
	}
	return marshal(e.data)
}

// end buffers the final events and hands them with the run's final
// status to the flusher, or, on the turn's own path, writes them in one
// Append. Whatever the write's outcome the turn has ended: a failed
// write leaves the run started (for Recover), and is returned.
func (t *Turn) end(ctx context.Context, f FinishRequest, evs ...ending) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended.Load() {
		return fmt.Errorf("runtime: end run %q: %w", t.run.ID, ErrTurnEnded)
	}
	now := t.rec.now()
	t.accept(now) // kept if an ending fails to encode: the start is no ending
	had := len(t.buf)
	for _, e := range evs {
		raw, err := e.encode()
		if err != nil {
			clear(t.buf[had:])
			t.buf = t.buf[:had] // the turn goes on, its buffer as it was
			return fmt.Errorf("runtime: end run %q: %w: %w", t.run.ID, ErrInvalidRequest, err)
		}
		t.buf = append(t.buf, Event{Type: e.typ, Time: now, Data: raw})
	}
	t.ended.Store(true)
	f.EndedAt = now
	if t.queueing() && t.hand(&f, true) {
		t.endSettled()
		t.cancel(context.Canceled) // the flusher retires the turn once written
		if t.rec.settling.Load() > 0 {
			t.rec.wakeSettling() // a purge waits: its end is queued now
		}
		return nil
	}
	var err error
	if !t.live {
		err = t.goLive(ctx)
	}
	if err == nil {
		err = t.flush(ctx, &f)
	}
	if err != nil && t.handed && errors.Is(err, ErrNotFound) && t.wroteAll() && !t.rec.redo.holdsStart(runKey{t.run.Tenant, t.run.ID}) {
		// The run is gone: purged with its session while its end was
		// still to be written (PurgeRequest.Committed, a delete on
		// another process). Nothing is left to record.
		t.rec.log.InfoContext(ctx, "runtime: a run's end was given up: the run is gone, its session deleted", "run", t.run.ID)
		err = nil
		clear(t.buf)
		t.buf = t.buf[:0]
	}
	t.endErr = err
	if err != nil {
		// Written again once the store takes it (redo.go).
		t.rec.keepRefused(t.record(&f), t.session(), t)
	} else {
		t.rec.redo.written(runKey{t.run.Tenant, t.run.ID})
	}
	t.endSettled()
	t.rec.mu.Lock()
	t.rec.retireLocked(t)
	t.rec.mu.Unlock()
	t.cancel(context.Canceled)
	if err != nil {
		t.rec.log.ErrorContext(ctx, "runtime: recording the end of a run failed; it is written again once the store takes it",
			"run", t.run.ID, "status", f.Status, "err", err)
	}
	return err
}

// flush writes the buffered events (and f) in one Append and publishes
// them. On failure the events stay buffered for the next flush. t.mu is
// held.
func (t *Turn) flush(ctx context.Context, f *FinishRequest) error {
	if len(t.buf) == 0 && f == nil {
		return nil
	}
	t.follow()
	// Another turn of the session may have queued records since this
	// one went live (an earlier turn's end): they are written first.
	t.rec.waitSession(t.session())
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.rec.writeTimeout)
	defer cancel()
	defer t.rec.pub.lock(t.session())()
	stored, err := t.rec.store.Append(wctx, AppendRequest{Tenant: t.run.Tenant, RunID: t.run.ID, Events: t.buf, Finish: f})
	if err != nil {
		return fmt.Errorf("runtime: record events of run %q: %w", t.run.ID, err)
	}
	clear(t.buf)
	t.buf = t.buf[:0]
	t.rec.broker.Publish(stored...)
	return nil
}
