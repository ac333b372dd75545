package llm

import "strconv"

// CheckHistory reports whether appending added to history keeps a chat
// history valid for every provider mapping (llm-provider §3). history is
// the stored conversation and is assumed valid; only the messages of
// added are checked, against history followed by added:
//
//   - every message of added passes [Message.Validate] (an assistant
//     message needs content or tool calls, and so on);
//   - every tool message of added answers, by its ToolCallID, a tool call
//     of an assistant message that comes earlier in history+added, and no
//     tool call is answered twice (a result for a call that already has
//     one, in history or earlier in added, is an error);
//   - the tool call ids of every assistant message of added are non-empty
//     and unique across history+added.
//
// These are the rules providers enforce on a stored conversation. The
// rules [ValidateMessages] adds for one complete() request are not
// checked: where a system message stands, which message comes first or
// last, the tool definitions. In particular an assistant message may
// stand between a tool call and its result (an approval request asking
// whether to run the call).
//
// It returns nil or a *[ValidationError] (category
// provider_invalid_request, like every validation error) for the first
// offending message of added, with Index its index in history+added and
// Field the full path named from there, such as
// "messages[7].tool_call_id" or "messages[9].tool_calls[0].id".
//
// Its cost is proportional to len(added) when added holds no tool call
// and no tool message. Otherwise it scans history once, backwards: to its
// start when added makes tool calls (their ids must be unique across the
// whole history), and otherwise only back to the calls that the tool
// messages of added answer. It does not allocate on a valid append that
// uses up to 16 tool call ids.
func CheckHistory(history, added []Message) error {
	return orNil(checkHistory(history, added))
}

// A toolRef is one use of a tool call id by a message of added: the id of
// one of its tool calls, or the id a tool message answers.
type toolRef struct {
	id   string
	at   int // index of the message in history+added
	call int // index of the call in the message's ToolCalls; -1 for a tool message
}

// A toolID is what is known of one id that the messages of added use.
type toolID struct {
	id string
	// full: a message of added makes a call with this id, so all of
	// history is searched for another call with it. Otherwise only tool
	// messages of added use it, and history is searched back to its call.
	full bool
	// callAt, callIdx locate the call with this id in history (callAt -1:
	// none); answerAt is a history tool message answering it (-1: none).
	callAt, callIdx, answerAt int
	// addedCallAt, addedCallIdx and addedAnswerAt are the same for the
	// messages of added checked so far.
	addedCallAt, addedCallIdx, addedAnswerAt int
}

// toolIDs is the set of ids the messages of added use, kept in a slice
// (a stack buffer while small) and indexed by a map once large.
type toolIDs struct {
	list  []toolID
	index map[string]int
}

const toolIDsSmall = 16

// find returns the position of id in s.list, or -1.
func (s *toolIDs) find(id string) int {
	if s.index != nil {
		if i, ok := s.index[id]; ok {
			return i
		}
		return -1
	}
	for i := range s.list {
		if s.list[i].id == id {
			return i
		}
	}
	return -1
}

// add returns s with id added, and its position in the list. (A value
// method, so that a stack buffer behind the list stays on the stack.)
func (s toolIDs) add(id string) (toolIDs, int) {
	if i := s.find(id); i >= 0 {
		return s, i
	}
	s.list = append(s.list, toolID{id: id, callAt: -1, callIdx: -1, answerAt: -1,
		addedCallAt: -1, addedCallIdx: -1, addedAnswerAt: -1})
	i := len(s.list) - 1
	switch {
	case s.index != nil:
		s.index[id] = i
	case len(s.list) > toolIDsSmall:
		s.index = make(map[string]int, 2*len(s.list))
		for j := range s.list {
			s.index[s.list[j].id] = j
		}
	}
	return s, i
}

func checkHistory(history, added []Message) *ValidationError {
	return checkHistoryWith(history, added, nil)
}

