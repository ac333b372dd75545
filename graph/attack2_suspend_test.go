package graph_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
	"github.com/armature-go/armature/store/sqlite"
)

// Randomized suspension inside fan-outs and parallel branches: instances
// or branches that complete, fail, suspend once or suspend twice in
// sequence, resumed in random orders over the in-memory store and SQLite,
// with process restarts, wrong ids, cancelled and duplicate resumes, and
// concurrent resumes of one invocation. ARMATURE_ATTACK2_SEED=<n> replays
// one seed; ARMATURE_ATTACK2_TRIALS=<n> runs more trials.

// Unit kinds.
const (
	a2Complete = iota
	a2SuspendOnce
	a2SuspendTwice
	a2Fail
)

// a2Plan is one trial's graph: what each unit does.
type a2Plan struct {
	kinds    []int
	rerun    bool // suspensions use RerunOnResume: the composite node re-runs
	branches bool // parallel branches instead of a fan-out
	conc     int  // fan-out concurrency (0: unbounded)
	ckpt     bool // WithCheckpointer instead of WithCheckpointStore
	last     bool // the composite leads to End (no node after it)
	sessions bool // the invocation is bound to a session
}

// a2Runs counts each unit's completions.
type a2Runs struct {
	mu   sync.Mutex
	done map[int]int
}

func (r *a2Runs) add(i int) {
	r.mu.Lock()
	r.done[i]++
	r.mu.Unlock()
}

// a2Unit is the body of unit i: it needs grants "i:1" (and "i:2") before it
// completes, suspending for the first one missing.
func a2Unit(ctx context.Context, p *a2Plan, runs *a2Runs, i int, grants []string, seed uint64) (int, error) {
	// Some jitter, honouring cancellation (siblings are cancelled when a
	// unit suspends or fails).
	d := time.Duration(rand.New(rand.NewPCG(seed, uint64(i))).IntN(3)) * time.Millisecond
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	need := 0
	switch p.kinds[i] {
	case a2Fail:
		return 0, fmt.Errorf("unit %d fails", i)
	case a2SuspendOnce:
		need = 1
	case a2SuspendTwice:
		need = 2
	}
	for k := 1; k <= need; k++ {
		id := fmt.Sprintf("%d:%d", i, k)
		if !slices.Contains(grants, id) {
			var opts []graph.SuspendOption
			if p.rerun {
				opts = append(opts, graph.RerunOnResume())
			}
			return 0, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: id, Metadata: map[string]any{"unit": i}}, opts...)
		}
	}
	runs.add(i)
	return 10*i + 1, nil
}

var (
	a2Items   = graph.NewListField[int]("items", graph.LastWriteWins)
	a2Grants  = graph.NewListField[string]("grants", graph.LastWriteWins)
	a2Results = graph.NewListField[int]("results", graph.Append)
	a2After   = graph.NewField[int]("after")
)

// a2Build compiles a trial's graph over store.
func a2Build(t *testing.T, p *a2Plan, runs *a2Runs, after *atomic.Int32, store checkpoint.Store, seed uint64) *graph.Graph {
	return a2BuildWith(t, p, runs, after, store, nil, seed)
}

