package runtime_test

import (
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

func TestNewRunID(t *testing.T) {
	base := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	prev := ""
	for i := range 2000 {
		// Several ids per millisecond, then later milliseconds: ids sort
		// by time, and never repeat.
		id := runtime.NewRunID(base.Add(time.Duration(i/4) * time.Millisecond))
		if len(id) != 26 || strings.Trim(id, "234567ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			t.Fatalf("id %q: want 26 characters of 2-7 and A-Z", id)
		}
		if seen[id] {
			t.Fatalf("id %q minted twice", id)
		}
		seen[id] = true
		if i%4 == 0 && id <= prev {
			t.Fatalf("id %q (ms %d) sorts before %q of an earlier millisecond", id, i/4, prev)
		}
		if i%4 == 3 {
			prev = id
		}
	}
	// The random part uses the whole alphabet at every position.
	var used [16]map[byte]bool
	for i := range used {
		used[i] = map[byte]bool{}
	}
	for range 4000 {
		id := runtime.NewRunID(base)
		for i := range 16 {
			used[i][id[10+i]] = true
		}
	}
	for i, u := range used {
		if len(u) != 32 {
			t.Errorf("random position %d: %d of 32 characters in 4000 ids", i, len(u))
		}
	}
	// Times before 1970 clamp instead of wrapping round.
	if a, b := runtime.NewRunID(time.Unix(-5, 0)), runtime.NewRunID(time.Unix(0, 0)); a[:10] != b[:10] {
		t.Errorf("pre-epoch prefix %q, want %q", a[:10], b[:10])
	}
}
