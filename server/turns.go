package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/jsonstr"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/session"
)

type correlationKey struct{}

// withCorrelation attaches the caller's correlation id to ctx; turns
// record it on their run.
func withCorrelation(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, correlationKey{}, id)
}

func correlationOf(ctx context.Context) string {
	id, _ := ctx.Value(correlationKey{}).(string)
	return id
}

type conversationKey struct{}

// withConversation attaches the caller's conversation id (OpenHarness
// context.conversation_id) to ctx; turns record it on their run.
func withConversation(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, conversationKey{}, id)
}

func conversationOf(ctx context.Context) string {
	id, _ := ctx.Value(conversationKey{}).(string)
	return id
}

// turnHooksKey carries a route's turnHooks.
type turnHooksKey struct{}

// turnHooks are a route's hooks into the turn it runs (send, sendStream,
// signal).
type turnHooks struct {
	// started, when set, is called with the run's id once the run is
	// begun, before the turn runs, on the caller's goroutine.
	started func(runID string)
	// handoff, when set, joins the run's agent.handoff event (a resumed
	// run then records one too): what the route needs to read back about
	// the run later.
	handoff map[string]any
	// refusedBySignal and refusedByMessage, when set, refuse a message's
	// turn when the session recorded a signal under that request id,
	// and a signal when it recorded a message under that message id
	// (chat.WithRefusedBySignal, chat.Signal.RefusedByMessage): one
	// Idempotency-Key names one request, a message or a decision.
	refusedBySignal, refusedByMessage string
	// requestAlias, when set, records a signal's turn under this request
	// id too (chat.Signal.RequestAlias): the request's own id when the
	// signal's request id names what resumes (an OpenHarness
	// continuation's token).
	requestAlias string
}

// recordHandoff records the agent.handoff event of a turn of a:
// {"adapter", "modelRef", "tools"} and the hooks' fields. Without hooks'
// fields it is the agent's payload New encoded once.
func (s *Server) recordHandoff(ctx context.Context, turn *runtime.Turn, h turnHooks, a *Agent) {
	payload := s.factsOf(a).handoff
	if payload == nil || len(h.handoff) > 0 {
		data := map[string]any{"adapter": a.backend(), "modelRef": a.Model, "tools": a.Tools}
		maps.Copy(data, h.handoff)
		_ = turn.Adapter(ctx, runtime.PhaseHandoff, data)
		return
	}
	// Every turn of the agent records the same handoff: encoded once.
	_ = turn.EmitJSON(ctx, runtime.EventAdapterEvent, payload)
}

// withTurnHooks attaches h to ctx.
func withTurnHooks(ctx context.Context, h *turnHooks) context.Context {
	return context.WithValue(ctx, turnHooksKey{}, h)
}

// hooksOf returns ctx's turnHooks (the zero hooks when none).
func hooksOf(ctx context.Context) turnHooks {
	if h, ok := ctx.Value(turnHooksKey{}).(*turnHooks); ok {
		return *h
	}
	return turnHooks{}
}

// RunRecordKeyPrefix prefixes the record key under which the chat
// harness records the outcome of every turn the server records as a run,
// in the same transaction as the turn's session write
// (chat.WithRecordKey, chat.Signal.RecordKey): the key is the prefix
// followed by the run id. [Server.RecoverRuns] reads it back to tell
// whether the turn of a run left started by a crash committed. It is
// stored with the sessions and must not change.
const RunRecordKeyPrefix = "run:"

// runRecordKey is the record key of a run's turn.
func runRecordKey(runID string) string { return RunRecordKeyPrefix + runID }

const (
	// ackFlushWait bounds how long a turn's answer waits for its run
	// record to be durable (Turn.Flush).
	ackFlushWait = 30 * time.Second
)

// sendStream runs one turn for the API and records it as a run:
// detached from the client's connection (a turn the client stops
// waiting for still completes and is stored), cancellable through POST
// /v1/runs/{id}/cancel, counted for graceful shutdown and metrics. It
// hands every chunk to onChunk (nil: none) as the turn streams. It also
// returns the id of the turn's run ("" when none was recorded, or for a
// retransmission answered from the record, which ran nothing): the
// turn's invocation id too, so that one id names the turn on every
// surface.
//
// Every turn streams internally, whether or not a client streams it, so
// that its node, tool and text events are recorded as they happen, in
// the order they happened (see turnEvents). The turn runs once its run's
// start is in the store, with the run's record key
// (RunRecordKeyPrefix + run id) recorded atomically with its session
// write, and sendStream returns only once the run's record, with its
// final status, is in the store (Turn.Flush): whatever the server
// answers from the outcome is then backed by a run record even if the
// process dies right after, and a turn that committed without an answer
// is reconciled by RecoverRuns.
func (s *Server) sendStream(ctx context.Context, tenant string, a *Agent, id string, msg llm.Message, messageID string, onChunk func(chat.Chunk), opts ...chat.SendOption) (chat.Outcome, string) {
	s.inflight.Add(1)
	defer s.inflight.Done()
	start := time.Now()
	key := storeKey(tenant, id)
	if messageID != "" {
		// A retransmission answers the recorded outcome and opens no run:
		// the turn ran once, under its first run. (A retransmission racing
		// its original is caught by Send itself, under the session lock.)
		out, err := a.Chat.ReplayMessage(ctx, key, messageID, msg)
		switch {
		case err == nil:
			return out, ""
		case errors.Is(err, chat.ErrMessageIDReused):
			// The id names another message: refused, nothing runs.
			return a.Chat.ErroredOutcome(chat.Turn{SessionID: key}, err), ""
		}
		opts = append(opts, chat.WithMessageID(messageID))
	}
	turn, tctx, err := s.runs.Begin(context.WithoutCancel(ctx), runtime.BeginRequest{Tenant: tenant, SessionID: id, AgentID: a.ID,
		CorrelationID: correlationOf(ctx), ConversationID: conversationOf(ctx), Adapter: a.backend(), MessageID: messageID})
	if err != nil {
		s.log.WarnContext(ctx, "server: recording a run failed", "error", err)
		out, _ := a.Chat.SendFunc(context.WithoutCancel(ctx), key, msg, handOn(onChunk), append(opts, s.lockWait)...)
		s.metrics.turn(outcomeName(out), time.Since(start))
		return out, ""
	}
	s.startDurable(ctx, turn)
	hooks := hooksOf(ctx)
	if hooks.started != nil {
		hooks.started(turn.ID())
	}
	hctx := tctx
	tctx = s.turnContext(ctx, tctx, tenant, id, turn, a)
	te := s.newTurnEvents(turn, a)
	// The run's id is the turn's invocation id: GET /v1/runs/{id} answers
	// for the invocation_id every surface reports.
	opts = append(make([]chat.SendOption, 0, len(opts)+7), opts...) // room for the options below, in one allocation
	// The turn settles under the session's lock: a delete of the session,
	// which takes the lock next, purges this run with the conversation.
	opts = append(opts, s.lockWait, chat.WithOnRelease(turn.Settle), chat.WithOnLocked(func() {
		// The agent takes over once the turn holds the session: a turn
		// that waited behind another and was cancelled, or gave up,
		// records no handoff to an agent that never ran. Its start is
		// recorded now too: PROTOCOLS.md's "turn accepted (validated,
		// session lock held)".
		_ = turn.Accept(hctx)
		s.recordHandoff(hctx, turn, hooks, a)
		s.workflowStarted(hctx, turn, a)
	}))
	if ctx.Done() != nil {
		// The turn runs detached from the client, but stops waiting for
		// its session (a long turn, a stalled replica holding its lock)
		// when the client is gone: it has run nothing then.
		opts = append(opts, chat.WithWaitContext(ctx))
	}
	if onChunk == nil && !turn.Watched() && s.cfg.WatchRelay == nil {
		// Nobody shows the text live: the model is called without
		// streaming and its text recorded whole (one agent.output.delta
		// either way, see flushText). With a WatchRelay, a watch on
		// another server may be announced a moment after the turn
		// began: the model streams, and the text goes live with it.
		opts = append(opts, chat.WithWholeText())
	}
	invOpts := append(te.options(), graph.WithInvocationID(turn.ID()))
	opts = append(opts, chat.WithRecordKey(runRecordKey(turn.ID())), chat.WithInvokeOptions(invOpts...))
	if hooks.refusedBySignal != "" {
		opts = append(opts, chat.WithRefusedBySignal(hooks.refusedBySignal))
	}
	out, _ := a.Chat.SendFunc(tctx, key, msg, te.handler(tctx, onChunk), opts...)
	out = cancelledAs(tctx, te.finished(tctx, out))
	if out.Info().Replayed {
		// A retransmission that raced its original (on this server or
		// another: Send caught it under the session's lock): the turn
		// ran once, under the original's run, and the caller gets that
		// run's id. This run ran nothing; it ends naming the original.
		s.finishReplay(ctx, tctx, turn, runIDOf(out, ""))
		s.metrics.turn(outcomeName(out), time.Since(start))
		return out, ""
	}
	s.finish(ctx, tctx, turn, out, te)
	if inv := out.Info().SupersededInvocations; len(inv) > 0 {
		s.endSuperseded(ctx, tenant, a, inv)
	}
	s.metrics.turn(outcomeName(out), time.Since(start))
	return out, turn.ID()
}

