package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/callindex"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// MessagesField is the canonical history field's name (harness-chat §4).
// It is a wire identifier and must not change.
const MessagesField = "messages"

// Messages is the canonical history field: a list of llm.Message with
// the append reducer. Declare it on a chat graph's schema (or use
// NewSchema) and append to it from nodes:
//
//	return chat.Messages.Add(llm.AssistantText("Hi!")), nil
//
// A field handle is immutable; sharing it between schemas is safe.
var Messages = graph.NewListField[llm.Message](MessagesField, graph.Append, graph.WithDecoder(llm.DecodeMessages))

// NewSchema returns a state schema declaring Messages followed by extra.
func NewSchema(extra ...graph.FieldSpec) (*graph.Schema, error) {
	return graph.NewSchema(append([]graph.FieldSpec{Messages}, extra...)...)
}

// ErrInvalidConfig is wrapped by configuration errors from [New].
var ErrInvalidConfig = errors.New("chat: invalid config")

// Config configures a chat [Harness]. Only Graph is required.
type Config struct {
	// Graph is the chat graph. Its schema must declare Messages and it
	// must be compiled graph.WithSessions: chat is sessioned only.
	Graph *graph.Graph
	// Coordinator routes signals to paused turns. Default: an in-memory
	// coordinator; give every worker a harness.StoreCoordinator over the
	// graph's durable checkpoint store to resume on any worker.
	Coordinator harness.Coordinator
	// Locker, when set, serializes the turns of one session across
	// processes (see Locker). In-process serialization is always on.
	Locker Locker
	// Replies customizes the errored replies' texts.
	Replies Replies
	// DeliverResumedOnSend enables the optional synchronous shape of
	// harness-chat §8.2: the outcome of a resumed turn for a session
	// with no listener is kept and handed to that session's next Send
	// (Turn.Delivered). A resumed turn's outcome never goes to both. At
	// most the 16 latest are kept per session, in memory.
	DeliverResumedOnSend bool
	// Feed, when set, carries resumed turns' outcomes to the harnesses of
	// other processes sharing the session store (replicas): a resumed
	// turn's completed or suspended outcome is recorded with its session
	// write and announced, and [Harness.Follow] delivers the
	// announcements of the others to this harness's listeners. Needs a
	// session store that records marks.
	Feed ResumeFeed
	// IdempotencyCapacity bounds the outcomes remembered in memory for
	// WithMessageID and WithRecordKey when the graph's session store
	// records no marks (session.Marker); with one (the memory and SQLite
	// stores) outcomes are recorded durably in the store, in the turn's
	// own transaction, and kept for the store's mark retention period.
	// 0 means 4096; negative disables the in-memory fallback.
	IdempotencyCapacity int
	// SupersededResult is the tool result that closes each open tool
	// call of a suspended turn superseded by a new message (see the
	// package documentation). Default DefaultSupersededResult.
	SupersededResult string
	// CancelledResult is the tool result that closes each open tool call
	// of a suspended turn that was cancelled (CancelSuspended), or whose
	// paused record is otherwise gone, when the next message is sent.
	// Default DefaultCancelledResult. (A call that never awaited an
	// approval is closed with UnansweredResult.)
	CancelledResult string
	// OnDelete, when set, is called by Delete under the session's lock
	// once the session's records are gone: it deletes what else holds
	// state of the session (an upstream agent's own session,
	// adapter.OnDelete). Its error fails the Delete.
	OnDelete func(ctx context.Context, sessionID string) error
	// OnCancel, when set, is called by CancelSuspended under the
	// session's lock once the suspended turn is retired, with the
	// suspension's signal id: it releases what else holds state of the
	// suspension (an upstream agent's checkpoint, adapter.OnCancel), which
	// no resume will read. Its error is logged: the cancel stands.
	OnCancel func(ctx context.Context, sessionID, signalID string) error
	// LockWait bounds how long a turn (a Send, a Signal's resume) waits
	// for its session while another turn holds it (a Delete and a
	// CancelSuspended wait as long at most, and fail the same way), in this process or,
	// with a Locker, in another: past it the turn fails with
	// invocation_cancelled (retryable), its cause ErrSessionBusy, having
	// run nothing (a resume took no decision), and its message is not in
	// the session. A stalled process that holds a session's lock (a
	// frozen VM, a long GC pause) then costs its callers an error to
	// retry, not a wait with no end. A session nobody holds is taken whatever the bound
	// when the Locker is a TryLocker (the PostgreSQL store's is); with
	// another Locker the bound also counts the lock's own round trip.
	// Zero: no bound (WithLockWait and Signal.LockWait set one per
	// turn).
	LockWait time.Duration
	// Logger receives one record per turn. Default: discard.
	Logger *slog.Logger
	// Tracer opens the optional turn wrapper span (observability §4.6).
	Tracer trace.Tracer
}

