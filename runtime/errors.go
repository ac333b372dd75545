package runtime

import (
	"errors"
	"fmt"
)

// Sentinel errors. Check with errors.Is; every Store backend wraps them.
var (
	// ErrNotFound: no run with that id exists in the tenant. A run of
	// another tenant is reported as not found: tenants never see each
	// other's runs.
	ErrNotFound = errors.New("runtime: not found")
	// ErrInvalidRequest: a malformed request (an empty or oversized id,
	// an event without a type, data that is not JSON, a bad page token,
	// both or neither of RunID and SessionID, ...).
	ErrInvalidRequest = errors.New("runtime: invalid request")
	// ErrConflict: the request contradicts the run's state: starting a
	// run whose id exists, or appending to or finishing a run that has
	// already finished.
	ErrConflict = errors.New("runtime: conflict")
	// ErrTurnEnded: a Turn method was called after the turn ended.
	ErrTurnEnded = errors.New("runtime: turn already ended")
	// ErrInvalidConfig: RecorderConfig.Validate rejected the configuration.
	ErrInvalidConfig = errors.New("runtime: invalid config")
)

// ErrCancelled is the cause (context.Cause) of a turn's context after
// [Recorder.Cancel]: someone asked for the run to stop.
var ErrCancelled = errors.New("runtime: run cancelled")

// ErrShutdown is the cause of a turn's context after
// [Recorder.CancelAll]: the server stopped before the turn ended. It
// wraps [ErrCancelled]; unlike a cancel request, it says nothing against
// running the turn again, on another server or after a restart.
var ErrShutdown = fmt.Errorf("%w: the server stopped before the turn ended", ErrCancelled)
