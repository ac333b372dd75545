package chat

import (
	"context"
	"log/slog"
	"slices"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/callindex"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// DefaultSupersededResult is the tool result that closes an open tool
// call of a suspended turn superseded by a new message.
const DefaultSupersededResult = "Not run: the user sent a new message instead of answering this approval request."

// markSuperseded prefixes the mark, recorded with a superseding turn,
// that names each suspended invocation it superseded.
const markSuperseded = "x:"

// turnInput computes a Send's input from the session as the graph
// loaded it (graph.WithSessionInput): msg, preceded — when msg
// supersedes a suspended turn of the session — by the tool results that
// close its open calls. The paused records are looked up only when the
// session may hold one, so a warm turn after a completed one costs no
// extra read. It also checks msg against the history.
type turnInput struct {
	c    *Harness
	id   string // the session
	msg  llm.Message
	w    *turnWrite
	pend []harness.Subscription // the superseded suspensions
	// left are suspensions an earlier turn superseded (its mark says so)
	// whose cleanup a crash interrupted: retired again, not reported.
	left []harness.Subscription
	// recheck, when set, is the message id's mark that Send looked up at
	// version checkedAt, the graph's cached one: if the turn loads
	// another version, it is looked up again there.
	recheck   string
	checkedAt int64
}

// replayedTurn stops a turn whose message id the loaded session has
// recorded: a retransmission that Send's lookup, at a cached version,
// could not see. Send answers the recorded outcome.
type replayedTurn struct{ out Outcome }

func (r *replayedTurn) Error() string { return "chat: the message was already answered" }

func (in *turnInput) input(ctx context.Context, stored graph.State, info graph.SessionInfo) (graph.Update, error) {
	c, msg := in.c, in.msg
	if in.recheck != "" && info.Version != in.checkedAt {
		o, ok, err := c.recordedIn(ctx, in.id, in.recheck, info.Version, messagesOf(stored), info.Offsets[MessagesField])
		if err != nil {
			return nil, err
		}
		if ok {
			return nil, &replayedTurn{out: o}
		}
	}
	if info.MaySuspend {
		if pl, ok := c.h.Coordinator().(harness.PendingLister); ok {
			p, err := pl.Pending(ctx, in.id)
			if err != nil {
				return nil, loadFailed(ctx, "chat: cannot list the session's suspended turns", err)
			}
			for _, sub := range p {
				done, err := c.isMarked(ctx, in.id, markSuperseded+sub.InvocationID)
				if err != nil {
					return nil, err
				}
				if done {
					in.left = append(in.left, sub)
				} else {
					in.pend = append(in.pend, sub)
				}
			}
		}
	}
	hist := messagesOf(stored)
	if off := info.Offsets[MessagesField]; off > 0 && (msg.Role == llm.RoleTool || msg.ToolCallID != "" || len(msg.ToolCalls) > 0 ||
		!slices.ContainsFunc(hist, func(m llm.Message) bool { return m.Role == llm.RoleUser })) {
		// A tail-loaded history whose last exchange starts before the
		// tail (the calls it may leave open are found in the whole one),
		// or a message with tool calls or results, checked against the
		// whole history: read it, and check the turn's writes against
		// it too (turnWrite.prefix).
		st, err := c.h.Graph().SessionState(ctx, in.id)
		if err != nil {
			return nil, err
		}
		whole := messagesOf(st)
		if len(whole) < off+len(hist) {
			return nil, errcat.Wrap(errcat.SessionWriteConflict, "chat: the session's history changed while the turn loaded it", session.ErrWriteConflict)
		}
		in.w.prefix, hist = whole[:off:off], whole
	}
	var input []llm.Message
	switch {
	case len(in.pend) > 0:
		input = closeOpenCalls(hist, c.superseded)
	case msg.Role == llm.RoleUser && exchangeCalls(hist):
		// Tool calls left open by a turn no longer suspended (cancelled,
		// its record lost) are closed too: no provider takes a history
		// with a tool call nobody answered. Calls that never awaited an
		// approval (a conversation a client sent whole) were not
		// cancelled: they are closed as unanswered.
		text := UnansweredResult
		if awaitedApproval(hist) {
			text = c.cancelled
		}
		input = closeOpenCalls(hist, text)
	}
	if len(in.pend) == 0 && len(input) == 0 && len(msg.ToolCalls) == 0 && msg.ToolCallID == "" && msg.Role != llm.RoleTool {
		return Messages.Add(msg), nil
	}
	input = append(input, msg)
	if err := llm.CheckHistory(hist, input); err != nil {
		return nil, &ShapeError{Err: err}
	}
	in.w.inputLen = len(input)
	for _, p := range in.pend {
		in.w.marks = append(in.w.marks, markSuperseded+p.InvocationID)
	}
	return Messages.Add(input...), nil
}

// awaitedApproval reports whether the history's last tool-call group
// holds an approval request (an aside: an assistant message among its
// results, which only a suspension for approval puts there). It reads
// the history back to that group's start only, so that a turn costs the
// same however long the session's history: an aside stands after the
// assistant message that opened its group, and a group's start resets
// what the messages before it left.
func awaitedApproval(hist []llm.Message) bool {
	start := len(hist)
	for start > 0 {
		start--
		if m := &hist[start]; m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			var asides llm.AsideFilter
			for i := start; i < len(hist); i++ {
				if asides.Aside(&hist[i]) {
					return true
				}
			}
			return false
		}
	}
	return false
}

// exchangeCalls reports whether the history's last exchange (since the
// last user message) has a tool call.
func exchangeCalls(hist []llm.Message) bool {
	for i := len(hist) - 1; i >= 0 && hist[i].Role != llm.RoleUser; i-- {
		if len(hist[i].ToolCalls) > 0 {
			return true
		}
	}
	return false
}

// closeOpenCalls returns a tool result, with text, for every tool call of
// the history's last exchange (since the last user message) that has no
// result yet, in call order.
func closeOpenCalls(hist []llm.Message, text string) []llm.Message {
	var out []llm.Message
	for _, tc := range callindex.Open(hist) {
		out = append(out, llm.ToolResult(tc.ID, text))
	}
	return out
}

// retire ends the suspended turns a committed turn superseded: their
// paused records are deleted and their subscriptions released, so their
// signals resume nothing. It returns their signal ids and their
// invocation ids. A failure only
// delays the cleanup: the superseding turn recorded a mark naming each
// superseded invocation, and Signal refuses those.
func (c *Harness) retire(ctx context.Context, pend []harness.Subscription) (signals, invocations []string) {
	if len(pend) == 0 {
		return nil, nil
	}
	ctx = context.WithoutCancel(ctx)
	signals, invocations = make([]string, 0, len(pend)), make([]string, 0, len(pend))
	for _, p := range pend {
		signals, invocations = append(signals, p.SignalID), append(invocations, p.InvocationID)
		if err := c.h.Graph().RetireSuspension(ctx, p.InvocationID); err != nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "chat: retiring a superseded suspension failed",
				slog.String("invocation_id", p.InvocationID), slog.String("error", err.Error()))
		}
		if err := c.h.Coordinator().Release(ctx, p); err != nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "chat: releasing a superseded subscription failed",
				slog.String("invocation_id", p.InvocationID), slog.String("error", err.Error()))
		}
	}
	return signals, invocations
}
