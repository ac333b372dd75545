package eino

import (
	"context"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapter"
)

// instructions is the ChatModelAgent handler giving the model calls of
// a turn with per-request instructions those in place of the agent's
// instruction (Eino's system message, which the run's state keeps:
// each call's input is changed, not the state, so a resumed run has
// the resuming request's instructions, or the agent's), for any model:
// the workspace model's bridge and an embedder's own alike (Eino's
// WrapModel). A turn without them is left as Eino runs it.
type instructions struct {
	*adk.BaseChatModelAgentMiddleware
}

// WrapModel implements adk.ChatModelAgentMiddleware.
func (instructions) WrapModel(_ context.Context, m model.BaseChatModel, _ *adk.ModelContext) (model.BaseChatModel, error) {
	return instructed{m}, nil
}

// instructed is a model whose calls under per-request instructions get
// them as their system message.
type instructed struct{ m model.BaseChatModel }

// Generate implements model.BaseChatModel.
func (i instructed) Generate(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	return i.m.Generate(ctx, instruct(ctx, input), opts...)
}

// Stream implements model.BaseChatModel.
func (i instructed) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return i.m.Stream(ctx, instruct(ctx, input), opts...)
}

// instruct returns input with its system messages replaced by the
// per-request instructions ctx carries ("" none), or input itself when
// ctx carries none.
func instruct(ctx context.Context, input []*schema.Message) []*schema.Message {
	text, ok := adapter.InstructionsOf(ctx)
	if !ok {
		return input
	}
	out := make([]*schema.Message, 0, len(input)+1)
	if text != "" {
		out = append(out, schema.SystemMessage(text))
	}
	for _, m := range input {
		if m == nil || m.Role != schema.System {
			out = append(out, m)
		}
	}
	return out
}
