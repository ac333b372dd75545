package graph_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// TestOptimisticConcurrentAppends: N concurrent invocations of one
// session under Optimistic each append one item; those that succeed must
// all be in the stored list, and the failures must be
// session_write_conflict.
func TestOptimisticConcurrentAppends(t *testing.T) {
	for name, open := range map[string]func() session.Store{
		"memory": func() session.Store { return session.NewMemoryStore(session.MemoryConfig{}) },
		"sqlite": func() session.Store {
			st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close(context.Background()) })
			return st
		},
	} {
		for _, cache := range []int{0, -1} {
			for _, twoGraphs := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/cache%d/two%v", name, cache, twoGraphs), func(t *testing.T) {
					st := open()
					mk := func() *graph.Graph {
						log := graph.NewListField[string]("log", graph.Append)
						n := graph.NewField[int]("n")
						return mustCompile(t, graph.NewBuilder(graph.MustSchema(log, n)).
							AddNode("w", func(ctx context.Context, s graph.State) (graph.Update, error) {
								return n.Set(n.Get(s) + 1), nil
							}).AddEdge("w", graph.End).SetEntry("w"),
							graph.WithSessions(graph.SessionConfig{Store: st, Optimistic: true, CacheSize: cache}))
					}
					gs := []*graph.Graph{mk(), mk()}
					// seed the session
					if _, err := gs[0].Invoke(t.Context(), graph.Update{"log": []string{"seed"}}, graph.WithSessionID("s")); err != nil {
						t.Fatal(err)
					}
					const N = 16
					var wg sync.WaitGroup
					var mu sync.Mutex
					okItems := map[string]bool{}
					others := 0
					for i := 0; i < N; i++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							g := gs[0]
							if twoGraphs {
								g = gs[i%2]
							}
							item := fmt.Sprintf("i%d", i)
							_, err := g.Invoke(t.Context(), graph.Update{"log": []string{item}}, graph.WithSessionID("s"))
							mu.Lock()
							defer mu.Unlock()
							if err == nil {
								okItems[item] = true
							} else if !errors.Is(err, errcat.SessionWriteConflict) {
								others++
								t.Errorf("unexpected error: %v", err)
							}
						}()
					}
					wg.Wait()
					stt, err := mk().SessionState(t.Context(), "s")
					if err != nil {
						t.Fatal(err)
					}
					logv, _ := stt.Get("log")
					nv, _ := stt.Get("n")
					got := map[string]bool{}
					for _, x := range logv.([]string)[1:] {
						if got[x] {
							t.Errorf("duplicate %s", x)
						}
						got[x] = true
					}
					for x := range okItems {
						if !got[x] {
							t.Errorf("successful append %s lost; stored %v", x, logv)
						}
					}
					for x := range got {
						if !okItems[x] {
							t.Errorf("failed append %s stored", x)
						}
					}
					if nv != 1+len(okItems) {
						t.Errorf("n = %v, want %d (successes %d)", nv, 1+len(okItems), len(okItems))
					}
					t.Logf("%d succeeded", len(okItems))
				})
			}
		}
	}
}
