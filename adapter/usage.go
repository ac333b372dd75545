package adapter

import (
	"context"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
)

// ReportModelCall records a model call an upstream made during the turn
// running in ctx (the context Run received, or one derived from it, as
// an upstream passes it down to its model): usage adds to the turn's
// (the usage of the OpenAI-compatible endpoints, the run record's
// output), and finish becomes the turn's finish reason; a streamed turn
// gets a usage chunk. An adapter calls it once per model call, from the
// upstream's response metadata. Outside a turn it does nothing.
func ReportModelCall(ctx context.Context, usage llm.Usage, finish llm.FinishReason) {
	chat.ReportModelCall(ctx, &llm.Response{Usage: usage, FinishReason: finish})
}
