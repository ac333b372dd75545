package adapter

import "errors"

// Sentinel errors. Each is matched with errors.Is.
var (
	// ErrInvalidConfig is wrapped by configuration errors: a malformed
	// backend-native section, an invalid registry name or factory, a
	// HarnessConfig without an adapter.
	ErrInvalidConfig = errors.New("adapter: invalid config")
	// ErrUnknownAdapter is wrapped when a workspace names a backend no
	// factory is registered for.
	ErrUnknownAdapter = errors.New("adapter: unknown adapter")
	// ErrDuplicate is wrapped when a name is registered twice.
	ErrDuplicate = errors.New("adapter: adapter already registered")
	// ErrInvalidResult is wrapped when Run returns neither or both of an
	// output and a suspension, or a suspension without a tool call id.
	ErrInvalidResult = errors.New("adapter: invalid result")
	// ErrGraphOnly is returned by the Run of an adapter whose turns run
	// only as its graph (NativeAdapter).
	ErrGraphOnly = errors.New("adapter: the adapter runs only as a graph")
)
