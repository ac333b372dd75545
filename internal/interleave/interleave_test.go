package interleave

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	flagSeed  = flag.Int64("interleave.seed", 0, "run this one seed (0: a fresh base seed, printed)")
	flagSeeds = flag.Int("interleave.seeds", 0, "sequences per target (0: the CI budget: 6 library, 3 HTTP)")
	flagSteps = flag.Int("interleave.steps", 0, "steps per sequence (0: the CI budget: 150 library, 80 HTTP)")
)

// binDir holds the armature binary the HTTP target runs, built once.
var (
	binDir  string
	binOnce sync.Once
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func armature(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "armature-interleave"); binErr == nil {
			binPath, binErr = buildArmature(binDir)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// TestInterleave runs random sequences against the library and against
// armature serve over HTTP (see the package documentation).
func TestInterleave(t *testing.T) {
	base := *flagSeed
	if base == 0 {
		base = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("base seed %d (rerun with -interleave.seed %d)", base, base)
	for _, tc := range []struct {
		name         string
		seeds, steps int
		target       func(t *testing.T) target
	}{
		{"library", 6, 150, func(t *testing.T) target { return newLibTarget(t) }},
		{"http", 3, 80, func(t *testing.T) target { return newHTTPTarget(t, armature(t)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeds, steps := tc.seeds, tc.steps
			if *flagSeeds > 0 {
				seeds = *flagSeeds
			}
			if *flagSteps > 0 {
				steps = *flagSteps
			}
			if *flagSeed != 0 {
				seeds = 1
			}
			if testing.Short() {
				seeds, steps = 1, steps/3
			}
			for i := range seeds {
				seed := base + int64(i)
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					t.Parallel()
					runSequence(t, tc.name, tc.target(t), seed, steps)
				})
			}
		})
	}
}

// sequence is one run: its target, model, random source and log.
type sequence struct {
	t       *testing.T
	name    string
	tg      target
	seed    int64
	rng     *rand.Rand
	m       *model
	log     []string
	n       int // messages sent so far
	crashes int
	doubts  int // requests a crash left without an answer
}

func (q *sequence) fail(format string, args ...any) {
	q.t.Helper()
	q.t.Fatalf("seed %d, step %d: %s\nsteps:\n  %s\nrerun: go test ./internal/interleave -run 'TestInterleave/%s' -interleave.seed %d -v",
		q.seed, len(q.log), fmt.Sprintf(format, args...), strings.Join(q.log, "\n  "), q.name, q.seed)
}

var sessions = []string{"s0", "s1", "s2"}

func runSequence(t *testing.T, name string, tg target, seed int64, steps int) {
	q := &sequence{t: t, name: name, tg: tg, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 0x1ea7e)), m: newModel(sessions...)}
	ctx := context.Background()
	for range steps {
		sess := sessions[q.rng.IntN(len(sessions))]
		switch r := q.rng.IntN(100); {
		case r < 4:
			q.log = append(q.log, "restart")
			tg.restart(t)
		case r < 9 && name == "http":
			q.crash(ctx, sess)
		case r < 18:
			q.pair(ctx, sess)
		default:
			o := q.gen(sess)
			resp := q.exec(ctx, o)
			q.log = append(q.log, fmt.Sprintf("%v → %v", o, resp))
			if err := q.m.apply(o, resp); err != nil {
				q.fail("%v", err)
			}
		}
		q.check(ctx)
	}
	t.Logf("seed %d: %d steps, %d messages, %d crashes (%d with a request in flight)", seed, steps, q.n, q.crashes, q.doubts)
}

