package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// RandomConfig configures CheckRandomTurns.
type RandomConfig struct {
	// Backend names the adapter and Factory builds it, with the
	// backend-native Section (JSON, "" for none).
	Backend string
	Factory adapter.Factory
	Section string
	// Restart adds restarts of the adapter (built again by Factory, as a
	// new process would) to the operations. Durable says an approval
	// pending across a restart can be given after it, as the runtime's
	// paused records survive too: the upstream's state survives (a
	// session database, checkpoint files) or the adapter restores it
	// (ADK-Go's in-memory sessions, seeded). Otherwise the next message
	// supersedes it.
	Restart, Durable bool
	// Steps is the number of operations (default 60).
	Steps int
}

// start returns a randomized check's seed (logged; ARMATURE_TEST_SEED
// replays one), its generator (of the given stream: each check its own)
// and the number of steps.
func (cfg RandomConfig) start(t *testing.T, stream uint64) (int64, *rand.Rand, int) {
	t.Helper()
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv("ARMATURE_TEST_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (ARMATURE_TEST_SEED replays it)", seed)
	steps := cfg.Steps
	if steps <= 0 {
		steps = 60
	}
	return seed, rand.New(rand.NewPCG(uint64(seed), stream)), steps
}

// CheckRandomTurns drives an agent of cfg's backend (the demo tools and a
// bridged model, as CheckRollback does) through random operations on one
// session, the seed logged (ARMATURE_TEST_SEED replays a logged seed):
// plain turns, turns whose model call fails, whose session write fails
// or that are cancelled, refunds that ask for approval, approvals and
// denials (some whose resumed model call fails), new messages that
// supersede a pending approval, deletes of the session, and restarts. At
// every model call it checks that the model is sent the conversation the
// runtime committed: its user messages, in order, and the new message;
// and no tool result the runtime's history does not hold.
func CheckRandomTurns(t *testing.T, cfg RandomConfig) {
	t.Helper()
	seed, rng, steps := cfg.start(t, 0)
	ctx := context.Background()
	m, ag := rollbackAgent(cfg.Backend, cfg.Section)
	// The runtime's paused records, shared by the restarts (as a durable
	// store would be).
	records := checkpoint.NewMemoryStore(nil)
	store := session.NewMemoryStore(session.MemoryConfig{})
	sessions := &FlakySessions{Store: store}
	var (
		h       *chat.Harness
		closeIt = func() {}
	)
	build := func() {
		closeIt()
		a, err := cfg.Factory(ctx, adapter.FactoryRequest{Agent: ag})
		if err != nil {
			t.Fatal(err)
		}
		closeIt = func() {}
		if c, ok := a.(interface{ Close() error }); ok {
			closeIt = func() { _ = c.Close() }
		}
		g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: sessions}), graph.WithCheckpointStore(records))
		if err != nil {
			t.Fatal(err)
		}
		if h, err = chat.New(chat.Config{Graph: g, OnDelete: adapter.OnDelete(a), OnCancel: adapter.OnCancel(a, g), Coordinator: harness.NewStoreCoordinator(records)}); err != nil {
			t.Fatal(err)
		}
	}
	build()
	defer func() { closeIt() }()
	const id = "acme/r"
	// committed is the runtime's history of the session.
	committed := func() []llm.Message {
		rec, err := store.Load(ctx, session.LoadRequest{SessionID: id})
		if errors.Is(err, session.ErrNotFound) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := llm.DecodeMessages(rec.State[chat.MessagesField])
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	users := func(msgs []llm.Message) []string {
		var out []string
		for _, msg := range msgs {
			if msg.Role == llm.RoleUser {
				out = append(out, msg.Text())
			}
		}
		return out
	}
	calls := 0
	// check compares the model's calls since the operation began with
	// the history committed before it and the operation's new message.
	check := func(step int, op string, before []llm.Message, input string) {
		t.Helper()
		m.mu.Lock()
		sent := slices.Clone(m.sent[calls:])
		calls = len(m.sent)
		m.mu.Unlock()
		want := users(before)
		if input != "" {
			want = append(want, input)
		}
		results := map[string]string{}
		for _, msg := range before {
			if msg.Role == llm.RoleTool {
				results[msg.ToolCallID] = msg.Text()
			}
		}
		for _, call := range sent {
			if got := users(call); !slices.Equal(got, want) {
				t.Fatalf("seed %d, step %d (%s): the model was sent the user messages %q, want %q", seed, step, op, got, want)
			}
			for _, msg := range call {
				// A result before the call's last user message is from an
				// earlier turn: the model may be told it only as the
				// runtime committed it.
				if msg.Role == llm.RoleTool && strings.Contains(msg.Text(), "refunded") && !producedBy(call, msg.ToolCallID) &&
					!strings.Contains(results[msg.ToolCallID], "refunded") {
					t.Fatalf("seed %d, step %d (%s): the model was told %s's result %q, which the runtime's history does not hold",
						seed, step, op, msg.ToolCallID, msg.Text())
				}
			}
		}
	}
	var pending string // the signal id of the pending approval
	for step := range steps {
		before := committed()
		n := rng.IntN(10)
		switch {
		case n == 0 && cfg.Restart:
			build()
			if !cfg.Durable {
				// The upstream lost the approval's state: the next
				// message supersedes it.
				pending = ""
			}
			t.Logf("step %d: restart", step)
			continue
		case n <= 2 && pending != "":
			approve := rng.IntN(3) > 0
			fail := rng.IntN(3) == 0
			op := fmt.Sprintf("approve=%v, model fails=%v", approve, fail)
			if fail {
				m.failNext(1)
			}
			payload := agent.Approve("")
			if !approve {
				payload = agent.Deny("no")
			}
			out, err := h.Signal(ctx, chat.Signal{SignalID: pending, SessionID: id, Payload: payload})
			m.failNext(0)
			if fail != isErrored(out) || !fail && !isCompleted(out) {
				t.Fatalf("seed %d, step %d (%s): %#v, %v", seed, step, op, out, err)
			}
			pending = ""
			t.Logf("step %d: %s", step, op)
			check(step, op, before, "")
		case n == 5 && rng.IntN(3) == 0:
			if err := h.Delete(ctx, id); err != nil {
				t.Fatalf("seed %d, step %d (delete): %v", seed, step, err)
			}
			pending = ""
			t.Logf("step %d: delete", step)
		case n == 3:
			text := fmt.Sprintf("refund %d", step)
			out, err := h.Send(ctx, id, llm.UserText(text))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("seed %d, step %d (%s): %#v, %v", seed, step, text, out, err)
			}
			pending = s.Descriptor.SignalID
			t.Logf("step %d: %s", step, text)
			check(step, text, before, text)
		case n == 4:
			text := fmt.Sprintf("slow %d %s", step, SlowWord)
			if out, err := m.cancelMidCall(ctx, h, id, text); err != nil || !isErrored(out) {
				t.Fatalf("seed %d, step %d (cancelled): %#v, %v", seed, step, out, err)
			}
			t.Logf("step %d: cancelled", step)
			check(step, "cancelled", before, text)
			pending = stillPending(committed(), pending)
		default:
			text := fmt.Sprintf("message %d", step)
			op := "plain"
			switch rng.IntN(4) {
			case 0:
				op = "model fails"
				m.failNext(1)
			case 1:
				op = "session write fails"
				sessions.FailNext(1)
			}
			out, err := h.Send(ctx, id, llm.UserText(text))
			m.failNext(0)
			sessions.FailNext(0)
			if (op == "plain") != isCompleted(out) {
				t.Fatalf("seed %d, step %d (%s): %#v, %v", seed, step, op, out, err)
			}
			t.Logf("step %d: %s", step, op)
			check(step, op, before, text)
			if op == "plain" {
				pending = "" // superseded
			} else {
				pending = stillPending(committed(), pending)
			}
		}
	}
}

// stillPending returns pending when history still ends in its approval
// prompt (a turn that failed left the suspension in place).
func stillPending(history []llm.Message, pending string) string {
	if pending == "" {
		return ""
	}
	for i := len(history) - 1; i >= 0; i-- {
		for _, c := range history[i].ToolCalls {
			if agent.SignalPrefix+c.ID == pending {
				return pending
			}
		}
		if history[i].Role == llm.RoleUser {
			return ""
		}
	}
	return ""
}

// producedBy reports whether call's tool call id is answered after the
// last user message of call: a result of the call's own turn.
func producedBy(call []llm.Message, id string) bool {
	for i := len(call) - 1; i >= 0; i-- {
		if call[i].Role == llm.RoleUser {
			return false
		}
		if call[i].Role == llm.RoleTool && call[i].ToolCallID == id {
			return true
		}
	}
	return false
}
