package runtime

import (
	"sync"
	"testing"
)

// TestPubLocks: locks of overlapping session sets, taken from many
// goroutines in any order, neither deadlock nor outlive their holders.
func TestPubLocks(t *testing.T) {
	var l pubLocks
	keys := []runKey{{"a", "1"}, {"a", "2"}, {"b", "1"}, {"a", "1"}}
	var wg sync.WaitGroup
	counter := map[runKey]int{}
	for i := range 64 {
		wg.Go(func() {
			set := []runKey{keys[i%4], keys[(i+1)%4], keys[(i+3)%4]}
			unlock := l.lock(set...)
			for _, k := range set {
				counter[k]++ // guarded by k's lock
			}
			unlock()
		})
	}
	wg.Wait()
	if len(l.m) != 0 {
		t.Fatalf("%d session locks left after every holder unlocked", len(l.m))
	}
	if n := counter[runKey{"a", "1"}] + counter[runKey{"a", "2"}] + counter[runKey{"b", "1"}]; n != 64*3 {
		t.Fatalf("counted %d, want %d", n, 64*3)
	}
}
