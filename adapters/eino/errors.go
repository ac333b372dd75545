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
	// lost it: the in-memory store does not survive a restart), or one
	// it cannot read or Eino cannot load (a corrupt file). Its
	// category is harness_signal_correlation_failed (user-correctable):
	// sending the approval again cannot help.
	ErrNoCheckpoint = errcat.Sentinel(errcat.HarnessSignalCorrelationFailed, "eino: no checkpoint for the interrupted run")
	// ErrInterrupt means Eino interrupted for something other than an
	// approval the adapter can map (a tool or agent of the embedding
	// program's own interrupting on its own terms).
	ErrInterrupt = errors.New("eino: unmapped interrupt")
)