// a2BuildWith is a2Build with sessions in sess (when not nil).
func a2BuildWith(t *testing.T, p *a2Plan, runs *a2Runs, after *atomic.Int32, store checkpoint.Store, sess session.Store, seed uint64) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder(mustSchema(t, a2Items, a2Grants, a2Results, a2After))
	if p.branches {
		var brs []graph.Branch
		for i := range p.kinds {
			brs = append(brs, graph.Branch{Name: "b" + strconv.Itoa(i), Call: func(ctx context.Context, s graph.State) (graph.Update, error) {
				v, err := a2Unit(ctx, p, runs, i, a2Grants.Get(s), seed)
				if err != nil {
					return nil, err
				}
				return graph.Update{"results": []int{v}}, nil
			}})
		}
		b.AddParallelBranches("comp", graph.ParallelBranches{Branches: brs})
	} else {
		x := graph.NewField[int]("x")
		y := graph.NewField[int]("y")
		leaf := mustCompile(t, graph.NewBuilder(mustSchema(t, x, y, a2Grants)).
			AddNode("work", func(ctx context.Context, s graph.State) (graph.Update, error) {
				v, err := a2Unit(ctx, p, runs, x.Get(s), a2Grants.Get(s), seed)
				if err != nil {
					return nil, err
				}
				return y.Set(v), nil
			}).AddEdge("work", graph.End).SetEntry("work"))
		cfg := graph.FanOut{Subgraph: leaf, ItemsField: "items", ItemField: "x", CollectField: "y", TargetField: "results",
			Inputs: map[string]string{"grants": "grants"}}
		if p.conc == 0 {
			cfg.Unbounded = true
		} else {
			cfg.Concurrency = graph.Fixed(p.conc)
		}
		b.AddFanOut("comp", cfg)
	}
	if p.last {
		b.AddEdge("comp", graph.End)
	} else {
		b.AddNode("after", func(context.Context, graph.State) (graph.Update, error) {
			after.Add(1)
			return a2After.Set(1), nil
		}).AddEdge("comp", "after").AddEdge("after", graph.End)
	}
	b.SetEntry("comp")
	opts := []graph.CompileOption{graph.WithCheckpointStore(store)}
	if p.ckpt {
		opts[0] = graph.WithCheckpointer(store)
	}
	if sess != nil {
		opts = append(opts, graph.WithSessions(graph.SessionConfig{Store: sess}))
	}
	return mustCompile(t, b, opts...)
}

// a2Backend opens a store; reopen simulates a process restart over the
// same data.
type a2Backend struct {
	name   string
	open   func(t *testing.T) checkpoint.Store
	reopen func(t *testing.T) checkpoint.Store
}

func a2Backends(t *testing.T) []a2Backend {
	mem := a2Backend{name: "memory"}
	var ms *checkpoint.MemoryStore
	mem.open = func(*testing.T) checkpoint.Store { ms = checkpoint.NewMemoryStore(nil); return ms }
	mem.reopen = func(*testing.T) checkpoint.Store { return ms }

	lite := a2Backend{name: "sqlite"}
	var (
		path string
		cur  *sqlite.Store
	)
	openAt := func(t *testing.T) checkpoint.Store {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		cur = st
		t.Cleanup(func() { _ = st.Close(context.Background()) })
		return st.Checkpoints()
	}
	lite.open = func(t *testing.T) checkpoint.Store {
		path = filepath.Join(t.TempDir(), "a2.db")
		return openAt(t)
	}
	lite.reopen = func(t *testing.T) checkpoint.Store {
		if err := cur.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		return openAt(t)
	}
	out := []a2Backend{mem, lite}
	if url := os.Getenv("ARMATURE_POSTGRES_URL"); url != "" {
		pg := a2Backend{name: "postgres"}
		var (
			schema string
			pcur   *postgres.Store
		)
		openPG := func(t *testing.T) checkpoint.Store {
			st, err := postgres.Open(context.Background(), postgres.Config{URL: url, Schema: schema})
			if err != nil {
				t.Skipf("PostgreSQL at ARMATURE_POSTGRES_URL: %v", err)
			}
			pcur = st
			t.Cleanup(st.Close)
			return st.Checkpoints()
		}
		pg.open = func(t *testing.T) checkpoint.Store {
			schema = "graph_attack2"
			return openPG(t)
		}
		pg.reopen = func(t *testing.T) checkpoint.Store {
			pcur.Close()
			return openPG(t)
		}
		out = append(out, pg)
	}
	return out
}

// a2Seeds returns the trial seeds: ARMATURE_ATTACK2_SEED alone, or n
// random ones.
func a2Seeds(t *testing.T, n int) []uint64 {
	if s := os.Getenv("ARMATURE_ATTACK2_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return []uint64{v}
	}
	if s := os.Getenv("ARMATURE_ATTACK2_TRIALS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = rand.Uint64()
	}
	return out
}

// pausedOf lists the paused records of invocation id.
func pausedOf(t *testing.T, st checkpoint.Store, id string) []checkpoint.Summary {
	t.Helper()
	resp, err := st.List(context.Background(), checkpoint.ListRequest{Kind: checkpoint.KindSuspended, PageSize: 1000})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var out []checkpoint.Summary
	for _, r := range resp.Records {
		if r.InvocationID == id {
			out = append(out, r)
		}
	}
	return out
}