// Validate reports a configuration error wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	if c.Graph == nil {
		return fmt.Errorf("%w: Graph is required", ErrInvalidConfig)
	}
	s := c.Graph.Schema()
	if !s.Has(MessagesField) {
		return fmt.Errorf("%w: the graph's schema has no %q field (declare chat.Messages)", ErrInvalidConfig, MessagesField)
	}
	if v, _ := s.Defaults().Get(MessagesField); !isMessages(v) {
		return fmt.Errorf("%w: the %q field must hold []llm.Message (declare chat.Messages)", ErrInvalidConfig, MessagesField)
	}
	if r, _ := s.Reducer(MessagesField); r.Name() != graph.ReducerAppend {
		return fmt.Errorf("%w: the %q field must use the append reducer, not %s", ErrInvalidConfig, MessagesField, r.Name())
	}
	return nil
}

func isMessages(v any) bool { _, ok := v.([]llm.Message); return ok }

// Harness is the chat harness (harness-chat): Send a user message to a
// session, get the turn's replies. History lives in the session's
// Messages field; turns of one session run one at a time in arrival
// order, different sessions in parallel; a turn may suspend for a signal
// (an approval), and the resumed turn's outcome reaches the session's
// listeners. It is safe for concurrent use.
type Harness struct {
	h *harness.Harness
	// locks serializes a session's turns in this process: the session
	// store's own (session.Locks, shared by every harness over the
	// store) when it has them, else the harness's.
	locks Locker
	own   session.Locks
	// lockWait is Config.LockWait.
	lockWait time.Duration
	locker   Locker
	replies  Replies
	log      *slog.Logger
	deliver  bool
	feed     ResumeFeed

	lmu       sync.Mutex
	listeners map[string][]*listener
	queued    map[string][]Outcome

	idem       *idemCache
	marker     session.Marker // the graph's session store, when it records marks
	superseded string
	cancelled  string
	onDelete   func(ctx context.Context, sessionID string) error
	onCancel   func(ctx context.Context, sessionID, signalID string) error
	// calls indexes the sessions' tool call ids for the history check.
	calls callindex.Cache
}

// New returns a chat harness for cfg.
func New(cfg Config) (*Harness, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h, err := harness.New(harness.Config{Graph: cfg.Graph, Mode: harness.Sessioned, Coordinator: cfg.Coordinator, Logger: log, Tracer: cfg.Tracer})
	if err != nil {
		return nil, err
	}
	c := &Harness{h: h, locker: cfg.Locker, replies: cfg.Replies.withDefaults(), log: log, deliver: cfg.DeliverResumedOnSend, feed: cfg.Feed,
		listeners: map[string][]*listener{}, queued: map[string][]Outcome{}, superseded: cfg.SupersededResult, onDelete: cfg.OnDelete, onCancel: cfg.OnCancel,
		lockWait: cfg.LockWait}
	if c.superseded == "" {
		c.superseded = DefaultSupersededResult
	}
	if c.cancelled = cfg.CancelledResult; c.cancelled == "" {
		c.cancelled = DefaultCancelledResult
	}
	c.locks = &c.own
	if l, ok := cfg.Graph.SessionStore().(Locker); ok && l != cfg.Locker {
		c.locks = l
	}
	c.marker, _ = cfg.Graph.SessionStore().(session.Marker)
	if c.marker == nil && cfg.IdempotencyCapacity >= 0 {
		n := cfg.IdempotencyCapacity
		if n == 0 {
			n = 4096
		}
		c.idem = newIdemCache(n)
	}
	return c, nil
}

// Harness returns the underlying abstract harness.
func (c *Harness) Harness() *harness.Harness { return c.h }

// SendOption adjusts one Send.
type SendOption func(*sendConfig)

type sendConfig struct {
	messageID string
	recordKey string
	wholeText bool
	wait      context.Context
	lockWait  time.Duration
	onRelease func()
	onLocked  func()
	refusedBy string // a signal request id (WithRefusedBySignal)
	opts      []graph.InvokeOption
}

