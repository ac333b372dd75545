package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
	"github.com/armature-go/armature/store/sqlite"
)

// embWorker is one "process": its own Store on the shared file, its own
// agent, harness, locker and coordinator.
type embWorker struct {
	store session.Store
	h     *chat.Harness
}

type embRefunds struct {
	mu  sync.Mutex
	ran map[string]int // "order" -> executions
}

func (r *embRefunds) tools() []agent.Tool {
	type args struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
	}
	lookup := demo.Tools()[0]
	refund := agent.MustTool("issue_refund", "Refund an order (needs approval)",
		func(ctx context.Context, a args) (string, error) {
			r.mu.Lock()
			r.ran[a.Order]++
			r.mu.Unlock()
			return fmt.Sprintf("refunded $%.2f for order %s", a.Amount, a.Order), nil
		}).WithApproval().WithRisk(agent.RiskDangerous)
	return []agent.Tool{lookup, refund}
}

func embOpen(t *testing.T, path string, tools []agent.Tool) *embWorker {
	t.Helper()
	ctx := context.Background()
	var (
		s      session.Store
		cp     checkpoint.Store
		locker chat.Locker
	)
	if url, ok := strings.CutPrefix(path, "pg:"); ok {
		p, err := postgres.Open(ctx, postgres.Config{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		s, cp, locker = p, p.Checkpoints(), p.SessionLocker(postgres.LockerConfig{})
	} else {
		l, err := sqlite.Open(ctx, sqlite.Config{Path: path, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		s, cp, locker = l, l.Checkpoints(), l.SessionLocker(sqlite.LockerConfig{})
	}
	a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: s}), graph.WithCheckpointStore(cp))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(cp), Locker: locker})
	if err != nil {
		t.Fatal(err)
	}
	return &embWorker{store: s, h: h}
}

func embSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("EMBEDDER_TEST_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (EMBEDDER_TEST_SEED to replay)", seed)
	return seed
}

// TestEmbedderTwoWorkersRandomized: two workers on one SQLite file
// (Shared, each with the store's SessionLocker and a StoreCoordinator)
// interleave sends (refund requests that suspend, lookups that complete,
// retransmissions under message ids), approvals, denials and cancels on
// one session, from several goroutines. Afterwards, reloaded from a
// fresh store:
//   - the history is valid for every provider;
//   - every acknowledged (Completed/Suspended, not replayed) user
//     message is in the history exactly once;
//   - every refund executed is recorded exactly once in the history
//     (no refund runs twice, none is run without its result stored);
//   - every approval acknowledged Completed has its refund in the history.
func TestEmbedderTwoWorkersRandomized(t *testing.T) {
	embTwoWorkers(t, filepath.Join(t.TempDir(), "shared.db"), false)
}

// TestEmbedderTwoWorkersRandomizedDeletes adds deletes of the session
// to the mix: the history checks then only cover validity, and every
// refund that ran must have been acknowledged to an approver as
// Completed.
func TestEmbedderTwoWorkersRandomizedDeletes(t *testing.T) {
	embTwoWorkers(t, filepath.Join(t.TempDir(), "shared.db"), true)
}

// TestEmbedderTwoWorkersRandomizedPostgres is the same on PostgreSQL.
func TestEmbedderTwoWorkersRandomizedPostgres(t *testing.T) {
	_, url := pgtest.Schema(t)
	embTwoWorkers(t, "pg:"+url, false)
}

