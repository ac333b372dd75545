package llm

import "weak"

// CallIndex indexes the tool call ids a history uses, in its assistant
// messages' tool calls and in its tool messages, and grows with it. A
// chat session's history only grows (new messages are appended in place
// to the same array, see [CallIndex.Sync]), so an index kept per
// session makes the tool-call id checks of a turn ([CheckHistoryIndexed],
// a caller's own uniqueness check) cost what the turn adds, instead of a
// scan of the whole history on every turn that calls a tool.
//
// The zero value is an empty index. A CallIndex is not safe for
// concurrent use.
type CallIndex struct {
	n int // history[:n] is indexed
	// first is &history[0], the indexed history's identity (with n):
	// weak, so that an index kept for a session does not keep its
	// history alive, and at the array's start, so that every Sync of a
	// growing history looks up the same weak handle (one per offset).
	first   weak.Pointer[Message]
	calls   map[string]struct{}
	answers map[string]struct{}
}

// Sync makes x index history. When history extends the history x
// indexes (it starts at the same address: the same backing array,
// appended to), x reads only the messages after the indexed ones;
// otherwise x is rebuilt from history. So a history
// must not be modified in place once indexed; appending to it is fine.
func (x *CallIndex) Sync(history []Message) {
	if x.n > 0 && (len(history) < x.n || weak.Make(&history[0]) != x.first) {
		x.n, x.first = 0, weak.Pointer[Message]{}
		clear(x.calls)
		clear(x.answers)
	}
	if x.calls == nil {
		x.calls, x.answers = map[string]struct{}{}, map[string]struct{}{}
	}
	for i := x.n; i < len(history); i++ {
		m := &history[i]
		if m.Role == RoleTool {
			x.answers[m.ToolCallID] = struct{}{}
		}
		for j := range m.ToolCalls {
			x.calls[m.ToolCalls[j].ID] = struct{}{}
		}
	}
	if x.n == 0 && len(history) > 0 {
		x.first = weak.Make(&history[0])
	}
	x.n = len(history)
}

// HasCall reports whether a tool call of the indexed history has id.
func (x *CallIndex) HasCall(id string) bool {
	_, ok := x.calls[id]
	return ok
}

// uses reports whether the indexed history uses id, in a tool call or in
// a tool message.
func (x *CallIndex) uses(id string) bool {
	if _, ok := x.calls[id]; ok {
		return true
	}
	_, ok := x.answers[id]
	return ok
}

// CheckHistoryIndexed is [CheckHistory] with an index of history's tool
// call ids, which it first syncs to history ([CallIndex.Sync]): the tool
// calls added makes are looked up in the index, and history is scanned
// in full only when one of their ids is already used there (the turn is
// then invalid). It returns exactly what CheckHistory returns.
func CheckHistoryIndexed(history, added []Message, x *CallIndex) error {
	x.Sync(history)
	return orNil(checkHistoryWith(history, added, x))
}
