package harness_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/session"
)

// downCoordinator answers every Resolve with err.
type downCoordinator struct {
	harness.Coordinator
	err error
}

func (c downCoordinator) Resolve(context.Context, harness.SignalRef) (harness.Subscription, error) {
	return harness.Subscription{}, c.err
}

// A signal whose look-up failed because the coordinator's store could
// not be reached is session_store_unavailable (retryable: the signal
// may well be awaited), not harness_signal_correlation_failed, which
// says nothing awaits it; a look-up that found nothing stays that.
func TestResolveStoreUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want errcat.Category
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, errcat.SessionStoreUnavailable},
		{"a store that says so", fmt.Errorf("checkpoint: list: %w", session.ErrUnavailable), errcat.SessionStoreUnavailable},
		{"nothing awaits", fmt.Errorf("%w: approval:1", harness.ErrNoSubscription), errcat.HarnessSignalCorrelationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harness.Config{Graph: newGraph(t, nil, nil, nil), Coordinator: downCoordinator{err: tc.err}})
			_, err := h.Resolve(context.Background(), harness.SignalRef{SignalID: "approval:1", SessionID: "s"})
			if got := errcat.Of(err); got != tc.want {
				t.Fatalf("category %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}