// cancelledAs reports a turn the server cancelled (a cancel request, or
// a shutdown out of grace) as what it is: an errored turn whatever the
// node that was running made of its cancelled context (a model call
// returns context.Canceled, which the engine reports as node_exception)
// is invocation_cancelled, retryable.
//
// The outcome's error wraps the cancel's cause, so that the surfaces can
// tell a cancel request (runtime.ErrCancelled alone: the OpenAI
// endpoints tell the SDKs not to send the request again) from a
// shutdown (runtime.ErrShutdown: another server, or this one restarted,
// may run it).
func cancelledAs(tctx context.Context, out chat.Outcome) chat.Outcome {
	o, ok := out.(*chat.Errored)
	cause := context.Cause(tctx)
	if !ok || !errors.Is(cause, runtime.ErrCancelled) || (o.Category == errcat.InvocationCancelled && errors.Is(o.Err, cause)) {
		return out
	}
	c := *o
	c.Category, c.Bucket = errcat.InvocationCancelled, harness.BucketOf(errcat.InvocationCancelled)
	why := o.Err
	switch {
	case o.Err == nil:
		why = cause
	case !errors.Is(o.Err, cause):
		why = fmt.Errorf("%w: %w", cause, o.Err)
	}
	c.Err = errcat.Wrap(errcat.InvocationCancelled, "the turn was cancelled (a cancel request or the server's shutdown)", why)
	return &c
}

// handOn is the chunk handler of a turn that records nothing: it hands
// every chunk to onChunk (when set).
func handOn(onChunk func(chat.Chunk)) func(chat.Chunk) bool {
	return func(c chat.Chunk) bool {
		if onChunk != nil {
			onChunk(c)
		}
		return true
	}
}

// recordTool records a tool chunk's progress: agent.tool.start when the
// tool runs, agent.tool.result when it ended (requested calls are not
// events: the model's node completion covers them).
func recordTool(ctx context.Context, turn *runtime.Turn, t *chat.ToolProgress) {
	if t == nil {
		return
	}
	switch t.Status {
	case chat.ToolRunning:
		if len(t.Arguments) > 0 {
			_ = turn.AdapterFields(ctx, runtime.PhaseToolStart, runtime.TextField("toolId", t.CallID), runtime.TextField("name", t.Name),
				runtime.JSONField("args", json.RawMessage(t.Arguments)))
		} else {
			_ = turn.AdapterFields(ctx, runtime.PhaseToolStart, runtime.TextField("toolId", t.CallID), runtime.TextField("name", t.Name))
		}
	case chat.ToolCompleted:
		_ = turn.AdapterFields(ctx, runtime.PhaseToolResult, runtime.TextField("toolId", t.CallID), runtime.TextField("name", t.Name),
			runtime.TextField("output", t.Result))
	case chat.ToolFailed:
		_ = turn.AdapterFields(ctx, runtime.PhaseToolResult, runtime.TextField("toolId", t.CallID), runtime.TextField("name", t.Name),
			runtime.TextField("error", t.Result))
	}
}

// runEnding is how a run ends for a committed outcome: what Turn.Complete
// or Turn.Suspend records, and what RecoverRuns records for a run whose
// turn committed before a crash.
func runEnding(out chat.Outcome) (runtime.Resolution, bool) {
	switch o := out.(type) {
	case *chat.Completed:
		output := map[string]any{"replies": o.Replies}
		if u := modelUsage(out); u != nil {
			output["usage"], output["finish_reason"] = u, o.FinishReason
		}
		return runtime.Resolution{Status: runtime.StatusCompleted, Output: output}, true
	case *chat.Suspended:
		var output any
		if u := modelUsage(out); u != nil {
			// The model calls before the suspension: billed as any.
			output = map[string]any{"usage": u, "finish_reason": o.FinishReason}
		}
		return runtime.Resolution{Status: runtime.StatusSuspended, InvocationID: o.InvocationID, Output: output,
			Signal:   map[string]any{"signal_id": o.Descriptor.SignalID, "metadata": o.Descriptor.Metadata},
			Approval: map[string]any{"signal_id": o.Descriptor.SignalID, "pending_messages": o.PendingMessages}}, true
	}
	return runtime.Resolution{}, false
}

// completedJSON is a completed turn's run output as json.Marshal
// encodes runEnding's map ({"finish_reason", "replies", "usage"}, keys
// sorted, the first and last only when the turn called a model) with
// tools' report merged in (toolReport.mergeInto: "failed_tools", first,
// once a tool answered), written by hand: every served turn records one.
func completedJSON(o *chat.Completed, tools *toolReport) (json.RawMessage, error) {
	b := make([]byte, 0, 256)
	b = append(b, '{')
	if tools != nil && tools.ran {
		b = jsonstr.AppendStrings(append(b, `"failed_tools":`...), tools.failed)
		b = append(b, ',')
	}
	t := o.Info()
	if t.ModelCalls > 0 {
		b = append(b, `"finish_reason":`...)
		b = llm.AppendJSONString(b, string(o.FinishReason))
		b = append(b, `,"replies":`...)
	} else {
		b = append(b, `"replies":`...)
	}
	b, err := llm.AppendMessagesJSON(b, o.Replies)
	if err != nil {
		return nil, err
	}
	if t.ModelCalls == 0 {
		return append(b, '}'), nil
	}
	b = append(b, `,"usage":{`...)
	sep := false
	for _, c := range [...]struct {
		key string
		n   *int
	}{{"cache_creation_tokens", t.Usage.CacheCreationTokens}, {"cached_tokens", t.Usage.CachedTokens},
		{"completion_tokens", t.Usage.CompletionTokens}, {"model_calls", &t.ModelCalls},
		{"prompt_tokens", t.Usage.PromptTokens}, {"total_tokens", t.Usage.TotalTokens}} {
		if c.n == nil {
			continue
		}
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = strconv.AppendInt(append(append(append(b, '"'), c.key...), `":`...), int64(*c.n), 10)
	}
	return append(b, "}}"...), nil
}

// toolReport is what a turn's run output says of its tools, once one of
// them answered (ran): the ids of the calls whose tool failed, in
// "failed_tools" (none: an empty list). A client tells a failed call's
// result from a successful one by it (a tool message does not say),
// without reading the run's events; a run whose output has no
// "failed_tools" (one that ran no tool, recorded by an earlier build, or
// recovered after a crash) tells nothing, and its events do.
type toolReport struct {
	ran    bool
	failed []string
}

// answered notes that the tool of call id answered, failed or not.
func (r *toolReport) answered(id string, failed bool) {
	r.ran = true
	if failed && !slices.Contains(r.failed, id) {
		r.failed = append(r.failed, id)
	}
}

// mergeInto adds the report to m, a run's output, unless m has its own
// "failed_tools".
func (r *toolReport) mergeInto(m map[string]any) {
	if !r.ran {
		return
	}
	if _, taken := m["failed_tools"]; !taken {
		m["failed_tools"] = append(make([]string, 0, len(r.failed)), r.failed...)
	}
}

// modelUsage is the turn's model usage as the run record, OpenHarness
// extension and inspector show it: the counters the model calls reported
// (nil when the turn made no model call).
func modelUsage(out chat.Outcome) map[string]int {
	t := out.Info()
	if t.ModelCalls == 0 {
		return nil
	}
	u := map[string]int{"model_calls": t.ModelCalls}
	for k, p := range map[string]*int{"prompt_tokens": t.Usage.PromptTokens, "completion_tokens": t.Usage.CompletionTokens,
		"total_tokens": t.Usage.TotalTokens, "cached_tokens": t.Usage.CachedTokens, "cache_creation_tokens": t.Usage.CacheCreationTokens} {
		if p != nil {
			u[k] = *p
		}
	}
	return u
}

// startDurable waits until the run's start is in the store, before the
// turn runs: a turn that commits then always has its run record, which
// RecoverRuns ends as the turn did if the process dies before the run's
// end is written. It costs about one group commit (shared with the
// other turns starting or ending meanwhile).
//
// Over a store that keeps nothing across a restart (runtime.Volatile)
// there is nothing to wait for: readers of the recorder's store see the
// records anyway.
func (s *Server) startDurable(ctx context.Context, turn *runtime.Turn) {
	s.awaitDurable(ctx, turn, "a run's start")
}

