package runtime

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"
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
	// NewID mints run ids; default crypto/rand.Text (26 base32 chars).
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
// Begin buffers the run's start, Emit buffers events, and the turn's end
// hands the whole turn (start, events and final status) to a background
// flusher. The flusher writes everything queued (up to BatchTurns
// records and about BatchEvents events) in one store transaction when
// the Store is a [BatchWriter] (group commit across sessions), letting
// the oldest record wait up to Linger for others to join; other stores
// get StartRun and Append per turn from the flusher. A turn with more
// than FlushEvery events hands them over every FlushEvery events. So a
// turn's run and events appear in the store, and are published to the
// Broker with their store-assigned IDs, a bounded delay after it ended
// (the linger plus one commit); [Recorder.Flush] waits for them. The
// queue is bounded by QueueTurns: when it is full, a turn's end waits
// for room rather than dropping records.
//
// While the session has a live subscriber, the turn writes on its own
// path as it always did: the run's start at Begin and each event (and
// publication) as it is emitted, so the stream is live. A turn that
// gains a subscriber midway first waits for the session's queued
// records, then writes its start and buffered events and goes on live;
// a turn starting live waits for them too. So within a session event
// IDs still increase in the order the turns ran, whichever path wrote
// them. With RecorderConfig.Synchronous, or after Close, an unwatched
// turn costs two writes on its own path: StartRun at Begin, and one
// Append storing its events and its final status together at its end.
//
// # Crash semantics
//
// Run records are observability, not part of a turn's durability
// contract (the session write is). If the process dies, the turns still
// in flight or queued are lost, and with group commit they are lost
// whole: their runs are missing from the store, not left started, so
// [Recorder.Recover] cannot see them. A crash loses at most the turns in
// flight and those that ended within the last linger window and
// commit; never session state. A turn that was written live (or handed
// its first FlushEvery events over) and dies before its end stays in
// status started until Recover, called at startup, marks it failed. The
// end of a turn is atomic: a run's final status is stored together with
// its last events, so a finished run always has its terminal event.
//
// # Errors
//
// A turn's end reports its write's failure only when it wrote on its
// own path; the flusher logs a failed write and reports it to the next
// [Recorder.Flush] or [Recorder.Close]. A run whose start failed to be
// written is missing; one whose end failed stays started until Recover.
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
	now          func() time.Time
	newID        func() string
	log          *slog.Logger
	flushEvery   int
	writeTimeout time.Duration

	mu   sync.Mutex
	live map[runKey]*Turn // turns not ended, and ended turns still queued

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
	closed       bool
	changed      chan struct{} // closed and replaced when done advances or Close is called
	kick         chan struct{} // ends the linger early
	failures     []failure
	flushers     sync.WaitGroup
}

// NewRecorder returns a Recorder.
func NewRecorder(cfg RecorderConfig) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Recorder{
		store: cfg.Store, broker: cfg.Broker, now: cfg.Now, newID: cfg.NewID, log: cfg.Logger,
		flushEvery: cfg.FlushEvery, writeTimeout: cfg.WriteTimeout, live: map[runKey]*Turn{},
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
		r.newID = rand.Text
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
	return r, nil
}

// Broker returns the Broker the Recorder publishes to.
func (r *Recorder) Broker() *Broker { return r.broker }

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
}

// Begin starts a run for a turn and buffers its runtime.request.started
// event. It returns the Turn and a context derived from ctx that
// [Recorder.Cancel] cancels (with cause [ErrCancelled]) and that is
// cancelled when the turn ends: run the turn under it. The caller must
// end every Turn with one of Complete, Fail, Suspend or Cancelled.
func (r *Recorder) Begin(ctx context.Context, req BeginRequest) (*Turn, context.Context, error) {
	if err := checkIDs("tenant", req.Tenant, "session id", req.SessionID, "agent id", req.AgentID,
		"parent id", req.ParentID, "correlation id", req.CorrelationID); err != nil {
		return nil, nil, fmt.Errorf("runtime: begin: %w", err)
	}
	run := Run{
		ID: r.newID(), Tenant: req.Tenant, SessionID: req.SessionID, AgentID: req.AgentID,
		ParentID: req.ParentID, CorrelationID: req.CorrelationID, Status: StatusStarted, StartedAt: r.now(),
	}
	t := &Turn{rec: r, run: run}
	subscribed := r.broker.Subscribed(run.Tenant, run.SessionID)
	if !r.batching || subscribed || r.closing.Load() {
		r.waitSession(t.session())
		if err := r.store.StartRun(ctx, run); err != nil {
			return nil, nil, fmt.Errorf("runtime: begin: %w", err)
		}
		t.live = true
	}
	tctx, cancel := context.WithCancelCause(ctx)
	t.cancel = cancel
	t.buf = append(t.buf, Event{Type: EventRequestStarted, Time: run.StartedAt})
	r.mu.Lock()
	r.live[runKey{run.Tenant, run.ID}] = t
	r.mu.Unlock()
	if subscribed {
		t.mu.Lock()
		if err := t.flush(ctx, nil); err != nil {
			r.log.WarnContext(ctx, "runtime: writing a started event failed", "run", run.ID, "err", err)
		}
		t.mu.Unlock()
	}
	return t, tctx, nil
}