func TestAttack2SuspendInCompositesRandomized(t *testing.T) {
	for _, be := range a2Backends(t) {
		trials := 60
		if be.name != "memory" {
			trials = 25
		}
		if be.name == "postgres" {
			trials = 8
		}
		for _, seed := range a2Seeds(t, trials) {
			t.Run(fmt.Sprintf("%s/seed=%d", be.name, seed), func(t *testing.T) {
				a2Trial(t, be, seed)
				if t.Failed() {
					t.Logf("replay: ARMATURE_ATTACK2_SEED=%d go test -run 'TestAttack2SuspendInCompositesRandomized/%s' ./graph", seed, be.name)
				}
			})
		}
	}
}

func a2Trial(t *testing.T, be a2Backend, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 0xa77ac2))
	n := 1 + rng.IntN(5)
	p := &a2Plan{rerun: rng.IntN(3) > 0, branches: rng.IntN(2) == 0, conc: rng.IntN(n + 1), ckpt: rng.IntN(2) == 0, sessions: rng.IntN(2) == 0}
	for range n {
		k := rng.IntN(10)
		switch {
		case k < 3:
			p.kinds = append(p.kinds, a2Complete)
		case k < 6:
			p.kinds = append(p.kinds, a2SuspendOnce)
		case k < 9:
			p.kinds = append(p.kinds, a2SuspendTwice)
		default:
			p.kinds = append(p.kinds, a2Fail)
		}
	}
	t.Logf("plan: kinds=%v rerun=%v branches=%v conc=%d ckpt=%v sessions=%v", p.kinds, p.rerun, p.branches, p.conc, p.ckpt, p.sessions)
	runs := &a2Runs{done: map[int]int{}}
	var after atomic.Int32
	store := be.open(t)
	// Sessions live with the records when the store keeps both (and the
	// engine then writes them in one transaction), else in memory.
	memSess := session.NewMemoryStore(session.MemoryConfig{})
	sessOf := func(st checkpoint.Store) session.Store {
		if !p.sessions {
			return nil
		}
		if sw, ok := st.(checkpoint.SessionWriter); ok {
			return sw.SessionStore()
		}
		return memSess
	}
	build := func() *graph.Graph { return a2BuildWith(t, p, runs, &after, store, sessOf(store), seed) }
	g := build()
	sid := fmt.Sprintf("s-%d", seed)
	// checkSession compares the session as stored with the outcome's state.
	checkSession := func(res *graph.Result) {
		if !p.sessions || (res.Status != graph.Completed && res.Status != graph.Suspended) {
			return
		}
		st, err := g.SessionState(ctx, sid)
		if err != nil {
			t.Fatalf("SessionState: %v", err)
		}
		if got, want := a2Results.Get(st), a2Results.Get(res.State); !slices.Equal(got, want) {
			t.Fatalf("%v: the session holds results %v, the outcome %v", res.Status, got, want)
		}
		if got, want := a2Grants.Get(st), a2Grants.Get(res.State); !slices.Equal(got, want) {
			t.Fatalf("%v: the session holds grants %v, the outcome %v", res.Status, got, want)
		}
	}
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	var invOpts []graph.InvokeOption
	if p.sessions {
		invOpts = append(invOpts, graph.WithSessionID(sid))
	}
	res, err := g.Invoke(ctx, a2Items.Set(items), invOpts...)
	var grants []string
	compName := "comp"
	for step := 0; ; step++ {
		if step > 40 {
			t.Fatalf("no end after %d steps", step)
		}
		checkSession(res)
		switch res.Status {
		case graph.Errored:
			a2CheckErrored(t, p, res, err, store)
			return
		case graph.Completed:
			a2CheckCompleted(t, p, res, err, store, runs, &after, grants)
			return
		}
		// Suspended: the awaited signal must be one the model expects.
		if err != nil || res.Suspension == nil || res.Suspension.SuspendingNode != compName {
			t.Fatalf("suspended outcome %+v, %v", res.Suspension, err)
		}
		sig := res.Suspension.Descriptor.SignalID
		unit, k := a2Signal(t, sig)
		if want := a2NextNeed(p, unit, grants); want != k {
			t.Fatalf("awaits %q; unit %d needs grant %d next (grants %v)", sig, unit, want, grants)
		}
		md := res.Suspension.Descriptor.Metadata
		if p.branches {
			if md["branch_name"] != "b"+strconv.Itoa(unit) {
				t.Fatalf("branch_name %v for signal %q", md["branch_name"], sig)
			}
		} else if md["fan_out_index"] != unit {
			t.Fatalf("fan_out_index %v for signal %q", md["fan_out_index"], sig)
		}
		if ps := pausedOf(t, store, res.InvocationID); len(ps) != 1 || ps[0].SignalID != sig {
			t.Fatalf("paused records %+v; want one awaiting %q", ps, sig)
		}
		id := res.InvocationID
		// Noise before the real resume.
		for range rng.IntN(4) {
			switch rng.IntN(4) {
			case 0: // a wrong invocation id
				_, err := g.Resume(ctx, id+"-wrong", a2Grants.Set(grants))
				var se *graph.SuspensionError
				if !errors.Is(err, errcat.SuspensionRecordInvalid) || !errors.As(err, &se) {
					t.Fatalf("resume of a wrong id = %v", err)
				}
			case 1: // a restart: a new store and graph over the same data
				store = be.reopen(t)
				g = build()
			case 2: // a caller whose context is already cancelled
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				r, err := g.Resume(cctx, id, a2Grants.Set(append(slices.Clone(grants), sig)))
				if err == nil || r.Status != graph.Errored {
					t.Fatalf("resume with a cancelled context = %v, %v", r.Status, err)
				}
				if errors.Is(err, errcat.SuspensionRecordInvalid) {
					t.Errorf("resume with a cancelled context = %v; the record is not invalid (want invocation_cancelled)", err)
				}
				if ps := pausedOf(t, store, id); len(ps) != 1 {
					t.Fatalf("a cancelled resume retired the paused record: %+v", ps)
				}
			case 3: // CheckResume must agree
				if err := g.CheckResume(ctx, id, a2Grants.Set(grants)); err != nil {
					t.Fatalf("CheckResume = %v", err)
				}
			}
		}
		prev := grants
		grants = append(slices.Clone(grants), sig)
		payload := a2Grants.Set(grants)
		if rng.IntN(4) == 0 {
			// Two workers resume the same invocation at once with the same
			// signal: exactly one takes effect.
			_, res, err = a2Concurrent(t, g, store, id, payload, payload)
		} else if rng.IntN(6) == 0 {
			// A retransmission of the previous signal races the new one:
			// whichever takes effect, the other does nothing.
			var won int
			won, res, err = a2Concurrent(t, g, store, id, payload, a2Grants.Set(prev))
			if won == 1 {
				grants = prev
			}
		} else {
			res, err = g.Resume(ctx, id, payload)
			if rng.IntN(3) == 0 && res.Status != graph.Suspended {
				// A duplicate after the end: nothing to resume.
				if _, derr := g.Resume(ctx, id, payload); !errors.Is(derr, errcat.SuspensionRecordInvalid) {
					t.Fatalf("duplicate resume after %v = %v", res.Status, derr)
				}
			}
		}
		if res.InvocationID != id {
			t.Fatalf("resumed invocation id %q, want %q", res.InvocationID, id)
		}
	}
}

