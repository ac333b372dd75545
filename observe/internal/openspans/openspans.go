// Package openspans keeps the open spans of one invocation for the
// observers in observe/: in start order, and looked up by their §6
// lineage (namespace, fan-out index chain, branch name chain) in
// constant time however many are open, so that rendering a fan-out of n
// instances costs O(n), not O(n²).
//
// A [Set] is not safe for concurrent use: its observer guards it with
// the lock of the invocation it belongs to.
package openspans

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
)

// Entry records a span's membership in a [Set]; span types embed it.
type Entry struct {
	open bool
	// gen counts the span's Adds: an order entry is the span's current
	// one when it carries the span's gen.
	gen uint32
}

// Span is an open span type: a pointer to a struct embedding [Entry].
type Span interface {
	comparable
	// Lineage returns the span's namespace and lineage chains; they
	// must not change while the span is in a Set.
	Lineage() (ns []string, fan []*int, br []*string)
	// OpenEntry returns the span's embedded Entry.
	OpenEntry() *Entry
}

// indexAt is the number of open spans from which a Set indexes them by
// lineage: below it a scan of the few open spans is cheaper than hashing.
const indexAt = 8

// Set is the open spans of an invocation, oldest first. The zero value
// is an empty set.
type Set[S Span] struct {
	// order holds the spans in start order; once indexed it also holds
	// dead entries (a removed span's, or the earlier one of a span
	// removed and added again), dead of them, until compacted. gens,
	// kept once indexed, holds each order entry's Entry gen.
	order []S
	gens  []uint32
	live  int
	dead  int
	// idx buckets the open spans by lineage hash, each bucket in start
	// order; nil until the set first holds indexAt spans.
	idx  map[uint64][]S
	seed maphash.Seed
}

// UseBuffer makes the empty set start in buf's storage.
func (s *Set[S]) UseBuffer(buf []S) {
	if len(s.order) == 0 {
		s.order = buf[:0]
	}
}

// Len returns the number of open spans.
func (s *Set[S]) Len() int { return s.live }

// Add tracks x as the newest open span.
func (s *Set[S]) Add(x S) {
	e := x.OpenEntry()
	if e.open {
		return
	}
	e.open = true
	e.gen++
	s.order = append(s.order, x)
	s.live++
	switch {
	case s.idx != nil:
		s.gens = append(s.gens, e.gen)
		h := s.hash(x.Lineage())
		s.idx[h] = append(s.idx[h], x)
	case s.live >= indexAt:
		s.seed = maphash.MakeSeed()
		s.idx = make(map[uint64][]S, 2*s.live)
		s.gens = make([]uint32, len(s.order), cap(s.order))
		for i, y := range s.order {
			s.gens[i] = y.OpenEntry().gen
			h := s.hash(y.Lineage())
			s.idx[h] = append(s.idx[h], y)
		}
	}
}

// current reports whether order entry i is its span's open entry.
func (s *Set[S]) current(i int) bool {
	e := s.order[i].OpenEntry()
	return e.open && (s.gens == nil || s.gens[i] == e.gen)
}

// Remove stops tracking x, reporting whether it was open.
func (s *Set[S]) Remove(x S) bool {
	e := x.OpenEntry()
	if !e.open {
		return false
	}
	e.open = false
	s.live--
	if s.idx == nil {
		if i := slices.Index(s.order, x); i >= 0 {
			s.order = slices.Delete(s.order, i, i+1)
		}
		return true
	}
	h := s.hash(x.Lineage())
	b := s.idx[h]
	if i := slices.Index(b, x); i >= 0 {
		b = slices.Delete(b, i, i+1)
	}
	if len(b) == 0 {
		delete(s.idx, h)
	} else {
		s.idx[h] = b
	}
	s.dead++
	if s.dead > indexAt && s.dead > s.live {
		n := 0
		for i := range s.order {
			if s.current(i) {
				s.order[n], s.gens[n] = s.order[i], s.gens[i]
				n++
			}
		}
		clear(s.order[n:])
		s.order, s.gens = s.order[:n], s.gens[:n]
		s.dead = 0
	}
	return true
}

// Candidates returns, oldest first, a superset of the open spans with
// the lineage (all of them while the set is small): the caller matches
// each. The slice is the set's own, valid until the set changes.
func (s *Set[S]) Candidates(ns []string, fan []*int, br []*string) []S {
	if s.idx == nil {
		return s.order
	}
	return s.idx[s.hash(ns, fan, br)]
}

// Backward calls f with each open span, newest first, until f returns
// false.
func (s *Set[S]) Backward(f func(S) bool) {
	for i := len(s.order) - 1; i >= 0; i-- {
		if s.current(i) && !f(s.order[i]) {
			return
		}
	}
}

// Clear removes every span.
func (s *Set[S]) Clear() {
	for _, x := range s.order {
		x.OpenEntry().open = false
	}
	clear(s.order)
	*s = Set[S]{}
}

// hash returns the hash of a lineage.
func (s *Set[S]) hash(ns []string, fan []*int, br []*string) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	var b [9]byte
	for _, n := range ns {
		_, _ = h.WriteString(n)
		_ = h.WriteByte(0)
	}
	_ = h.WriteByte(1)
	for _, i := range fan {
		if i == nil {
			_ = h.WriteByte(0)
			continue
		}
		b[0] = 1
		binary.LittleEndian.PutUint64(b[1:], uint64(*i))
		_, _ = h.Write(b[:])
	}
	_ = h.WriteByte(2)
	for _, n := range br {
		if n == nil {
			_ = h.WriteByte(0)
			continue
		}
		_ = h.WriteByte(1)
		_, _ = h.WriteString(*n)
		_ = h.WriteByte(0)
	}
	return h.Sum64()
}
