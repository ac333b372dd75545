package adk

import (
	"errors"

	"github.com/armature-go/armature/errcat"
)

// Sentinel errors of the ADK adapter; every message starts with "adk:".
var (
	// ErrInvalidConfig is wrapped by the errors of [Config.Validate].
	ErrInvalidConfig = errors.New("adk: invalid config")
	// ErrNoPending means a resume found no pending confirmation for the
	// call it names in the ADK session (it was answered already, or the
	// session was lost: the in-memory session service does not survive
	// a restart). Its category is harness_signal_correlation_failed
	// (user-correctable): sending the approval again cannot help.
	ErrNoPending error = &categorized{msg: "adk: no pending confirmation", cat: errcat.HarnessSignalCorrelationFailed}
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