// a2Concurrent resumes id from two goroutines and checks that their
// outcomes are consistent with exactly one resume taking effect. It
// returns whose outcome took effect (0 or 1) and that outcome.
func a2Concurrent(t *testing.T, g *graph.Graph, store checkpoint.Store, id string, p1, p2 graph.Update) (int, *graph.Result, error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		res  [2]*graph.Result
		errs [2]error
	)
	for i, p := range []graph.Update{p1, p2} {
		wg.Go(func() { res[i], errs[i] = g.Resume(context.Background(), id, p) })
	}
	wg.Wait()
	paused := pausedOf(t, store, id)
	var completed, suspended, lost int
	var pick *graph.Result
	var pickErr error
	won := -1
	for i := range res {
		switch {
		case res[i].Status == graph.Completed && errs[i] == nil:
			completed++
			pick, pickErr, won = res[i], errs[i], i
		case res[i].Status == graph.Suspended:
			suspended++
			if pick == nil || pick.Status != graph.Completed {
				// The one the store kept, if any.
				if len(paused) == 1 && paused[0].SignalID == res[i].Suspension.Descriptor.SignalID {
					pick, pickErr, won = res[i], errs[i], i
				}
			}
		case errors.Is(errs[i], errcat.SuspensionRecordInvalid):
			lost++
		default:
			if pick == nil {
				pick, pickErr, won = res[i], errs[i], i
			}
		}
	}
	// In one process the duplicate is refused while the first runs; if it
	// came after the first ended, it found no record, or, the first having
	// suspended again, resumed that new suspension.
	sequential := lost == 0 && suspended >= 1
	if lost != 1 && !sequential {
		t.Errorf("%d of the concurrent resumes were refused, want 1", lost)
	}
	t.Logf("concurrent resumes: %v/%v and %v/%v; paused after: %+v", res[0].Status, errs[0], res[1].Status, errs[1], paused)
	if completed > 1 {
		t.Fatalf("both concurrent resumes completed")
	}
	if completed == 1 && len(paused) != 0 {
		t.Fatalf("a resume completed, yet a paused record remains: %+v", paused)
	}
	if completed == 1 && suspended > 0 && !sequential {
		t.Fatalf("one resume completed while the other reported a suspension that no longer exists")
	}
	if sequential && suspended == 1 && len(res) == 2 {
		// The later resume consumed the earlier's new suspension: its
		// outcome is the one that stands.
		for i := range res {
			if res[i].Status != graph.Suspended {
				pick, pickErr, won = res[i], errs[i], i
				if len(paused) != 0 {
					t.Fatalf("the invocation ended (%v), yet paused records remain: %+v", res[i].Status, paused)
				}
				return won, pick, pickErr
			}
		}
	}
	if suspended > 0 && len(paused) != 1 {
		t.Fatalf("a resume reported suspended, paused records %+v", paused)
	}
	if pick == nil {
		t.Fatalf("no usable outcome: %v, %v", errs[0], errs[1])
	}
	return won, pick, pickErr
}

