package adk

import (
	"context"
	"slices"
	"sync"

	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/model"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/llm"
)

// modelCall is one response of a model call of a run: its usage (as
// reported, none when the model reported none) and finish reason.
type modelCall struct {
	usage  llm.Usage
	finish llm.FinishReason
}

// modelCalls are the model calls of a run not reported yet: noteCalls,
// ADK-Go's AfterModelCallback, adds each model call's response as the
// model gives it, and the run reports them (report) from its own
// goroutine, in the order made, as it reads ADK-Go's events.
//
// ADK-Go calls an AfterModelCallback once for each response a model call
// yields (partial ones included, in streaming mode), and for nothing
// else: not for the events it makes itself (function responses, a
// confirmation request, a BeforeModelCallback's answer such as
// stepLimit's), so a model call is counted once, whether the model
// reported usage or not (an OpenAI-compatible server that reports none,
// through the model bridge), and whether or not ADK-Go makes an event of
// it (a response without content).
type modelCalls struct {
	mu    sync.Mutex
	calls []modelCall
	made  int // the model calls stepLimit let the run make
}

type modelCallsKey struct{}

// withModelCalls returns ctx carrying c, for noteCalls.
func withModelCalls(ctx context.Context, c *modelCalls) context.Context {
	return context.WithValue(ctx, modelCallsKey{}, c)
}

// noteCalls is the AfterModelCallback noting each model call's final
// (not partial) response in the run's modelCalls; it changes nothing.
func noteCalls(ctx adkagent.Context, resp *model.LLMResponse, err error) (*model.LLMResponse, error) {
	c, ok := ctx.Value(modelCallsKey{}).(*modelCalls)
	if !ok || err != nil || resp == nil || resp.Partial {
		return nil, nil
	}
	call := modelCall{finish: llmFinish(resp.FinishReason, resp.Content != nil && slices.ContainsFunc(resp.Content.Parts, isCall))}
	if resp.UsageMetadata != nil {
		call.usage = llmUsage(resp.UsageMetadata)
	}
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
	return nil, nil
}

// report reports the model calls noted since the last report as the
// turn's (adapter.ReportModelCall): the usage of each, when reported,
// adds to the turn's, and the finish reason of the last becomes the
// turn's (a reply cut at the model's token limit makes it length, which
// the OpenAI-compatible endpoints answer and the run record keeps).
func (c *modelCalls) report(ctx context.Context) {
	c.mu.Lock()
	calls := c.calls
	c.calls = nil
	c.mu.Unlock()
	for _, call := range calls {
		adapter.ReportModelCall(ctx, call.usage, call.finish)
	}
}
