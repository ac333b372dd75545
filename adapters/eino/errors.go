package eino

import (
	"errors"

	"github.com/armature-go/armature/errcat"
)

// Sentinel errors of the Eino adapter; every message starts with "eino:".
var (
	// ErrInvalidConfig is wrapped by the errors of [Config.Validate].
	ErrInvalidConfig = errors.New("eino: invalid config")
	// ErrNoCheckpoint means a resume found no checkpoint for the
	// interrupted run it names (it was resumed already, or the store
	// lost it: the in-memory store does not survive a restart). Its
	// category is harness_signal_correlation_failed (user-correctable):
	// sending the approval again cannot help.
	ErrNoCheckpoint error = &categorized{msg: "eino: no checkpoint for the interrupted run", cat: errcat.HarnessSignalCorrelationFailed}
	// ErrInterrupt means Eino interrupted for something other than an
	// approval the adapter can map (a tool or agent of the embedding
	// program's own interrupting on its own terms).
	ErrInterrupt = errors.New("eino: unmapped interrupt")
)

// categorized is a sentinel error with an errcat category: a resume
// whose upstream state is gone cannot succeed if retried, so it fails
// the turn as user-correctable (harness_signal_correlation_failed: the
// approval no longer correlates with anything the upstream holds; the
// user sends the request again), not as a transient failure.
type categorized struct {
	msg string
	cat errcat.Category
}

func (e *categorized) Error() string { return e.msg }

// Category implements errcat.Categorized.
func (e *categorized) Category() errcat.Category { return e.cat }