// awaitDurable waits, detached from ctx's cancellation and for at most
// ackFlushWait, until the records turn handed over are in the run store
// (Turn.Flush), logging a failed wait as what is not durable. Over a
// volatile store it returns at once (see startDurable).
func (s *Server) awaitDurable(ctx context.Context, turn *runtime.Turn, what string) {
	if !s.runs.Durable() {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackFlushWait)
	defer cancel()
	if err := turn.Flush(fctx); err != nil {
		s.log.WarnContext(ctx, "server: "+what+" is not durable", "run_id", turn.ID(), "error", err)
	}
}

// turnContext is the context a turn runs under: tctx carrying the
// turn's identity for adapters (adapter.WithRequestInfo); it also
// records the workflow's start when the agent runs a graph workflow.
func (s *Server) turnContext(ctx, tctx context.Context, tenant, id string, turn *runtime.Turn, a *Agent) context.Context {
	var md map[string]any
	if c := correlationOf(ctx); c != "" {
		md = map[string]any{"correlationId": c}
	}
	if c := conversationOf(ctx); c != "" {
		if md == nil {
			md = map[string]any{}
		}
		md["conversationId"] = c
	}
	return adapter.WithRequestInfo(tctx, adapter.RequestInfo{RequestID: turn.ID(), Tenant: tenant, SessionID: id, Metadata: md})
}

// workflowStarted records runtime.workflow.started for an agent that
// runs a graph workflow.
func (s *Server) workflowStarted(tctx context.Context, turn *runtime.Turn, a *Agent) {
	if a.Workflow != "" {
		_ = turn.EmitJSON(tctx, runtime.EventWorkflowStarted, s.factsOf(a).workflow)
	}
}

// finish ends the run with the turn's outcome, then waits until the
// run's record is durable, so that the caller may answer. te, when set,
// holds what the turn's nodes added to its output (artifacts, metadata).
func (s *Server) finish(ctx, tctx context.Context, turn *runtime.Turn, out chat.Outcome, te *turnEvents) {
	var err error
	if c, ok := out.(*chat.Completed); ok {
		if te != nil {
			if te.a.Workflow != "" {
				_ = turn.EmitJSON(tctx, runtime.EventWorkflowCompleted, s.factsOf(te.a).workflow)
			}
			if te.narration != nil { // before the sources are built
				// From the agent's events that made the answer (its
				// output, its nodes' completion), recorded before: the
				// narrator only consumes events, and the run's own end
				// comes after anything it records.
				te.narrate(tctx, narrationAnswer, runtime.EventAdapterEvent)
			}
		}
		err = complete(tctx, turn, c, te)
	} else if end, ok := runEnding(out); ok {
		err = turn.SuspendOutput(tctx, end.InvocationID, end.Signal, end.Approval, te.suspendedOutput(end.Output))
	} else if o, isErr := out.(*chat.Errored); isErr {
		if errors.Is(o.Err, chat.ErrSessionBusy) {
			err = turn.CancelledFor(tctx, runtime.CauseSessionBusy, "cancelled before it started: another turn held the session for longer than the server's session wait")
		} else if errors.Is(o.Err, errcat.InvocationCancelled) || errors.Is(context.Cause(tctx), runtime.ErrCancelled) {
			err = turn.CancelledFor(tctx, runtime.CauseRequested, "cancelled")
		} else {
			err = turn.Fail(tctx, runtime.RunError{Bucket: string(o.Bucket), Category: string(o.Category), Message: o.Reply.Text()})
		}
	} else {
		err = turn.Fail(tctx, runtime.RunError{Bucket: string(harness.RetryableTransient), Message: "the turn ended without an outcome"})
	}
	if err != nil && !errors.Is(err, runtime.ErrTurnEnded) {
		err = s.endUnencodable(ctx, tctx, turn, out, te, err)
	}
	if err != nil {
		s.log.WarnContext(ctx, "server: recording a run's end failed", "run_id", turn.ID(), "error", err)
	}
	s.awaitDurable(ctx, turn, "a run's record")
}

// endUnencodable ends the run of a turn whose ending finish could not
// record (cause): its output, signal or approval did not encode as JSON
// (a NaN or an infinity in an artifact's or the output's metadata, a
// value json.Marshal refuses), or a completed turn's replies are not
// valid messages. Left started, the run would stay in the recorder's
// live set for good, a cancel of it doing nothing and its session's
// delete waiting for it, while its caller was answered. So the run
// ends as the turn did, without what does not encode: a completed turn
// with its replies and usage and the output keys and artifacts that do
// encode, a suspended one with its usage and what encodes of the rest,
// on a signal and approval naming the signal alone if its descriptor's
// metadata or pending messages do not encode. Only when even that cannot
// be recorded (replies that are not messages, an invocation id the run
// store refuses) does the run end failed, with the category saying what
// could not be recorded.
//
// A cause that is no encoding error (the store failed to write the
// ending) ended the turn already: the first attempt then reports
// runtime.ErrTurnEnded, and cause is returned.
func (s *Server) endUnencodable(ctx, tctx context.Context, turn *runtime.Turn, out chat.Outcome, te *turnEvents, cause error) error {
	var result error
	// ended reports whether an attempt e ended the turn, or found it
	// ended, setting result: only an encoding error
	// (runtime.ErrInvalidRequest) leaves the turn going.
	ended := func(e error) bool {
		switch {
		case e == nil:
			result = nil
			s.log.WarnContext(ctx, "server: a run's ending did not encode: it was recorded without what did not",
				"run_id", turn.ID(), "error", cause)
		case errors.Is(e, runtime.ErrTurnEnded):
			result = cause // the ending's write failed after the turn ended
		case errors.Is(e, runtime.ErrInvalidRequest):
			return false
		default:
			result = e // ended, its write failed
		}
		return true
	}
	cat, why := errcat.Category(""), "the turn's ending could not be recorded"
	switch o := out.(type) {
	case *chat.Completed:
		cat, why = errcat.ChatMessageShapeInvalid, "the turn completed, but its replies cannot be recorded"
		raw, err := completedJSON(o, te.toolReport())
		if err != nil {
			break // the replies are not messages: no completion can be recorded
		}
		if extras := te.encodableOutput(); len(extras) > 0 {
			end, _ := runEnding(o)
			if ended(turn.Complete(tctx, mergeOutput(end.Output.(map[string]any), extras))) {
				return result
			}
		}
		if ended(turn.CompleteJSON(tctx, raw)) {
			return result
		}
	case *chat.Suspended:
		cat, why = errcat.SuspensionRecordInvalid, "the turn suspended, but its suspension cannot be recorded"
		end, _ := runEnding(o)
		output := end.Output
		if extras := te.encodableOutput(); len(extras) > 0 {
			m, _ := output.(map[string]any)
			if m == nil {
				m = make(map[string]any, len(extras))
			}
			output = mergeOutput(m, extras)
		}
		if ended(turn.SuspendOutput(tctx, end.InvocationID, end.Signal, end.Approval, output)) {
			return result
		}
		// The descriptor's metadata or the pending messages do not
		// encode: the signal id alone still resumes the turn.
		only := map[string]any{"signal_id": o.Descriptor.SignalID}
		if ended(turn.SuspendOutput(tctx, end.InvocationID, only, only, output)) {
			return result
		}
	}
	// The last resort, which always encodes: the run ends failed (a turn
	// ended already, as an errored turn's always is, reports
	// ErrTurnEnded).
	err := turn.Fail(tctx, runtime.RunError{Bucket: string(harness.BucketOf(cat)), Category: string(cat), Message: why + ": " + cause.Error()})
	if errors.Is(err, runtime.ErrTurnEnded) {
		return cause
	}
	s.log.WarnContext(ctx, "server: a run's ending could not be recorded: the run ended failed", "run_id", turn.ID(), "error", cause)
	return err
}

// mergeOutput adds extras' keys to m, m's own keys winning, and returns m.
func mergeOutput(m, extras map[string]any) map[string]any {
	for k, v := range extras {
		if _, taken := m[k]; !taken {
			m[k] = v
		}
	}
	return m
}

// finishReplay ends the run a retransmission opened before Send found
// that its original had answered meanwhile: completed, with an output
// naming the original's run ("replay_of") rather than a copy of its
// replies.
func (s *Server) finishReplay(ctx, tctx context.Context, turn *runtime.Turn, original string) {
	if err := turn.Complete(tctx, map[string]any{"replay_of": original}); err != nil {
		s.log.WarnContext(ctx, "server: recording a run's end failed", "run_id", turn.ID(), "error", err)
	}
	s.awaitDurable(ctx, turn, "a run's record")
}

// complete ends the run of a completed turn with its output: written by
// hand (completedJSON), or, when the turn's nodes added to the output
// (te.output: an adapter's artifacts and metadata; te.artifacts),
// runEnding's map with their keys merged in (turnEvents.mergeInto).
func complete(tctx context.Context, turn *runtime.Turn, c *chat.Completed, te *turnEvents) error {
	if !te.addsOutput() {
		raw, err := completedJSON(c, te.toolReport())
		if err != nil {
			return err
		}
		return turn.CompleteJSON(tctx, raw)
	}
	end, _ := runEnding(c)
	return turn.Complete(tctx, te.mergeInto(end.Output.(map[string]any)))
}

