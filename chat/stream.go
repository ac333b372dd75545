package chat

import (
	"context"
	"encoding/json"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
)

// ChunkKind discriminates stream chunks. Kinds are wire identifiers and
// must not change.
type ChunkKind string

// Chunk kinds.
const (
	// ChunkText is a piece of assistant text as a model streams it.
	ChunkText ChunkKind = "text"
	// ChunkThinking is a piece of reasoning text.
	ChunkThinking ChunkKind = "thinking"
	// ChunkTool is tool-call progress.
	ChunkTool ChunkKind = "tool"
	// ChunkOutcome ends a stream: it carries the turn's Outcome.
	ChunkOutcome ChunkKind = "outcome"
	// ChunkEvent carries a runtime event a node reports for the turn's
	// run record (an adapter's upstream signal, an artifact).
	ChunkEvent ChunkKind = "event"
)

// Event is a runtime event a node reports for the turn's run (see
// EmitEvent): an agent.* signal, or a runtime fact such as
// runtime.artifact.created. The server records it on the turn's run; a
// plain Send drops it.
type Event struct {
	// Type is the runtime event type; empty means an agent.* signal
	// (runtime.adapter.event) whose payload phase is Phase.
	Type  string
	Phase string
	// Data is the event's payload (JSON-serializable).
	Data map[string]any
	// Output, when set, is merged into the run's recorded output (for
	// example its artifacts and metadata).
	Output map[string]any
}

// Chunk is one element of a streamed turn.
type Chunk struct {
	Kind ChunkKind
	// Node is the emitting node's name ("" on the outcome chunk).
	Node string
	// Step is the emitting node's step in its invocation
	// (graph.NodeInfo.Step), set with Node by Emit: with Node, it names
	// the node execution the chunk belongs to.
	Step int
	// Text is the delta of a text or thinking chunk.
	Text string
	// Tool is the progress of a tool chunk.
	Tool *ToolProgress
	// Outcome is the turn's outcome, on the final chunk.
	Outcome Outcome
	// Model is a model call's usage and finish reason, on a usage chunk.
	Model *ModelCall
	// Prompt is the managed prompt a node rendered, on a prompt chunk.
	Prompt *PromptUse
	// Event is the runtime event of an event chunk.
	Event *Event
}

// ToolStatus is a tool call's progress state. Statuses are wire
// identifiers and must not change.
type ToolStatus string

// Tool statuses.
const (
	ToolRequested ToolStatus = "requested" // the model asked for the call
	ToolRunning   ToolStatus = "running"   // the tool is executing
	ToolCompleted ToolStatus = "completed" // the tool returned its result
	ToolFailed    ToolStatus = "failed"    // the tool failed
)