func a2Signal(t *testing.T, sig string) (unit, k int) {
	t.Helper()
	if _, err := fmt.Sscanf(sig, "%d:%d", &unit, &k); err != nil {
		t.Fatalf("signal %q: %v", sig, err)
	}
	return unit, k
}

// a2NextNeed returns the grant unit needs next (0: none).
func a2NextNeed(p *a2Plan, unit int, grants []string) int {
	need := map[int]int{a2SuspendOnce: 1, a2SuspendTwice: 2}[p.kinds[unit]]
	for k := 1; k <= need; k++ {
		if !slices.Contains(grants, fmt.Sprintf("%d:%d", unit, k)) {
			return k
		}
	}
	return 0
}

func a2CheckErrored(t *testing.T, p *a2Plan, res *graph.Result, err error, store checkpoint.Store) {
	t.Helper()
	var ne *graph.NodeError
	if !errors.As(err, &ne) {
		t.Fatalf("errored with %v (%T); want a *NodeError", err, err)
	}
	unit := -1
	if p.branches {
		if !errors.Is(err, errcat.ParallelBranchesBranchFailed) {
			t.Errorf("branch failure category %q, want parallel_branches_branch_failed", errcat.Of(err))
		}
		unit, _ = strconv.Atoi(ne.BranchName[1:])
	} else {
		if !errors.Is(err, errcat.NodeException) || ne.FanOutIndex == nil {
			t.Fatalf("fan-out failure %v (category %q)", err, errcat.Of(err))
		}
		unit = *ne.FanOutIndex
	}
	if unit < 0 || unit >= len(p.kinds) || p.kinds[unit] != a2Fail {
		t.Fatalf("failure attributed to unit %d (kinds %v): %v", unit, p.kinds, err)
	}
	if ps := pausedOf(t, store, res.InvocationID); len(ps) != 0 {
		t.Fatalf("an errored invocation keeps paused records %+v", ps)
	}
}

