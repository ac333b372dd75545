package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/uuid"
	"github.com/armature-go/armature/session"
)

// Mode is fixed at construction (harness §2): a harness is sessioned or
// stateless, never both.
type Mode int

// Harness modes.
const (
	// Sessioned threads a session id into every invocation (the default).
	Sessioned Mode = iota
	// Stateless never resolves a session id and never touches a session
	// store, even one registered on the graph (harness §3.0).
	Stateless
)

// String returns "sessioned" or "stateless".
func (m Mode) String() string {
	if m == Stateless {
		return "stateless"
	}
	return "sessioned"
}

// Path is an inbound dispatch path of harness §3. Paths are wire
// identifiers and must not change.
type Path string

// The dispatch paths.
const (
	PathStateless       Path = "3.0" // stateless transmission
	PathNewSession      Path = "3.1" // new session
	PathExistingSession Path = "3.2" // existing active session
	PathSignalResume    Path = "3.3" // signal resume
)

// Intent is how the transport routed a transmission (harness §3.4):
// a dedicated "start session" route, a continuation, or a signal
// callback.
type Intent int

// Intents. The zero value infers the intent from the transmission: a
// signal resumes, a transmission without a session id starts a new
// session, one with a session id continues it.
const (
	IntentInfer Intent = iota
	IntentNewSession
	IntentContinue
	IntentResume
)

// Transmission is one inbound request, event or input (harness §3).
type Transmission struct {
	Intent Intent
	// SessionID names the session (sessioned mode). Empty on a new
	// session means the harness mints one.
	SessionID string
	// Input is the initial state or next-turn input, merged into the
	// loaded session through the reducers.
	Input graph.Update
	// Signal identifies the paused invocation a signal resumes; Payload
	// is the signal payload overlaid on the paused state.
	Signal  *SignalRef
	Payload graph.Update
	// Options are passed to the invocation (observers, correlation id).
	Options []graph.InvokeOption
}

// Config configures a [Harness]. The zero value of every field but Graph
// is a usable default.
type Config struct {
	// Graph is the compiled graph every turn invokes. Required.
	Graph *graph.Graph
	// Mode is Sessioned (default) or Stateless.
	Mode Mode
	// Coordinator routes signals to paused invocations. Default: a new
	// MemoryCoordinator. Give every worker a StoreCoordinator over the
	// graph's durable checkpoint store to resume on any worker.
	Coordinator Coordinator
	// NewSessionID mints session ids for new-session transmissions
	// without one. Default: random UUIDv4.
	NewSessionID func() string
	// Logger receives one record per turn. Default: discard.
	Logger *slog.Logger
	// Tracer, when set, opens the optional turn wrapper span around each
	// invocation (observability §4.6); the invocation span becomes its
	// child when the graph's tracing observer parents on the context.
	Tracer trace.Tracer
}

// Validate reports a configuration error wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	if c.Graph == nil {
		return fmt.Errorf("%w: Graph is required", ErrInvalidConfig)
	}
	if c.Mode != Sessioned && c.Mode != Stateless {
		return fmt.Errorf("%w: unknown mode %d", ErrInvalidConfig, c.Mode)
	}
	return nil
}

// Harness wraps a compiled graph for a deployment runtime (harness §1):
// it classifies transmissions into dispatch paths, resolves and mints
// session ids, invokes the graph, registers signal subscriptions for
// suspended turns without blocking on them, routes signals back to the
// paused invocation, and sorts failures into the three buckets of §7.
//
// A Harness is safe for concurrent use. It does not serialize turns of
// one session; the chat harness (package chat) does.
type Harness struct {
	g      *graph.Graph
	mode   Mode
	coord  Coordinator
	mint   func() string
	log    *slog.Logger
	tracer trace.Tracer
}