// ToolProgress reports a tool call's progress.
type ToolProgress struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Status    ToolStatus      `json:"status"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Result is the tool's result (completed) or error message (failed).
	Result string `json:"result,omitempty"`
}

type emitterKey struct{}

// emitter carries a streaming turn's chunks from nodes to the iterator.
// It is one of two kinds: a channel to SendStreaming's iterator, or a
// handler called in place (SendFunc).
type emitter struct {
	ch   chan Chunk
	done <-chan struct{}

	// The handler kind: fn is called under mu, until it returns false or
	// the turn returned (stopped).
	mu      sync.Mutex
	fn      func(Chunk) bool
	cancel  context.CancelFunc
	stopped bool

	// whole is set by WithWholeText: text comes whole, not streamed.
	whole atomic.Bool
}

// handle hands c to the emitter's handler.
func (e *emitter) handle(ctx context.Context, c Chunk) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || ctx.Err() != nil {
		return false
	}
	if !e.fn(c) {
		e.stopped = true
		e.cancel()
		return false
	}
	return true
}

// stop ends the handler's calls: a chunk emitted after the turn returned
// (by a goroutine a node left behind) is dropped.
func (e *emitter) stop() {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
}

// Emit sends a chunk to the turn's stream, if the turn is being streamed
// (SendStreaming, SendFunc); it reports whether a stream took the chunk.
// Nodes call it without knowing the transport; on a plain Send it does
// nothing and costs one context lookup. Emit blocks while the consumer
// is slow (under SendFunc, it runs the consumer's handler), and gives up
// when the consumer stops or the turn's context ends.
func Emit(ctx context.Context, c Chunk) bool {
	e, ok := ctx.Value(emitterKey{}).(*emitter)
	if !ok {
		return false
	}
	if c.Node == "" {
		if name, step, ok := graph.CurrentStep(ctx); ok {
			c.Node, c.Step = name, step
		}
	}
	if e.fn != nil {
		return e.handle(ctx, c)
	}
	select {
	case e.ch <- c:
		return true
	case <-e.done:
		return false
	case <-ctx.Done():
		return false
	}
}

// EmitText streams a piece of assistant text.
func EmitText(ctx context.Context, text string) bool {
	return Emit(ctx, Chunk{Kind: ChunkText, Text: text})
}

// EmitTool streams tool-call progress.
func EmitTool(ctx context.Context, p ToolProgress) bool {
	return Emit(ctx, Chunk{Kind: ChunkTool, Tool: &p})
}

// EmitEvent reports a runtime event for the turn's run record, if the
// turn is being streamed (the server streams every turn).
func EmitEvent(ctx context.Context, e Event) bool {
	return Emit(ctx, Chunk{Kind: ChunkEvent, Event: &e})
}

// Streaming reports whether the turn running in ctx is being streamed,
// so a node can choose a streaming model call.
func Streaming(ctx context.Context) bool {
	_, ok := ctx.Value(emitterKey{}).(*emitter)
	return ok
}

// wholeText makes the streamed turn running in ctx, if any, want its
// text whole (WithWholeText, Signal.WholeText).
func wholeText(ctx context.Context) {
	if e, ok := ctx.Value(emitterKey{}).(*emitter); ok {
		e.whole.Store(true)
	}
}

// StreamingText reports whether the turn running in ctx wants assistant
// text as the model produces it: it is streamed (Streaming) and its Send
// did not ask for whole text (WithWholeText). A node that calls a model
// streams the call when it does; when the turn is streamed but not its
// text, the node calls the model without streaming and emits each
// reply's text in one chunk.
func StreamingText(ctx context.Context) bool {
	e, ok := ctx.Value(emitterKey{}).(*emitter)
	return ok && !e.whole.Load()
}

// SendStreaming runs a turn like Send and yields its chunks as nodes emit
// them (Emit, EmitText, EmitTool), ending with a ChunkOutcome chunk that
// carries the same Outcome Send returns (and its error). Stopping the
// iteration early cancels the turn, which then ends as Send would under
// a cancelled context.
func (c *Harness) SendStreaming(ctx context.Context, sessionID string, msg llm.Message, opts ...SendOption) iter.Seq2[Chunk, error] {
	return stream(ctx, func(ctx context.Context) (Outcome, error) { return c.Send(ctx, sessionID, msg, opts...) })
}

// SignalStreaming resumes a suspended turn like Signal and yields the
// resumed turn's chunks, ending with its outcome (which also goes to the
// session's listeners, as with Signal).
func (c *Harness) SignalStreaming(ctx context.Context, sig Signal, opts ...graph.InvokeOption) iter.Seq2[Chunk, error] {
	return stream(ctx, func(ctx context.Context) (Outcome, error) { return c.Signal(ctx, sig, opts...) })
}

// SendFunc runs a turn like SendStreaming, handing each chunk to fn in
// place of an iterator: fn runs on the goroutine of the node that
// emitted the chunk, one call at a time (calls from concurrent nodes are
// serialized, and each happens before SendFunc returns), and no chunk
// crosses to another goroutine. fn returning false stops the turn as
// breaking out of SendStreaming's loop does: the turn is cancelled and
// the chunks emitted after that are dropped. SendFunc returns the
// outcome SendStreaming's last chunk carries; fn never sees an outcome
// chunk. fn should not block for long: the node that emitted the chunk
// waits for it.
func (c *Harness) SendFunc(ctx context.Context, sessionID string, msg llm.Message, fn func(Chunk) bool, opts ...SendOption) (Outcome, error) {
	return streamFunc(ctx, fn, func(ctx context.Context) (Outcome, error) { return c.Send(ctx, sessionID, msg, opts...) })
}

// SignalFunc resumes a suspended turn like SignalStreaming, handing the
// resumed turn's chunks to fn as SendFunc does.
func (c *Harness) SignalFunc(ctx context.Context, sig Signal, fn func(Chunk) bool, opts ...graph.InvokeOption) (Outcome, error) {
	return streamFunc(ctx, fn, func(ctx context.Context) (Outcome, error) { return c.Signal(ctx, sig, opts...) })
}

// streamFunc runs turn with a handler emitter in its context.
func streamFunc(ctx context.Context, fn func(Chunk) bool, turn func(context.Context) (Outcome, error)) (Outcome, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e := &emitter{fn: fn, cancel: cancel}
	out, err := turn(context.WithValue(ctx, emitterKey{}, e))
	e.stop()
	return out, err
}

// stream runs turn in its own goroutine with an emitter in its context
// and yields the emitted chunks, then the outcome.
func stream(ctx context.Context, turn func(context.Context) (Outcome, error)) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		e := &emitter{ch: make(chan Chunk, 16), done: done}
		type result struct {
			out Outcome
			err error
		}
		res := make(chan result, 1)
		go func() {
			out, err := turn(context.WithValue(ctx, emitterKey{}, e))
			res <- result{out, err}
		}()
		stop := func() {
			close(done)
			cancel()
			<-res // the turn's goroutine has an owner that waits for it
		}
		for {
			select {
			case ch := <-e.ch:
				if !yield(ch, nil) {
					stop()
					return
				}
			case r := <-res:
				// Chunks emitted before the turn returned come first.
				for {
					select {
					case ch := <-e.ch:
						if !yield(ch, nil) {
							close(done)
							return
						}
						continue
					default:
					}
					break
				}
				close(done)
				yield(Chunk{Kind: ChunkOutcome, Outcome: r.out}, r.err)
				return
			}
		}
	}
}
