package graph_test

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

func mutateJSON(r *rand.Rand, v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			return x
		}
		k := keys[r.Intn(len(keys))]
		if r.Intn(3) == 0 {
			x[k] = []any{nil, -1, 1e300, "completed", "x", map[string]any{}, []any{}, true, 99999999}[r.Intn(9)]
		} else {
			x[k] = mutateJSON(r, x[k])
		}
		return x
	case []any:
		if len(x) == 0 {
			return append(x, map[string]any{"state": "completed", "result": "zz"})
		}
		switch r.Intn(4) {
		case 0:
			return x[:len(x)-1]
		case 1:
			return append(x, x[0])
		default:
			i := r.Intn(len(x))
			x[i] = mutateJSON(r, x[i])
			return x
		}
	case string:
		return x + "x"
	case float64:
		return []float64{-1, 0, x + 1, 1e18}[r.Intn(4)]
	case bool:
		return !x
	case nil:
		return "completed"
	}
	return v
}

// TestCheckpointCorruptRecordsAreCategorized resumes semantically corrupted checkpoint
// records: a resume must fail with a category (never panic) or finish.
func TestCheckpointCorruptRecordsAreCategorized(t *testing.T) {
	seed := int64(77)
	for it := 0; it < 8; it++ { // fixed seeds: a deterministic CI; GRAPH_RANDOM_SEED in the other random tests varies them
		s := seed + int64(it)
		r := rand.New(rand.NewSource(s))
		blk := genBlock(r, 3)
		rec := &recordingStore{Store: checkpoint.NewMemoryStore(nil)}
		g := buildRandGraph(t, blk, "", graph.WithCheckpointer(rec))
		if _, err := g.Invoke(t.Context(), graph.Update{"item": 1}); err != nil {
			t.Fatal(err)
		}
		for k, cr := range rec.recs {
			for m := 0; m < 6; m++ {
				var v any
				_ = json.Unmarshal(cr.Data, &v)
				v = mutateJSON(r, v)
				data, _ := json.Marshal(v)
				c := cr
				c.Data = data
				if m == 5 {
					c.Data = cr.Data[:r.Intn(len(cr.Data))]
				}
				st := checkpoint.NewMemoryStore(nil)
				_ = st.Save(t.Context(), c)
				g2 := buildRandGraph(t, blk, "", graph.WithCheckpointer(st))
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Errorf("seed %d rec %d mut %d: panic %v\n%s", s, k, m, p, c.Data)
						}
					}()
					_, err := g2.ResumeCheckpoint(t.Context(), cr.InvocationID)
					if err != nil {
						cat := errcat.Of(err)
						if cat == "" || (!strings.HasPrefix(string(cat), "checkpoint_") && cat != errcat.StateValidationError && cat != errcat.NodeException && cat != errcat.ReducerError) {
							t.Errorf("seed %d rec %d mut %d: category %q: %v\n%s", s, k, m, cat, err, c.Data)
						}
						if cat == errcat.NodeException && !strings.Contains(err.Error(), "checkpoint") && !strings.Contains(err.Error(), "fan_out") {
							t.Logf("seed %d rec %d mut %d: node_exception: %v", s, k, m, err)
						}
					}
				}()
			}
		}
		if t.Failed() {
			return
		}
	}
}
