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
	// call it names in the ADK session (it was answered already, or its
	// call is not in the history the adapter seeds a lost session
	// with). Its category is harness_signal_correlation_failed
	// (user-correctable): sending the approval again cannot help.
	ErrNoPending = errcat.Sentinel(errcat.HarnessSignalCorrelationFailed, "adk: no pending confirmation")
)
