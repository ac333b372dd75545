package graph

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/armature-go/armature/errcat"
)

// Next invokes the rest of a middleware chain: the inner middleware and,
// at the innermost point, the node itself.
type Next func(ctx context.Context, s State) (Update, error)

// Middleware wraps a node dispatch (pipeline-utilities §2). Handle receives
// the state the node would receive and next, the rest of the chain. It may
// transform the state it passes to next (never the state it received),
// inspect or replace the update next returns, short-circuit by not calling
// next, recover from next's error, or call next again (retry). It must
// return a partial update or an error; an error fails the node with
// node_exception.
//
// Middleware runs with the node's context: [CurrentNode], [InvocationID]
// and [AttemptIndex] work inside it.
type Middleware interface {
	Handle(ctx context.Context, s State, next Next) (Update, error)
}

// MiddlewareFunc adapts a function to [Middleware].
type MiddlewareFunc func(ctx context.Context, s State, next Next) (Update, error)

// Handle calls f.
func (f MiddlewareFunc) Handle(ctx context.Context, s State, next Next) (Update, error) {
	return f(ctx, s, next)
}

// runChain calls chain[0] with the rest of the chain as next, ending in
// inner.
func runChain(ctx context.Context, chain []Middleware, s State, inner Next) (Update, error) {
	if len(chain) == 0 {
		return inner(ctx, s)
	}
	next := func(ctx context.Context, s State) (Update, error) {
		return runChain(ctx, chain[1:], s, inner)
	}
	return callMiddleware(ctx, chain[0], s, next)
}

func callMiddleware(ctx context.Context, m Middleware, s State, next Next) (u Update, err error) {
	defer func() {
		if p := recover(); p != nil {
			if sig, ok := p.(*suspendSignal); ok {
				panic(sig) // a suspension skips the middleware's post-phase
			}
			u, err = nil, newPanicError(p)
		}
	}()
	return m.Handle(ctx, s, next)
}

type attemptKey struct{}

// WithAttemptIndex returns a context in which the node events emitted
// below carry attempt index i. Retry middleware sets it before each
// attempt; the innermost (closest to the node) setting wins.
func WithAttemptIndex(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, attemptKey{}, i)
}

// AttemptIndex returns the retry attempt of the innermost retry wrapping
// ctx's node (0 on a first attempt or without retry).
func AttemptIndex(ctx context.Context) int {
	i, _ := ctx.Value(attemptKey{}).(int)
	return i
}

// RetryConfig configures [NewRetry] (pipeline-utilities §6.1).
type RetryConfig struct {
	// MaxAttempts is the total number of attempts including the first;
	// 0 means the default, 3. 1 disables retry.
	MaxAttempts int
	// Classifier reports whether a failure is retryable; s is the state
	// the attempt received. The default is [DefaultRetryable].
	Classifier func(err error, s State) bool
	// Backoff returns the wait before retry attempt+1 (attempt is
	// 0-based). The default is exponential with full jitter, base 1s,
	// cap 30s ([JitterBackoff]).
	Backoff func(attempt int) time.Duration
	// OnRetry, if set, is called before each wait.
	OnRetry func(ctx context.Context, err error, attempt int)
}

// Retry is the canonical retry middleware. Each attempt runs the rest of
// the chain afresh and produces its own node event pair with its attempt
// index. Context cancellation is never retried, and a wait is cut short
// by cancellation.
type Retry struct{ cfg RetryConfig }

// NewRetry returns retry middleware; MaxAttempts must not be negative.
func NewRetry(cfg RetryConfig) (*Retry, error) {
	if cfg.MaxAttempts < 0 {
		return nil, invalidOption("retry: MaxAttempts must be >= 1, got %d", cfg.MaxAttempts)
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.Classifier == nil {
		cfg.Classifier = DefaultRetryable
	}
	if cfg.Backoff == nil {
		cfg.Backoff = JitterBackoff(time.Second, 30*time.Second)
	}
	return &Retry{cfg: cfg}, nil
}

// JitterBackoff returns exponential backoff with full jitter: a uniform
// random wait in [0, min(cap, base·2^attempt)).
func JitterBackoff(base, limit time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		if base <= 0 || limit <= 0 {
			return 0
		}
		d := limit
		if attempt < 62 && base<<attempt > 0 && base<<attempt < limit {
			d = base << attempt
		}
		if d <= 0 {
			return 0
		}
		return time.Duration(rand.Int64N(int64(d)))
	}
}

// Handle runs next until it succeeds, fails with a non-retryable error, or
// the attempts are used up.
func (r *Retry) Handle(ctx context.Context, s State, next Next) (Update, error) {
	for attempt := 0; ; attempt++ {
		// Each attempt starts from the pre-attempt metadata; a failed
		// attempt's additions are dropped (observability §3.4).
		actx, commit := attemptMeta(ctx)
		u, err := next(WithAttemptIndex(actx, attempt), s)
		if err == nil {
			commit()
			return u, nil
		}
		if isCancellation(err) || ctx.Err() != nil || attempt+1 >= r.cfg.MaxAttempts || !r.cfg.Classifier(err, s) {
			return nil, err
		}
		if r.cfg.OnRetry != nil {
			r.cfg.OnRetry(ctx, err, attempt)
		}
		if d := r.cfg.Backoff(attempt); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, err
			}
		}
	}
}