// resumedSomething reports whether a resume that errored with category
// cat resumed its turn (and so used up the suspension): every surface
// asks it before it answers a failed resume as final.
func resumedSomething(cat errcat.Category) bool {
	switch cat {
	case errcat.HarnessSignalCorrelationFailed, errcat.SuspensionResumePayloadInvalid,
		errcat.SuspensionRecordInvalid, errcat.InvocationCancelled,
		errcat.MessageIDReused: // refused for its request id
		return false
	}
	return true
}

// resumedAnything reports whether the errored outcome of a resume used
// up its suspension, so that the same decision sent again is refused:
// the resume took the suspension up (turnEvents.tookUp).
func resumedAnything(o *chat.Errored) bool {
	return errors.Is(o.Err, errTookUpSuspension)
}

// resumeTookUp reports whether the run runID, a resume, took its
// suspension up: it recorded runtime.approval.resolved, which a resume
// records, right after its start, only once it ran. false when its
// events cannot be read.
func (s *Server) resumeTookUp(ctx context.Context, tenant, runID string) bool {
	evs, err := s.runs.Store().Events(ctx, runtime.EventsRequest{Tenant: tenant, RunID: runID, Limit: 8})
	if err != nil {
		return false
	}
	for _, ev := range evs {
		if ev.Type == runtime.EventApprovalResolved {
			return true
		}
	}
	return false
}

// errTookUpSuspension is in the error of the errored outcome of a resume
// that took its suspension up (it ran: the resumed invocation's nodes
// started, an approved call may have run) before it failed or was
// cancelled (see turnEvents.tookUp).
var errTookUpSuspension = errors.New("server: the resume had taken its suspension up")

// signal resumes a suspended turn of the tenant's session and records
// it as a new run whose parent is the suspended run. It also returns the
// new run's id ("" when no run was recorded: a refused or replayed
// signal).
//
// A signal that names no agent (named false) resumes the turn of the
// agent that suspended it (signalOwner); one that names an agent
// resumes only that agent's turn.
func (s *Server) signal(ctx context.Context, tenant string, a *Agent, named bool, id string, sig chat.Signal) (chat.Outcome, string) {
	s.inflight.Add(1)
	defer s.inflight.Done()
	start := time.Now()
	if !named {
		a = s.signalOwner(ctx, tenant, a, id, sig)
	}
	key := storeKey(tenant, id)
	if nestedDeeper(sig.Payload, maxPayloadDepth) {
		// Recorded in the run's events (runtime.approval.resolved) a few
		// levels down, a payload near the body's bound would be served
		// back deeper than JSON decoders take (encoding/json: 10000).
		return refusedSignal(a, key, "", errcat.Wrap(errcat.SuspensionResumePayloadInvalid,
			fmt.Sprintf("the payload nests objects and arrays more than %d levels deep", maxPayloadDepth), nil)), ""
	}
	lockWait := s.cfg.SessionWait
	if sig.RequestID != "" {
		// A copy of a signal under way here waits for it, then answers
		// its recorded outcome below, opening no run of its own. Its
		// wait counts against SessionWait with the wait for the session
		// that follows: copies sent while the session is held each fail
		// within the bound, not one bound after another.
		fctx := ctx
		if lockWait > 0 {
			var cancel context.CancelFunc
			fctx, cancel = context.WithTimeoutCause(ctx, lockWait, chat.ErrSessionBusy)
			defer cancel()
		}
		done, err := s.resuming.enter(fctx, key+"\x00"+sig.RequestID)
		if err != nil {
			return refusedSignal(a, key, "", err), ""
		}
		defer done()
		if d, ok := fctx.Deadline(); ok && lockWait > 0 {
			// What is left of the bound (a free session is taken at once,
			// however little).
			lockWait = max(time.Until(d), time.Nanosecond)
		}
	}
	var wait context.Context
	if ctx.Done() != nil {
		wait = ctx
	}
	sub, err := a.Chat.Resolve(ctx, chat.Signal{SignalID: sig.SignalID, InvocationID: sig.InvocationID, SessionID: key, Wait: wait, LockWait: lockWait})
	if err == nil && sub.SessionID != key {
		err = errors.New("another session's invocation")
	}
	if err != nil {
		if ctx.Err() != nil {
			return signalAbandoned(ctx, a, key), "" // the look-up failed for that: it says nothing of the signal
		}
		if session.Unavailable(err) {
			// The store could not be reached: the signal may well be
			// awaited, and a retry may resume it (retryable, not "nothing
			// awaits").
			return a.Chat.ErroredOutcome(chat.Turn{SessionID: key}, err), ""
		}
		if out := replayedSignal(ctx, a, key, sig); out != nil {
			return out, "" // the recorded answer: no turn ran
		}
		// Nothing of this session awaits the signal (the same answer
		// whether it exists elsewhere or not).
		out := notAwaited(ctx, a, key, sig.InvocationID, sig.SignalID, nil)
		return out, "" // refused: no turn ran, none is counted
	}
	// A payload the suspended node would refuse is refused now, before
	// a run opens: a refusal resumes nothing, so it is no run.
	if err := a.Chat.Harness().Graph().CheckResume(ctx, sub.InvocationID, graph.Update(sig.Payload)); err != nil {
		if ctx.Err() != nil {
			return signalAbandoned(ctx, a, key), ""
		}
		if session.Unavailable(err) {
			return a.Chat.ErroredOutcome(chat.Turn{SessionID: key}, errcat.Wrap(errcat.SessionStoreUnavailable,
				"server: checking the signal's payload: the store is unavailable", err)), ""
		}
		if errcat.Of(err) != errcat.SuspensionResumePayloadInvalid {
			// Gone since Resolve (resumed, superseded): as above, and a
			// copy whose original resumed the turn meanwhile (on another
			// replica) answers the original's recorded outcome.
			if errors.Is(err, checkpoint.ErrNotFound) {
				if out := replayedSignal(ctx, a, key, sig); out != nil {
					return out, ""
				}
			}
			return notAwaited(ctx, a, key, sub.InvocationID, sig.SignalID, err), ""
		}
		return refusedSignal(a, key, sub.InvocationID, err), ""
	}
	parent := s.suspendedRun(ctx, tenant, id, sub.InvocationID)
	resume := chat.Signal{InvocationID: sub.InvocationID, SessionID: key, Payload: sig.Payload, RequestID: sig.RequestID, LockWait: lockWait}
	turn, tctx, err := s.runs.Begin(context.WithoutCancel(ctx), runtime.BeginRequest{Tenant: tenant, SessionID: id, AgentID: a.ID,
		ParentID: parent, CorrelationID: correlationOf(ctx), ConversationID: conversationOf(ctx), Adapter: a.backend()})
	if err != nil {
		s.log.WarnContext(ctx, "server: recording a run failed", "error", err)
		out, _ := a.Chat.Signal(context.WithoutCancel(ctx), resume)
		s.metrics.turn(outcomeName(out), time.Since(start))
		return out, ""
	}
	s.startDurable(ctx, turn)
	hooks := hooksOf(ctx)
	if hooks.started != nil {
		hooks.started(turn.ID())
	}
	rctx := tctx
	tctx = s.turnContext(ctx, tctx, tenant, id, turn, a)
	te := s.newTurnEvents(turn, a)
	te.durableTools = s.runs.Durable()
	// The decision is recorded once the turn resumes (its first chunk,
	// or its end): a copy of the signal from another replica, which
	// finds the original resumed the turn once it holds the session,
	// resolved nothing and records no approval.resolved.
	te.prelude = func() {
		_ = turn.Resolved(rctx, map[string]any{"signal_id": sub.SignalID, "invocationId": sub.InvocationID}, sig.Payload)
		if hooks.handoff != nil {
			s.recordHandoff(rctx, turn, hooks, a)
		}
		s.workflowStarted(rctx, turn, a)
	}
	resume.RecordKey = runRecordKey(turn.ID())
	resume.OnRelease = turn.Settle                     // as for a Send (see sendStream)
	resume.OnLocked = func() { _ = turn.Accept(rctx) } // its start, as for a Send
	resume.RefusedByMessage, resume.RequestAlias = hooks.refusedByMessage, hooks.requestAlias
	if ctx.Done() != nil {
		resume.Wait = ctx // as for a Send (see sendStream)
	}
	// A resume is answered whole: unless somebody watches the session
	// live, its text is recorded whole (as a Send's, see sendStream).
	resume.WholeText = !turn.Watched() && s.cfg.WatchRelay == nil
	out, _ := a.Chat.SignalFunc(tctx, resume, te.handler(tctx, nil), te.resumeOptions()...)
	out = te.tookUp(cancelledAs(tctx, te.finished(tctx, out)))
	if out.Info().Replayed {
		// A retransmission that raced its original (the same request
		// id; the signal caught it under the session's lock): the turn
		// resumed once, under the original's run, and the caller gets
		// that run's id. This run resumed nothing; it ends naming the
		// original, as a racing message's does.
		s.finishReplay(ctx, tctx, turn, runIDOf(out, ""))
		s.metrics.turn(outcomeName(out), time.Since(start))
		return out, ""
	}
	if e, ok := out.(*chat.Errored); ok && e.Category == errcat.HarnessSignalCorrelationFailed && !errors.Is(e.Err, chat.ErrDecisionTookEffect) && !resumedNodeFailed(e) {
		// The turn was gone once the signal held the session, or its
		// paused record was ended under this resume (its session lost,
		// another signal taking the turn): say so when a decision took
		// effect, this one's included (its approved call ran).
		if o := notAwaited(ctx, a, key, sub.InvocationID, sig.SignalID, e.Err); tookEffect(o) {
			out = o
		}
	}
	nothing := resumedNothing(out)
	if nothing {
		// A decision about a suspension that is gone (perhaps deleted
		// with its session): the run is done with the session, whether
		// or not it took it (see runtime.Recorder.PurgeSession).
		turn.Settle()
	}
	s.finish(ctx, tctx, turn, out, te)
	if nothing {
		s.purgeOrphan(ctx, turn, true)
	}
	s.metrics.turn(outcomeName(out), time.Since(start))
	return out, turn.ID()
}