// sendState is a Send's state, in one allocation.
type sendState struct {
	sc sendConfig
	w  turnWrite
	in turnInput
	m  meter
}

// WithMessageID makes the Send idempotent: a Send to the same session
// with the same client message id returns the first Send's outcome
// (marked Replayed) without running another turn — a retransmission
// after a timeout, a restart or a failover. The id is recorded with the
// turn's session write, in the same transaction, when the session store
// records marks (session.Marker; the memory and SQLite stores do), so it
// survives restarts and is seen by every worker sharing the store, for
// the store's mark retention period (24 hours by default); otherwise it
// is remembered in memory (Config.IdempotencyCapacity). Ids are per
// session — so per tenant when sessions are — and at most MaxIDLength
// bytes. Only completed and suspended turns are recorded: an errored
// turn stored nothing, so retransmitting it runs it again.
func WithMessageID(id string) SendOption { return func(c *sendConfig) { c.messageID = id } }

// WithWholeText asks for the turn's assistant text in one chunk per
// model reply, once the reply is complete, rather than as the model
// streams it: on a streamed turn (SendFunc, SendStreaming) whose consumer
// records the text rather than shows it live, nodes call the model
// without streaming (StreamingText reports false) and emit each reply's
// text whole. The chunks carry the same text in the same place among the
// turn's other chunks; only their cut differs. On a plain Send it does
// nothing.
func WithWholeText() SendOption { return func(c *sendConfig) { c.wholeText = true } }

// WithWaitContext makes the turn's wait for its session (the session's
// earlier turn, which holds its lock) end also when wait ends: a server
// runs a turn detached from its client's cancellation, so that a turn
// under way is never cut short by a client that went away, but a turn
// still waiting has run nothing, and its client gone, it stops waiting
// (invocation_cancelled) rather than wait for a session held for long
// (a long turn, a stalled process). Once the turn holds the session it
// runs under Send's ctx alone.
func WithWaitContext(wait context.Context) SendOption {
	return func(c *sendConfig) { c.wait = wait }
}

// WithOnRelease calls f once the turn is done with its session, with
// the session's lock still held, right before the turn releases it: the
// turn's session write (if any) is committed and nothing of the turn
// touches the session any more. f is not called when the turn never
// took the lock (it was refused before, or gave up waiting). A server
// marks its run record there (runtime.Turn.Settle), so that a delete of
// the session, which takes the lock next, tells the turns that ran
// before it from those that wait behind it. f must not block.
func WithOnRelease(f func()) SendOption {
	return func(c *sendConfig) { c.onRelease = f }
}

// WithOnLocked calls f once the turn holds its session's lock, before
// anything else of the turn (a retransmission's look-up included): the
// moment the turn is accepted, after any wait behind the session's
// earlier turn. f is not called when the turn never took the lock. A
// server records there that its agent takes the turn over (the
// agent.handoff event), which a turn that waited and was cancelled, or
// gave up, never did. f must not block.
func WithOnLocked(f func()) SendOption {
	return func(c *sendConfig) { c.onLocked = f }
}

// WithRefusedBySignal refuses the turn (an Errored outcome wrapping
// ErrMessageIDReused, nothing run) when the session recorded a signal
// under requestID (Signal.RequestID), checked under the session's lock.
// A server whose idempotency key names one request, either a message
// (WithMessageID) or a decision (Signal.RequestID), passes the key's
// other id here and in Signal.RefusedByMessage: whichever of a message
// and a decision sent with one key at the same instant takes the
// session first runs, the other is refused.
func WithRefusedBySignal(requestID string) SendOption {
	return func(c *sendConfig) { c.refusedBy = requestID }
}

// WithLockWait bounds the turn's wait for its session, as
// Config.LockWait does for every turn: past d the turn fails with
// invocation_cancelled, its cause ErrSessionBusy. Negative: no bound,
// whatever Config.LockWait says.
func WithLockWait(d time.Duration) SendOption {
	return func(c *sendConfig) { c.lockWait = d }
}

// ErrSessionBusy is the cause of a turn that waited for its session
// longer than its lock wait (Config.LockWait, WithLockWait,
// Signal.LockWait): another turn held the session all that time. The
// turn failed with invocation_cancelled (retryable) before it started:
// it ran nothing, and a resume took no decision.
var ErrSessionBusy = errors.New("chat: the session is busy with another turn")

