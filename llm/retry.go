package llm

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/armature-go/armature/errcat"
)

// RetryPolicy is the §7.1 call-level retry configuration: the four fields
// of the pipeline-utilities §6.1 retry record plus the two llm-provider
// adaptive extensions. The zero value retries transient failures up to 3
// attempts in all with jittered exponential backoff.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts including the first;
	// 0 means 3, 1 disables retry.
	MaxAttempts int
	// Classifier reports whether a failed attempt may be retried. The
	// default is [DefaultTransient]. Cancellation is never retried,
	// whatever the classifier says.
	Classifier func(err error) bool
	// Backoff returns the wait before retry attempt+1 (attempt is the
	// 0-based index of the failed attempt). The default is exponential
	// with full jitter, base 1s, cap 30s. When the failed attempt's
	// error is a [*ProviderError] with a RetryAfter (the provider's
	// Retry-After), the wait is the longer of the two; see
	// MaxRetryAfter. A wait that would outlast the context's deadline is
	// not taken: the attempt's error is returned at once.
	Backoff func(attempt int) time.Duration
	// MaxRetryAfter bounds the wait a provider's Retry-After may impose
	// ([ProviderError.RetryAfter]): a failed attempt asking for longer
	// is not retried, and its error (carrying the RetryAfter) is
	// returned. 0 means [DefaultMaxRetryAfter]; a negative value ignores
	// Retry-After (only Backoff decides the wait).
	MaxRetryAfter time.Duration
	// Now and Sleep are the loop's clock, injected for determinism:
	// Now reads the time (to tell whether a wait would outlast the
	// context's deadline), Sleep waits d or until ctx is done and
	// reports whether d elapsed. Defaults: time.Now and a timer.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) bool
	// OnRetry, if set, observes each retry before its wait: the failed
	// attempt's error and index. It cannot change the request.
	OnRetry func(ctx context.Context, err error, attempt int)
	// PerAttemptOverride is the per-attempt config schedule: retry i
	// (attempt i+1) uses the request's Config merged with entry i
	// ([Config.Merge]); the last entry carries forward. Attempt 0 always
	// uses the request's Config.
	PerAttemptOverride []Config
	// Reask, when set, makes structured_output_invalid retryable for the
	// call: before the next attempt the model's output (as an assistant
	// message) and the text Reask returns (as a user message) are
	// appended to the working transcript. It is not called on the last
	// attempt. The returned text is sent verbatim.
	Reask func(err *StructuredOutputError) string
	// OnAttempt, if set, observes every attempt after it ends (the
	// per-attempt LLM span of §7.1, observability §5.5).
	OnAttempt func(ctx context.Context, a Attempt)
}

// RetryReason says why an attempt was scheduled (§7.1
// openarmature.llm.retry_reason). The constants are wire identifiers from
// the OpenArmature specification; they must not change.
type RetryReason string

// The retry reasons; attempt 0 has none ("").
const (
	RetryTransient RetryReason = "transient"
	RetryReask     RetryReason = "reask"
)

// Attempt describes one attempt of a [Complete] call, for observers.
type Attempt struct {
	// Index is the 0-based attempt index.
	Index int
	// Reason is why the attempt was made; "" for attempt 0.
	Reason RetryReason
	// Request is the request the attempt sent (the working transcript
	// and the attempt's config). Read only.
	Request *Request
	// Response is the attempt's response, when one was received (also on
	// a structured_output_invalid failure).
	Response *Response
	// Err is the attempt's error, or nil.
	Err error
}

// DefaultTransient is the default retry classifier (§7 Retry
// classification, pipeline-utilities §6.1): true for the transient
// categories provider_unavailable, provider_rate_limit and
// provider_model_not_loaded (and errors declaring Transient() true);
// false for cancellation and everything else.
func DefaultTransient(err error) bool {
	if err == nil || isCancellation(err) {
		return false
	}
	var t interface{ Transient() bool }
	if errors.As(err, &t) {
		return t.Transient()
	}
	return errcat.Of(err).Transient()
}

