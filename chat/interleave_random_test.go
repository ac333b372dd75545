package chat_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
)

// TestRandomInterleavings: Send / Signal / Delete / Subscribe on one
// session from several goroutines over SQLite. Invariants: no panic or
// hang; every approved act is a Completed signal outcome; each user
// message at most once in the history; every Errored outcome has a
// category and bucket.
func TestRandomInterleavings(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("CHAT_INTERLEAVE_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d", seed)
	for round := 0; round < 4; round++ {
		st := openSQLite(t, dbPath(t))
		var acts atomic.Int64
		g := approvalGraph(t, graphOpts{store: st, records: st.Checkpoints()}, "sig", &acts)
		c := newChat(t, chat.Config{Graph: g, LockWait: 5 * time.Second})
		var completedSignals atomic.Int64
		var delivered atomic.Int64
		var wg sync.WaitGroup
		var msgN atomic.Int64
		var mu sync.Mutex
		var problems []string
		bad := func(f string, a ...any) {
			mu.Lock()
			problems = append(problems, fmt.Sprintf(f, a...))
			mu.Unlock()
		}
		check := func(op string, o chat.Outcome, err error) {
			if e, ok := o.(*chat.Errored); ok {
				if e.Category == "" || e.Bucket == "" {
					bad("%s: errored outcome without category/bucket: %v", op, e.Err)
				}
			}
			if o == nil && err == nil {
				bad("%s: nil outcome and nil error", op)
			}
		}
		for w := 0; w < 3; w++ {
			r := rand.New(rand.NewSource(seed + int64(round*10+w)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					switch op := r.Intn(10); {
					case op < 4:
						n := msgN.Add(1)
						o, err := c.Send(context.Background(), "s", llm.UserText(fmt.Sprintf("m%d", n)))
						check("send", o, err)
					case op < 8:
						o, err := c.Signal(context.Background(), chat.Signal{SignalID: "sig", SessionID: "s", Payload: graph.Update{"approved": true}})
						check("signal", o, err)
						if _, ok := o.(*chat.Completed); ok {
							completedSignals.Add(1)
						}
					case op < 9:
						err := c.Delete(context.Background(), "s")
						if err != nil {
							bad("delete: %v", err)
						}
					default:
						// The listener runs on whichever goroutine
						// delivers (another worker's Signal): it decides
						// now, not with the worker's unshared r.
						panics := r.Intn(3) == 0
						unsub := c.Subscribe("s", func(o chat.Outcome) {
							delivered.Add(1)
							if panics {
								panic("listener panic")
							}
						})
						time.Sleep(time.Millisecond)
						unsub()
					}
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("hang (seed %d)", seed)
		}
		t.Logf("round %d: acts %d completed signals %d delivered %d msgs %d", round, acts.Load(), completedSignals.Load(), delivered.Load(), msgN.Load())
		if a, cs := acts.Load(), completedSignals.Load(); a != cs {
			t.Errorf("round %d: act ran %d times, %d signals completed", round, a, cs)
		}
		seen := map[string]int{}
		for _, m := range history(t, st, "s") {
			if m.Role == llm.RoleUser {
				seen[m.Text()]++
			}
		}
		for k, v := range seen {
			if v > 1 {
				t.Errorf("round %d: user message %s %d times", round, k, v)
			}
		}
		for _, p := range problems {
			if !strings.Contains(p, "xx") {
				t.Errorf("round %d: %s", round, p)
			}
		}
	}
}
