// Package callindex keeps an [llm.CallIndex] per session, so that the
// tool-call id checks of a session's turns (the chat harness's history
// check, the agent's id uniqueness) cost what each turn adds rather than
// a scan of the whole history.
//
//	var c callindex.Cache
//	c.With(sessionID, func(x *llm.CallIndex) {
//		err = llm.CheckHistoryIndexed(history, added, x)
//	})
package callindex

import (
	"container/list"
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

// Forget drops the index of key (a deleted session's).
func (c *Cache) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		c.lru.Remove(el)
		delete(c.m, key)
	}
}