func a2CheckCompleted(t *testing.T, p *a2Plan, res *graph.Result, err error, store checkpoint.Store, runs *a2Runs, after *atomic.Int32, grants []string) {
	t.Helper()
	if err != nil {
		t.Fatalf("completed with %v", err)
	}
	if ps := pausedOf(t, store, res.InvocationID); len(ps) != 0 {
		t.Fatalf("a completed invocation keeps paused records %+v", ps)
	}
	if a := after.Load(); a != 1 {
		t.Errorf("the node after the composite ran %d times, want 1", a)
	}
	got := a2Results.Get(res.State)
	var all []int
	for i := range p.kinds {
		all = append(all, 10*i+1)
	}
	if p.rerun {
		// The composite re-ran whole after each signal; its last run merged
		// every unit's contribution once, in index (insertion) order.
		if !slices.Equal(got, all) {
			t.Fatalf("results %v, want %v", got, all)
		}
		for i, k := range p.kinds {
			if k == a2Fail || a2NextNeed(p, i, grants) != 0 {
				t.Fatalf("completed although unit %d (kind %d) cannot complete (grants %v)", i, k, grants)
			}
		}
		return
	}
	// Continuing after the composite: its contribution is at most an
	// ordered, duplicate-free subset.
	j := 0
	for _, v := range got {
		for j < len(all) && all[j] != v {
			j++
		}
		if j == len(all) {
			t.Fatalf("results %v are not an ordered subset of %v", got, all)
		}
		j++
	}
}

// a2Gated compiles work → gate (suspends until approved; then waits for
// release, failing when fail is set) → after, counting after's runs.
func a2Gated(t *testing.T, store checkpoint.Store, release <-chan struct{}, entered chan<- struct{}, fail *atomic.Bool, after *atomic.Int32) *graph.Graph {
	ok := graph.NewField[bool]("ok")
	return mustCompile(t, graph.NewBuilder(mustSchema(t, ok, a2After)).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if !ok.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "go"}, graph.RerunOnResume())
			}
			entered <- struct{}{}
			<-release
			if fail.Load() {
				return nil, errors.New("gate fails")
			}
			return nil, nil
		}).
		AddNode("after", func(context.Context, graph.State) (graph.Update, error) {
			after.Add(1)
			return a2After.Set(1), nil
		}).AddEdge("gate", "after").AddEdge("after", graph.End).SetEntry("gate"),
		graph.WithCheckpointStore(store))
}

// TestAttack2ConcurrentResumeRefused: a second Resume of an invocation
// while a first one runs on the same graph is refused at once
// (suspension_record_invalid, ErrResumeUnderWay) and runs nothing. Before,
// both ran the rest of the graph; when the first failed and the second
// had meanwhile suspended again (or the reverse), the failing one retired
// the other's new paused record, or the one completing took it.
func TestAttack2ConcurrentResumeRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		fail bool
		want graph.Status
	}{
		{"first completes", false, graph.Completed},
		{"first fails", true, graph.Errored},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := checkpoint.NewMemoryStore(nil)
			release, entered := make(chan struct{}), make(chan struct{}, 2)
			var fail atomic.Bool
			fail.Store(tt.fail)
			var after atomic.Int32
			g := a2Gated(t, store, release, entered, &fail, &after)
			res, err := g.Invoke(t.Context(), nil)
			if err != nil || res.Status != graph.Suspended {
				t.Fatalf("Invoke = %v, %v", res.Status, err)
			}
			id := res.InvocationID
			done := make(chan *graph.Result)
			go func() {
				r, _ := g.Resume(context.Background(), id, graph.Update{"ok": true})
				done <- r
			}()
			<-entered // the first resume runs the gate
			dupDone := make(chan error, 1)
			go func() {
				_, err := g.Resume(context.Background(), id, graph.Update{"ok": true})
				dupDone <- err
			}()
			select {
			case err := <-dupDone:
				if !errors.Is(err, errcat.SuspensionRecordInvalid) || !errors.Is(err, graph.ErrResumeUnderWay) {
					t.Errorf("a resume while another runs = %v; want suspension_record_invalid (ErrResumeUnderWay)", err)
				}
				close(release)
			case <-entered:
				t.Errorf("a resume while another runs ran the gate too")
				close(release)
				err := <-dupDone
				t.Logf("the duplicate resume ended with %v", err)
			}
			first := <-done
			if first.Status != tt.want {
				t.Errorf("the first resume = %v (%v), want %v", first.Status, first.Err, tt.want)
			}
			if n := len(pausedOf(t, store, id)); n != 0 {
				t.Errorf("%d paused records remain", n)
			}
			if a, want := after.Load(), map[bool]int32{false: 1, true: 0}[tt.fail]; a != want {
				t.Errorf("after ran %d times, want %d", a, want)
			}
			// Once the first is over, a resume finds no record.
			if _, err := g.Resume(t.Context(), id, graph.Update{"ok": true}); errors.Is(err, graph.ErrResumeUnderWay) || !errors.Is(err, errcat.SuspensionRecordInvalid) {
				t.Errorf("a resume after the end = %v", err)
			}
		})
	}
}