// gen draws an operation on sess that fits the model's state.
func (q *sequence) gen(sess string) op {
	s := q.m.s[sess]
	r := q.rng.IntN(100)
	switch {
	case r < 10 && len(s.sent) > 0:
		ids := slices.Sorted(mapsKeys(s.sent))
		id := ids[q.rng.IntN(len(ids))]
		return op{kind: "resend", sess: sess, id: id, content: s.sent[id].content}
	case r < 28 && s.pending != "":
		return op{kind: "signal", sess: sess, sig: s.pending, approve: q.rng.IntN(10) < 7}
	case r < 34 && s.pending != "":
		return op{kind: "badsignal", sess: sess, sig: s.pending}
	case r < 39 && len(s.stale) > 0:
		return op{kind: "stalesignal", sess: sess, sig: s.stale[q.rng.IntN(len(s.stale))]}
	case r < 39:
		return op{kind: "stalesignal", sess: sess, sig: "approval:call_never"}
	case r < 45:
		return op{kind: "delete", sess: sess}
	case r < 50 && s.pending != "":
		return op{kind: "cancel", sess: sess, inv: s.pendingInv}
	}
	q.n++
	content := []string{"refund order %d", "where is order %d?", "hello number %d"}[q.rng.IntN(3)]
	return op{kind: "send", sess: sess, id: fmt.Sprintf("m%d", q.n), content: fmt.Sprintf(content, q.n)}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (q *sequence) exec(ctx context.Context, o op) response {
	switch o.kind {
	case "send", "resend":
		return q.tg.send(ctx, o.sess, o.id, o.content)
	case "signal":
		return q.tg.signal(ctx, o.sess, o.sig, map[string]any{"approval": map[string]any{"approved": o.approve, "comment": ""}})
	case "badsignal":
		return q.tg.signal(ctx, o.sess, o.sig, map[string]any{"approval": map[string]any{"approved": 1}})
	case "stalesignal":
		return q.tg.signal(ctx, o.sess, o.sig, map[string]any{"approval": map[string]any{"approved": true}})
	case "delete":
		return q.tg.del(ctx, o.sess)
	case "cancel":
		return q.tg.cancel(ctx, o.sess, o.inv)
	}
	panic("unknown op " + o.kind)
}

// pair runs two operations on one session at once; the answers must fit
// one of the two orders.
func (q *sequence) pair(ctx context.Context, sess string) {
	a, b := q.gen(sess), q.gen(sess)
	if a.kind == "send" && b.kind == "send" && a.id == b.id {
		return
	}
	var ra, rb response
	var wg sync.WaitGroup
	wg.Go(func() { ra = q.exec(ctx, a) })
	wg.Go(func() { rb = q.exec(ctx, b) })
	wg.Wait()
	q.log = append(q.log, fmt.Sprintf("at once: %v → %v  ||  %v → %v", a, ra, b, rb))
	order := func(x op, rx response, y op, ry response) (*model, error) {
		m := q.m.clone()
		err := m.apply(x, rx)
		if err == nil {
			err = m.apply(y, ry)
		}
		return m, err
	}
	ab, errAB := order(a, ra, b, rb)
	ba, errBA := order(b, rb, a, ra)
	switch {
	case errAB != nil && errBA != nil:
		q.fail("the answers fit neither order:\n    first then second: %v\n    second then first: %v", errAB, errBA)
	case errBA != nil:
		q.m = ab
	case errAB != nil:
		q.m = ba
	default:
		// Both orders fit the answers (two messages that supersede
		// nothing): the history tells which one happened.
		hist, exists, err := q.tg.history(ctx, sess)
		if err != nil {
			q.fail("reading %s: %v", sess, err)
		}
		q.m = ab
		if checkHistory(ab.s[sess], hist, exists) != nil {
			q.m = ba
		}
	}
}

// crash kills the server with an operation in flight; an operation that
// got no answer is retransmitted after the restart, which settles it.
func (q *sequence) crash(ctx context.Context, sess string) {
	o := q.gen(sess)
	if o.kind == "cancel" {
		o = op{kind: "delete", sess: sess}
	}
	done := make(chan response, 1)
	go func() { done <- q.exec(ctx, o) }()
	time.Sleep(time.Duration(q.rng.IntN(2500)) * time.Microsecond)
	q.tg.kill(q.t)
	q.crashes++
	resp := <-done
	if resp.status == 0 {
		q.log = append(q.log, fmt.Sprintf("kill -9 during %v (no answer)", o))
		q.doubts++
		o.doubt = o.kind == "send" || o.kind == "signal" || o.kind == "delete"
		if o.kind == "send" {
			if _, known := q.m.s[sess].sent[o.id]; known {
				o.doubt = false // a retransmission already: replays either way
			}
		}
		resp = q.exec(ctx, o)
	} else {
		q.log = append(q.log, "kill -9 after the answer to the next")
	}
	q.log = append(q.log, fmt.Sprintf("%v → %v", o, resp))
	if err := q.m.apply(o, resp); err != nil {
		q.fail("%v", err)
	}
}

// check compares every session with the model.
func (q *sequence) check(ctx context.Context) {
	for _, sess := range sessions {
		hist, exists, err := q.tg.history(ctx, sess)
		if err != nil {
			q.fail("reading %s: %v", sess, err)
		}
		if err := checkHistory(q.m.s[sess], hist, exists); err != nil {
			q.fail("session %s: %v", sess, err)
		}
		runs, ok, err := q.tg.runs(ctx, sess)
		if err != nil {
			q.fail("runs of %s: %v", sess, err)
		}
		if ok {
			if err := checkRuns(q.m.s[sess], runs, q.crashes); err != nil {
				q.fail("runs of %s: %v", sess, err)
			}
		}
	}
}
