// Package llmtest provides a scripted fake [llm.Provider] for tests and
// benchmarks of packages built on llm (agents, chat, graphs).
//
// A [Provider] replays its steps in order, one per Complete or Stream
// call, and records every request it receives (deep enough copies that
// later changes by the caller do not show). It implements [llm.Streamer]:
// a step with Chunks is streamed chunk by chunk; a step with only a
// Response is streamed as one chunk per content/tool-call part.
//
//	p := llmtest.New(
//		llmtest.Reply("Hello!"),
//		llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderUnavailable}),
//	)
//	resp, err := llm.Complete(ctx, p, &llm.Request{Messages: msgs})
//	reqs := p.Requests()
//
// # Concurrency
//
// A Provider is safe for concurrent use; concurrent calls take steps in
// the order they lock the provider.
package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"sync"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// ErrExhausted is the (uncategorized) error of a call that finds no
// scripted step left.
var ErrExhausted = errors.New("llmtest: no scripted step left")

// Step is one scripted answer.
type Step struct {
	// Response is returned by Complete (a copy); ignored when Err is set.
	Response *llm.Response
	// Chunks are yielded by Stream; when nil, Stream derives chunks from
	// Response.
	Chunks []*llm.Chunk
	// Err is returned by Complete, or yielded by Stream after Chunks.
	Err error
}

// Reply returns a step answering with assistant text and finish reason
// stop.
func Reply(text string) Step {
	return Step{Response: &llm.Response{
		Message:      llm.AssistantText(text),
		FinishReason: llm.FinishStop,
		Raw:          json.RawMessage(`{}`),
	}}
}

// CallTools returns a step answering with tool calls and finish reason
// tool_calls.
func CallTools(calls ...llm.ToolCall) Step {
	return Step{Response: &llm.Response{
		Message:      llm.AssistantToolCalls(calls...),
		FinishReason: llm.FinishToolCalls,
		Raw:          json.RawMessage(`{}`),
	}}
}

// Fail returns a step failing with err.
func Fail(err error) Step { return Step{Err: err} }

// Provider is the scripted fake. Its zero value has no steps and a nil
// ReadyErr.
type Provider struct {
	// ReadyErr is what Ready returns.
	ReadyErr error

	mu       sync.Mutex
	steps    []Step
	next     int
	requests []llm.Request
}

var (
	_ llm.Provider = (*Provider)(nil)
	_ llm.Streamer = (*Provider)(nil)
)

// New returns a provider that answers with steps in order.
func New(steps ...Step) *Provider { return &Provider{steps: steps} }

// Push appends steps to the script.
func (p *Provider) Push(steps ...Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.steps = append(p.steps, steps...)
}

// Ready returns ReadyErr, or ctx's error.
func (p *Provider) Ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.ReadyErr
}

// take records req and returns the next step.
func (p *Provider) take(req *llm.Request) (Step, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := *req
	r.Messages = slices.Clone(req.Messages)
	r.Tools = slices.Clone(req.Tools)
	r.Config = req.Config.Clone()
	p.requests = append(p.requests, r)
	if p.next >= len(p.steps) {
		return Step{}, ErrExhausted
	}
	s := p.steps[p.next]
	p.next++
	return s, nil
}

// Complete validates req, records it and returns the next step's answer.
// Structured output is checked against req.ResponseSchema as a real
// mapping does.
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	s, err := p.take(req)
	if err != nil {
		return nil, err
	}
	if s.Err != nil {
		return nil, s.Err
	}
	if s.Response == nil {
		return nil, &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: "llmtest", Op: "complete", Message: "step has no response"}
	}
	resp := *s.Response
	if err := llm.ParseStructured(&resp, req.ResponseSchema); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Stream validates req, records it and yields the next step's chunks.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(nil, err)
			return
		}
		if err := req.Validate(); err != nil {
			yield(nil, err)
			return
		}
		s, err := p.take(req)
		if err != nil {
			yield(nil, err)
			return
		}
		chunks := s.Chunks
		if chunks == nil && s.Response != nil {
			chunks = ChunksOf(s.Response)
		}
		for _, c := range chunks {
			if ctx.Err() != nil {
				yield(nil, ctx.Err())
				return
			}
			if !yield(c, nil) {
				return
			}
		}
		if s.Err != nil {
			yield(nil, s.Err)
		}
	}
}

// ChunksOf splits a response into the chunks a streaming provider would
// send: reasoning, then content, then one chunk per tool call, then a
// final chunk with the finish reason, usage and raw body.
func ChunksOf(r *llm.Response) []*llm.Chunk {
	var out []*llm.Chunk
	for _, b := range r.Message.Content.Blocks() {
		if b.Type == llm.BlockThinking {
			out = append(out, &llm.Chunk{Reasoning: b.Text})
		}
	}
	if t := r.Message.Text(); t != "" {
		out = append(out, &llm.Chunk{Content: t})
	}
	for i, tc := range r.Message.ToolCalls {
		out = append(out, &llm.Chunk{ToolCalls: []llm.ToolCallDelta{{
			Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments), Signature: tc.Signature,
		}}})
	}
	u := r.Usage
	return append(out, &llm.Chunk{FinishReason: r.FinishReason, Usage: &u, Raw: r.Raw})
}

// Requests returns copies of the requests received so far, in order.
func (p *Provider) Requests() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// Calls returns the number of Complete and Stream calls received.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.requests)
}

// Remaining returns the number of unused steps.
func (p *Provider) Remaining() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.steps) - p.next
}