// TestAttack2ResumeCancelledBeforeLoad: a resume whose context is already
// done fails with invocation_cancelled (retryable) and leaves the paused
// record, so the retry resumes. Before, it failed with
// suspension_record_invalid, as if the suspension were gone.
func TestAttack2ResumeCancelledBeforeLoad(t *testing.T) {
	store := checkpoint.NewMemoryStore(nil)
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	close(release)
	var fail atomic.Bool
	var after atomic.Int32
	g := a2Gated(t, store, release, entered, &fail, &after)
	res, err := g.Invoke(t.Context(), nil)
	if err != nil || res.Status != graph.Suspended {
		t.Fatalf("Invoke = %v, %v", res.Status, err)
	}
	for _, mk := range []func() (context.Context, context.CancelFunc){
		func() (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) },
		func() (context.Context, context.CancelFunc) { return context.WithTimeout(t.Context(), 0) },
	} {
		ctx, cancel := mk()
		cancel()
		r, err := g.Resume(ctx, res.InvocationID, graph.Update{"ok": true})
		if !errors.Is(err, errcat.InvocationCancelled) || errors.Is(err, errcat.SuspensionRecordInvalid) || r.Status != graph.Errored {
			t.Errorf("resume with a done context = %v, %v (category %q); want invocation_cancelled", r.Status, err, errcat.Of(err))
		}
		if n := len(pausedOf(t, store, res.InvocationID)); n != 1 {
			t.Fatalf("%d paused records after a cancelled resume, want 1", n)
		}
	}
	if r, err := g.Resume(t.Context(), res.InvocationID, graph.Update{"ok": true}); err != nil || r.Status != graph.Completed {
		t.Fatalf("the retry = %v, %v", r.Status, err)
	}
}