// WithInvokeOptions passes options to the turn's invocation (observers,
// a correlation id).
func WithInvokeOptions(opts ...graph.InvokeOption) SendOption {
	return func(c *sendConfig) { c.opts = append(c.opts, opts...) }
}

// Send runs one chat turn (harness-chat §5): it validates the session id
// and the message before touching the store, waits for the session's
// earlier turns, appends the message to the session's history and runs
// the graph. The Outcome is never nil; the error is non-nil exactly when
// the outcome is *Errored (it is then Errored.Err).
//
// A cancelled ctx while waiting for the session returns an Errored
// outcome (invocation_cancelled) without running the turn.
func (c *Harness) Send(ctx context.Context, sessionID string, msg llm.Message, opts ...SendOption) (Outcome, error) {
	// One allocation holds the turn's state: the options, the session
	// hooks (graph.SessionHooks), the input and the usage meter.
	st := &sendState{}
	sc := &st.sc
	for _, o := range opts {
		if o != nil {
			o(sc)
		}
	}
	if sc.wholeText {
		wholeText(ctx)
	}
	if sessionID == "" {
		return c.errored(Turn{}, &harness.Error{Cat: errcat.HarnessSessionIDUnresolved, Msg: "empty session id"})
	}
	if err := msg.Validate(); err != nil {
		return c.errored(Turn{SessionID: sessionID}, &ShapeError{Err: err})
	}
	if err := checkID("the message id", sc.messageID); err != nil {
		return c.errored(Turn{SessionID: sessionID}, err)
	}
	if err := checkID("the record key", sc.recordKey); err != nil {
		return c.errored(Turn{SessionID: sessionID}, err)
	}
	if _, err := c.h.Route(&harness.Transmission{SessionID: sessionID}); err != nil {
		return c.errored(Turn{SessionID: sessionID}, err)
	}
	unlock, err := c.lockWaiting(ctx, sc.wait, sc.lockWait, sessionID)
	if err != nil {
		return c.errored(Turn{SessionID: sessionID}, err)
	}
	defer unlock()
	if sc.onRelease != nil {
		defer sc.onRelease() // before unlock: deferred calls run last in, first out
	}
	if sc.onLocked != nil {
		sc.onLocked()
	}
	w, in := &st.w, &st.in
	*in = turnInput{c: c, id: sessionID, msg: msg, w: w}
	w.inputLen, w.in, w.marks = 1, in, w.keys[:0]
	w.calls, w.key, w.meter = &c.calls, sessionID, &st.m
	if sc.messageID != "" {
		// A retransmission answers its recorded outcome. The lookup is
		// made at the version the graph's cache holds, without a read
		// when the store indexes its marks; the turn's load checks again
		// if the session moved on since (turnInput.input).
		key := markMessage + sc.messageID
		hint := c.h.Graph().SessionVersionHint(sessionID)
		o, ok, err := c.recordedAt(ctx, sessionID, key, hint)
		if err != nil {
			return c.errored(Turn{SessionID: sessionID}, err)
		}
		if ok {
			return c.replayed(o, sessionID, sc.messageID, msg)
		}
		if _, versioned := c.marker.(session.VersionedMarker); versioned && hint > 0 {
			in.recheck, in.checkedAt = key, hint
		}
		w.marks = append(w.marks, key)
	}
	if sc.recordKey != "" {
		w.marks = append(w.marks, markRecord+sc.recordKey)
	}
	if err := c.refusedByMark(ctx, sessionID, markSignal, sc.refusedBy, "a signal"); err != nil {
		return c.errored(Turn{SessionID: sessionID}, err)
	}
	delivered := c.takeQueued(sessionID)
	invOpts := append(sc.opts[:len(sc.opts):len(sc.opts)], graph.WithSessionHooks(w))
	m := &st.m
	mctx := context.WithValue(ctx, meterKey{}, m)
	ho, herr := c.h.Invoke(mctx, &harness.Outcome{Path: harness.PathExistingSession, SessionID: sessionID}, nil, invOpts...)
	if herr != nil {
		if rp := (*replayedTurn)(nil); errors.As(herr, &rp) {
			return c.replayed(rp.out, sessionID, sc.messageID, msg) // a retransmission, found at the loaded version
		}
	}
	out := c.outcome(ho, false)
	m.stamp(out)
	out.Info().Delivered = delivered
	c.retire(ctx, in.left)
	if _, failed := out.(*Errored); !failed {
		t := out.Info()
		t.Superseded, t.SupersededInvocations = c.retire(ctx, in.pend)
		if c.marker == nil && c.idem != nil {
			out.Info().input = &msg
			for _, k := range w.marks {
				c.idem.put(sessionID, k, out)
			}
		}
	}
	return out, outcomeErr(out)
}