// DefaultMaxRetryAfter is the longest Retry-After a [RetryPolicy] waits
// for when its MaxRetryAfter is 0.
const DefaultMaxRetryAfter = 60 * time.Second

// sleepCtx waits d, or until ctx is done; it reports whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryWait is the wait before the retry that follows the failed attempt
// (index attempt, error err), and false when the loop must stop instead:
// the provider's Retry-After exceeds pol.MaxRetryAfter, or the wait would
// outlast ctx's deadline. pol's defaults are applied.
func retryWait(ctx context.Context, pol *RetryPolicy, attempt int, err error) (time.Duration, bool) {
	d := max(pol.Backoff(attempt), 0)
	var pe *ProviderError
	if pol.MaxRetryAfter >= 0 && errors.As(err, &pe) && pe.RetryAfter > 0 {
		limit := pol.MaxRetryAfter
		if limit == 0 {
			limit = DefaultMaxRetryAfter
		}
		if pe.RetryAfter > limit {
			return 0, false
		}
		d = max(d, pe.RetryAfter)
	}
	if dl, ok := ctx.Deadline(); ok && d > 0 && d >= dl.Sub(pol.Now()) {
		return 0, false
	}
	return d, true
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

func jitter(attempt int) time.Duration {
	const base, limit = time.Second, 30 * time.Second
	d := limit
	if attempt < 30 && base<<attempt < limit {
		d = base << attempt
	}
	return time.Duration(rand.Int64N(int64(d)))
}

// Complete performs a complete() call on p with everything §5 and §7.1 add
// above one wire exchange:
//
//   - req.Stream: the call goes through p's [Streamer] (failing with
//     [ErrStreamUnsupported], provider_invalid_request, before sending when
//     p has none), req.OnChunk sees each chunk as it arrives, and the
//     chunks are assembled into one Response ([Accumulator]) whose
//     structured output is checked ([ParseStructured]);
//   - req.Retry: the call-level retry loop with per-attempt config
//     overrides and structured-output reask. A streamed attempt that
//     failed after req.OnChunk saw a chunk of it is not retried on a
//     transient error (its error is returned): the consumer has shown
//     part of an answer that a retry would contradict, and cannot take
//     it back (an end user's stream). A streamed call is retried while
//     its attempts fail before their first chunk; a reask (structured
//     output) follows a complete attempt, and is the caller's choice.
//
// req is never modified. Without Stream and Retry it is p.Complete.
//
// When ctx carries a [CallObserver] (see [CallObserverKey]) the call is
// reported to it: its streamed deltas, its attempts and its outcome.
func Complete(ctx context.Context, p Provider, req *Request) (*Response, error) {
	if o, ok := ctx.Value(CallObserverKey{}).(CallObserver); ok && o != nil {
		return tracked(ctx, o, p, req)
	}
	return complete(ctx, p, req, nil)
}

// complete is Complete; rec, when set, records the attempts and deltas.
func complete(ctx context.Context, p Provider, req *Request, rec *callRecorder) (*Response, error) {
	if req.Stream {
		if _, ok := p.(Streamer); !ok {
			return nil, &ProviderError{Cat: errcat.ProviderInvalidRequest, Op: "complete",
				Message: "stream requested", Err: ErrStreamUnsupported}
		}
	}
	if req.Retry == nil {
		if rec == nil {
			resp, _, err := once(ctx, p, req, nil)
			return resp, err
		}
		start := time.Now()
		resp, _, err := once(ctx, p, req, rec)
		rec.attempt(AttemptRecord{Response: resp, Err: err, Start: start, End: time.Now()})
		return resp, err
	}
	pol := *req.Retry
	if pol.MaxAttempts <= 0 {
		pol.MaxAttempts = 3
	}
	if pol.Classifier == nil {
		pol.Classifier = DefaultTransient
	}
	if pol.Backoff == nil {
		pol.Backoff = jitter
	}
	if pol.Now == nil {
		pol.Now = time.Now
	}
	if pol.Sleep == nil {
		pol.Sleep = sleepCtx
	}
	work := req.clone()
	work.Retry = nil
	base := req.Config
	var reason RetryReason
	for attempt := 0; ; attempt++ {
		if attempt > 0 && len(pol.PerAttemptOverride) > 0 {
			o := pol.PerAttemptOverride[min(attempt-1, len(pol.PerAttemptOverride)-1)]
			work.Config = base.Merge(o)
		}
		sent := work.clone()
		start := time.Now()
		resp, delivered, err := once(ctx, p, sent, rec)
		var soe *StructuredOutputError
		isSOE := errors.As(err, &soe)
		if rec != nil {
			rec.attempt(AttemptRecord{Index: attempt, Reason: reason, Response: resp, Err: err, Start: start, End: time.Now()})
		}
		if pol.OnAttempt != nil {
			a := Attempt{Index: attempt, Reason: reason, Request: sent, Response: resp, Err: err}
			if isSOE {
				a.Response = soe.Response
			}
			pol.OnAttempt(ctx, a)
		}
		if err == nil {
			return resp, nil
		}
		if isCancellation(err) || ctx.Err() != nil || attempt+1 >= pol.MaxAttempts {
			return nil, err
		}
		switch {
		case isSOE && pol.Reask != nil:
			reason = RetryReask
		case delivered:
			// Part of this attempt reached the consumer: see Complete.
			return nil, err
		case pol.Classifier(err):
			reason = RetryTransient
		default:
			return nil, err
		}
		d, ok := retryWait(ctx, &pol, attempt, err)
		if !ok {
			return nil, err
		}
		if pol.OnRetry != nil {
			pol.OnRetry(ctx, err, attempt)
		}
		if d > 0 && !pol.Sleep(ctx, d) {
			return nil, err
		}
		if reason == RetryReask {
			correction := pol.Reask(soe)
			work.Messages = append(work.Messages,
				AssistantText(soe.OutputContent),
				UserText(correction))
		}
	}
}

// once performs one attempt, atomic or streamed; rec, when set, sees the
// streamed deltas. delivered reports that req.OnChunk saw a chunk.
func once(ctx context.Context, p Provider, req *Request, rec *callRecorder) (resp *Response, delivered bool, err error) {
	if !req.Stream {
		resp, err = p.Complete(ctx, req)
		return resp, false, err
	}
	s := p.(Streamer)
	var acc Accumulator
	if ra, ok := p.(RawAssembler); ok {
		acc.AssembleRaw = ra.AssembleRaw
	}
	var assembled *Response
	for c, err := range s.Stream(ctx, req) {
		if err != nil {
			return nil, delivered, err
		}
		if req.OnChunk != nil {
			req.OnChunk(c)
			delivered = true
		}
		if rec != nil {
			rec.chunk(c)
		}
		acc.Add(c)
		if c.Response != nil {
			assembled = c.Response
		}
	}
	resp = assembled
	if resp == nil {
		if resp, err = acc.Response(); err != nil {
			return nil, delivered, named(err, p, "stream")
		}
	}
	if err := ParseStructured(resp, req.ResponseSchema); err != nil {
		return nil, delivered, err
	}
	return resp, delivered, nil
}

// named gives a *ProviderError that names no provider the name of p (when
// p is a [Namer]) and op.
func named(err error, p Provider, op string) error {
	pe, ok := err.(*ProviderError)
	n, isNamer := p.(Namer)
	if ok && isNamer && pe.Provider == "" {
		pe.Provider, pe.Op = n.ProviderName(), op
	}
	return err
}

// asStructured returns the *StructuredOutputError in err's chain, or nil.
func asStructured(err error) *StructuredOutputError {
	var soe *StructuredOutputError
	if errors.As(err, &soe) {
		return soe
	}
	return nil
}