// isCancellation reports whether err is a cancellation, never retried
// nor degraded: a context's Canceled or DeadlineExceeded that no
// category along its chain classes as transient. A provider's own call
// timeout (its Timeout, not the caller's context) wraps DeadlineExceeded
// but is provider_unavailable: a failure of the upstream, retried as
// any other. (The caller's own context being done is checked apart.)
func isCancellation(err error) bool {
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, c := range errcat.Chain(err) {
		if c.Transient() {
			return false
		}
	}
	return true
}

// transient is implemented by errors that declare themselves transient.
type transient interface{ Transient() bool }

// DefaultRetryable is the default retry classifier (pipeline-utilities
// §6.1): an error is retryable when its own category is transient
// (provider_unavailable, provider_rate_limit, provider_model_not_loaded),
// or when it is a node_exception carrier whose direct cause is. An error
// with a Transient() bool method is classified by it instead of its
// category. Cancellation is never
// retryable. The state is ignored.
func DefaultRetryable(err error, _ State) bool {
	if err == nil || isCancellation(err) {
		return false
	}
	if isTransient(err) {
		return true
	}
	var ne *NodeError
	if errors.As(err, &ne) && ne.Carrier() && ne.Err != nil {
		if ne.cat == errcat.ParallelBranchesBranchFailed {
			// A failed branch inherits the classification of the failure
			// it wraps (pipeline-utilities §11.9).
			return DefaultRetryable(ne.Err, State{})
		}
		return isTransient(ne.Err)
	}
	return false
}

func isTransient(err error) bool {
	// An error that declares its transience is taken at its word, even
	// against its category (a mock raising a non-transient
	// provider_unavailable, conformance-adapter §5.1).
	if t, ok := err.(transient); ok {
		return t.Transient()
	}
	if c, ok := err.(errcat.Categorized); ok {
		return c.Category().Transient()
	}
	// Look through plain wrappers (fmt.Errorf) to the first categorized
	// or self-declared error, but not through another carrier.
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(u) {
		if t, ok := u.(transient); ok {
			return t.Transient()
		}
		if c, ok := u.(errcat.Categorized); ok {
			if _, carrier := u.(errcat.Carrier); carrier {
				return false
			}
			return c.Category().Transient()
		}
	}
	return false
}

// TimingConfig configures [NewTiming] (pipeline-utilities §6.2).
type TimingConfig struct {
	// NodeName labels the records. When empty, the name of the node the
	// middleware runs on is used, so one Timing can serve a whole graph.
	NodeName string
	// OnComplete receives one record per dispatch, after the wrapped chain
	// returns or fails. It runs inline; an error it returns fails the node
	// with node_exception. Required.
	OnComplete func(ctx context.Context, r TimingRecord) error
	// Now is the clock; the default is time.Now, whose readings carry the
	// monotonic clock.
	Now func() time.Time
}

// TimingRecord is one timed dispatch.
type TimingRecord struct {
	NodeName string
	Duration time.Duration
	// Outcome is "success" or "exception".
	Outcome string
	// ExceptionCategory is the failure's category, "" when it has none or
	// the dispatch succeeded.
	ExceptionCategory errcat.Category
}

// DurationMS returns the duration in milliseconds.
func (r TimingRecord) DurationMS() float64 { return float64(r.Duration) / float64(time.Millisecond) }

// Timing is the canonical timing middleware.
type Timing struct{ cfg TimingConfig }

