package prompt_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
)

// a2Source is a prompt source over a Memory: each fetch reads the memory
// at once (its linearization point), then optionally waits for hold
// (or its context) before answering; down makes fetches fail as
// unavailable.
type a2Source struct {
	mem      *prompt.Memory
	reads    atomic.Int32
	down     atomic.Bool
	hold     atomic.Pointer[chan struct{}]
	entered  chan struct{} // optional: told of each held fetch
	canceled atomic.Int32  // fetches that ended on their context
}

func (s *a2Source) Fetch(ctx context.Context, name, label string, opts prompt.FetchOptions) (*prompt.Prompt, error) {
	s.reads.Add(1)
	if s.down.Load() {
		return nil, errcat.New(errcat.PromptStoreUnavailable, "source down")
	}
	p, err := s.mem.Fetch(ctx, name, label, opts)
	if h := s.hold.Load(); h != nil {
		if s.entered != nil {
			s.entered <- struct{}{}
		}
		select {
		case <-*h:
		case <-ctx.Done():
			s.canceled.Add(1)
			return nil, errcat.Wrap(errcat.PromptStoreUnavailable, "fetch cancelled", ctx.Err())
		}
	}
	return p, err
}

// a2Version is version k of prompt "p" under "production": its template
// and its sampling configuration both name k.
func a2Version(k int) *prompt.Prompt {
	mt := k
	return &prompt.Prompt{Name: "p", Label: "production", Version: strconv.Itoa(k),
		Template: prompt.MustParseTemplate("v" + strconv.Itoa(k)), Sampling: &llm.Config{MaxTokens: &mt}}
}

// a2Check fails unless p is one whole version and returns it.
func a2Check(t *testing.T, p *prompt.Prompt) int {
	t.Helper()
	k, err := strconv.Atoi(p.Version)
	if err != nil || p.Template.Source() != "v"+p.Version || p.Sampling == nil || *p.Sampling.MaxTokens != k {
		t.Fatalf("a mixture of versions: version %q, template %q, sampling %+v", p.Version, p.Template.Source(), p.Sampling)
	}
	return k
}

// TestAttack2CacheNoRegressionAfterMove: a read that began before the
// label moved and ends after a fresh read saw the move must not put the
// old version back in the cache. Before, the slower, older read
// overwrote the entry, and fetches within TTL were served the version the
// label had left.
func TestAttack2CacheNoRegressionAfterMove(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	src := &a2Source{mem: prompt.NewMemory(clock, a2Version(1)), entered: make(chan struct{}, 1)}
	c := prompt.NewCache(src, prompt.CacheConfig{TTL: time.Minute, Now: clock})
	hold := make(chan struct{})
	src.hold.Store(&hold)
	slow := make(chan *prompt.Prompt)
	go func() {
		p, err := c.Fetch(ctx, "p", "production", prompt.FetchOptions{})
		if err != nil {
			t.Error(err)
		}
		slow <- p
	}()
	<-src.entered // the slow read has read version 1
	src.hold.Store(nil)
	src.mem.Put(a2Version(2)) // the label moves
	fresh, err := c.Fetch(ctx, "p", "production", prompt.FetchOptions{MaxAge: prompt.MaxAge(0)})
	if err != nil || a2Check(t, fresh) != 2 {
		t.Fatalf("fresh read after the move: %+v, %v", fresh, err)
	}
	close(hold)
	if p := <-slow; a2Check(t, p) != 1 {
		t.Fatalf("the slow read: version %s", p.Version)
	}
	p, err := c.Fetch(ctx, "p", "production", prompt.FetchOptions{})
	if err != nil || a2Check(t, p) != 2 {
		t.Fatalf("after a fresh read saw version 2, the cache serves version %s (%v)", p.Version, err)
	}
}

// TestAttack2CacheSingleFlight: concurrent misses of one prompt read the
// source once and share the result; fetches that force a fresh read
// (MaxAge 0) never share a read that began before them.
func TestAttack2CacheSingleFlight(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tt := range []struct {
		name      string
		opts      prompt.FetchOptions
		wantReads int32
	}{
		{"default", prompt.FetchOptions{}, 1},
		{"max age", prompt.FetchOptions{MaxAge: prompt.MaxAge(time.Second)}, 1},
		{"fresh", prompt.FetchOptions{MaxAge: prompt.MaxAge(0)}, 32},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const n = 32
			src := &a2Source{mem: prompt.NewMemory(nil, a2Version(7)), entered: make(chan struct{}, n)}
			hold := make(chan struct{})
			src.hold.Store(&hold)
			c := prompt.NewCache(src, prompt.CacheConfig{TTL: time.Minute})
			var wg sync.WaitGroup
			var started sync.WaitGroup
			got := make([]*prompt.Prompt, n)
			for i := range n {
				started.Add(1)
				wg.Go(func() {
					started.Done()
					p, err := c.Fetch(context.Background(), "p", "production", tt.opts)
					if err != nil {
						t.Error(err)
						return
					}
					got[i] = p
				})
			}
			started.Wait()
			<-src.entered
			if tt.wantReads > 1 {
				for range tt.wantReads - 1 {
					<-src.entered
				}
			} else {
				time.Sleep(20 * time.Millisecond) // let the others pile up on the read under way
			}
			close(hold)
			wg.Wait()
			if r := src.reads.Load(); r != tt.wantReads {
				t.Errorf("%d concurrent fetches made %d source reads, want %d", n, r, tt.wantReads)
			}
			for _, p := range got {
				if p != nil {
					a2Check(t, p)
				}
			}
		})
	}
}