func embTwoWorkers(t *testing.T, path string, deletes bool) {
	seed := embSeed(t)
	refunds := &embRefunds{ran: map[string]int{}}
	ws := []*embWorker{embOpen(t, path, refunds.tools()), embOpen(t, path, refunds.tools())}
	ctx := context.Background()
	const sid = "shared-session"

	var (
		mu        sync.Mutex
		acked     = map[string]int{}  // user text -> acknowledged turns (non replayed)
		signals   []chat.Suspended    // known suspensions
		approvedC = map[string]bool{} // order -> approval acknowledged Completed
		log       []string
	)
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	var seq int
	var wg sync.WaitGroup
	for g := range 3 {
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Go(func() {
			for range 25 {
				w := ws[rng.IntN(2)]
				switch op := rng.IntN(8); op {
				case 0, 1: // refund request
					mu.Lock()
					seq++
					n := seq
					mu.Unlock()
					text := fmt.Sprintf("please refund order %d", 1000+n)
					var opts []chat.SendOption
					mid := fmt.Sprintf("m%d", n)
					opts = append(opts, chat.WithMessageID(mid))
					tries := 1 + rng.IntN(2)
					for range tries {
						out, err := w.h.Send(ctx, sid, llm.UserText(text), opts...)
						note(fmt.Sprintf("g%d send %q -> %T %v", g, text, out, err))
						switch o := out.(type) {
						case *chat.Suspended:
							mu.Lock()
							if !o.Replayed {
								acked[text]++
								signals = append(signals, *o)
							}
							mu.Unlock()
						case *chat.Completed:
							if !o.Replayed {
								mu.Lock()
								acked[text]++
								mu.Unlock()
							}
						}
						w = ws[rng.IntN(2)]
					}
				case 2: // lookup
					mu.Lock()
					seq++
					n := seq
					mu.Unlock()
					text := fmt.Sprintf("where is order %d?", 2000+n)
					out, err := w.h.Send(ctx, sid, llm.UserText(text))
					note(fmt.Sprintf("g%d send %q -> %T %v", g, text, out, err))
					if o, ok := out.(*chat.Completed); ok && !o.Replayed {
						mu.Lock()
						acked[text]++
						mu.Unlock()
					}
				case 3, 4, 6, 7: // approve or deny a known suspension
					mu.Lock()
					if len(signals) == 0 {
						mu.Unlock()
						continue
					}
					s := signals[len(signals)-1]
					if rng.IntN(4) == 0 {
						s = signals[rng.IntN(len(signals))]
					}
					mu.Unlock()
					approve := rng.IntN(3) > 0
					payload := agent.Deny("no")
					if approve {
						payload = agent.Approve("")
					}
					rid := ""
					if rng.IntN(2) == 0 {
						rid = "r-" + s.InvocationID + strconv.FormatBool(approve)
					}
					// The invocation too: with deletes, a new session's first
					// call has the same signal id (approval:call_1) as the
					// deleted one's, and the approval must be the one whose
					// order it is counted for.
					out, err := w.h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, InvocationID: s.InvocationID, SessionID: sid, Payload: payload, RequestID: rid})
					note(fmt.Sprintf("g%d signal %s approve=%v -> %T %v", g, s.Descriptor.SignalID, approve, out, err))
					if o, ok := out.(*chat.Completed); ok && approve && !o.Replayed {
						args := s.PendingMessages[len(s.PendingMessages)-2]
						_ = args
						mu.Lock()
						for _, m := range s.PendingMessages {
							for _, tc := range m.ToolCalls {
								if tc.Name == "issue_refund" {
									var a struct{ Order string }
									_ = json.Unmarshal(tc.Arguments, &a)
									approvedC[a.Order] = true
								}
							}
						}
						mu.Unlock()
					}
				case 5: // cancel, or delete
					if deletes && rng.IntN(2) == 0 {
						err := w.h.Delete(ctx, sid)
						note(fmt.Sprintf("g%d delete -> %v", g, err))
						continue
					}
					mu.Lock()
					if len(signals) == 0 {
						mu.Unlock()
						continue
					}
					s := signals[rng.IntN(len(signals))]
					mu.Unlock()
					err := w.h.CancelSuspended(ctx, sid, s.InvocationID)
					note(fmt.Sprintf("g%d cancel %s -> %v", g, s.Descriptor.SignalID, err))
				}
			}
		})
	}
	wg.Wait()

	fresh := embOpen(t, path, refunds.tools()).store
	rec, err := fresh.Load(ctx, session.LoadRequest{SessionID: sid})
	var msgs []llm.Message
	if err == nil {
		if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil {
			t.Fatal(err)
		}
	} else if !deletes {
		t.Fatal(err)
	}
	dump := func() string {
		var b strings.Builder
		for _, l := range log {
			b.WriteString(l + "\n")
		}
		b.WriteString("history:\n")
		for _, m := range msgs {
			b.WriteString(fmt.Sprintf("  %s %q %s %v\n", m.Role, m.Text(), m.ToolCallID, m.ToolCalls))
		}
		return b.String()
	}
	var fails []string
	if err := llm.CheckHistory(nil, msgs); err != nil {
		fails = append(fails, fmt.Sprintf("invalid history: %v", err))
	}
	inHist := map[string]int{}
	refundedInHist := map[string]int{}
	for _, m := range msgs {
		if m.Role == llm.RoleUser {
			inHist[m.Text()]++
		}
		if m.Role == llm.RoleTool && strings.HasPrefix(m.Text(), "refunded ") {
			f := strings.Fields(m.Text())
			refundedInHist[f[len(f)-1]]++
		}
	}
	for text, n := range acked {
		if deletes {
			break
		}
		if inHist[text] != 1 || n != 1 {
			fails = append(fails, fmt.Sprintf("user message %q acknowledged %d times, %d times in the history", text, n, inHist[text]))
		}
	}
	refunds.mu.Lock()
	for order, n := range refunds.ran {
		if !approvedC[order] {
			fails = append(fails, fmt.Sprintf("refund of order %s ran %d times, but no approval of it was acknowledged Completed", order, n))
		}
		if deletes {
			continue
		}
		if n != 1 || refundedInHist[order] != 1 {
			fails = append(fails, fmt.Sprintf("refund of order %s ran %d times, %d results in the history", order, n, refundedInHist[order]))
		}
	}
	refunds.mu.Unlock()
	for order := range approvedC {
		if deletes {
			break
		}
		if refundedInHist[order] != 1 {
			fails = append(fails, fmt.Sprintf("approval of order %s acknowledged Completed, %d refund results in the history", order, refundedInHist[order]))
		}
	}
	if len(fails) > 0 {
		t.Fatalf("%s\n%s", strings.Join(fails, "\n"), dump())
	}
	t.Logf("%d messages, %d acked, %d refunds", len(msgs), len(acked), len(refunds.ran))
}
