package server

import (
	"sync"
	"testing"
	"time"
)

// Turns may be counted while a stop waits (a turn taken just as the
// server stops): no race, and Wait returns once none is under way.
func TestTurnCountAddDuringWait(t *testing.T) {
	var c turnCount
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			c.Add(1)
			time.Sleep(time.Millisecond)
			c.Done()
		})
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	wg.Wait()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return with no turn under way")
	}
	c.Wait() // at zero: returns at once
}