// TestAttack2CacheCancelledCaller: a caller that gives up while a shared
// read is under way returns at once; the others still get the prompt,
// and the read is not cut short on their behalf. When every caller has
// given up, the read is cancelled (no goroutine is left waiting), and a
// later fetch starts afresh.
func TestAttack2CacheCancelledCaller(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	src := &a2Source{mem: prompt.NewMemory(nil, a2Version(3)), entered: make(chan struct{}, 4)}
	hold := make(chan struct{})
	src.hold.Store(&hold)
	c := prompt.NewCache(src, prompt.CacheConfig{TTL: time.Minute})

	lctx, cancel := context.WithCancel(context.Background())
	leader := make(chan error, 1)
	go func() { _, err := c.Fetch(lctx, "p", "production", prompt.FetchOptions{}); leader <- err }()
	<-src.entered
	follower := make(chan *prompt.Prompt, 1)
	go func() {
		p, err := c.Fetch(context.Background(), "p", "production", prompt.FetchOptions{})
		if err != nil {
			t.Error(err)
		}
		follower <- p
	}()
	time.Sleep(50 * time.Millisecond) // the follower joins the read under way
	cancel()
	select {
	case err := <-leader:
		if err == nil {
			t.Error("a cancelled caller got no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled caller did not return")
	}
	close(hold)
	if p := <-follower; p == nil || a2Check(t, p) != 3 {
		t.Fatalf("the caller still waiting got %+v", p)
	}
	if n := src.canceled.Load(); n != 0 {
		t.Errorf("the shared read was cancelled for the caller still waiting (%d cancelled reads)", n)
	}

	// Every caller gives up: the read ends; then a fetch reads afresh.
	src.mem.Put(a2Version(4))
	hold2 := make(chan struct{})
	src.hold.Store(&hold2)
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Fetch(ctx2, "p", "production", prompt.FetchOptions{MaxAge: prompt.MaxAge(time.Nanosecond)})
		done <- err
	}()
	<-src.entered
	cancel2()
	if err := <-done; err == nil {
		t.Fatal("a cancelled caller got no error")
	}
	for deadline := time.Now().Add(5 * time.Second); src.canceled.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the read nobody waits for was not cancelled")
		}
	}
	src.hold.Store(nil)
	p, err := c.Fetch(context.Background(), "p", "production", prompt.FetchOptions{MaxAge: prompt.MaxAge(time.Nanosecond)})
	if err != nil || a2Check(t, p) != 4 {
		t.Fatalf("after the abandoned read: %+v, %v", p, err)
	}
}

// TestAttack2CacheLabelRace: many callers render through a Manager while
// the label moves from version to version and the source fails now and
// then, some callers giving up. Every result is one whole version (never
// one version's template with another's configuration), and once the
// label settles and TTL passes, every fetch serves the final version; no
// goroutine is left behind.
// ARMATURE_ATTACK2_SEED=<n> replays one seed.
func TestAttack2CacheLabelRace(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	seed := rand.Uint64()
	if s := os.Getenv("ARMATURE_ATTACK2_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (ARMATURE_ATTACK2_SEED=%d replays it)", seed, seed)
	var clockMu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	src := &a2Source{mem: prompt.NewMemory(clock, a2Version(0))}
	c := prompt.NewCache(src, prompt.CacheConfig{TTL: time.Minute, Now: clock, ServeStale: true})
	m, err := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{c}})
	if err != nil {
		t.Fatal(err)
	}
	const moves = 40
	var (
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				opts := prompt.FetchOptions{}
				if rng.IntN(4) == 0 {
					opts.MaxAge = prompt.MaxAge(0)
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(8) == 0 {
					cancel() // a caller that gave up
				}
				r, err := m.Get(ctx, "p", "", nil, opts, prompt.RenderOptions{})
				cancel()
				if err != nil {
					continue // cancelled, or the source down with nothing cached
				}
				k, _ := strconv.Atoi(r.Version)
				if r.Messages[0].Text() != "v"+r.Version || r.Sampling == nil || *r.Sampling.MaxTokens != k {
					t.Errorf("a mixture: version %s, text %q, sampling %+v", r.Version, r.Messages[0].Text(), r.Sampling)
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	for k := 1; k <= moves; k++ {
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		src.down.Store(rng.IntN(5) == 0)
		src.mem.Put(a2Version(k))
	}
	src.down.Store(false)
	close(stop)
	wg.Wait()
	clockMu.Lock()
	now = now.Add(2 * time.Minute)
	clockMu.Unlock()
	for range 3 {
		p, err := m.Fetch(context.Background(), "p", "", prompt.FetchOptions{})
		if err != nil || a2Check(t, p) != moves {
			t.Fatalf("after the label settled and TTL passed: %+v, %v", p, err)
		}
	}
	if t.Failed() {
		t.Logf("replay: ARMATURE_ATTACK2_SEED=%d", seed)
	}
}