// purgeOrphan deletes the run of turn, which names a parent (a resume
// that resumed nothing, or the record of how a suspension ended), once
// its end is written, when its parent is gone: a delete of the session
// purged the conversation it belongs to while it waited for the session
// (a resume after a delete finds nothing to resume), or between the
// check that its parent existed and its start. Left, it would outlive
// the delete, naming a purged run.
//
// resolved says the turn was a resume of a suspension it resolved: one
// that names no parent found its suspended run purged already (a
// delete between the signal's look-up and its start), and is deleted
// when its conversation is gone: its session deleted, or begun again
// after the run started (a message that waited for the delete). With
// Config.KeepRunsOnDelete nothing is deleted.
func (s *Server) purgeOrphan(ctx context.Context, turn *runtime.Turn, resolved bool) {
	run := turn.Run()
	if s.cfg.KeepRunsOnDelete || (run.ParentID == "" && (!resolved || s.cfg.Sessions == nil)) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackFlushWait)
	defer cancel()
	if turn.Flush(ctx) != nil {
		return
	}
	if !s.conversationGone(ctx, run) {
		return
	}
	if _, err := s.runs.PurgeRuns(ctx, run.Tenant, run.SessionID, run.ID); err != nil && !errors.Is(err, runtime.ErrInvalidConfig) {
		s.log.WarnContext(ctx, "server: deleting the run of a deleted conversation failed", "run_id", run.ID, "error", err)
	}
}

// conversationGone reports whether the conversation run belongs to is
// gone: its parent run purged, or, for a run naming none, its session
// deleted, or begun again after the run started by another turn. A
// session created after the run started is the run's own when the run's
// turn committed to it: the first turn of a new session creates it, and
// the chat harness records the turn's outcome under the run's record key
// (RunRecordKeyPrefix + run id) in the same transaction; a delete drops
// those records with the session, so a session deleted and begun again
// by a later turn does not hold it. A failed read says no.
func (s *Server) conversationGone(ctx context.Context, run runtime.Run) bool {
	if run.ParentID != "" {
		_, err := s.runs.Store().Run(ctx, run.Tenant, run.ParentID)
		return errors.Is(err, runtime.ErrNotFound)
	}
	key := storeKey(run.Tenant, run.SessionID)
	created, err := s.sessionCreated(ctx, key)
	if err != nil {
		return errors.Is(err, session.ErrNotFound)
	}
	if !created.After(run.StartedAt) {
		return false
	}
	a := s.agents[run.AgentID]
	if a == nil {
		a = s.def // the records live in the shared session store
	}
	_, err = a.Chat.Recorded(ctx, key, runRecordKey(run.ID))
	return errors.Is(err, chat.ErrNotRecorded)
}

// sessionCreated returns when the session under the store key was
// created (session.ErrNotFound when there is none), reading as little
// of it as the store allows: a session deleted and begun again is
// another conversation, created later.
func (s *Server) sessionCreated(ctx context.Context, key string) (time.Time, error) {
	rec, err := s.cfg.Sessions.Load(ctx, session.LoadRequest{SessionID: key,
		Tail: []session.ListTail{{Field: chat.MessagesField, Max: 1}}})
	switch {
	case err != nil:
		return time.Time{}, err
	case rec == nil:
		return time.Time{}, session.ErrNotFound
	}
	return rec.CreatedAt, nil
}

// signalAbandoned is the outcome of a signal whose caller left (ctx
// ended) before it was resolved: invocation_cancelled, retryable,
// nothing resumed. Not "nothing awaits the signal": the look-up failed
// because ctx ended, and a surface that records its answers
// (OpenHarness) must not tell the caller's retry that the approval is
// gone.
func signalAbandoned(ctx context.Context, a *Agent, key string) chat.Outcome {
	return refusedSignal(a, key, "",
		errcat.Wrap(errcat.InvocationCancelled, "server: the signal's caller left before it was resolved; nothing was resumed", context.Cause(ctx)))
}

// maxPayloadDepth bounds how deep a signal's payload nests objects and
// arrays: a decision is a small object ({"approval": {"approved":
// true}}); the bound leaves room for any structured one.
const maxPayloadDepth = 64

// nestedDeeper reports whether v (decoded JSON) nests objects and arrays
// more than limit levels deep.
func nestedDeeper(v any, limit int) bool {
	if limit < 0 {
		return true
	}
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if nestedDeeper(e, limit-1) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if nestedDeeper(e, limit-1) {
				return true
			}
		}
	case graph.Update:
		return nestedDeeper(map[string]any(v), limit)
	}
	return false
}

// notAwaited is the errored outcome of a signal that finds no suspended
// turn of the session (key) awaiting it: harness_signal_correlation_failed
// (cause err), saying the decision was already given and took effect
// (chat.ErrDecisionTookEffect) when the signal is an approval's
// (agent.SignalPrefix + a call id), a resume consumed a decision on it
// and the history holds a decided result of that call
// (chat.Harness.DecisionTookEffect): another signal's decision, or this one's in a
// resume that was cancelled, failed or lost its session after the
// approved call ran (a client told only that nothing awaits its
// approval would ask again for what was done). Otherwise that nothing
// awaits it. When the history cannot be read to tell, the outcome is
// harness_signal_subscription_failed (retryable), wrapping the read's
// error. invocationID is the invocation the signal resolved to or named
// ("" for none): a decision took effect only if that invocation's did.
func notAwaited(ctx context.Context, a *Agent, key, invocationID, signalID string, err error) chat.Outcome {
	if callID, ok := strings.CutPrefix(signalID, agent.SignalPrefix); ok {
		done, lerr := a.Chat.DecisionTookEffect(context.WithoutCancel(ctx), key, signalID, callID, invocationID)
		if lerr != nil {
			// Whether the decision took effect is unknown: the session
			// could not be read. Saying that nothing awaits it could have
			// the user ask again for what was done: the signal could not
			// be resolved, try again (harness_signal_subscription_failed,
			// retryable).
			return refusedSignal(a, key, invocationID, errcat.Wrap(errcat.HarnessSignalSubscriptionFailed,
				"cannot tell whether the decision on this call took effect: the session could not be read", lerr))
		}
		if done {
			return refusedSignal(a, key, invocationID, &harness.Error{Cat: errcat.HarnessSignalCorrelationFailed,
				Msg: "the decision on this call was already given and took effect", Err: errors.Join(chat.ErrDecisionTookEffect, err)})
		}
	}
	return refusedSignal(a, key, invocationID, &harness.Error{Cat: errcat.HarnessSignalCorrelationFailed, Msg: "no suspended turn of this session awaits the signal", Err: err})
}

// resumedNodeFailed reports whether e is the failure of the resumed
// turn's own node (an adapter that could not resume its upstream's run:
// an Eino checkpoint lost with an in-memory store's restart), not the
// runtime finding no suspended turn: its reply says what happened to the
// call, which "the decision already took effect" would contradict.
func resumedNodeFailed(e *chat.Errored) bool {
	var ne *graph.NodeError
	return errors.As(e.Err, &ne)
}

// tookEffect reports whether out says a decision already took effect.
func tookEffect(out chat.Outcome) bool {
	e, ok := out.(*chat.Errored)
	return ok && errors.Is(e.Err, chat.ErrDecisionTookEffect)
}

