package eino

import (
	"errors"
	"fmt"

	"github.com/armature-go/armature/errcat"
)

// Sentinel errors of the Eino adapter; every message starts with "eino:".
var (
	// ErrInvalidConfig is wrapped by the errors of [Config.Validate].
	ErrInvalidConfig = errors.New("eino: invalid config")
	// ErrNoCheckpoint means a resume found no checkpoint for the
	// interrupted run it names (it was resumed already, or the store
	// lost it: the in-memory store does not survive a restart), or one
	// it cannot read or Eino cannot load (a corrupt file). Its
	// category is harness_signal_correlation_failed (user-correctable):
	// sending the approval again cannot help.
	ErrNoCheckpoint = errcat.Sentinel(errcat.HarnessSignalCorrelationFailed, "eino: no checkpoint for the interrupted run")
	// ErrInvalidToolCall is wrapped by the failure of a turn whose model
	// answered with a tool call that has no id or no name (the model
	// bridge's, before Eino runs the call; or an embedder's model's call
	// of an approval-gated tool): provider_invalid_response, as a
	// native agent's turn fails on such an answer. No id is made up for
	// it.
	ErrInvalidToolCall = errcat.Sentinel(errcat.ProviderInvalidResponse, "eino: a tool call of the model's answer lacks an id or name")
	// ErrInterrupt means Eino interrupted for something other than an
	// approval the adapter can map (a tool or agent of the embedding
	// program's own interrupting on its own terms).
	ErrInterrupt = errors.New("eino: unmapped interrupt")
)

// noCheckpoint is the failure of a resume of interrupted run id whose
// checkpoint is missing, or that Eino cannot load (cause, nil for a
// missing one): it is [ErrNoCheckpoint], and its diagnostic, which the
// runtime's reply to the decision quotes, says what happened to the
// call: the decision could not be applied and the tool did not run.
type noCheckpoint struct {
	id       string
	approved bool
	cause    error
}

func (e *noCheckpoint) Error() string {
	if e.cause == nil {
		return fmt.Sprintf("%v %q", ErrNoCheckpoint, e.id)
	}
	return fmt.Sprintf("%v %q: %v", ErrNoCheckpoint, e.id, e.cause)
}

func (e *noCheckpoint) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrNoCheckpoint}
	}
	return []error{ErrNoCheckpoint, e.cause}
}

// Category implements errcat.Categorized: ErrNoCheckpoint's.
func (e *noCheckpoint) Category() errcat.Category { return errcat.HarnessSignalCorrelationFailed }

// Diagnostic implements errcat.Diagnoser.
func (e *noCheckpoint) Diagnostic() string {
	if e.approved {
		return "the approval could not be applied, as the interrupted run's checkpoint is missing or unreadable: the tool did not run"
	}
	return "the denial could not be applied, as the interrupted run's checkpoint is missing or unreadable: the tool did not run"
}
