package llm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
)

// failingProvider fails its first len(errs) calls with errs, in order,
// then answers "ok".
type failingProvider struct {
	errs  []error
	calls int
}

func (p *failingProvider) Ready(context.Context) error { return nil }

func (p *failingProvider) Complete(ctx context.Context, req *Request) (*Response, error) {
	p.calls++
	if p.calls <= len(p.errs) {
		return nil, p.errs[p.calls-1]
	}
	return &Response{Message: AssistantText("ok"), FinishReason: FinishStop}, nil
}

// fakeRetryClock returns a clock standing at base and a sleep that
// records the waits instead of sleeping, for a RetryPolicy.
func fakeRetryClock(base time.Time) (now func() time.Time, sleep func(context.Context, time.Duration) bool, waits *[]time.Duration) {
	waits = new([]time.Duration)
	return func() time.Time { return base }, func(_ context.Context, d time.Duration) bool {
		*waits = append(*waits, d)
		return true
	}, waits
}

func rateLimited(after time.Duration) error {
	return &ProviderError{Cat: errcat.ProviderRateLimit, Provider: "test", Op: "complete", StatusCode: 429, RetryAfter: after}
}

// TestRetryHonoursRetryAfter: the wait before a retry is at least the
// failed attempt's ProviderError.RetryAfter (the provider's Retry-After),
// bounded by RetryPolicy.MaxRetryAfter and the context's deadline; past
// either bound the call returns the error instead of sleeping. Before,
// the loop waited only its own backoff (a 429 with Retry-After: 2 was
// retried after ~70 ms, into the same rate-limit window).
func TestRetryHonoursRetryAfter(t *testing.T) {
	// The fake clock stands a day ahead, so the contexts' deadlines (set
	// from it) are in the real future and never expire during the test.
	base := time.Now().Add(24 * time.Hour)
	short := func(int) time.Duration { return 100 * time.Millisecond }
	long := func(int) time.Duration { return 5 * time.Second }
	for _, tc := range []struct {
		name     string
		errs     []error
		pol      RetryPolicy
		deadline time.Duration // from base; 0: none
		calls    int
		waits    []time.Duration
		fail     bool
	}{
		{"retry-after over backoff", []error{rateLimited(2 * time.Second)}, RetryPolicy{Backoff: short}, 0, 2, []time.Duration{2 * time.Second}, false},
		{"backoff over retry-after", []error{rateLimited(2 * time.Second)}, RetryPolicy{Backoff: long}, 0, 2, []time.Duration{5 * time.Second}, false},
		{"no retry-after", []error{rateLimited(0)}, RetryPolicy{Backoff: short}, 0, 2, []time.Duration{100 * time.Millisecond}, false},
		{"over the default bound", []error{rateLimited(DefaultMaxRetryAfter + time.Second)}, RetryPolicy{Backoff: short}, 0, 1, nil, true},
		{"over the policy bound", []error{rateLimited(10 * time.Second)}, RetryPolicy{Backoff: short, MaxRetryAfter: 5 * time.Second}, 0, 1, nil, true},
		{"within a raised bound", []error{rateLimited(90 * time.Second)}, RetryPolicy{Backoff: short, MaxRetryAfter: 2 * time.Minute}, 0, 2, []time.Duration{90 * time.Second}, false},
		{"ignored", []error{rateLimited(time.Hour)}, RetryPolicy{Backoff: short, MaxRetryAfter: -1}, 0, 2, []time.Duration{100 * time.Millisecond}, false},
		{"past the deadline", []error{rateLimited(2 * time.Second)}, RetryPolicy{Backoff: short}, time.Second, 1, nil, true},
		{"within the deadline", []error{rateLimited(2 * time.Second)}, RetryPolicy{Backoff: short}, 3 * time.Second, 2, []time.Duration{2 * time.Second}, false},
		{"backoff past the deadline", []error{rateLimited(0)}, RetryPolicy{Backoff: long}, 3 * time.Second, 1, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now, sleep, waits := fakeRetryClock(base)
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, base.Add(tc.deadline))
				defer cancel()
			}
			p := &failingProvider{errs: tc.errs}
			pol := tc.pol
			pol.Now, pol.Sleep = now, sleep
			_, err := Complete(ctx, p, &Request{Messages: []Message{UserText("hi")}, Retry: &pol})
			if (err != nil) != tc.fail {
				t.Fatalf("err = %v", err)
			}
			if tc.fail && !errors.Is(err, errcat.ProviderRateLimit) {
				t.Errorf("err = %v, want the provider_rate_limit error", err)
			}
			if p.calls != tc.calls {
				t.Errorf("%d attempts, want %d", p.calls, tc.calls)
			}
			if len(*waits) != len(tc.waits) || (len(tc.waits) > 0 && (*waits)[0] != tc.waits[0]) {
				t.Errorf("waits %v, want %v", *waits, tc.waits)
			}
		})
	}
}
