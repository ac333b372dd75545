package server

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
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

// send runs one turn for the API and records it as a run: detached from
// the client's connection (a turn the client stops waiting for still
// completes and is stored), cancellable through POST
// /v1/runs/{id}/cancel, counted for graceful shutdown and metrics.
func (s *Server) send(ctx context.Context, tenant string, a *Agent, id string, msg llm.Message, opts ...chat.SendOption) chat.Outcome {
	return s.sendStream(ctx, tenant, a, id, msg, nil, opts...)
}

// sendStream is send that also hands every chunk to onChunk (nil: none)
// as the turn streams.
func (s *Server) sendStream(ctx context.Context, tenant string, a *Agent, id string, msg llm.Message, onChunk func(chat.Chunk), opts ...chat.SendOption) chat.Outcome {
	s.inflight.Add(1)
	defer s.inflight.Done()
	start := time.Now()
	key := storeKey(tenant, id)
	turn, tctx, err := s.runs.Begin(context.WithoutCancel(ctx), runtime.BeginRequest{Tenant: tenant, SessionID: id, AgentID: a.ID,
		CorrelationID: correlationOf(ctx)})
	if err != nil {
		out, _ := a.Chat.Send(context.WithoutCancel(ctx), key, msg, opts...)
		s.log.WarnContext(ctx, "server: recording a run failed", "error", err)
		s.metrics.turn(outcomeName(out), time.Since(start))
		return out
	}
	_ = turn.Adapter(tctx, runtime.PhaseHandoff, map[string]any{"adapter": "armature", "modelRef": a.Model, "tools": a.Tools})
	opts = append(opts, chat.WithInvokeOptions(graph.WithObserver(nodeObserver(tctx, turn, a.ID), graph.Phases(graph.PhaseCompleted))))
	var out chat.Outcome
	if onChunk == nil && !s.runs.Broker().Subscribed(tenant, id) {
		// Nobody watches the turn live: run it unstreamed and record its
		// tool calls and text from the replies afterwards.
		out, _ = a.Chat.Send(tctx, key, msg, opts...)
		recordMessages(tctx, turn, out)
	} else {
		for c := range a.Chat.SendStreaming(tctx, key, msg, opts...) {
			if c.Kind == chat.ChunkOutcome {
				out = c.Outcome
				break
			}
			recordChunk(tctx, turn, c)
			if onChunk != nil {
				onChunk(c)
			}
		}
	}
	s.finish(tctx, turn, out)
	s.metrics.turn(outcomeName(out), time.Since(start))
	return out
}

// nodeObserver records agent.node.completed events.
func nodeObserver(ctx context.Context, turn *runtime.Turn, agentID string) graph.Observer {
	return func(_ context.Context, ev graph.Event) error {
		if ne, ok := ev.(*graph.NodeEvent); ok && ne.Phase == graph.PhaseCompleted && len(ne.Namespace) <= 1 {
			return turn.Adapter(ctx, runtime.PhaseNodeCompleted, map[string]any{"workflowId": agentID, "nodeId": ne.NodeName})
		}
		return nil
	}
}

// recordChunk turns a streamed chunk into runtime events.
func recordChunk(ctx context.Context, turn *runtime.Turn, c chat.Chunk) {
	switch c.Kind {
	case chat.ChunkText:
		_ = turn.Adapter(ctx, runtime.PhaseOutputDelta, map[string]any{"text": c.Text})
	case chat.ChunkTool:
		t := c.Tool
		switch t.Status {
		case chat.ToolRunning:
			data := map[string]any{"toolId": t.CallID, "name": t.Name}
			if len(t.Arguments) > 0 {
				data["args"] = json.RawMessage(t.Arguments)
			}
			_ = turn.Adapter(ctx, runtime.PhaseToolStart, data)
		case chat.ToolCompleted:
			_ = turn.Adapter(ctx, runtime.PhaseToolResult, map[string]any{"toolId": t.CallID, "name": t.Name, "output": t.Result})
		case chat.ToolFailed:
			_ = turn.Adapter(ctx, runtime.PhaseToolResult, map[string]any{"toolId": t.CallID, "name": t.Name, "error": t.Result})
		}
	}
}

// recordMessages records, after an unstreamed turn, the events a
// streamed one records as it goes: each tool call's start and result, and
// each assistant text as one output delta.
func recordMessages(ctx context.Context, turn *runtime.Turn, out chat.Outcome) {
	var msgs []llm.Message
	switch o := out.(type) {
	case *chat.Completed:
		msgs = o.Replies
	case *chat.Suspended:
		msgs = o.PendingMessages
	}
	names := map[string]string{}
	for _, m := range msgs {
		switch {
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0:
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
				data := map[string]any{"toolId": tc.ID, "name": tc.Name}
				if len(tc.Arguments) > 0 {
					data["args"] = json.RawMessage(tc.Arguments)
				}
				_ = turn.Adapter(ctx, runtime.PhaseToolStart, data)
			}
		case m.Role == llm.RoleTool:
			_ = turn.Adapter(ctx, runtime.PhaseToolResult, map[string]any{"toolId": m.ToolCallID, "name": names[m.ToolCallID], "output": m.Text()})
		case m.Role == llm.RoleAssistant && m.Text() != "":
			_ = turn.Adapter(ctx, runtime.PhaseOutputDelta, map[string]any{"text": m.Text()})
		}
	}
}