// Cancel cancels the live turn of the tenant's run: its context is
// cancelled with cause ErrCancelled, and the turn ends as cancelled
// (runtime.request.cancelled) even if its owner then calls Fail. It
// reports whether a live turn was cancelled; a run that is unknown, of
// another tenant, already ended or run by another process is not.
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
// each, and reports how many it cancelled: a server whose graceful
// shutdown runs out of time calls it so that the turns it abandons end
// as cancelled runs rather than staying started.
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
		t.cancel(ErrCancelled)
		n++
	}
	if n > 0 {
		r.log.InfoContext(ctx, "runtime: runs cancelled", "runs", n)
	}
	return n
}

// CategoryInterrupted is the RunError category of a run that
// [Recorder.Recover] failed: the process stopped before the run ended.
// It is a wire identifier (an Armature extension) and must not change.
const CategoryInterrupted = "run_interrupted"

// Recover fails the runs a previous process left in status started
// (their turns died with it): each gets a runtime.request.failed event
// and status failed with category [CategoryInterrupted], bucket
// retryable_transient. Call it once at startup, before serving; it
// skips this Recorder's live turns, but not the live turns of other
// processes sharing the store. It needs a [Recoverable] Store and does
// nothing otherwise. It returns how many runs it failed.
func (r *Recorder) Recover(ctx context.Context) (int, error) {
	rs, ok := r.store.(Recoverable)
	if !ok {
		return 0, nil
	}
	rerr := RunError{Bucket: "retryable_transient", Category: CategoryInterrupted,
		Message: "the run was interrupted: the server stopped before it ended"}
	data, err := json.Marshal(failedData{Error: rerr})
	if err != nil {
		return 0, err
	}
	cutoff, n, skipped := r.now(), 0, map[runKey]bool{}
	for {
		runs, err := rs.UnfinishedRuns(ctx, UnfinishedRequest{StartedBefore: cutoff, Limit: MaxPageSize})
		if err != nil {
			return n, fmt.Errorf("runtime: recover: %w", err)
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
			now := r.now()
			e := rerr
			_, err := r.store.Append(ctx, AppendRequest{
				Tenant: run.Tenant, RunID: run.ID,
				Events: []Event{{Type: EventRequestFailed, Time: now, Data: data}},
				Finish: &FinishRequest{Status: StatusFailed, Error: &e, EndedAt: now},
			})
			switch {
			case errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound):
				skipped[k] = true // finished meanwhile
			case err != nil:
				return n, fmt.Errorf("runtime: recover run %q: %w", run.ID, err)
			default:
				n++
				progress = true
				r.log.InfoContext(ctx, "runtime: recovered an interrupted run", "run", run.ID)
			}
		}
		if !progress {
			return n, nil
		}
	}
}

// Turn records one turn. Its methods are safe for concurrent use; events
// are stored in the order the calls return.
type Turn struct {
	rec    *Recorder
	run    Run // identity; immutable
	cancel context.CancelCauseFunc

	cancelled atomic.Bool // set by Recorder.Cancel
	ended     atomic.Bool // set under mu

	mu  sync.Mutex
	buf []Event
	// live: the run is in the store, and the turn writes on its own
	// path. Otherwise its records go to the flusher, and handed tells
	// whether its start already went.
	live, handed bool
}

// session is the key of the turn's session.
func (t *Turn) session() runKey { return runKey{t.run.Tenant, t.run.SessionID} }

// queueing reports whether the turn's records go to the flusher now:
// it is not live and nobody watches its session. t.mu is held.
func (t *Turn) queueing() bool {
	return !t.live && !t.rec.closing.Load() && !t.rec.broker.Subscribed(t.run.Tenant, t.run.SessionID)
}

// record is the turn's buffered records (its start, if not handed yet,
// and its events) with f; the buffer passes to the record. t.mu is held.
func (t *Turn) record(f *FinishRequest) TurnRecord {
	rec := TurnRecord{Append: AppendRequest{Tenant: t.run.Tenant, RunID: t.run.ID, Events: t.buf, Finish: f}}
	if !t.handed {
		run := t.run
		rec.Start = &run
	}
	return rec
}

