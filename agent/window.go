package agent

import (
	"math"
	"sync/atomic"

	"github.com/armature-go/armature/llm"
)

// Window is the context-window policy of an agent's model calls: which
// recent part of the session's history a call sends. The zero value sends
// the whole history. The history itself is never changed: the window is
// what one call sends, chosen anew on every call.
//
// A call sends the system prompt, the tool definitions and a window of
// the history that is a suffix of it, history[start:], where start is the
// earliest turn boundary whose window fits both bounds. A turn boundary
// is the start of the history, or a user message that stands outside
// every tool-call group (no tool result after it answers a call made
// before it). So a window
//
//   - always carries the system prompt (it is not part of the history and
//     is not counted by MaxMessages; it counts against MaxTokens);
//   - starts with a user message (or with the history's first message);
//   - never starts with a tool result and never splits a tool call from
//     its results: the whole of every group is in it, or none;
//   - always holds the turn in progress, from its user message, even when
//     that turn alone exceeds a bound (the model must see what it is
//     answering; the provider then reports its context limit, if any, as
//     a provider_invalid_request failure of the turn).
//
// Approval requests standing inside tool-call groups (llm.AsideFilter)
// are not sent, so they count toward neither bound.
//
// The selection walks the history backwards from its end and stops at
// the first message past the bounds: its cost is proportional to the
// window (plus, when the turn in progress is over budget, to that turn),
// never to the history.
type Window struct {
	// MaxMessages bounds the history messages a call sends; 0 means no
	// bound.
	MaxMessages int
	// MaxTokens bounds the input tokens of a call: the system prompt, the
	// tool definitions and the history messages it sends; 0 means no
	// bound. Tokens are estimated per message with the provider's
	// llm.TokenEstimator (llm.EstimateTokens when it has none), and the
	// estimate is corrected by the prompt tokens the provider reports:
	// after each call the agent compares the usage reported with its
	// estimate of what it sent and scales later estimates by the ratio
	// (averaged over calls, between 1/4 and 4).
	MaxTokens int
}

// IsZero reports whether w sets no bound (the whole history is sent).
func (w Window) IsZero() bool { return w.MaxMessages <= 0 && w.MaxTokens <= 0 }

// Start returns where the window of a call begins in history (the call
// sends history[start:]) and the window's estimated tokens: fixed (the
// tokens of the request outside the history: system prompt and tool
// definitions) plus tokens(m) for every message of the window that is
// sent. tokens is called only when w.MaxTokens is set, and only for the
// messages the walk reaches. history must be a valid chat history
// (llm.CheckHistory); with no bound set, Start returns 0 at once, without
// estimating anything.
func (w Window) Start(history []llm.Message, fixed int, tokens func(*llm.Message) int) (start, cost int) {
	if w.IsZero() {
		return 0, 0
	}
	start, cost = w.start(history, fixed, tokens, false)
	if start < 0 { // not a valid history: send it all
		return 0, cost
	}
	return start, cost
}

// TailMax is how many of the history's last messages an agent with
// window w loads from its session (graph.WithSessionTail): 0, the whole
// history, unless MaxMessages is set; then MaxMessages and tailSlack
// more: the window's messages, the one past it that ends the walk, and
// room for approval requests inside tool-call groups, which do not
// count. A turn whose window the tail cannot decide (the walk over it
// reaches its first message before a bound) reads the history whole,
// so the window is always the one a whole history gives.
func (w Window) TailMax() int {
	if w.MaxMessages <= 0 {
		return 0
	}
	return w.MaxMessages + tailSlack
}

// tailSlack is what a tail holds beyond a window's MaxMessages (TailMax).
const tailSlack = 8

// start is Start over a history that is whole or, when partial, a
// suffix of the history: index 0 of a partial one is no turn boundary
// unless it is a user message. It returns -1 when it finds no boundary.
func (w Window) start(history []llm.Message, fixed int, tokens func(*llm.Message) int, partial bool) (start, cost int) {
	start, cost, _ = w.scan(history, fixed, tokens, partial)
	return start, cost
}

// scan is start, also reporting whether the walk stopped at a bound
// (stopped) rather than at the history's first message: over a partial
// history, only a walk that stopped finds the window a whole history
// gives (the messages before the suffix could hold an earlier boundary).
func (w Window) scan(history []llm.Message, fixed int, tokens func(*llm.Message) int, partial bool) (start, cost int, stopped bool) {
	best, bestCost := -1, 0
	count, cost := 0, fixed
	var openBuf [8]string
	open := openBuf[:0] // the calls answered in history[i:] but made before i
	for i := len(history) - 1; i >= 0; i-- {
		m := &history[i]
		switch {
		case m.Role == llm.RoleTool:
			open = append(open, m.ToolCallID)
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0:
			open = closeCalls(open, m.ToolCalls)
		}
		if aside := m.Role == llm.RoleAssistant && len(m.ToolCalls) == 0 && len(open) > 0; !aside {
			count++
			if w.MaxTokens > 0 {
				cost += tokens(m)
			}
		}
		over := (w.MaxMessages > 0 && count > w.MaxMessages) || (w.MaxTokens > 0 && cost > w.MaxTokens)
		if over && best >= 0 {
			stopped = true
			break
		}
		if len(open) == 0 && ((i == 0 && !partial) || m.Role == llm.RoleUser) {
			best, bestCost = i, cost
			if over {
				stopped = true
				break // the turn in progress, over budget
			}
		}
	}
	if best < 0 {
		return -1, cost, stopped
	}
	return best, bestCost, stopped
}

// closeCalls removes from open the ids of calls.
func closeCalls(open []string, calls []llm.ToolCall) []string {
	for j := range calls {
		for k, id := range open {
			if id == calls[j].ID {
				open[k] = open[len(open)-1]
				open = open[:len(open)-1]
				break
			}
		}
	}
	return open
}

// calibration is the correction of an agent's token estimates: the
// average ratio of the prompt tokens providers reported to the agent's
// estimate of what it sent. Its zero value has no observation (ratio 1).
// It is safe for concurrent use: every session's calls contribute.
type calibration struct{ bits atomic.Uint64 } // math.Float64bits of the ratio; 0: none

// ratio returns the current correction (1 before any observation).
func (c *calibration) ratio() float64 {
	if b := c.bits.Load(); b != 0 {
		return math.Float64frombits(b)
	}
	return 1
}

// observe folds one call into the correction: the provider reported
// reported prompt tokens for a request estimated at estimate.
func (c *calibration) observe(reported, estimate int) {
	if reported <= 0 || estimate <= 0 {
		return
	}
	obs := min(max(float64(reported)/float64(estimate), 0.25), 4)
	for {
		old := c.bits.Load()
		next := obs
		if old != 0 {
			next = (math.Float64frombits(old) + obs) / 2
		}
		if c.bits.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}
