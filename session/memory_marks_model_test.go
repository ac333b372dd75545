package session_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/session"
)

type modelMark struct {
	val string
	at  time.Time
}

type modelRec struct {
	version int64
	marks   map[string]modelMark
}

// TestMemoryMarksRandomAgainstModel: random Save/Append/Delete with marks (up to
// 12 keys, across the list->map switch), a moving clock, checked
// against a model: LoadMark and MarkKeys after every step.
func TestMemoryMarksRandomAgainstModel(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		runMarksModel(t, seed)
	}
}

func runMarksModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 58))
	ret := time.Hour
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m := session.NewMemoryStore(session.MemoryConfig{Now: clock, MarkRetention: ret})
	ctx := context.Background()
	model := map[string]*modelRec{}
	sessions := []string{"s1", "s2", "s3"}
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	randMarks := func() []session.Mark {
		n := rng.IntN(4)
		var ms []session.Mark
		seen := map[string]bool{}
		for range n {
			k := keys[rng.IntN(len(keys))]
			if seen[k] {
				continue
			}
			seen[k] = true
			ms = append(ms, session.Mark{Key: k, Value: json.RawMessage(fmt.Sprintf("%d", rng.IntN(1000)))})
		}
		return ms
	}
	apply := func(r *modelRec, ms []session.Mark, at time.Time) {
		for _, mk := range ms {
			r.marks[mk.Key] = modelMark{string(mk.Value), at}
		}
	}
	for step := 0; step < 400; step++ {
		mu.Lock()
		now = now.Add(time.Duration(rng.IntN(int(ret/time.Duration(1+int(seed%3)*20)))) + time.Nanosecond*time.Duration(rng.IntN(2)))
		at := now
		mu.Unlock()
		sid := sessions[rng.IntN(len(sessions))]
		r := model[sid]
		switch op := rng.IntN(10); {
		case op < 4:
			ms := randMarks()
			if _, err := m.Save(ctx, session.SaveRequest{SessionID: sid, State: map[string]json.RawMessage{"x": json.RawMessage(`1`)}, Marks: ms}); err != nil {
				t.Fatalf("seed %d step %d save: %v", seed, step, err)
			}
			if r == nil {
				r = &modelRec{marks: map[string]modelMark{}}
				model[sid] = r
			}
			r.version++
			apply(r, ms, at)
		case op < 8:
			if r == nil {
				continue
			}
			ms := randMarks()
			if _, err := m.Append(ctx, session.AppendRequest{SessionID: sid, ExpectedVersion: r.version,
				Append: map[string][]json.RawMessage{"l": {json.RawMessage(`2`)}}, Marks: ms}); err != nil {
				t.Fatalf("seed %d step %d append: %v", seed, step, err)
			}
			r.version++
			apply(r, ms, at)
		default:
			if err := m.Delete(ctx, sid); err != nil {
				t.Fatal(err)
			}
			delete(model, sid)
		}
		// check
		for _, s := range sessions {
			r := model[s]
			var want []session.WrittenKey
			for _, k := range keys {
				got, err := m.LoadMark(ctx, s, k)
				var exp *modelMark
				if r != nil {
					if mk, ok := r.marks[k]; ok && at.Sub(mk.at) <= ret {
						exp = &mk
					}
				}
				switch {
				case exp == nil && err == nil:
					t.Fatalf("seed %d step %d: LoadMark(%s,%s) = %s, want none", seed, step, s, k, got)
				case exp != nil && (err != nil || string(got) != exp.val):
					t.Fatalf("seed %d step %d: LoadMark(%s,%s) = %s, %v, want %s", seed, step, s, k, got, err, exp.val)
				}
				if exp != nil {
					want = append(want, session.WrittenKey{Key: k, At: exp.at.UnixNano()})
				}
			}
			slices.SortFunc(want, func(a, b session.WrittenKey) int {
				if c := cmp.Compare(b.At, a.At); c != 0 {
					return c
				}
				return cmp.Compare(a.Key, b.Key)
			})
			limit := 1 + rng.IntN(14)
			var wk []string
			for _, w := range want[:min(limit, len(want))] {
				wk = append(wk, w.Key)
			}
			got, err := m.MarkKeys(ctx, s, "k", limit)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, wk) {
				t.Fatalf("seed %d step %d: MarkKeys(%s, %d) = %v, want %v", seed, step, s, limit, got, wk)
			}
		}
	}
}

// TestMemoryMarksConcurrent: writers, deleters and readers of the
// same sessions at once (run with -race).
func TestMemoryMarksConcurrent(t *testing.T) {
	m := session.NewMemoryStore(session.MemoryConfig{MarkRetention: time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1500 {
				sid := fmt.Sprintf("s%d", i%3)
				switch (g + i) % 4 {
				case 0:
					_, _ = m.Save(ctx, session.SaveRequest{SessionID: sid, State: map[string]json.RawMessage{}, Marks: []session.Mark{{Key: fmt.Sprintf("k%d", i%11), Value: json.RawMessage(`1`)}}})
				case 1:
					_ = m.Delete(ctx, sid)
				case 2:
					_, _ = m.LoadMark(ctx, sid, fmt.Sprintf("k%d", i%11))
				case 3:
					_, _ = m.MarkKeys(ctx, sid, "", 5)
				}
			}
		}()
	}
	wg.Wait()
}