// refusedSignal is the errored outcome of a signal that resumed nothing
// in the session (key): refused, abandoned or busy. invocationID is the
// suspended invocation it resolved to ("" for none).
func refusedSignal(a *Agent, key, invocationID string, err error) chat.Outcome {
	return a.Chat.ErroredOutcome(chat.Turn{SessionID: key, InvocationID: invocationID, Path: harness.PathSignalResume, Resumed: true}, err)
}

// replayedSignal returns the outcome recorded with the turn that sig's
// request id already resumed, before or after a restart, for a
// retransmission of a signal that finds nothing of the session awaiting
// it (nil when sig has no request id or nothing is recorded under it).
// A request id that resumed the turn with another decision (another
// payload or signal id) is refused: the errored outcome says
// message_id_reused, and the client learns its decision did not take
// effect rather than receiving the other decision's answer as its own.
// It only looks (chat.Harness.ReplaySignal): it resolves no signal, so
// a signal naming another session's invocation resumes nothing here.
func replayedSignal(ctx context.Context, a *Agent, key string, sig chat.Signal) chat.Outcome {
	if sig.RequestID == "" {
		return nil
	}
	sig.SessionID = key
	out, err := a.Chat.ReplaySignal(ctx, sig)
	if errors.Is(err, chat.ErrMessageIDReused) {
		return refusedSignal(a, key, "", err)
	}
	if err != nil {
		return nil
	}
	return out
}

// suspendedRun finds the run that suspended on invocationID among the
// session's recent runs ("" when it is not found).
func (s *Server) suspendedRun(ctx context.Context, tenant, sessionID, invocationID string) string {
	r, _ := s.suspendedRunRecord(ctx, tenant, sessionID, invocationID)
	return r.ID
}

// suspendedRunRecord is suspendedRun's run record (false when it is not
// found).
//
// The session's runs are read newest first, a page of 50 and then pages
// of runtime.MaxPageSize, up to suspendedRunScan runs: the suspended run
// is usually among the newest, but other agents' turns of the session
// (and cancelled ones), which do not supersede it, may have come after
// it in any number.
func (s *Server) suspendedRunRecord(ctx context.Context, tenant, sessionID, invocationID string) (runtime.Run, bool) {
	req := runtime.ListRunsRequest{Tenant: tenant, SessionID: sessionID, PageSize: 50}
	for read := 0; read < suspendedRunScan; {
		resp, err := s.runs.Store().ListRuns(ctx, req)
		if err != nil {
			return runtime.Run{}, false
		}
		for _, r := range resp.Runs {
			if r.InvocationID == invocationID && r.Status == runtime.StatusSuspended {
				return r, true
			}
		}
		read += len(resp.Runs)
		if resp.NextPageToken == "" || len(resp.Runs) == 0 {
			break
		}
		req.PageToken, req.PageSize = resp.NextPageToken, runtime.MaxPageSize
	}
	return runtime.Run{}, false
}

// suspendedRunScan bounds how many of a session's runs suspendedRunRecord
// reads to find a suspended run.
const suspendedRunScan = 10_000

// signalOwner returns the agent whose suspended turn of the tenant's
// session sig answers, for a signal that names no agent (a REST signal,
// the OpenAI endpoint's resume_url, Submit): the agents of a workspace
// share the session and the paused records, but only the agent that
// suspended may resume (its graph, its upstream's pending state). It is
// the agent of the suspended run record, else the first agent, def
// first, whose graph takes the paused record for its own (a served
// agent's graph is named after it, see NewAdapterAgent, and refuses
// another's: graph.ErrOtherGraph). With one agent, or when no agent
// finds the signal, it is def, whose refusal answers.
func (s *Server) signalOwner(ctx context.Context, tenant string, def *Agent, id string, sig chat.Signal) *Agent {
	if len(s.cfg.Agents) < 2 {
		return def
	}
	key := storeKey(tenant, id)
	ref := harness.SignalRef{SignalID: sig.SignalID, InvocationID: sig.InvocationID, SessionID: key}
	looked := false
	for i := -1; i < len(s.cfg.Agents); i++ {
		a := def
		if i >= 0 {
			if a = s.cfg.Agents[i]; a == def {
				continue
			}
		}
		sub, err := a.Chat.Harness().Resolve(ctx, ref)
		if err != nil || sub.SessionID != key {
			continue
		}
		if !looked {
			looked = true
			if r, ok := s.suspendedRunRecord(ctx, tenant, id, sub.InvocationID); ok && s.agents[r.AgentID] != nil {
				return s.agents[r.AgentID]
			}
		}
		if err := a.Chat.Harness().Graph().CheckResume(ctx, sub.InvocationID, nil); !errors.Is(err, graph.ErrOtherGraph) {
			return a
		}
	}
	return def
}

// turnEvents records a turn's node, tool and text events in the order
// they happened. Tool and text events come from the turn's chunks (the
// nodes emit them through chat.Emit as they run, and SendFunc hands them
// to the chunk handler on the node's goroutine); node events come from
// an invocation-scoped synchronous observer (graph.Synchronous), which
// the engine calls as it emits them. Both run on the goroutines that
// produce them, so when a chunk is handled, every node event that
// happened before it is queued; the handler's calls are serialized and
// alone write to the Turn:
//
//   - A chunk belongs to a dispatch (a node execution): the one of its
//     step (chat.Chunk.Step) when that one is placed, else the earliest
//     one of its node's name not known to be over (still running, or
//     completed with messages the chunk is part of: its text, or its
//     tool call id).
//   - The node events before that dispatch's start happened before the
//     chunk: their agent.node.completed events are recorded first.
//   - At the end of the turn the invocation's remaining node events are
//     recorded before the run's terminal event, so the last
//     agent.node.completed is never lost to the turn's end.
//
// agent.node.completed is recorded for the nodes of the agent's own
// graph (not for nodes inside subgraphs), as before.
type turnEvents struct {
	turn *runtime.Turn
	a    *Agent
	g    *graph.Graph
	// output collects what the turn's nodes add to the run's output
	// (chat.Event.Output: an adapter's artifacts and metadata).
	output map[string]any
	// artifacts are the artifacts of the runtime.artifact.created events
	// the turn's nodes reported, in order: the run's output lists them
	// when output has no "artifacts" of its own (an adapter's turn that
	// suspends reports its artifacts only as events).
	artifacts []any
	// narration, when set, is the narration style: the turn records
	// runtime.progress.narration events.
	narration *Narration
	// agentID is the workflowId of node events.
	agentID string
	// tools is what the run's output says of the turn's tools.
	tools toolReport
	// ran is set once the turn's invocation ran: a node event or a chunk
	// (for a resume: it took its suspension up, see tookUp).
	ran atomic.Bool
	// unobserved: the turn's graph is an adapter's scaffolding, whose
	// node events it does not observe (see options).
	unobserved bool
	// durableTools: the turn resumes a human's decision over a durable
	// run store, and each tool's result is in the store as soon as it
	// is recorded (Turn.Sync): the session keeps the approved call's
	// result from then on (it is spent), so its run must not lose it to
	// a crash either.
	durableTools bool
	// prelude, when set, records what precedes the turn's events (a
	// resume's decision): at the first chunk, or at the end unless the
	// turn resumed nothing (see finished).
	prelude func()

	mu      sync.Mutex
	pending []*graph.NodeEvent // delivered by the observer, not yet taken

	// The chunk handler's own state (its calls are serialized, and
	// happen before end).
	text []byte             // text chunks not recorded yet
	evs  []*graph.NodeEvent // delivered node events not yet placed, in order
	open []*dispatch        // dispatches started and not yet over, in start order
	// textAt is when the turn last recorded its text live, at most every
	// textEvery (Config.LiveTextEvery).
	textAt    time.Time
	textEvery time.Duration
	// recorded counts the bytes of text recorded so far: past
	// maxLiveText, the text is held until the next other event or the
	// turn's end instead of being recorded as it streams (see
	// boundFailedText).
	recorded int
	log      *slog.Logger

	// Room for a turn's usual handful of node events and dispatches, in
	// the turnEvents' own allocation.
	evsBuf, pendingBuf [8]*graph.NodeEvent
	openBuf            [4]*dispatch
	dispatches         [4]dispatch
	usedDispatches     int
}

// dispatch is one node execution whose start was placed.
type dispatch struct {
	step int
	name string
	text int // bytes of text chunks placed in it
}

func (s *Server) newTurnEvents(turn *runtime.Turn, a *Agent) *turnEvents {
	te := &turnEvents{turn: turn, a: a, g: a.Chat.Harness().Graph(), agentID: a.ID,
		narration: s.cfg.Narration, unobserved: s.factsOf(a).wrapped, log: s.log, textEvery: s.cfg.LiveTextEvery}
	if te.textEvery == 0 {
		te.textEvery = defaultLiveTextEvery
	}
	te.evs, te.pending, te.open = te.evsBuf[:0], te.pendingBuf[:0], te.openBuf[:0]
	return te
}