// lockWaiting is lock, its wait also ended when wait (nil: none) ends;
// the locks, once taken, are held until released whatever either
// context does.
func (c *Harness) lockWaiting(ctx, wait context.Context, limit time.Duration, sessionID string) (func(), error) {
	// A session nobody holds is taken without a wait to bound: in this
	// process, then (with a TryLocker) across processes.
	var own func() // the in-process lock, when taken here
	if t, ok := c.locks.(interface {
		TryLock(string) (func(), bool)
	}); ok {
		if unlock, ok := t.TryLock(sessionID); ok {
			if c.locker == nil {
				return unlock, nil
			}
			own = unlock
			if t, ok := c.locker.(TryLocker); ok {
				release, ok, err := t.TryLock(ctx, sessionID)
				switch {
				case err != nil:
					own()
					return nil, lockFailed(ctx, err)
				case ok:
					return func() { release(); own() }, nil
				}
			}
		}
	}
	if limit == 0 {
		limit = c.lockWait
	}
	lock := c.lock
	if own != nil {
		lock = func(ctx context.Context, sessionID string) (func(), error) { return c.lockShared(ctx, sessionID, own) }
	}
	waits := wait != nil && wait.Done() != nil
	if !waits && limit <= 0 {
		return lock(ctx, sessionID)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if waits {
		stop := context.AfterFunc(wait, func() { cancel(context.Cause(wait)) })
		defer stop()
	}
	if limit > 0 {
		t := time.AfterFunc(limit, func() { cancel(ErrSessionBusy) })
		defer t.Stop()
	}
	unlock, err := lock(wctx, sessionID)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), ErrSessionBusy) {
		// Cancelled before it started, as a turn whose caller left: it
		// ran nothing (a resume took no decision), and every surface
		// treats it so.
		return nil, errcat.Wrap(errcat.InvocationCancelled,
			fmt.Sprintf("chat: another turn held the session for longer than %v; nothing ran, try again", limit), ErrSessionBusy)
	}
	return unlock, err
}

// lock takes the session's in-process lock, then the cross-process one.
func (c *Harness) lock(ctx context.Context, sessionID string) (func(), error) {
	unlock, err := c.locks.Lock(ctx, sessionID)
	if err != nil {
		return nil, cancelled(err)
	}
	if c.locker == nil {
		return unlock, nil
	}
	return c.lockShared(ctx, sessionID, unlock)
}

// lockShared takes the cross-process lock of a session whose in-process
// lock is held (unlock frees it, also when this fails).
func (c *Harness) lockShared(ctx context.Context, sessionID string, unlock func()) (func(), error) {
	release, err := c.locker.Lock(ctx, sessionID)
	if err != nil {
		unlock()
		return nil, lockFailed(ctx, err)
	}
	return func() { release(); unlock() }, nil
}

// lockFailed maps a cross-process lock's failure: a cancellation when
// ctx ended, else session_load_failed.
func lockFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return cancelled(err)
	}
	if session.Unavailable(err) {
		return errcat.Wrap(errcat.SessionStoreUnavailable, "chat: cannot lock the session: the store is unavailable", err)
	}
	return errcat.Wrap(errcat.SessionLoadFailed, "chat: cannot lock the session", err)
}

// replayed answers a retransmission of msg under messageID with the
// recorded outcome o, or, when o answered another message, with an
// error wrapping ErrMessageIDReused.
func (c *Harness) replayed(o Outcome, sessionID, messageID string, msg llm.Message) (Outcome, error) {
	if !sameInput(o, msg) {
		return c.errored(Turn{SessionID: sessionID}, fmt.Errorf("%w: %q", ErrMessageIDReused, messageID))
	}
	return o, nil
}

func cancelled(err error) error {
	return errcat.Wrap(errcat.InvocationCancelled, "chat: gave up waiting for the session's earlier turns", err)
}

