package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// A Recorder on a MemoryStore hands the store its turns' event buffers
// (MemoryStore keeps them as they are) while the turns go on filling the
// rest of the same buffers, some of them live on their own path once a
// subscriber arrives. Random turns, event counts, flush sizes and
// subscriptions: every run must read back exactly the events it
// recorded, in order, with IDs and Seqs as the store assigned them, and
// a subscriber must have seen the stored events, not others.
func TestRecorderBuffersKeptByTheMemoryStore(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	for round := range 20 {
		mem := runtime.NewMemoryStore(runtime.MemoryConfig{})
		cfg := runtime.RecorderConfig{Store: mem, FlushEvery: 1 + rng.IntN(12), BatchTurns: 1 + rng.IntN(4)}
		if rng.IntN(2) == 0 {
			cfg.Linger = -1
		}
		rec, err := runtime.NewRecorder(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		const sessions = 4
		type want struct {
			run, session string
			texts        []string
		}
		var (
			mu    sync.Mutex
			wants []want
			wg    sync.WaitGroup
		)
		plans := make([][]int, sessions) // events per turn, per session
		watch := make([]bool, sessions)
		for s := range sessions {
			for range 1 + rng.IntN(5) {
				plans[s] = append(plans[s], rng.IntN(20))
			}
			watch[s] = rng.IntN(2) == 0
		}
		seen := make([][]runtime.Event, sessions)
		for s := range sessions {
			wg.Go(func() {
				session := fmt.Sprintf("s%d", s)
				var (
					evs    <-chan runtime.Event
					cancel func()
					done   chan struct{}
				)
				for turnNo, n := range plans[s] {
					turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: session, AgentID: "a"})
					if err != nil {
						t.Error(err)
						return
					}
					w := want{run: turn.ID(), session: session}
					for i := range n {
						if watch[s] && evs == nil && turnNo == len(plans[s])-1 && i == n/2 {
							// A subscriber arrives mid-turn: the turn goes
							// live, its buffer's rest written on its path.
							evs, cancel = rec.Subscribe(ctx, "acme", session)
							done = make(chan struct{})
							go func() {
								defer close(done)
								for e := range evs {
									seen[s] = append(seen[s], e)
								}
							}()
						}
						text := fmt.Sprintf("%s/%d/%d", session, turnNo, i)
						if err := turn.Emit(tctx, "test.step", map[string]string{"text": text}); err != nil {
							t.Error(err)
						}
						w.texts = append(w.texts, text)
					}
					if err := turn.Complete(tctx, "ok"); err != nil {
						t.Error(err)
					}
					mu.Lock()
					wants = append(wants, w)
					mu.Unlock()
				}
				if cancel != nil {
					if err := rec.Flush(ctx); err != nil {
						t.Error(err)
					}
					cancel()
					<-done
				}
			})
		}
		wg.Wait()
		if err := rec.Close(ctx); err != nil {
			t.Fatal(err)
		}
		stored := map[int64]runtime.Event{}
		for _, w := range wants {
			got, err := mem.Events(ctx, runtime.EventsRequest{Tenant: "acme", RunID: w.run, Limit: runtime.MaxEventsLimit})
			if err != nil {
				t.Fatalf("round %d: events of %s: %v", round, w.run, err)
			}
			if len(got) != len(w.texts)+2 || got[0].Type != runtime.EventRequestStarted || got[len(got)-1].Type != runtime.EventRequestCompleted {
				t.Fatalf("round %d: run %s: %d events, want %d between a start and a completion: %+v", round, w.run, len(got), len(w.texts), got)
			}
			for i, e := range got {
				if e.Seq != int64(i+1) || e.RunID != w.run || e.SessionID != w.session || e.Tenant != "acme" || e.AgentID != "a" {
					t.Fatalf("round %d: run %s event %d: %+v", round, w.run, i, e)
				}
				if i > 0 && e.ID <= got[i-1].ID {
					t.Fatalf("round %d: run %s: IDs out of order: %d after %d", round, w.run, e.ID, got[i-1].ID)
				}
				stored[e.ID] = e
			}
			for i, text := range w.texts {
				var d struct{ Text string }
				if err := json.Unmarshal(got[i+1].Data, &d); err != nil || d.Text != text {
					t.Fatalf("round %d: run %s event %d: data %s, want text %q", round, w.run, i+1, got[i+1].Data, text)
				}
			}
		}
		for s := range sessions {
			all, err := mem.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: fmt.Sprintf("s%d", s), Limit: runtime.MaxEventsLimit})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, p := range plans[s] {
				n += p + 2
			}
			if len(all) != n {
				t.Fatalf("round %d: session s%d: %d events, want %d", round, s, len(all), n)
			}
			for i := 1; i < len(all); i++ {
				if all[i].ID <= all[i-1].ID {
					t.Fatalf("round %d: session s%d: IDs out of order", round, s)
				}
			}
			for _, e := range seen[s] {
				st, ok := stored[e.ID]
				if !ok || st.RunID != e.RunID || st.Seq != e.Seq || string(st.Data) != string(e.Data) || st.Type != e.Type {
					t.Fatalf("round %d: session s%d: published %+v, stored %+v", round, s, e, st)
				}
			}
		}
	}
}
