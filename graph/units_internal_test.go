package graph

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Under fail_fast, a unit that fails as soon as it starts stops the
// units after it from starting, whichever goroutine runs first: it marks
// its failure before its start lets the next unit go. With collect,
// every unit runs.
func TestRunUnitsFailFastStopsLaterUnits(t *testing.T) {
	boom := errors.New("boom")
	for _, policy := range []ErrorPolicy{FailFast, Collect} {
		for range 200 {
			var later atomic.Int32
			results, first := runUnits(context.Background(), 3, 0, policy, func(ctx context.Context, i int, started *startSignal) (Update, error) {
				if i == 0 {
					started.failed()
					started.signal()
					// Report the failure late, as a unit does after its
					// completed event: the next unit is dispatched meanwhile.
					time.Sleep(50 * time.Microsecond)
					return nil, boom
				}
				started.signal()
				later.Add(1)
				return Update{}, nil
			})
			if policy == Collect {
				if first != -1 || later.Load() != 2 || !results[1].ran || !results[2].ran {
					t.Fatalf("collect: first %d, later units run %d", first, later.Load())
				}
				continue
			}
			if first != 0 || !errors.Is(results[0].err, boom) {
				t.Fatalf("fail_fast: first %d, err %v", first, results[0].err)
			}
			if n := later.Load(); n != 0 {
				t.Fatalf("fail_fast: %d later units started after the first failed", n)
			}
		}
	}
}
