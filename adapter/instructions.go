package adapter

import "context"

// instructionsKey carries a turn's per-request instructions to the
// upstream's model hooks (see WithInstructions).
type instructionsKey struct{}

// WithInstructions returns ctx carrying a turn's per-request
// instructions (Request.Instructions) for the hooks an adapter installs
// in its upstream's model calls (an ADK-Go callback or instruction
// provider, an Eino model middleware), which see only the context of
// the model call: an adapter's Run puts them on the context it runs its
// upstream under. nil carries none, hiding any an outer context
// carries.
func WithInstructions(ctx context.Context, text *string) context.Context {
	return context.WithValue(ctx, instructionsKey{}, text)
}

// InstructionsOf returns the per-request instructions WithInstructions
// put on ctx, and whether there are any ("" with true: the turn's model
// calls get no system prompt).
func InstructionsOf(ctx context.Context) (string, bool) {
	if p, _ := ctx.Value(instructionsKey{}).(*string); p != nil {
		return *p, true
	}
	return "", false
}
