package eino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// refundsModel answers "refund <order> <order>…" with one issue_refund
// call per order in one step, a tool result with "ok", anything else
// with "You said it".
type refundsModel struct{}

func (refundsModel) Ready(context.Context) error { return nil }

func (refundsModel) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == llm.RoleTool {
		return &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop}, nil
	}
	orders, ok := strings.CutPrefix(last.Text(), "refund ")
	if last.Role != llm.RoleUser || !ok {
		return &llm.Response{Message: llm.AssistantText("You said it"), FinishReason: llm.FinishStop}, nil
	}
	var calls []llm.ToolCall
	for _, o := range strings.Fields(orders) {
		calls = append(calls, llm.ToolCall{ID: "call_" + o, Name: "issue_refund", Arguments: json.RawMessage(`{"order":"` + o + `","amount":1}`)})
	}
	return &llm.Response{Message: llm.AssistantToolCalls(calls...), FinishReason: llm.FinishToolCalls}, nil
}

// TestAttackRandomApprovals drives one session through random
// operations (the seed logged; ARMATURE_TEST_SEED replays it): plain
// messages, refunds of one to three orders in one step (each asked for
// in turn), approvals, denials, stale approvals, cancelled suspensions,
// session deletes and restarts (a new engine on the same checkpoint
// directory, streaming or not, the runtime's stores kept), checked against a model: an
// approved order is refunded once, no other order ever, the outcome of
// each operation is the expected one, at most two checkpoints exist
// (the pending run's and one awaiting its discard), none after a delete,
// and none once two plain turns followed the last suspension.
func TestAttackRandomApprovals(t *testing.T) {
	ctx := context.Background()
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv("ARMATURE_TEST_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (ARMATURE_TEST_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))

	var (
		mu       sync.Mutex
		refunded = map[string]int{}
	)
	tools := []agent.Tool{agent.MustTool("issue_refund", "Refund an order", func(_ context.Context, a struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
	}) (string, error) {
		mu.Lock()
		refunded[a.Order]++
		mu.Unlock()
		return "refunded " + a.Order, nil
	}).WithApproval()}
	dir := t.TempDir()
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	cps := checkpoint.NewMemoryStore(nil)
	var fs *eino.FileStore
	start := func() *chat.Harness {
		var err error
		if fs, err = eino.NewFileStore(dir); err != nil {
			t.Fatal(err)
		}
		// Each process streams or not (a checkpoint saved by one is
		// resumed by the other).
		e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Store: fs, Model: eino.NewProviderModel(refundsModel{}), Streaming: new(rng.IntN(2) == 0)})
		if err != nil {
			t.Fatal(err)
		}
		a := &eino.Adapter{Engine: e}
		ag := &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: tools}
		g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: sessions}), graph.WithCheckpointStore(cps))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(cps), OnDelete: adapter.OnDelete(a)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	files := func() int {
		t.Helper()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	const key = "acme/s"
	h := start()
	var (
		pending  []string        // the orders awaiting approval, the asked one first
		susp     *chat.Suspended // the suspension asking for pending[0]
		spent    []string        // signal ids already answered
		want     = map[string]int{}
		next     = 0
		plain    = 2 // plain turns since the last suspension
		steps    = 80
		opsNames []string
	)
	expectSuspension := func(op string, out chat.Outcome, err error) {
		t.Helper()
		s, ok := out.(*chat.Suspended)
		if !ok {
			t.Fatalf("seed %d, %v: %s: want a suspension for %v, got %#v %v", seed, opsNames, op, pending, out, err)
		}
		if got := s.Descriptor.Metadata[agent.MetadataTool]; got != "issue_refund" {
			t.Fatalf("%s: suspended for %v", op, got)
		}
		susp = s
	}
	decide := func(approve bool) {
		op := map[bool]string{true: "approve", false: "deny"}[approve]
		payload := agent.Approve("")
		if !approve {
			payload = agent.Deny("no")
		}
		out, err := h.Signal(ctx, chat.Signal{SignalID: susp.Descriptor.SignalID, SessionID: key, Payload: payload})
		spent = append(spent, susp.Descriptor.SignalID)
		if approve {
			want[pending[0]] = 1
		}
		pending = pending[1:]
		if len(pending) > 0 {
			expectSuspension(op, out, err)
			return
		}
		susp = nil
		if !isCompleted(out) || lastText(t, out) != "ok" {
			t.Fatalf("seed %d, %v: %s: %#v %v", seed, opsNames, op, out, err)
		}
	}
	for range steps {
		var op string
		switch r := rng.IntN(100); {
		case r < 20:
			op = "plain"
			out, err := h.Send(ctx, key, llm.UserText("hello"))
			if !isCompleted(out) || lastText(t, out) != "You said it" {
				t.Fatalf("seed %d, %v: plain: %#v %v", seed, opsNames, out, err)
			}
			pending, susp = nil, nil
			plain++
		case r < 40:
			n := 1 + rng.IntN(3)
			var orders []string
			for range n {
				next++
				orders = append(orders, strconv.Itoa(next))
			}
			op = "refund " + strings.Join(orders, " ")
			out, err := h.Send(ctx, key, llm.UserText(op))
			pending = orders
			expectSuspension(op, out, err)
			plain = 0
		case r < 60 && susp != nil:
			op = "approve"
			decide(true)
		case r < 70 && susp != nil:
			op = "deny"
			decide(false)
		case r < 75 && susp != nil:
			op = "cancel"
			if err := h.CancelSuspended(ctx, key, susp.InvocationID); err != nil {
				t.Fatalf("seed %d, %v: cancel: %v", seed, opsNames, err)
			}
			spent = append(spent, susp.Descriptor.SignalID)
			pending, susp = nil, nil
		case r < 80 && len(spent) > 0:
			op = "stale approval"
			sig := spent[rng.IntN(len(spent))]
			if out, err := h.Signal(ctx, chat.Signal{SignalID: sig, SessionID: key, Payload: agent.Approve("")}); isCompleted(out) {
				t.Fatalf("seed %d, %v: a stale approval completed: %#v %v", seed, opsNames, out, err)
			}
		case r < 85:
			op = "delete"
			if err := h.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			if n := files(); n != 0 {
				t.Fatalf("seed %d, %v: %d checkpoints after the delete", seed, opsNames, n)
			}
			pending, susp, spent = nil, nil, nil
		case r < 92:
			op = "restart"
			h = start()
		default:
			op = "plain"
			out, err := h.Send(ctx, key, llm.UserText("hi"))
			if !isCompleted(out) {
				t.Fatalf("seed %d, %v: plain: %#v %v", seed, opsNames, out, err)
			}
			pending, susp = nil, nil
			plain++
		}
		opsNames = append(opsNames, op)
		mu.Lock()
		for o := 1; o <= next; o++ {
			if got := refunded[strconv.Itoa(o)]; got != want[strconv.Itoa(o)] {
				mu.Unlock()
				t.Fatalf("seed %d, %v: order %d refunded %d times, want %d", seed, opsNames, o, got, want[strconv.Itoa(o)])
			}
		}
		mu.Unlock()
		if n := files(); n > 2 || plain >= 2 && n != 0 {
			t.Fatalf("seed %d, %v: %d checkpoints (%d plain turns since the last suspension)", seed, opsNames, n, plain)
		}
	}
	t.Logf("ops: %s", fmt.Sprint(opsNames))
}