// newDispatch returns a new dispatch of the named node's step, from the
// turnEvents' own room while it lasts.
func (te *turnEvents) newDispatch(step int, name string) *dispatch {
	if te.usedDispatches == len(te.dispatches) {
		return &dispatch{step: step, name: name}
	}
	d := &te.dispatches[te.usedDispatches]
	te.usedDispatches++
	*d = dispatch{step: step, name: name}
	return d
}

// options are the invoke options that install the observer: none when
// the agent's graph is an adapter's scaffolding (adapter.Wraps), whose
// nodes are not the upstream's (it reports its own), so a turn records
// no node event of it and has no observer to deliver them to. The
// slice has room for one more option.
// resumeOptions are options of a resume: an adapter's scaffolding, whose
// node events the turn does not record, is observed for whether the
// resume ran (tookUp).
func (te *turnEvents) resumeOptions() []graph.InvokeOption {
	if !te.unobserved {
		return te.options()
	}
	return []graph.InvokeOption{graph.WithObserver(func(context.Context, graph.Event) error {
		te.ran.Store(true)
		return nil
	}, graph.WithoutCallEvents(), graph.Synchronous())}
}

// tookUp returns out, the outcome of a resume, with errTookUpSuspension
// in its error when it errored after the resume took its suspension up:
// it ran (its invocation's nodes started or it streamed), so that its
// decision took effect (an approved call may have run) and the paused
// record is spent: the same decision sent again is refused, and the
// surfaces answer the failure as final (resumedAnything). A resume that
// failed or was cancelled before it ran (waiting for the session, a
// store failing before the record was read) ran nothing, and the same
// decision resumes the turn later: retryable. Only the resume itself
// knows which: the paused record's absence cannot tell it from another
// client's resume that took the suspension meanwhile.
func (te *turnEvents) tookUp(out chat.Outcome) chat.Outcome {
	o, ok := out.(*chat.Errored)
	if !ok || !te.ran.Load() {
		return out
	}
	c := *o
	c.Err = fmt.Errorf("%w: %w", errTookUpSuspension, o.Err)
	return &c
}

func (te *turnEvents) options() []graph.InvokeOption {
	opts := make([]graph.InvokeOption, 0, 2)
	if te.unobserved {
		return opts
	}
	return append(opts, graph.WithObserver(te.observe, graph.WithoutCallEvents(), graph.Synchronous()))
}

// observe is a synchronous observer (graph.Synchronous): it runs on the
// goroutine that emits the event, so the events of a node are queued
// before its chunks are handled. It only queues.
func (te *turnEvents) observe(_ context.Context, ev graph.Event) error {
	if e, ok := ev.(*graph.NodeEvent); ok {
		te.ran.Store(true)
		te.mu.Lock()
		te.pending = append(te.pending, e)
		te.mu.Unlock()
	}
	return nil
}

// handler is the turn's chunk handler (chat.Harness.SendFunc): it
// records each chunk in order among the turn's node events, then hands
// it to onChunk (when set). The harness serializes its calls.
func (te *turnEvents) handler(ctx context.Context, onChunk func(chat.Chunk)) func(chat.Chunk) bool {
	return func(c chat.Chunk) bool {
		te.chunk(ctx, c)
		if onChunk != nil {
			onChunk(c)
		}
		return true
	}
}

// finished records what the turn left once it returned out (see end) and
// returns out.
func (te *turnEvents) finished(ctx context.Context, out chat.Outcome) chat.Outcome {
	if p := te.prelude; p != nil && !resumedNothing(out) && (te.ran.Load() || !isErrored(out)) {
		// A resume records its decision once it ran (the prelude at its
		// first chunk, or here): one that errored before it ran (it
		// waited for the session and was cancelled or gave up, a store
		// failed) resolved nothing.
		p()
	}
	te.prelude = nil
	if _, failed := out.(*chat.Errored); failed {
		te.boundFailedText(ctx)
	}
	te.end(ctx)
	return out
}

// addsOutput reports whether the turn's nodes added to the run's output
// (output, artifacts).
func (te *turnEvents) addsOutput() bool {
	return te != nil && (len(te.output) > 0 || len(te.artifacts) > 0)
}

// toolReport is the turn's report of its tools (nil without te).
func (te *turnEvents) toolReport() *toolReport {
	if te == nil {
		return nil
	}
	return &te.tools
}

// mergeInto adds to m, a run's output, what the turn's nodes added to it
// (output, and the artifacts under "artifacts" unless output lists its
// own), m's own keys winning, and returns m.
func (te *turnEvents) mergeInto(m map[string]any) map[string]any {
	mergeOutput(m, te.output)
	te.tools.mergeInto(m)
	if _, taken := m["artifacts"]; !taken && len(te.artifacts) > 0 {
		m["artifacts"] = te.artifacts
	}
	return m
}

// suspendedOutput is the output of the run of a turn that suspended:
// output (runEnding's: its model calls' usage, or nil) with what the
// turn's nodes added to it merged in (mergeInto), so that the artifacts
// a turn produced before it suspended are listed on its run's output as
// on a completed one's.
func (te *turnEvents) suspendedOutput(output any) any {
	if !te.addsOutput() && (te == nil || !te.tools.ran) {
		return output
	}
	m, _ := output.(map[string]any)
	if m == nil {
		m = make(map[string]any, len(te.output)+1)
	}
	return te.mergeInto(m)
}

// encodableOutput is what the turn's nodes added to the run's output
// (mergeInto) without what does not encode as JSON: a list keeps the
// elements that encode (an artifact whose metadata holds a NaN goes,
// the others stay), any other value that does not encode goes. It is
// for a run whose ending did not encode (Server.endUnencodable), and
// encodes every value to tell.
func (te *turnEvents) encodableOutput() map[string]any {
	if !te.addsOutput() {
		return nil
	}
	all := te.mergeInto(make(map[string]any, len(te.output)+1))
	for k, v := range all {
		if jsonEncodes(v) {
			continue
		}
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
			kept := make([]any, 0, rv.Len())
			for i := range rv.Len() {
				if e := rv.Index(i).Interface(); jsonEncodes(e) {
					kept = append(kept, e)
				}
			}
			if len(kept) > 0 {
				all[k] = kept
				continue
			}
		}
		delete(all, k)
	}
	return all
}

// jsonEncodes reports whether v encodes as JSON.
func jsonEncodes(v any) bool {
	_, err := json.Marshal(v)
	return err == nil
}

// maxLiveText bounds the text a turn records as it streams, and the text
// a failed turn records at all: 1 MiB, more than any model writes in one
// reply. A reply the provider refused at its size bound
// (provider_invalid_response, 16 MiB by default), or that failed
// otherwise after streaming garbage, would put all it streamed in the
// run record: its text is not the session's, and only its first 1 MiB
// is kept. A completed turn records all its text (past 1 MiB, held and
// recorded at the next other event or at its end rather than live).
const maxLiveText = 1 << 20

// boundFailedText cuts the text a failed turn has not recorded yet to
// what maxLiveText leaves (at a UTF-8 boundary), logging what it drops.
func (te *turnEvents) boundFailedText(ctx context.Context) {
	keep := max(0, maxLiveText-te.recorded)
	if len(te.text) <= keep {
		return
	}
	for keep > 0 && !utf8.RuneStart(te.text[keep]) {
		keep--
	}
	te.log.WarnContext(ctx, "server: the run record keeps only the first part of a failed turn's text",
		"run", te.turn.ID(), "kept_bytes", te.recorded+keep, "dropped_bytes", len(te.text)-keep)
	te.text = te.text[:keep]
}

// syncTool puts the tool events recorded so far in the store
// (durableTools), waiting for at most ackFlushWait; a failed write is
// logged by the turn's end, whose records fail with it.
func (te *turnEvents) syncTool(ctx context.Context) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackFlushWait)
	defer cancel()
	_ = te.turn.Sync(fctx)
}

// isErrored reports whether out is an errored outcome.
func isErrored(out chat.Outcome) bool {
	_, ok := out.(*chat.Errored)
	return ok
}

// resumedNothing reports whether a resume's outcome says it found the
// turn resumed already (a copy of its signal that a replica answered
// from the original's record) or no longer awaiting it (refused).
func resumedNothing(out chat.Outcome) bool {
	if out.Info().Replayed {
		return true
	}
	e, ok := out.(*chat.Errored)
	// Refused: no suspension awaits it, or its request id names another
	// request (chat.Signal.RefusedByMessage, RequestAlias).
	return ok && (e.Category == errcat.HarnessSignalCorrelationFailed || e.Category == errcat.MessageIDReused)
}