// NewTiming returns timing middleware; OnComplete is required.
func NewTiming(cfg TimingConfig) (*Timing, error) {
	if cfg.OnComplete == nil {
		return nil, invalidOption("timing: OnComplete is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Timing{cfg: cfg}, nil
}

// Handle times next.
func (t *Timing) Handle(ctx context.Context, s State, next Next) (Update, error) {
	start := t.cfg.Now()
	u, err := next(ctx, s)
	rec := TimingRecord{NodeName: t.cfg.NodeName, Duration: t.cfg.Now().Sub(start), Outcome: "success"}
	if rec.NodeName == "" {
		if sc := scopeFrom(ctx); sc != nil {
			rec.NodeName = sc.label()
		}
	}
	if err != nil {
		rec.Outcome, rec.ExceptionCategory = "exception", errcat.Of(err)
	}
	if cerr := t.cfg.OnComplete(ctx, rec); cerr != nil {
		if err != nil {
			return nil, errors.Join(err, cerr)
		}
		return nil, fmt.Errorf("timing callback: %w", cerr)
	}
	return u, err
}

// FailureIsolationConfig configures [NewFailureIsolation]
// (pipeline-utilities §6.3).
type FailureIsolationConfig struct {
	// EventName identifies this catch site on the FailureIsolationEvent.
	// Required.
	EventName string
	// Degraded is the update returned instead of a caught failure, or
	// DegradedFunc computes it from the state the middleware received.
	// Exactly one is required.
	Degraded     Update
	DegradedFunc func(ctx context.Context, s State) (Update, error)
	// Catch, if set, limits catching to failures whose derived category
	// (the cause chain's outermost non-carrier category, see
	// errcat.Derived) is in the set.
	Catch []errcat.Category
	// Predicate, if set, must also accept the caught (surface) error.
	Predicate func(err error) bool
	// OnCaught, if set, is called with each caught error.
	OnCaught func(ctx context.Context, err error)
}

// FailureIsolation is the canonical failure-isolation middleware: it
// catches failures of the wrapped chain, emits a [FailureIsolationEvent],
// and returns a degraded update, so the engine sees a normal return.
// Context cancellation is never caught.
//
// Compose it outside [Retry] ("retry transients, degrade on
// exhaustion"): with isolation inside, retry would never see a failure.
type FailureIsolation struct{ cfg FailureIsolationConfig }

// NewFailureIsolation returns failure-isolation middleware.
func NewFailureIsolation(cfg FailureIsolationConfig) (*FailureIsolation, error) {
	switch {
	case cfg.EventName == "":
		return nil, invalidOption("failure isolation: EventName is required")
	case cfg.Degraded == nil && cfg.DegradedFunc == nil:
		return nil, invalidOption("failure isolation: one of Degraded and DegradedFunc is required")
	case cfg.Degraded != nil && cfg.DegradedFunc != nil:
		return nil, invalidOption("failure isolation: set only one of Degraded and DegradedFunc")
	}
	cfg.Catch = slices.Clone(cfg.Catch)
	return &FailureIsolation{cfg: cfg}, nil
}

// staticDegraded returns the static degraded update, if configured.
func (f *FailureIsolation) staticDegraded() (Update, bool) {
	return f.cfg.Degraded, f.cfg.DegradedFunc == nil
}

// Handle runs next and degrades a caught failure.
func (f *FailureIsolation) Handle(ctx context.Context, s State, next Next) (Update, error) {
	u, err := next(ctx, s)
	if err == nil || isCancellation(err) || ctx.Err() != nil {
		return u, err
	}
	chain := errcat.CauseChain(err)
	cat, msg := errcat.DerivedFrom(chain)
	if len(f.cfg.Catch) > 0 && (cat == "" || !slices.Contains(f.cfg.Catch, cat)) {
		return nil, err
	}
	if f.cfg.Predicate != nil && !f.cfg.Predicate(err) {
		return nil, err
	}
	degraded := f.cfg.Degraded
	if f.cfg.DegradedFunc != nil {
		d, derr := f.cfg.DegradedFunc(ctx, s)
		if derr != nil {
			return nil, errors.Join(err, fmt.Errorf("degraded update: %w", derr))
		}
		degraded = d
	}
	if degraded == nil {
		degraded = Update{}
	}
	if sc := scopeFrom(ctx); sc != nil && sc.inv.w != nil {
		ev := &FailureIsolationEvent{
			EventName:       f.cfg.EventName,
			AttemptIndex:    max(AttemptIndex(ctx), sc.lastAttempt),
			PreState:        s,
			PostState:       degraded,
			CaughtException: CaughtException{Category: cat, Message: msg, Chain: chain, Err: err},
			InvocationID:    sc.inv.id,
			CorrelationID:   sc.inv.corrID,
			Time:            sc.inv.g.now(),
		}
		ev.Namespace, ev.FanOutIndex, ev.BranchName, ev.FanOutIndexChain, ev.BranchNameChain = sc.lineage()
		sc.fr.emit(ev, 0)
	}
	if f.cfg.OnCaught != nil {
		f.cfg.OnCaught(ctx, err)
	}
	return degraded, nil
}

// FailureIsolationEvent reports a failure caught by [FailureIsolation]
// (pipeline-utilities §6.3). It is delivered to observers like node
// events, but is not one: it has no phase and is not filtered by
// [Phases].
type FailureIsolationEvent struct {
	// EventName is the configured catch-site name.
	EventName string
	// The wrapped node's (or fan-out instance's, or branch's) lineage.
	Namespace        []string
	AttemptIndex     int
	FanOutIndex      *int
	BranchName       *string
	FanOutIndexChain []*int
	BranchNameChain  []*string
	// PreState is the state the middleware received.
	PreState State
	// PostState is the degraded update returned in place of the failure.
	PostState Update
	// CaughtException describes the caught failure.
	CaughtException CaughtException
	InvocationID    string
	CorrelationID   string
	// Time is when the failure was caught.
	Time time.Time
}

// EventInvocationID returns the invocation id.
func (e *FailureIsolationEvent) EventInvocationID() string { return e.InvocationID }

// CaughtException is the cause chain of a caught failure with its derived
// category and message (pipeline-utilities §6.3, §6.4).
type CaughtException struct {
	// Category is the derived category: the outermost non-carrier link's
	// ("" when none has one).
	Category errcat.Category
	// Message is that link's message.
	Message string
	// Chain lists every link, outermost (the caught error) first.
	Chain []errcat.Link
	// Err is the caught error.
	Err error
}
