package runtimetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// testPrune checks runtime.Pruner, for stores that implement it: age
// pruning deletes the finished runs that ended before the cutoff with
// their events, never a started run; the size cap deletes the oldest
// finished runs until the estimate fits; the reported size matches
// runtime.RunSize and runtime.EventSize of what is left.
func testPrune(t *testing.T, s runtime.Store) {
	p, ok := s.(runtime.Pruner)
	if !ok {
		t.Skip("the store does not implement runtime.Pruner")
	}
	ctx := t.Context()
	if _, err := p.Prune(ctx, runtime.PruneRequest{MaxBytes: -1}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Fatalf("Prune(MaxBytes -1) = %v, want ErrInvalidRequest", err)
	}
	start(t, s, "acme", "r0", "s1") // left started: never pruned
	appendEvs(t, s, "acme", "r0", evs("a"))
	for i := 1; i <= 5; i++ {
		id := fmt.Sprintf("r%d", i)
		start(t, s, "acme", id, "s1")
		appendEvs(t, s, "acme", id, evs("a", "b", "c"))
		if err := s.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: id, Status: runtime.StatusCompleted,
			Output: []byte(`{"text":"done"}`), EndedAt: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	start(t, s, "other", "r1", "s1") // another tenant's run of the same id
	if err := s.Finish(ctx, runtime.FinishRequest{Tenant: "other", RunID: "r1", Status: runtime.StatusFailed,
		Error: &runtime.RunError{Bucket: "b", Category: "c", Message: "m"}, EndedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	left := func(want ...string) int64 {
		t.Helper()
		var size int64
		var got []string
		for _, tenant := range []string{"acme", "other"} {
			page, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: tenant, PageSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			for i := len(page.Runs) - 1; i >= 0; i-- {
				r := page.Runs[i]
				got = append(got, tenant+"/"+r.ID)
				size += runtime.RunSize(r)
				for _, e := range events(t, s, runtime.EventsRequest{Tenant: tenant, RunID: r.ID}) {
					size += runtime.EventSize(e)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("runs left = %v, want %v", got, want)
		}
		return size
	}

	res, err := p.Prune(ctx, runtime.PruneRequest{EndedBefore: t0.Add(2*time.Minute + time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	size := left("acme/r0", "acme/r3", "acme/r4", "acme/r5", "other/r1")
	if res.Runs != 2 || res.Events != 6 || res.Bytes != size {
		t.Fatalf("Prune by age = %+v, want 2 runs, 6 events, %d bytes left", res, size)
	}
	if _, err := s.Run(ctx, "acme", "r1"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("pruned run: %v, want ErrNotFound", err)
	}
	if got := events(t, s, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"}); len(got) != 1+3*3 {
		t.Fatalf("session events after pruning = %d, want 10", len(got))
	}
	if _, err := s.Run(ctx, "other", "r1"); err != nil {
		t.Fatalf("another tenant's run of the same id was pruned: %v", err)
	}

	// The size cap: one byte under takes the oldest finished run only.
	res, err = p.Prune(ctx, runtime.PruneRequest{MaxBytes: size - 1})
	if err != nil {
		t.Fatal(err)
	}
	size2 := left("acme/r0", "acme/r4", "acme/r5", "other/r1")
	if res.Runs != 1 || res.Events != 3 || res.Bytes != size2 {
		t.Fatalf("Prune by size = %+v, want 1 run, 3 events, %d bytes left", res, size2)
	}
	// Nothing to do is not an error.
	if res, err = p.Prune(ctx, runtime.PruneRequest{MaxBytes: size2}); err != nil || res.Runs != 0 {
		t.Fatalf("Prune under the cap = %+v, %v", res, err)
	}
	// A cap below every run leaves only the started one.
	if _, err = p.Prune(ctx, runtime.PruneRequest{MaxBytes: 1}); err != nil {
		t.Fatal(err)
	}
	left("acme/r0")
	appendEvs(t, s, "acme", "r0", evs("d")) // the started run still works
}