// TestAttack2CheckpointAfterResumedSuspension: with a checkpointer, once
// a suspended invocation is resumed, its checkpoint is the resume point:
// ResumeCheckpoint of the completed invocation runs nothing again. Before,
// the latest checkpoint stayed the one saved before the suspension, so
// ResumeCheckpoint ran the suspending node again (suspending anew, a new
// paused record) or re-ran the fan-out whose instance had suspended,
// every instance and the nodes after it.
func TestAttack2CheckpointAfterResumedSuspension(t *testing.T) {
	for _, be := range a2Backends(t) {
		for _, tt := range []struct {
			name            string
			branches, rerun bool
			kinds           []int
		}{
			{"fan-out", false, false, []int{a2Complete, a2SuspendOnce, a2Complete}},
			{"fan-out re-run", false, true, []int{a2Complete, a2SuspendOnce, a2Complete}},
			{"parallel branches", true, false, []int{a2SuspendOnce, a2Complete}},
			{"parallel branches re-run", true, true, []int{a2SuspendOnce, a2Complete}},
		} {
			t.Run(be.name+"/"+tt.name, func(t *testing.T) {
				// The composite is the last node: nothing after it saves a
				// checkpoint in the resumed run.
				p := &a2Plan{kinds: tt.kinds, branches: tt.branches, rerun: tt.rerun, ckpt: true, last: true}
				runs := &a2Runs{done: map[int]int{}}
				var after atomic.Int32
				store := be.open(t)
				g := a2Build(t, p, runs, &after, store, 1)
				res, err := g.Invoke(t.Context(), a2Items.Set([]int{0, 1, 2}[:len(tt.kinds)]))
				if err != nil || res.Status != graph.Suspended {
					t.Fatalf("Invoke = %v, %v", res.Status, err)
				}
				id := res.InvocationID
				if res, err = g.Resume(t.Context(), id, a2Grants.Set([]string{"0:1", "1:1"})); err != nil || res.Status != graph.Completed {
					t.Fatalf("Resume = %v, %v", res.Status, err)
				}
				runs.mu.Lock()
				before := maps.Clone(runs.done)
				runs.mu.Unlock()
				afterRuns := after.Load()
				r2, err := g.ResumeCheckpoint(t.Context(), id)
				if err != nil || r2.Status != graph.Completed {
					t.Fatalf("ResumeCheckpoint of the completed invocation = %v, %v", r2.Status, err)
				}
				runs.mu.Lock()
				defer runs.mu.Unlock()
				if !maps.Equal(runs.done, before) || after.Load() != afterRuns {
					t.Errorf("ResumeCheckpoint of a completed invocation ran units %v (before %v) and after %d times (before %d)",
						runs.done, before, after.Load(), afterRuns)
				}
				if ps := pausedOf(t, store, r2.InvocationID); len(ps) != 0 {
					t.Errorf("ResumeCheckpoint suspended anew: %+v", ps)
				}
			})
		}
	}
}

// TestAttack2ResumeAcrossGraphsKeepsNewSuspension: two graphs over one
// store (two workers) resume one invocation; the second suspends again
// while the first still runs. When the first then fails, or completes, it
// must not consume the second's new suspension: the invocation stays
// suspended as the second reported. Before, the failing resume deleted
// the new paused record and the completing one took it, so the second's
// caller held a suspension that no longer existed.
func TestAttack2ResumeAcrossGraphsKeepsNewSuspension(t *testing.T) {
	for _, tt := range []struct {
		name      string
		fail      bool
		wantFirst errcat.Category
	}{
		{"first fails", true, errcat.NodeException},
		{"first completes", false, errcat.SuspensionRecordInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := checkpoint.NewMemoryStore(nil)
			release, entered := make(chan struct{}), make(chan struct{}, 2)
			var fail atomic.Bool
			fail.Store(tt.fail)
			var after atomic.Int32
			g1 := a2Gated(t, store, release, entered, &fail, &after)
			g2 := a2Gated(t, store, release, entered, &fail, &after)
			res, err := g1.Invoke(t.Context(), nil)
			if err != nil || res.Status != graph.Suspended {
				t.Fatalf("Invoke = %v, %v", res.Status, err)
			}
			id := res.InvocationID
			done := make(chan *graph.Result)
			go func() {
				r, _ := g1.Resume(context.Background(), id, graph.Update{"ok": true})
				done <- r
			}()
			<-entered // the first worker's resume runs the gate
			second, err := g2.Resume(t.Context(), id, graph.Update{"ok": false})
			if err != nil || second.Status != graph.Suspended {
				t.Fatalf("the second worker's resume = %v, %v; want suspended again", second.Status, err)
			}
			close(release)
			first := <-done
			if first.Status != graph.Errored || !errors.Is(first.Err, tt.wantFirst) {
				t.Errorf("the first worker's resume = %v, %v; want errored with %s", first.Status, first.Err, tt.wantFirst)
			}
			if ps := pausedOf(t, store, id); len(ps) != 1 {
				t.Fatalf("paused records %+v; the second worker's suspension must stand", ps)
			}
			// (A worker's run may execute to the end before it finds its
			// resume did not take effect: nodes are idempotent.)
			// The suspension the second worker reported resumes.
			fail.Store(false)
			if r, err := g2.Resume(t.Context(), id, graph.Update{"ok": true}); err != nil || r.Status != graph.Completed {
				t.Fatalf("resuming the standing suspension = %v, %v", r.Status, err)
			}
		})
	}
}