// checkHistoryWith is checkHistory, with x (when not nil) an index of
// history's tool call ids: an id that added makes a call with needs no
// full scan of history when history does not use it at all (the scan
// would find nothing for it).
func checkHistoryWith(history, added []Message, x *CallIndex) *ValidationError {
	var refBuf [32]toolRef
	refs := refBuf[:0]
	var shapeErr *ValidationError
	for i := range added {
		m := &added[i]
		if err := m.validate(); err != nil {
			// Reported unless an earlier message breaks a list rule.
			shapeErr = err.at(len(history) + i)
			break
		}
		if m.Role == RoleTool {
			refs = append(refs, toolRef{id: m.ToolCallID, at: len(history) + i, call: -1})
		}
		for j := range m.ToolCalls {
			refs = append(refs, toolRef{id: m.ToolCalls[j].ID, at: len(history) + i, call: j})
		}
	}
	if len(refs) == 0 {
		return shapeErr
	}
	var idBuf [toolIDsSmall]toolID
	ids := toolIDs{list: idBuf[:0]}
	for _, r := range refs {
		var x int
		if ids, x = ids.add(r.id); r.call >= 0 {
			ids.list[x].full = true
		}
	}
	// An id that added makes a call with is searched in all of history;
	// one that added only answers, back to its call.
	pending, full := 0, false
	for i := range ids.list {
		switch {
		case !ids.list[i].full:
			pending++
		case x == nil || x.uses(ids.list[i].id):
			full = true
		}
	}
	scanHistory(history, &ids, full, pending)
	if err := checkRefs(refs, &ids); err != nil {
		return err
	}
	return shapeErr
}

// scanHistory walks history backwards and records, for each id of ids,
// the call making it and a tool message answering it after that call. It
// goes to the start of history when full is set, and otherwise stops once
// the calls of all pending ids are found: in a valid history a call's
// results come after it.
func scanHistory(history []Message, ids *toolIDs, full bool, pending int) {
	for k := len(history) - 1; k >= 0 && (full || pending > 0); k-- {
		m := &history[k]
		if m.Role == RoleTool {
			if x := ids.find(m.ToolCallID); x >= 0 && ids.list[x].callAt < 0 {
				ids.list[x].answerAt = k
			}
			continue
		}
		for j := range m.ToolCalls {
			x := ids.find(m.ToolCalls[j].ID)
			if x < 0 || ids.list[x].callAt >= 0 {
				continue
			}
			ids.list[x].callAt, ids.list[x].callIdx = k, j
			if !ids.list[x].full {
				pending--
			}
		}
	}
}

// checkRefs checks the tool-call ids of added in order, against history
// (as scanned into ids) and the earlier messages of added.
func checkRefs(refs []toolRef, ids *toolIDs) *ValidationError {
	for _, r := range refs {
		e := &ids.list[ids.find(r.id)]
		if r.call >= 0 {
			at, idx := e.callAt, e.callIdx
			if at < 0 {
				at, idx = e.addedCallAt, e.addedCallIdx
			}
			if at >= 0 {
				return invalid("id", "tool call id "+strconv.Quote(r.id)+" duplicates the id of messages["+
					strconv.Itoa(at)+"].tool_calls["+strconv.Itoa(idx)+"]").under("tool_calls", r.call).at(r.at)
			}
			e.addedCallAt, e.addedCallIdx = r.at, r.call
			continue
		}
		if e.callAt < 0 && e.addedCallAt < 0 {
			return invalid("tool_call_id", "tool_call_id "+strconv.Quote(r.id)+
				" matches no tool call of an earlier assistant message").at(r.at)
		}
		first := e.answerAt
		if first < 0 {
			first = e.addedAnswerAt
		}
		if first >= 0 {
			return invalid("tool_call_id", "tool message answers call "+strconv.Quote(r.id)+
				" a second time (messages["+strconv.Itoa(first)+"] answers it first)").at(r.at)
		}
		e.addedAnswerAt = r.at
	}
	return nil
}
