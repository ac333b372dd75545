package llm

import "slices"

// An AsideFilter picks the asides out of a conversation walked in order.
//
// An aside is an assistant message without tool calls that stands inside
// a tool-call group: after an assistant message that makes n tool calls
// and before the n-th tool message that follows it. A stored chat history
// may hold asides — the agent package's approval request asks the user
// whether to run a call before the call has a result, and [CheckHistory]
// accepts it — but providers require a call's results to follow it
// directly, so every wire mapping leaves the asides of
// [Request.Messages] out of the request it sends, as must any [Provider]
// that maps a Request to a wire format of its own. The results of a group
// are counted, not matched by id: validation has already paired each
// result with an earlier call.
//
// The zero value is ready for the first message of a conversation. An
// AsideFilter is a small value with no references; it is not safe for
// concurrent use.
type AsideFilter struct{ open int }

// Aside reports whether m, the next message of the conversation, is an
// aside. Call it once per message, in order.
func (f *AsideFilter) Aside(m *Message) bool {
	switch {
	case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
		f.open = len(m.ToolCalls)
	case m.Role == RoleTool && f.open > 0:
		f.open--
	case m.Role == RoleAssistant && f.open > 0:
		return true
	}
	return false
}

// Transcript returns r's conversation as one new list, as it goes on the
// wire: [Request.System] as a leading system message (when set), then
// Messages without their asides (see [AsideFilter]). It copies the
// conversation; the wire mappings walk System and Messages in place
// instead, and use it only where they rewrite the list anyway (the
// prompt-augmented structured-output fallback, [AugmentForSchema]).
func (r *Request) Transcript() []Message {
	out := make([]Message, 0, len(r.Messages)+1)
	if r.System != "" {
		out = append(out, SystemText(r.System))
	}
	var asides AsideFilter
	for i := range r.Messages {
		if !asides.Aside(&r.Messages[i]) {
			out = append(out, r.Messages[i])
		}
	}
	return slices.Clip(out)
}
