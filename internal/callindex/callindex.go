// Package callindex keeps an [llm.CallIndex] per session, so that the
// tool-call id checks of a session's turns (the chat harness's history
// check, the agent's id uniqueness) cost what each turn adds rather than
// a scan of the whole history; [Unique] gives a turn's tool calls ids
// unique in the session.
//
//	var c callindex.Cache
//	c.With(sessionID, func(x *llm.CallIndex) {
//		err = llm.CheckHistoryIndexed(history, added, x)
//	})
package callindex

import (
	"container/list"
	"crypto/sha256"
	"encoding/base32"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/armature-go/armature/llm"
)

// DefaultMax is how many sessions' indexes a Cache keeps when Max is 0.
const DefaultMax = 1024

// Cache holds the indexes of the sessions used last, at most Max (the
// least recently used go first; a dropped index is rebuilt on its next
// use). The zero value is ready to use. It is safe for concurrent use;
// uses of one key are serialized.
type Cache struct {
	// Max bounds the indexes kept; 0 means DefaultMax.
	Max int

	mu  sync.Mutex
	m   map[string]*list.Element // of *entry
	lru list.List                // most recently used in front
}

type entry struct {
	key string
	mu  sync.Mutex
	x   llm.CallIndex
}

// With runs fn with the index kept for key (empty the first time), which
// fn syncs to the key's history (llm.CallIndex.Sync, or
// llm.CheckHistoryIndexed). fn must not keep it.
func (c *Cache) With(key string, fn func(x *llm.CallIndex)) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*list.Element{}
	}
	var e *entry
	if el, ok := c.m[key]; ok {
		c.lru.MoveToFront(el)
		e = el.Value.(*entry)
	} else {
		e = &entry{key: key}
		c.m[key] = c.lru.PushFront(e)
		max := c.Max
		if max <= 0 {
			max = DefaultMax
		}
		for c.lru.Len() > max {
			old := c.lru.Remove(c.lru.Back()).(*entry)
			delete(c.m, old.key)
		}
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	fn(&e.x)
}

// Len returns how many sessions' indexes the cache keeps.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Forget drops the index of key (a deleted session's).
func (c *Cache) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		c.lru.Remove(el)
		delete(c.m, key)
	}
}

// Unique returns calls with ids unique in the whole history. A
// model sees only the window of the history, and some number their
// calls by what they see (call_1, call_2, …): an id reused from a call
// the window left out would make the stored history invalid for every
// provider (tool-call ids are unique in a conversation) and fail every
// such turn.
//
// history is what the turn loaded: the whole history (off 0), where a
// reused id is found and only such an id is replaced, or its last
// messages, after off others (a cold session read by its tail), where
// the older ids are unknown, so every id is replaced. A replacement
// keeps the model's id as its prefix and adds the absolute index of the
// message being added ("call_1_42"), which no other message has, so it
// cannot collide with an id the tail leaves out; it stays within
// [A-Za-z0-9_-]. The tool result and every later request carry it. An
// id longer than MaxIDBytes, or with bytes that are not printable
// ASCII, is replaced by its Short form first.
//
// inHistory, when not nil, answers whether a call of history has an id
// (an index of history); otherwise history is scanned.
func Unique(history []llm.Message, off int, calls []llm.ToolCall, inHistory func(id string) bool) []llm.ToolCall {
	if inHistory == nil {
		inHistory = func(id string) bool { return callIDUsed(history, nil, id, nil) }
	}
	return rename(calls, off+len(history), off > 0, inHistory)
}

// Fresh returns calls with every id that used reports taken, or that an
// earlier call of calls has, replaced by the id, "_" and at (then "_1",
// "_2", … while that is taken too): Unique for a history that is not a
// list of messages (an upstream's own session), at naming the position
// of the message being added.
func Fresh(calls []llm.ToolCall, at int, used func(id string) bool) []llm.ToolCall {
	return rename(calls, at, false, used)
}

// MaxIDBytes bounds the length of a tool-call id as the runtime keeps
// it. A longer one (an upstream's) is replaced, by Unique and Fresh, by
// "call_h" and 24 characters of its SHA-256 (the same for the same id,
// so every layer renames it alike), so that every id the runtime hands
// out fits where a client names it: an approval's signal id (the
// approval prefix and the call id) and an OpenAI approval_request_id
// are at most 256 bytes, and a suffix a repeated id gets still fits.
const MaxIDBytes = 128

// Short is id, or its replacement when it is longer than MaxIDBytes or
// holds a byte that is not printable ASCII (a space, a control
// character, NUL, anything not ASCII: a model's id with a bidirectional
// override would spoof an approval prompt naming it, and one with NUL
// fails the stores that keep it in a signal id).
func Short(id string) string {
	if len(id) <= MaxIDBytes && printableASCII(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "call_h" + strings.ToLower(base32.StdEncoding.EncodeToString(sum[:15]))
}

// printableASCII reports whether every byte of s is printable ASCII
// other than the space (0x21 to 0x7E).
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// rename is Unique and Fresh: all replaces every id, not only the taken
// ones.
func rename(calls []llm.ToolCall, pos int, all bool, used func(id string) bool) []llm.ToolCall {
	at := strconv.Itoa(pos)
	var out []llm.ToolCall
	for i := range calls {
		done := calls[:i]
		if out != nil {
			done = out[:i]
		}
		base := Short(calls[i].ID)
		id := base
		if all {
			id += "_" + at
		}
		for n := 0; callIDUsed(nil, done, id, used); n++ {
			id = base + "_" + at
			if n > 0 {
				id += "_" + strconv.Itoa(n)
			}
		}
		if id != calls[i].ID {
			if out == nil {
				out = slices.Clone(calls)
			}
			out[i].ID = id
		}
	}
	if out == nil {
		return calls
	}
	return out
}

// callIDUsed reports whether a call of history or one of earlier uses id
// (inHistory, when not nil, answers for history).
func callIDUsed(history []llm.Message, earlier []llm.ToolCall, id string, inHistory func(string) bool) bool {
	for _, tc := range earlier {
		if tc.ID == id {
			return true
		}
	}
	if inHistory != nil {
		return inHistory(id)
	}
	return HasCall(history, id)
}

// HasCall reports whether a tool call of history has id, scanning it
// from its end (for a history too short to be worth an index).
func HasCall(history []llm.Message, id string) bool {
	for i := len(history) - 1; i >= 0; i-- {
		for _, tc := range history[i].ToolCalls {
			if tc.ID == id {
				return true
			}
		}
	}
	return false
}

// Open returns the tool calls of history's last exchange (since the last
// user message) that have no result yet, in call order.
func Open(history []llm.Message) []llm.ToolCall {
	answered := map[string]bool{}
	var groups [][]llm.ToolCall // newest first
	for i := len(history) - 1; i >= 0 && history[i].Role != llm.RoleUser; i-- {
		m := history[i]
		switch {
		case m.Role == llm.RoleTool:
			answered[m.ToolCallID] = true
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0:
			groups = append(groups, m.ToolCalls)
		}
	}
	var open []llm.ToolCall
	for g := len(groups) - 1; g >= 0; g-- {
		for _, tc := range groups[g] {
			if !answered[tc.ID] {
				open = append(open, tc)
				answered[tc.ID] = true
			}
		}
	}
	return open
}
