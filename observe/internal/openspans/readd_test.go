package openspans

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func readdBackward(s *Set[*testSpan]) []string {
	var out []string
	s.Backward(func(x *testSpan) bool { out = append(out, x.name); return true })
	return out
}

// A span removed then added again once the set is indexed: it is the
// newest open span, listed once.
func TestReAddAfterIndexing(t *testing.T) {
	idx := make([]int, 20)
	var set Set[*testSpan]
	var spans []*testSpan
	for i := range 10 {
		idx[i] = i
		s := &testSpan{ns: []string{"n"}, fan: []*int{&idx[i]}, br: []*string{nil}, name: fmt.Sprint("s", i)}
		spans = append(spans, s)
		set.Add(s)
	}
	set.Remove(spans[2])
	set.Add(spans[2])
	got := readdBackward(&set)
	if set.Len() != 10 || len(got) != 10 || got[0] != "s2" || slices.Index(got[1:], "s2") >= 0 {
		t.Fatalf("Len %d, Backward (newest first) %v: want 10 spans, s2 first and once", set.Len(), got)
	}
}

// Two lineages whose hash input bytes are equal (a namespace element
// holding the separator byte): both in one bucket, told apart by the
// caller's match.
func TestHashCollision(t *testing.T) {
	var set Set[*testSpan]
	for i := range 9 {
		set.Add(&testSpan{ns: []string{fmt.Sprint("pad", i)}, name: fmt.Sprint("p", i)})
	}
	a := &testSpan{ns: []string{"a\x00b"}, name: "a"}
	b := &testSpan{ns: []string{"a", "b"}, name: "b"}
	set.Add(a)
	set.Add(b)
	if c := set.Candidates(a.ns, nil, nil); len(c) != 2 {
		t.Logf("candidates %d (collision expected 2)", len(c))
	}
	if got := find(&set, a); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("find a: %v", got)
	}
	if got := find(&set, b); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("find b: %v", got)
	}
	set.Remove(a)
	if got := find(&set, b); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after removing a, find b: %v", got)
	}
	if set.Remove(a) {
		t.Fatal("second Remove reported open")
	}
}

// Randomized model check: adds (fresh spans, same-lineage duplicates),
// removes (including twice) and, separately, re-adds; compared to a
// slice model.
func TestRandomModel(t *testing.T) {
	for _, readd := range []bool{false, true} {
		seed := uint64(rand.Int64())
		t.Logf("readd=%t seed=%d", readd, seed)
		r := rand.New(rand.NewPCG(seed, 1))
		ints := make([]int, 6)
		for i := range ints {
			ints[i] = i
		}
		names := []string{"x", "y", "z"}
		var set Set[*testSpan]
		var model []*testSpan
		var all []*testSpan
		for step := range 20000 {
			switch op := r.IntN(10); {
			case op < 5 || len(all) == 0:
				s := &testSpan{ns: []string{names[r.IntN(3)]}, fan: []*int{&ints[r.IntN(6)]}, br: []*string{nil}, name: fmt.Sprint(step)}
				all = append(all, s)
				set.Add(s)
				model = append(model, s)
			case op < 9:
				s := all[r.IntN(len(all))]
				i := slices.Index(model, s)
				if got := set.Remove(s); got != (i >= 0) {
					t.Fatalf("seed %d step %d: Remove=%t, model open=%t", seed, step, got, i >= 0)
				}
				if i >= 0 {
					model = slices.Delete(model, i, i+1)
				}
			default:
				if !readd {
					continue
				}
				s := all[r.IntN(len(all))]
				if slices.Index(model, s) < 0 {
					set.Add(s)
					model = append(model, s)
				}
			}
			if set.Len() != len(model) {
				t.Fatalf("seed %d step %d: Len %d model %d", seed, step, set.Len(), len(model))
			}
			if step%97 == 0 {
				var back []*testSpan
				set.Backward(func(x *testSpan) bool { back = append(back, x); return true })
				slices.Reverse(back)
				if !slices.Equal(back, model) {
					t.Fatalf("readd=%t seed %d step %d: Backward differs from model (%d vs %d)", readd, seed, step, len(back), len(model))
				}
				probe := model
				if len(probe) > 0 {
					p := probe[r.IntN(len(probe))]
					var want []string
					for _, m := range model {
						if slices.Equal(m.ns, p.ns) && *m.fan[0] == *p.fan[0] {
							want = append(want, m.name)
						}
					}
					var got []string
					for _, c := range set.Candidates(p.ns, p.fan, p.br) {
						if c.OpenEntry().open && slices.Equal(c.ns, p.ns) && *c.fan[0] == *p.fan[0] {
							got = append(got, c.name)
						}
					}
					if !slices.Equal(got, want) {
						t.Fatalf("readd=%t seed %d step %d: candidates %v want %v", readd, seed, step, got, want)
					}
				}
			}
		}
	}
}
