package openspans

import (
	"fmt"
	"slices"
	"testing"
)

type testSpan struct {
	Entry
	ns   []string
	fan  []*int
	br   []*string
	name string
}

func (s *testSpan) Lineage() ([]string, []*int, []*string) { return s.ns, s.fan, s.br }
func (s *testSpan) OpenEntry() *Entry                      { return &s.Entry }

// find returns the names of the open spans with the lineage of x, oldest
// first, as a caller matching Candidates would.
func find(set *Set[*testSpan], x *testSpan) []string {
	var out []string
	for _, s := range set.Candidates(x.ns, x.fan, x.br) {
		if slices.Equal(s.ns, x.ns) && slices.Equal(s.fan, x.fan) && slices.Equal(s.br, x.br) {
			out = append(out, s.name)
		}
	}
	return out
}

// A Set finds its open spans by lineage, in start order, below and above
// the size from which it indexes them, and forgets removed ones.
func TestSetAcrossIndexing(t *testing.T) {
	idx := make([]int, 100)
	var spans []*testSpan
	var set Set[*testSpan]
	for i := range idx {
		idx[i] = i
		s := &testSpan{ns: []string{"fan"}, fan: []*int{&idx[i]}, br: []*string{nil}, name: fmt.Sprint("u", i)}
		spans = append(spans, s)
		set.Add(s)
		if got := find(&set, s); len(got) != 1 || got[0] != s.name {
			t.Fatalf("after adding %s: found %v", s.name, got)
		}
	}
	// A second span with the same lineage comes after the first.
	dup := &testSpan{ns: []string{"fan"}, fan: []*int{&idx[3]}, br: []*string{nil}, name: "u3bis"}
	set.Add(dup)
	if got := find(&set, dup); !slices.Equal(got, []string{"u3", "u3bis"}) {
		t.Fatalf("same lineage: %v", got)
	}
	for i, s := range spans {
		if i%3 != 0 {
			if !set.Remove(s) || set.Remove(s) {
				t.Fatalf("Remove %s: want true once", s.name)
			}
		}
	}
	if want := 34 + 1; set.Len() != want {
		t.Fatalf("Len %d, want %d", set.Len(), want)
	}
	for i, s := range spans {
		got := find(&set, s)
		switch {
		case i == 3:
			if !slices.Equal(got, []string{"u3", "u3bis"}) {
				t.Fatalf("u3: %v", got)
			}
		case i%3 == 0:
			if len(got) != 1 {
				t.Fatalf("%s: %v", s.name, got)
			}
		default:
			if len(got) != 0 {
				t.Fatalf("removed %s still found: %v", s.name, got)
			}
		}
	}
	var back []string
	set.Backward(func(s *testSpan) bool { back = append(back, s.name); return true })
	if len(back) != set.Len() || back[0] != "u3bis" || back[len(back)-1] != "u0" {
		t.Fatalf("Backward %v", back)
	}
	set.Clear()
	if set.Len() != 0 || spans[0].open {
		t.Fatal("Clear left spans open")
	}
}
