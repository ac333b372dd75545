package adapter

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

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
	// ErrTextOnly is wrapped when a turn hands an upstream that passes
	// only text (TextOnly) a message holding an image, which it would
	// silently drop. Its category is provider_unsupported_content_block
	// (user-correctable).
	ErrTextOnly = errcat.Sentinel(errcat.ProviderUnsupportedContentBlock, "adapter: the backend passes text only")
	// ErrNoSuspension fails a resumed turn that carries a decision but
	// no suspension of the adapter's graph (another graph's paused turn,
	// in a checkpoint store graphs share without names): the upstream is
	// not run. Its category is harness_signal_correlation_failed.
	ErrNoSuspension = errcat.Sentinel(errcat.HarnessSignalCorrelationFailed, "adapter: no suspension of this agent awaits the decision")
)

// TextOnly fails a turn whose message or history holds an image, for an
// adapter whose upstream is handed only the text of messages (it would
// drop the image silently, and the model answer without it): it returns
// an error wrapping ErrTextOnly naming backend, or nil.
func TextOnly(backend string, req *Request) error {
	if hasImage(req.Input) {
		return fmt.Errorf("%w: %s cannot hand the model the message's image", ErrTextOnly, backend)
	}
	for i := range req.History {
		if hasImage(req.History[i]) {
			return fmt.Errorf("%w: %s cannot hand the model the image of message %d of the history", ErrTextOnly, backend, i+1)
		}
	}
	return nil
}

func hasImage(m llm.Message) bool {
	for _, b := range m.Content.Blocks() {
		if b.Type == llm.BlockImage {
			return true
		}
	}
	return false
}

// CheckToolCalls fails a model's answer (of operation op) holding a
// tool call without an id or a name, in provider_invalid_response
// wrapping sentinel (the adapter's own), as the model clients fail such
// an answer and a native agent the turn that would store it: an
// upstream that ran the call, or asked for its approval, under no id
// would leave a call that no result, approval or later request can
// name. It returns nil when every call has both.
func CheckToolCalls(op string, calls []llm.ToolCall, sentinel error) error {
	for i, tc := range calls {
		if tc.ID == "" || tc.Name == "" {
			return &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Op: op,
				Message: "tool_calls[" + strconv.Itoa(i) + "] of the model's answer lacks an id or function name", Err: sentinel}
		}
	}
	return nil
}