// loadFailed is a failed read of the session's records: session_load_failed,
// or invocation_cancelled when ctx ended (the caller's cancellation or
// deadline ended the read; the session is fine).
func loadFailed(ctx context.Context, msg string, err error) error {
	if ctx.Err() != nil {
		return errcat.Wrap(errcat.InvocationCancelled, msg+": the turn was cancelled", err)
	}
	if session.Unavailable(err) {
		return errcat.Wrap(errcat.SessionStoreUnavailable, msg+": the store is unavailable", err)
	}
	return errcat.Wrap(errcat.SessionLoadFailed, msg, err)
}

func outcomeErr(o Outcome) error {
	if e, ok := o.(*Errored); ok {
		return e.Err
	}
	return nil
}

// outcome converts a harness outcome, extracting the turn's messages by
// index (harness-chat §7): everything past the run's start state — the
// loaded history plus the user's message, or the suspended state of a
// resumed turn — is new.
func (c *Harness) outcome(ho *harness.Outcome, resumed bool) Outcome {
	t := Turn{SessionID: ho.SessionID, InvocationID: ho.InvocationID, Path: ho.Path, Resumed: resumed}
	var start []llm.Message
	if r := ho.Result; r != nil && !r.Start.IsZero() {
		start = Messages.Get(r.Start)
		if !resumed {
			t.Path = harness.PathNewSession
			if len(start) > 1 {
				t.Path = harness.PathExistingSession
			}
		}
	} else if !resumed {
		t.Path = ""
	}
	switch ho.Status {
	case graph.Completed:
		return &Completed{Turn: t, Replies: tail(Messages.Get(ho.Result.State), len(start)), FinalState: ho.Result.State}
	case graph.Suspended:
		return &Suspended{Turn: t, Descriptor: ho.Suspension.Descriptor, PendingMessages: tail(Messages.Get(ho.Result.State), len(start))}
	}
	o, _ := c.errored(t, ho.Err)
	return o
}

// tail returns a copy of msgs[from:], never nil.
func tail(msgs []llm.Message, from int) []llm.Message {
	if from > len(msgs) {
		from = len(msgs)
	}
	out := make([]llm.Message, len(msgs)-from)
	copy(out, msgs[from:])
	return out
}

// errored builds the Errored outcome for err with its bucket's reply.
func (c *Harness) errored(t Turn, err error) (Outcome, error) {
	cat, bucket := harness.Classify(err)
	var text string
	switch bucket {
	case harness.SessionTerminating:
		text = c.replies.SessionTerminating
	case harness.UserCorrectable:
		text = strings.ReplaceAll(c.replies.UserCorrectable, "{diagnostic}", harness.Diagnostic(err))
	default:
		text = c.replies.RetryableTransient
	}
	o := &Errored{Turn: t, Bucket: bucket, Category: cat, Reply: llm.SystemText(text), Err: err}
	return o, err
}

// ShapeError reports an invalid message given to Send
// (chat_message_shape_invalid, harness-chat §10.4). Err is the
// llm.ValidationError naming the offending field.
type ShapeError struct{ Err error }

// Error formats the failure.
func (e *ShapeError) Error() string {
	return "chat: " + string(errcat.ChatMessageShapeInvalid) + ": " + e.Err.Error()
}

// Message returns the validation diagnostic, which the user-correctable
// reply quotes.
func (e *ShapeError) Message() string {
	if d, ok := errors.AsType[errcat.Diagnoser](e.Err); ok {
		if s := d.Diagnostic(); s != "" {
			return s // an llm.ValidationError's, without its "llm: "
		}
	}
	var m errcat.Messager
	if errors.As(e.Err, &m) {
		return m.Message()
	}
	return e.Err.Error()
}

// Category returns chat_message_shape_invalid.
func (e *ShapeError) Category() errcat.Category { return errcat.ChatMessageShapeInvalid }

// Unwrap returns the validation error.
func (e *ShapeError) Unwrap() error { return e.Err }

// Is matches chat_message_shape_invalid (and, through Unwrap, the
// validation error's own category).
func (e *ShapeError) Is(target error) bool {
	return errcat.Matches(errcat.ChatMessageShapeInvalid, target)
}

// ErroredOutcome returns the Errored outcome this harness gives err —
// bucket, category and the bucket's reply — for failures a transport
// detects around the harness (for example a signal naming another
// session's invocation).
func (c *Harness) ErroredOutcome(t Turn, err error) *Errored {
	o, _ := c.errored(t, err)
	return o.(*Errored)
}
