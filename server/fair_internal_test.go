package server

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Random tenants acquire and release concurrently: the limits always
// hold, every unit is given back, and the maps end empty (no tenant
// stays in memory). The seed is printed.
func TestLimiterRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	l := newLimiter("turn", 5, 2, 6, 2, 20*time.Millisecond, &refusals{n: map[[2]string]int64{}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	inUse := map[string]int{}
	total := 0
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for range 200 {
				tenant := string(rune('a' + rng.IntN(4)))
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(30))*time.Millisecond)
				release, err := l.acquire(ctx, tenant)
				cancel()
				if err != nil {
					continue
				}
				mu.Lock()
				inUse[tenant]++
				total++
				if inUse[tenant] > 2 || total > 5 {
					t.Errorf("seed %d: tenant %s holds %d, total %d", seed, tenant, inUse[tenant], total)
				}
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				mu.Lock()
				inUse[tenant]--
				total--
				mu.Unlock()
				release()
				release() // a second call is a no-op
			}
		}()
	}
	wg.Wait()
	if n, q := l.counts(); n != 0 || q != 0 || len(l.used) != 0 || len(l.waiting) != 0 {
		t.Fatalf("seed %d: after all releases: %d in use, %d queued, maps %v %v", seed, n, q, l.used, l.waiting)
	}
}