// hand queues the buffered records with f for the flusher. It reports
// false, changing nothing, when the Recorder closed. t.mu is held.
func (t *Turn) hand(f *FinishRequest, final bool) bool {
	q := &queued{rec: t.record(f), key: t.session()}
	if final {
		q.turn = t
	}
	if !t.rec.enqueue(q) {
		return false
	}
	t.handed, t.buf = true, nil
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
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended.Load() {
		return fmt.Errorf("runtime: emit %q on run %q: %w", typ, t.run.ID, ErrTurnEnded)
	}
	t.buf = append(t.buf, Event{Type: typ, Time: t.rec.now(), Data: raw})
	if t.queueing() && (len(t.buf) < t.rec.flushEvery || t.hand(nil, false)) {
		return nil // else the Recorder closed meanwhile: write on the turn's path
	}
	if !t.live {
		if err := t.goLive(ctx); err != nil {
			return err
		}
	}
	if len(t.buf) >= t.rec.flushEvery || t.rec.broker.Subscribed(t.run.Tenant, t.run.SessionID) {
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
// {"event": data + {"phase": phase}} (one of the Phase* constants).
func (t *Turn) Adapter(ctx context.Context, phase string, data map[string]any) error {
	ev := make(map[string]any, len(data)+1)
	maps.Copy(ev, data)
	ev["phase"] = phase
	return t.Emit(ctx, EventAdapterEvent, map[string]any{"event": ev})
}

// Resolved records runtime.approval.resolved{approval, decision}: the
// first event of a resumed turn after its start.
func (t *Turn) Resolved(ctx context.Context, approval, decision any) error {
	return t.Emit(ctx, EventApprovalResolved, map[string]any{"approval": approval, "decision": decision})
}

type (
	completedData struct {
		Output json.RawMessage `json:"output"`
	}
	failedData struct {
		Error RunError `json:"error"`
	}
	cancelledData struct {
		Reason string `json:"reason,omitempty"`
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
	return t.end(ctx, FinishRequest{Status: StatusCompleted, Output: out},
		ending{EventRequestCompleted, completedData{Output: out}})
}

// Fail ends the turn as failed: runtime.request.failed{error}. A turn
// cancelled by [Recorder.Cancel] ends as cancelled instead.
func (t *Turn) Fail(ctx context.Context, e RunError) error {
	if t.cancelled.Load() {
		return t.Cancelled(ctx, "cancelled by request")
	}
	return t.end(ctx, FinishRequest{Status: StatusFailed, Error: &e}, ending{EventRequestFailed, failedData{Error: e}})
}

// Cancelled ends the turn as cancelled: runtime.request.cancelled{reason}.
func (t *Turn) Cancelled(ctx context.Context, reason string) error {
	return t.end(ctx, FinishRequest{Status: StatusCancelled}, ending{EventRequestCancelled, cancelledData{Reason: reason}})
}

// Suspend ends the turn as suspended on invocationID (the resume key):
// runtime.request.suspended{invocationId, signal} then
// runtime.approval.requested{approval}. The turn that resumes it is a
// new run whose BeginRequest.ParentID is this run's id.
func (t *Turn) Suspend(ctx context.Context, invocationID string, signal, approval any) error {
	if err := checkID("invocation id", invocationID, false); err != nil {
		return fmt.Errorf("runtime: suspend run %q: %w", t.run.ID, err)
	}
	return t.end(ctx, FinishRequest{Status: StatusSuspended, InvocationID: invocationID},
		ending{EventRequestSuspended, suspendedData{InvocationID: invocationID, Signal: signal}},
		ending{EventApprovalRequested, approvalData{Approval: approval}})
}

type ending struct {
	typ  string
	data any
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
	final := make([]Event, len(evs))
	for i, e := range evs {
		raw, err := marshal(e.data)
		if err != nil {
			return fmt.Errorf("runtime: end run %q: %w: %w", t.run.ID, ErrInvalidRequest, err)
		}
		final[i] = Event{Type: e.typ, Time: now, Data: raw}
	}
	t.buf = append(t.buf, final...)
	t.ended.Store(true)
	f.EndedAt = now
	if t.queueing() && t.hand(&f, true) {
		t.cancel(context.Canceled) // the flusher retires the turn once written
		return nil
	}
	var err error
	if !t.live {
		err = t.goLive(ctx)
	}
	if err == nil {
		err = t.flush(ctx, &f)
	}
	t.rec.mu.Lock()
	delete(t.rec.live, runKey{t.run.Tenant, t.run.ID})
	t.rec.mu.Unlock()
	t.cancel(context.Canceled)
	if err != nil {
		t.rec.log.ErrorContext(ctx, "runtime: recording the end of a run failed; it stays started until Recover",
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
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.rec.writeTimeout)
	defer cancel()
	stored, err := t.rec.store.Append(wctx, AppendRequest{Tenant: t.run.Tenant, RunID: t.run.ID, Events: t.buf, Finish: f})
	if err != nil {
		return fmt.Errorf("runtime: record events of run %q: %w", t.run.ID, err)
	}
	clear(t.buf)
	t.buf = t.buf[:0]
	t.rec.broker.Publish(stored...)
	return nil
}
