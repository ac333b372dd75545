package sqlite

import (
	"sync"

	"github.com/armature-go/armature/session"
)

// maxVersionEntries bounds a sole writer's version map: a session it no
// longer remembers is checked with a query, as without the map.
const maxVersionEntries = 1 << 16

// versions is a sole writer's memory (Config.SoleWriter) of the version
// its last committed write left each session at. Every write of a
// session goes through this Store, and its effects are applied here in
// commit order, as each transaction commits and before any of its
// writers return: so an entry is the session's stored version, and a
// warm load's version check (Load with IfVersionNot) needs no query.
type versions struct {
	mu sync.Mutex
	m  map[string]verStamp

	// pending are the effects of the write transaction in progress, in
	// the order its writes ran; only the goroutine running it touches
	// them (write transactions run one at a time).
	pending []versionEffect
}

// verStamp is a session's stored version and update time (unix
// nanoseconds): what a conditional load compares.
type verStamp struct {
	version, updated int64
}

// is reports whether a conditional load req names this verStamp: its
// version, and its update time when req gives one (a session deleted
// and written again starts over at version 1).
func (st verStamp) is(req session.LoadRequest) bool {
	return st.version == req.IfVersionNot && (req.IfUpdatedAt.IsZero() || req.IfUpdatedAt.UnixNano() == st.updated)
}

// versionEffect is what a committed write did to a session: left it at
// version (version 0: deleted it).
type versionEffect struct {
	id      string
	version verStamp
}

// get returns the version the Store last committed of session id.
func (v *versions) get(id string) (verStamp, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, ok := v.m[id]
	return n, ok
}

// note records an effect of the write transaction in progress.
func (v *versions) note(id string, version verStamp) {
	v.pending = append(v.pending, versionEffect{id, version})
}

// applied applies the committed transaction's effects, in order, and
// forgets them.
func (v *versions) applied() {
	if len(v.pending) == 0 {
		return
	}
	v.mu.Lock()
	for _, e := range v.pending {
		if e.version.version == 0 {
			delete(v.m, e.id)
			continue
		}
		if v.m == nil {
			v.m = make(map[string]verStamp)
		}
		if _, ok := v.m[e.id]; !ok && len(v.m) >= maxVersionEntries {
			for k := range v.m { // forget an arbitrary session
				delete(v.m, k)
				break
			}
		}
		v.m[e.id] = e.version
	}
	v.mu.Unlock()
	v.discard(0)
}

// discard drops the pending effects from index from on (a write rolled
// back to its savepoint, or a transaction that did not commit).
func (v *versions) discard(from int) {
	clear(v.pending[from:])
	v.pending = v.pending[:from]
}