// New returns a harness for cfg.
func New(cfg Config) (*Harness, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Harness{g: cfg.Graph, mode: cfg.Mode, coord: cfg.Coordinator, mint: cfg.NewSessionID, log: cfg.Logger, tracer: cfg.Tracer}
	if h.coord == nil {
		h.coord = NewMemoryCoordinator()
	}
	if h.mint == nil {
		h.mint = uuid.New
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// Mode returns the harness's mode.
func (h *Harness) Mode() Mode { return h.mode }

// Graph returns the graph the harness invokes.
func (h *Harness) Graph() *graph.Graph { return h.g }

// Coordinator returns the harness's signal coordinator.
func (h *Harness) Coordinator() Coordinator { return h.coord }

// Outcome is a turn's result at the harness boundary (harness §5).
type Outcome struct {
	// Path is the dispatch path the transmission took.
	Path Path
	// Status is graph.Completed, graph.Errored or graph.Suspended.
	Status graph.Status
	// SessionID is the turn's session ("" in stateless mode);
	// SessionIDMinted reports that the harness minted it.
	SessionID       string
	SessionIDMinted bool
	// InvocationID and CorrelationID identify the invocation ("" when the
	// harness failed before invoking).
	InvocationID  string
	CorrelationID string
	// Result is the engine's outcome (nil when the harness failed before
	// invoking).
	Result *graph.Result
	// Suspension describes a Suspended outcome.
	Suspension *graph.Suspension
	// Subscription is the signal subscription registered for a
	// Suspended outcome, or the one a signal-resume turn resolved.
	Subscription *Subscription
	// Err, Category and Bucket describe an Errored outcome: the error,
	// its turn-boundary category (see Classify) and bucket.
	Err      error
	Category errcat.Category
	Bucket   Bucket
}

// State returns the final state (Completed), the suspended state
// (Suspended) or the recoverable state (Errored); the zero State when the
// harness failed before invoking.
func (o *Outcome) State() graph.State {
	if o.Result == nil {
		return graph.State{}
	}
	return o.Result.State
}

// Route classifies a transmission into its dispatch path (harness §3.4).
// It is deterministic: the same transmission always takes the same path.
// It fails with harness_path_classification_ambiguous when the
// transmission fits no path or several, and with
// harness_session_id_unresolved when a sessioned continuation carries no
// valid session id.
func (h *Harness) Route(tx *Transmission) (Path, error) {
	ambiguous := func(format string, args ...any) (Path, error) {
		return "", newError(errcat.HarnessPathClassificationAmbiguous, nil, format, args...)
	}
	resume := tx.Signal != nil
	switch {
	case resume && tx.Intent != IntentInfer && tx.Intent != IntentResume:
		return ambiguous("a transmission carrying a signal cannot also start or continue a session")
	case resume && len(tx.Input) > 0:
		return ambiguous("a signal-resume transmission carries a payload, not an input")
	case !resume && tx.Intent == IntentResume:
		return ambiguous("a resume transmission must identify the signal")
	case resume && tx.Signal.InvocationID == "" && tx.Signal.SignalID == "":
		return ambiguous("the signal names neither an invocation nor a signal id")
	case resume:
		return PathSignalResume, nil
	case !resume && len(tx.Payload) > 0:
		return ambiguous("a signal payload without a signal")
	}
	if h.mode == Stateless {
		if tx.SessionID != "" || tx.Intent != IntentInfer {
			return ambiguous("a stateless harness cannot start or continue session %q", tx.SessionID)
		}
		return PathStateless, nil
	}
	if tx.SessionID != "" {
		if err := session.ValidateID(tx.SessionID); err != nil {
			return "", newError(errcat.HarnessSessionIDUnresolved, err, "invalid session id")
		}
	}
	switch tx.Intent {
	case IntentNewSession:
		return PathNewSession, nil
	case IntentContinue:
		if tx.SessionID == "" {
			return "", newError(errcat.HarnessSessionIDUnresolved, nil, "a continuation names no session")
		}
		return PathExistingSession, nil
	case IntentInfer:
		if tx.SessionID == "" {
			return PathNewSession, nil
		}
		return PathExistingSession, nil
	}
	return ambiguous("unknown intent %d", tx.Intent)
}

// Handle runs one transmission as one turn: classify, invoke (or resume),
// handle the outcome (harness §3-§5). The returned Outcome is never nil;
// the error is non-nil exactly when the outcome is Errored, and is then
// Outcome.Err.
//
// A Suspended outcome returns at once, after registering the signal
// subscription (a registration failure makes the outcome Errored with
// harness_signal_subscription_failed); the turn resumes when a
// transmission carrying the signal arrives (Path 3.3).
func (h *Harness) Handle(ctx context.Context, tx Transmission) (*Outcome, error) {
	path, err := h.Route(&tx)
	if err != nil {
		return h.fail(ctx, &Outcome{SessionID: tx.SessionID}, err)
	}
	if path == PathSignalResume {
		sub, err := h.Resolve(ctx, *tx.Signal)
		if err != nil {
			return h.fail(ctx, &Outcome{Path: path, SessionID: tx.Signal.SessionID}, err)
		}
		return h.Resume(ctx, sub, tx.Payload, tx.Options...)
	}
	o := &Outcome{Path: path, SessionID: tx.SessionID}
	if path == PathNewSession && o.SessionID == "" {
		o.SessionID, o.SessionIDMinted = h.mint(), true
	}
	return h.Invoke(ctx, o, tx.Input, tx.Options...)
}

// Invoke runs a classified turn: o carries the path and the session id
// (the chat harness classifies and locks before calling it). It fills in
// and returns o.
func (h *Harness) Invoke(ctx context.Context, o *Outcome, input graph.Update, opts ...graph.InvokeOption) (*Outcome, error) {
	ctx, end := h.span(ctx, o, nil)
	defer end()
	if o.SessionID != "" && h.mode == Sessioned {
		opts = append(opts[:len(opts):len(opts)], graph.WithSessionID(o.SessionID))
	}
	res, err := h.g.Invoke(ctx, input, opts...)
	return h.outcome(ctx, o, res, err)
}

// Resolve maps an arriving signal to its paused invocation through the
// coordinator (harness §6). It fails with
// harness_signal_correlation_failed.
func (h *Harness) Resolve(ctx context.Context, ref SignalRef) (Subscription, error) {
	sub, err := h.coord.Resolve(ctx, ref)
	if err != nil {
		if session.Unavailable(err) {
			// The coordinator's store could not be reached: nothing is
			// known of the signal, which may well be awaited (a retry
			// may succeed), so not a correlation failure, which says
			// that nothing awaits it.
			return Subscription{}, newError(errcat.SessionStoreUnavailable, err, "cannot correlate the signal: the store is unavailable")
		}
		return Subscription{}, newError(errcat.HarnessSignalCorrelationFailed, err, "cannot correlate the signal")
	}
	if h.mode == Stateless {
		sub.SessionID = ""
	}
	return sub, nil
}

// Resume runs the signal-resume turn of a resolved subscription
// (harness §3.3): the engine resumes the paused invocation with the
// payload, in the paused record's session.
func (h *Harness) Resume(ctx context.Context, sub Subscription, payload graph.Update, opts ...graph.InvokeOption) (*Outcome, error) {
	o := &Outcome{Path: PathSignalResume, SessionID: sub.SessionID, Subscription: &sub}
	ctx, end := h.span(ctx, o, &sub)
	defer end()
	if payload == nil {
		payload = graph.Update{}
	}
	res, err := h.g.Resume(ctx, sub.InvocationID, payload, opts...)
	// The subscription is spent unless the record stays resumable (a
	// payload that failed validation) or the turn suspended again (which
	// re-subscribes below).
	if err == nil || errcat.Of(err) != errcat.SuspensionResumePayloadInvalid {
		if rerr := h.coord.Release(context.WithoutCancel(ctx), sub); rerr != nil {
			h.log.LogAttrs(ctx, slog.LevelWarn, "harness: releasing a signal subscription failed",
				slog.String("invocation_id", sub.InvocationID), slog.String("error", rerr.Error()))
		}
	}
	return h.outcome(ctx, o, res, err)
}

// outcome completes o from the engine's result.
func (h *Harness) outcome(ctx context.Context, o *Outcome, res *graph.Result, err error) (*Outcome, error) {
	if res == nil { // invalid options
		return h.fail(ctx, o, err)
	}
	o.Result, o.InvocationID, o.CorrelationID = res, res.InvocationID, res.CorrelationID
	switch {
	case err != nil:
		// Errored, or Completed whose session save failed: the turn's
		// effect is not durable, so the caller sees an error.
		return h.fail(ctx, o, err)
	case res.Status == graph.Suspended:
		o.Status, o.Suspension = graph.Suspended, res.Suspension
		sub := subscriptionOf(res, o.SessionID)
		if h.mode == Stateless {
			sub.SessionID = ""
		}
		if err := h.coord.Subscribe(ctx, sub); err != nil {
			return h.fail(ctx, o, newError(errcat.HarnessSignalSubscriptionFailed, err,
				"cannot subscribe to signal %q", sub.SignalID))
		}
		o.Subscription = &sub
		if h.log.Enabled(ctx, slog.LevelDebug) {
			h.log.LogAttrs(ctx, slog.LevelDebug, "harness: turn suspended", h.attrs(o, slog.String("signal_id", sub.SignalID))...)
		}
		return o, nil
	}
	o.Status = graph.Completed
	if h.log.Enabled(ctx, slog.LevelDebug) { // a turn's attributes are built only when logged
		h.log.LogAttrs(ctx, slog.LevelDebug, "harness: turn completed", h.attrs(o)...)
	}
	return o, nil
}

// fail marks o Errored with err.
func (h *Harness) fail(ctx context.Context, o *Outcome, err error) (*Outcome, error) {
	if err == nil {
		err = errors.New("harness: invocation failed without an error")
	}
	o.Status, o.Err = graph.Errored, err
	o.Category, o.Bucket = Classify(err)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetStatus(codes.Error, string(o.Category))
		span.SetAttributes(attribute.String("openarmature.harness.error_bucket", string(o.Bucket)))
	}
	level, msg := slog.LevelWarn, "harness: turn errored"
	if errors.Is(ctx.Err(), context.Canceled) {
		// Its caller cancelled it (a user's stop, a shutdown): no
		// warning, and its category says what the node saw.
		level, msg = slog.LevelInfo, "harness: turn cancelled"
	}
	h.log.LogAttrs(ctx, level, msg,
		h.attrs(o, slog.String("category", string(o.Category)), slog.String("bucket", string(o.Bucket)))...)
	if h.log.Enabled(ctx, slog.LevelDebug) {
		// The cause, for an operator debugging (an unparsable prompt
		// file, a refused connection): at debug level only, since a
		// node's error may quote the conversation. Errors carry no
		// secrets (providers redact their keys).
		h.log.LogAttrs(ctx, slog.LevelDebug, "harness: turn errored: cause", h.attrs(o, slog.String("error", err.Error()))...)
	}
	return o, err
}

func (h *Harness) attrs(o *Outcome, extra ...slog.Attr) []slog.Attr {
	a := make([]slog.Attr, 0, 4+len(extra))
	a = append(a, slog.String("path", string(o.Path)), slog.String("invocation_id", o.InvocationID))
	if o.SessionID != "" {
		a = append(a, slog.String("session_id", o.SessionID))
	}
	if o.CorrelationID != "" {
		a = append(a, slog.String("correlation_id", o.CorrelationID))
	}
	return append(a, extra...)
}

// Turn span attribute names. They are wire identifiers and must not
// change.
const (
	// SpanTurn is the turn wrapper span's name.
	SpanTurn = "openarmature.harness.turn"
	// AttrDispatchPath carries the turn's dispatch path.
	AttrDispatchPath = "openarmature.harness.dispatch_path"
	// AttrSessionID is observability §5.6's session attribute.
	AttrSessionID = "openarmature.session_id"
	// AttrSignalID is observability §5.8's suspension signal attribute.
	AttrSignalID = "openarmature.suspension.signal_id"
)

// span opens the optional turn wrapper span.
func (h *Harness) span(ctx context.Context, o *Outcome, sub *Subscription) (context.Context, func()) {
	if h.tracer == nil {
		return ctx, func() {}
	}
	attrs := []attribute.KeyValue{attribute.String(AttrDispatchPath, string(o.Path))}
	if o.SessionID != "" && h.mode == Sessioned {
		attrs = append(attrs, attribute.String(AttrSessionID, o.SessionID))
	}
	if sub != nil {
		attrs = append(attrs, attribute.String(AttrSignalID, sub.SignalID))
		for _, k := range sortedKeys(sub.Metadata) {
			attrs = append(attrs, attribute.String("openarmature.suspension.metadata."+k, fmt.Sprint(sub.Metadata[k])))
		}
	}
	ctx, span := h.tracer.Start(ctx, SpanTurn, trace.WithAttributes(attrs...))
	return ctx, func() { span.End() }
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