// chunk places c among the node events, then records it. A chunk of a
// node execution already placed (its step open) is recorded at once: the
// events the engine emitted before it came from that execution, whose
// start is placed, or from executions running concurrently with it, with
// which it has no order. Any other chunk first takes the node events
// delivered so far.
func (te *turnEvents) chunk(ctx context.Context, c chat.Chunk) {
	te.ran.Store(true)
	if p := te.prelude; p != nil {
		te.prelude = nil
		p()
	}
	if c.Node != "" && !te.unobserved {
		if d := te.openStep(c.Step); d != nil && d.name == c.Node {
			d.text += textLen(c)
		} else {
			te.take()
			te.placeChunk(ctx, c)
		}
	}
	switch c.Kind {
	case chat.ChunkText:
		te.text = append(te.text, c.Text...)
		if te.recorded+len(te.text) <= maxLiveText {
			if now := time.Now(); now.Sub(te.textAt) >= te.textEvery && te.watched() {
				te.flushText(ctx)
				te.textAt = now
			}
		}
	case chat.ChunkTool:
		te.flushText(ctx)
		recordTool(ctx, te.turn, c.Tool)
		if t := c.Tool; t != nil && (t.Status == chat.ToolCompleted || t.Status == chat.ToolFailed) {
			te.tools.answered(t.CallID, t.Status == chat.ToolFailed)
		}
		if te.durableTools && c.Tool != nil && (c.Tool.Status == chat.ToolCompleted || c.Tool.Status == chat.ToolFailed) {
			te.syncTool(ctx)
		}
		te.narrateTool(ctx, c.Tool)
	case chat.ChunkEvent:
		te.flushText(ctx)
		te.event(ctx, c.Event)
		if e := c.Event; e != nil && e.Type == runtime.EventArtifactCreated {
			if a, ok := e.Data["artifact"]; ok {
				te.artifacts = append(te.artifacts, a)
			}
		}
	case chat.ChunkPrompt:
		te.flushText(ctx)
		_ = te.turn.Adapter(ctx, runtime.PhasePromptResolved, map[string]any{"prompt": c.Prompt})
	}
}

// defaultLiveTextEvery is Config.LiveTextEvery's default: how often at
// most a turn whose session is watched live records the text it
// streams. The chunks that arrive meanwhile are recorded together, with
// the next chunk after it or the next other event (a tool call, the
// turn's end). Every record of a watched turn is a write of its own to
// the run store (a commit), and a model streams a reply in tens or
// hundreds of chunks; at this pace the watcher sees the text at 40
// updates a second, not one commit per token.
const defaultLiveTextEvery = 25 * time.Millisecond

// watched reports whether the session is watched live, here or on
// another server (runtime.Turn.Watched).
func (te *turnEvents) watched() bool { return te.turn.Watched() }

// flushText records the text chunks not recorded yet as one
// agent.output.delta. While nobody watches the session live, the text
// chunks between two other events are recorded as one delta: the same
// text, in the same place, for a fraction of the rows.
func (te *turnEvents) flushText(ctx context.Context) {
	if len(te.text) == 0 {
		return
	}
	_ = te.turn.AdapterFields(ctx, runtime.PhaseOutputDelta, runtime.TextField("text", string(te.text)))
	te.recorded += len(te.text)
	te.text = te.text[:0]
}

// take moves the delivered node events to the consumer's list.
func (te *turnEvents) take() {
	te.mu.Lock()
	if len(te.evs) == 0 {
		te.evs = te.evsBuf[:0] // placed from the front: start over
	}
	te.evs = append(te.evs, te.pending...)
	clear(te.pending)
	te.pending = te.pending[:0]
	te.mu.Unlock()
}

// placeChunk finds the dispatch c belongs to and places the node events
// that precede its start.
func (te *turnEvents) placeChunk(ctx context.Context, c chat.Chunk) {
	for _, d := range te.open {
		if d.name == c.Node && te.accepts(d, c) {
			d.text += textLen(c)
			return
		}
	}
	for i, ev := range te.evs {
		if ev.Phase != graph.PhaseStarted || ev.NodeName != c.Node || te.isOpen(ev.Step) {
			continue
		}
		d := &dispatch{step: ev.Step, name: ev.NodeName}
		if !te.accepts(d, c) {
			continue
		}
		te.place(ctx, i+1)
		if od := te.openStep(ev.Step); od != nil {
			od.text += textLen(c)
		}
		return
	}
	// No dispatch of that node is known (a chunk relayed from another
	// graph, or deliveries abandoned): record it where it arrives.
}

func textLen(c chat.Chunk) int {
	if c.Kind == chat.ChunkText {
		return len(c.Text)
	}
	return 0
}

func (te *turnEvents) isOpen(step int) bool { return te.openStep(step) != nil }

func (te *turnEvents) openStep(step int) *dispatch {
	for _, d := range te.open {
		if d.step == step {
			return d
		}
	}
	return nil
}

// accepts reports whether c can belong to dispatch d: d is still
// running (its completion is not delivered), or it completed with
// messages c is part of. When the messages tell nothing (a failed node,
// a chunk kind they do not show), it accepts.
func (te *turnEvents) accepts(d *dispatch, c chat.Chunk) bool {
	var done *graph.NodeEvent
	for _, ev := range te.evs {
		if ev.Step == d.step && ev.Phase != graph.PhaseStarted {
			done = ev
			break
		}
	}
	if done == nil || done.Err != nil || done.PostState.IsZero() {
		return true
	}
	added, ok := addedMessages(done)
	if !ok {
		return true
	}
	switch {
	case c.Kind == chat.ChunkText:
		n := 0
		for _, m := range added {
			if m.Role == llm.RoleAssistant {
				n += len(m.Text())
			}
		}
		return d.text+len(c.Text) <= n
	case c.Kind == chat.ChunkTool && c.Tool != nil:
		for _, m := range added {
			if m.ToolCallID == c.Tool.CallID || slices.ContainsFunc(m.ToolCalls, func(tc llm.ToolCall) bool { return tc.ID == c.Tool.CallID }) {
				return true
			}
		}
		return false
	}
	return true
}

// addedMessages returns the chat messages a completed node appended.
func addedMessages(ev *graph.NodeEvent) ([]llm.Message, bool) {
	post, ok1 := messagesIn(ev.PostState)
	pre, ok2 := messagesIn(ev.PreState)
	if !ok1 || !ok2 || len(post) < len(pre) {
		return nil, false
	}
	return post[len(pre):], true
}

func messagesIn(st graph.State) ([]llm.Message, bool) {
	v, ok := st.Get(chat.MessagesField)
	if !ok {
		return nil, false
	}
	msgs, ok := v.([]llm.Message)
	return msgs, ok
}

// place records the first n node events of the consumer's list: a
// started event opens its dispatch, a completed or suspended one closes
// it, and a completed node of the agent's own graph is recorded as
// agent.node.completed.
func (te *turnEvents) place(ctx context.Context, n int) {
	for _, ev := range te.evs[:n] {
		switch ev.Phase {
		case graph.PhaseStarted:
			if !te.isOpen(ev.Step) {
				te.open = append(te.open, te.newDispatch(ev.Step, ev.NodeName))
			}
		default:
			te.open = slices.DeleteFunc(te.open, func(d *dispatch) bool { return d.step == ev.Step })
			if ev.Phase == graph.PhaseCompleted && len(ev.Namespace) <= 1 {
				te.flushText(ctx)
				_ = te.turn.AdapterFields(ctx, runtime.PhaseNodeCompleted, runtime.TextField("workflowId", te.agentID),
					runtime.TextField("nodeId", ev.NodeName))
			}
		}
	}
	clear(te.evs[:n])
	te.evs = te.evs[n:]
}

// end records the turn's remaining node events. The observer is
// synchronous: once the turn returned, they are all delivered.
func (te *turnEvents) end(ctx context.Context) {
	ctx = context.WithoutCancel(ctx) // a cancelled turn still records its events
	te.take()
	te.place(ctx, len(te.evs))
	te.flushText(ctx)
}

// signalFlights lets one signal per request id run at a time on a
// server: a retransmission arriving while its original resumes the turn
// waits for it, then finds its recorded outcome (chat.Signal with the
// request id) instead of opening a run that would resume nothing. (A
// copy on another replica is caught by the chat harness under the
// session's lock, and its run ends naming the original.)
type signalFlights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// enter waits until no signal of key is under way (or ctx ends: its
// error is returned), then marks one under way until done is called.
func (f *signalFlights) enter(ctx context.Context, key string) (done func(), err error) {
	for {
		f.mu.Lock()
		ch, busy := f.m[key]
		if !busy {
			if f.m == nil {
				f.m = map[string]chan struct{}{}
			}
			ch = make(chan struct{})
			f.m[key] = ch
			f.mu.Unlock()
			return func() {
				f.mu.Lock()
				delete(f.m, key)
				f.mu.Unlock()
				close(ch)
			}, nil
		}
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, errcat.Wrap(errcat.InvocationCancelled, "server: waiting for the same signal under way", context.Cause(ctx))
		}
	}
}