// finish ends the run with the turn's outcome.
func (s *Server) finish(ctx context.Context, turn *runtime.Turn, out chat.Outcome) {
	var err error
	switch o := out.(type) {
	case *chat.Completed:
		err = turn.Complete(ctx, map[string]any{"replies": o.Replies})
	case *chat.Suspended:
		err = turn.Suspend(ctx, o.InvocationID,
			map[string]any{"signal_id": o.Descriptor.SignalID, "metadata": o.Descriptor.Metadata},
			map[string]any{"signal_id": o.Descriptor.SignalID, "pending_messages": o.PendingMessages})
	case *chat.Errored:
		if errors.Is(o.Err, errcat.InvocationCancelled) || errors.Is(context.Cause(ctx), runtime.ErrCancelled) {
			err = turn.Cancelled(ctx, "cancelled")
			break
		}
		err = turn.Fail(ctx, runtime.RunError{Bucket: string(o.Bucket), Category: string(o.Category), Message: o.Reply.Text()})
	}
	if err != nil {
		s.log.WarnContext(ctx, "server: recording a run's end failed", "run_id", turn.ID(), "error", err)
	}
}

// signal resumes a suspended turn of the tenant's session and records
// it as a new run whose parent is the suspended run.
func (s *Server) signal(ctx context.Context, tenant string, a *Agent, id string, sig chat.Signal) chat.Outcome {
	s.inflight.Add(1)
	defer s.inflight.Done()
	start := time.Now()
	key := storeKey(tenant, id)
	sub, err := a.Chat.Harness().Resolve(ctx, harness.SignalRef{SignalID: sig.SignalID, InvocationID: sig.InvocationID, SessionID: key})
	if err == nil && sub.SessionID != key {
		err = errors.New("another session's invocation")
	}
	if err != nil {
		// Nothing of this session awaits the signal (the same answer
		// whether it exists elsewhere or not).
		out := a.Chat.ErroredOutcome(chat.Turn{SessionID: key, Path: harness.PathSignalResume, Resumed: true},
			&harness.Error{Cat: errcat.HarnessSignalCorrelationFailed, Msg: "no suspended turn of this session awaits the signal"})
		s.metrics.turn(outcomeName(out), time.Since(start))
		return out
	}
	parent := s.suspendedRun(ctx, tenant, id, sub.InvocationID)
	turn, tctx, err := s.runs.Begin(context.WithoutCancel(ctx), runtime.BeginRequest{Tenant: tenant, SessionID: id, AgentID: a.ID,
		ParentID: parent, CorrelationID: correlationOf(ctx)})
	if err != nil {
		s.log.WarnContext(ctx, "server: recording a run failed", "error", err)
		tctx = context.WithoutCancel(ctx)
		turn = nil
	}
	if turn != nil {
		_ = turn.Resolved(tctx, map[string]any{"signal_id": sub.SignalID, "invocationId": sub.InvocationID}, sig.Payload)
	}
	var out chat.Outcome
	observe := graph.WithObserver(nodeObserverOrNil(tctx, turn, a.ID), graph.Phases(graph.PhaseCompleted))
	resume := chat.Signal{InvocationID: sub.InvocationID, SessionID: key, Payload: sig.Payload}
	if turn == nil || !s.runs.Broker().Subscribed(tenant, id) {
		out, _ = a.Chat.Signal(tctx, resume, observe)
		if turn != nil {
			recordMessages(tctx, turn, out)
		}
	} else {
		for c := range a.Chat.SignalStreaming(tctx, resume, observe) {
			if c.Kind == chat.ChunkOutcome {
				out = c.Outcome
				break
			}
			recordChunk(tctx, turn, c)
		}
	}
	if turn != nil {
		s.finish(tctx, turn, out)
	}
	s.metrics.turn(outcomeName(out), time.Since(start))
	return out
}

func nodeObserverOrNil(ctx context.Context, turn *runtime.Turn, agentID string) graph.Observer {
	if turn == nil {
		return func(context.Context, graph.Event) error { return nil }
	}
	return nodeObserver(ctx, turn, agentID)
}

// suspendedRun finds the run that suspended on invocationID among the
// session's recent runs ("" when it is not found).
func (s *Server) suspendedRun(ctx context.Context, tenant, sessionID, invocationID string) string {
	resp, err := s.runs.Store().ListRuns(ctx, runtime.ListRunsRequest{Tenant: tenant, SessionID: sessionID, PageSize: 50})
	if err != nil {
		return ""
	}
	for _, r := range resp.Runs {
		if r.InvocationID == invocationID && r.Status == runtime.StatusSuspended {
			return r.ID
		}
	}
	return ""
}
