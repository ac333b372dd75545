package adk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// orderScript is a scripted model for the randomized sequences: "refund
// one N" calls issue_refund for order N, "refund two N" for orders N and
// Nb in one step, each answer naming its calls call_0, call_1 (ids every
// turn repeats, as some OpenAI-compatible servers name them); a tool
// result is answered with the results it read. It records each request.
type orderScript struct {
	mu   sync.Mutex
	reqs [][]llm.Message
}

func (*orderScript) Ready(context.Context) error { return nil }

func (m *orderScript) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, slices.Clone(req.Messages))
	m.mu.Unlock()
	refund := func(i int, order string) llm.ToolCall {
		return llm.ToolCall{ID: "call_" + strconv.Itoa(i), Name: "issue_refund", Arguments: json.RawMessage(`{"order":"` + order + `","amount":1}`)}
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == llm.RoleTool {
		return &llm.Response{Message: llm.AssistantText("noted"), FinishReason: llm.FinishStop}, nil
	}
	f := strings.Fields(last.Text())
	switch {
	case len(f) == 3 && f[0] == "refund" && f[1] == "one":
		return &llm.Response{Message: llm.AssistantToolCalls(refund(0, f[2])), FinishReason: llm.FinishToolCalls}, nil
	case len(f) == 3 && f[0] == "refund" && f[1] == "two":
		return &llm.Response{Message: llm.AssistantToolCalls(refund(0, f[2]), refund(1, f[2]+"b")), FinishReason: llm.FinishToolCalls}, nil
	}
	return &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop}, nil
}

func (m *orderScript) requests() [][]llm.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// refundCounter is an approval-gated issue_refund counting its runs by
// order.
type refundCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *refundCounter) tool() agent.Tool {
	type args struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
	}
	return agent.MustTool("issue_refund", "Refund an order (needs approval)", func(_ context.Context, a args) (string, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.runs[a.Order]++
		return "refunded order " + a.Order, nil
	}).WithApproval()
}

// TestRandomSequences runs random sequences of send, approve, deny
// (with a comment), cancel, delete and restart on one session, on ADK-Go's
// in-memory, SQLite and (with ARMATURE_POSTGRES_URL) PostgreSQL session
// services, and checks them against a model of the conversation: each
// refund runs once when every call of its step is decided and it was
// approved, never otherwise; every request the model gets answers each
// of its tool calls exactly once, never with ADK-Go's "requires
// confirmation"; each user message reaches the model at most once per
// request, and nothing of a deleted conversation reaches it again. The
// seed is printed; ADK_RANDOM_SEED replays one, ADK_RANDOM_RUNS sets
// how many sequences each service runs.
func TestRandomSequences(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ADK_RANDOM_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	runs := 4
	if s := os.Getenv("ADK_RANDOM_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d (replay with ADK_RANDOM_SEED=%d)", seed, seed)
	drivers := map[string]func(t *testing.T) string{
		"memory":           func(*testing.T) string { return `{"streaming":false}` },
		"memory/streaming": func(*testing.T) string { return `{"streaming":true}` },
		"sqlite/streaming": func(t *testing.T) string {
			return `{"streaming":true,"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
		},
		"sqlite": func(t *testing.T) string {
			return `{"streaming":false,"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
		},
		"postgres": func(t *testing.T) string {
			url := os.Getenv("ARMATURE_POSTGRES_URL")
			if url == "" {
				t.Skip("ARMATURE_POSTGRES_URL is not set")
			}
			schema := fmt.Sprintf("adk_rand_%d", time.Now().UnixNano())
			t.Cleanup(func() { dropSchema(url, schema) })
			return `{"session":{"driver":"postgres","url_env":"ARMATURE_POSTGRES_URL","schema":"` + schema + `"}}`
		},
	}
	for _, name := range []string{"memory", "memory/streaming", "sqlite", "sqlite/streaming", "postgres"} {
		t.Run(name, func(t *testing.T) {
			for i := range runs {
				s := seed + uint64(i)
				t.Run(strconv.FormatUint(s, 10), func(t *testing.T) {
					randomSequence(t, rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)), drivers[name](t), 30)
				})
			}
		})
	}
}

type randWorld struct {
	t       *testing.T
	section string
	st      stores
	m       *orderScript
	// provider, when set, is the model in place of m.
	provider llm.Provider
	tools    *refundCounter
	h        *chat.Harness
	closers  []func()
}

func (w *randWorld) restart() {
	t := w.t
	t.Helper()
	for _, c := range w.closers {
		c()
	}
	w.closers = nil
	reg := &adapter.Registry{}
	if err := adk.Register(reg); err != nil {
		t.Fatal(err)
	}
	var p llm.Provider = w.m
	if w.provider != nil {
		p = w.provider
	}
	ag := &adapter.Agent{ID: "helper", Backend: adk.Name, Tools: []agent.Tool{w.tools.tool()}, Provider: p, Model: "script", Config: json.RawMessage(w.section)}
	a, err := reg.Build(context.Background(), adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	w.closers = append(w.closers, func() { a.(*adk.Adapter).Close() })
	g, err := adapter.Compile(a, nil, ag, graph.WithSessions(graph.SessionConfig{Store: w.st.sessions}), graph.WithCheckpointStore(w.st.cps))
	if err != nil {
		t.Fatal(err)
	}
	if w.h, err = chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(w.st.cps), OnDelete: adapter.OnDelete(a)}); err != nil {
		t.Fatal(err)
	}
}

func randomSequence(t *testing.T, r *rand.Rand, section string, steps int) {
	ctx := context.Background()
	w := &randWorld{t: t, section: section, m: &orderScript{}, tools: &refundCounter{runs: map[string]int{}},
		st: stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}}
	w.restart()
	defer func() {
		for _, c := range w.closers {
			c()
		}
	}()
	const sid = "acme/s"
	var (
		susp     *chat.Suspended
		step     []string           // the orders of the suspended step
		decided  []bool             // decisions given so far for step
		want     = map[string]int{} // the runs each order must have had
		deleted  []string           // user texts of deleted conversations
		current  []string           // user texts of the conversation
		n        int
		trace    []string
		reqsSeen int
	)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("after %s: %s", strings.Join(trace, " → "), fmt.Sprintf(format, args...))
	}
	settle := func(out chat.Outcome, err error, orders []string) {
		t.Helper()
		if err != nil {
			fail("error %v", err)
		}
		switch o := out.(type) {
		case *chat.Suspended:
			if susp == nil || orders != nil {
				step, decided = orders, nil
			}
			susp = o
		case *chat.Completed:
			susp, step, decided = nil, nil, nil
		default:
			fail("outcome %#v", out)
		}
	}
	send := func(text string, orders []string) {
		t.Helper()
		if susp != nil {
			// Superseded: nothing of the step runs.
			susp, step, decided = nil, nil, nil
		}
		current = append(current, text)
		out, err := w.h.Send(ctx, sid, llm.UserText(text))
		settle(out, err, orders)
	}
	for range steps {
		n++
		ops := []string{"hello", "one", "two", "delete", "restart"}
		if susp != nil {
			ops = append(ops, "approve", "approve", "deny", "deny", "cancel")
		}
		op := ops[r.IntN(len(ops))]
		trace = append(trace, op)
		switch op {
		case "hello":
			send(fmt.Sprintf("hello %d", n), nil)
		case "one":
			o := strconv.Itoa(n)
			send("refund one "+o, []string{o})
		case "two":
			o := strconv.Itoa(n)
			send("refund two "+o, []string{o, o + "b"})
		case "delete":
			if err := w.h.Delete(ctx, sid); err != nil && !strings.Contains(err.Error(), "not found") {
				fail("delete: %v", err)
			}
			deleted = append(deleted, current...)
			current, susp, step, decided = nil, nil, nil, nil
		case "restart":
			w.restart()
		case "approve", "deny":
			approved := op == "approve"
			payload := agent.Approve("")
			if !approved {
				payload = agent.Deny(fmt.Sprintf("reason %d", n))
			}
			decided = append(decided, approved)
			if len(decided) == len(step) {
				for i, o := range step {
					if decided[i] {
						want[o] = 1
					}
				}
			}
			out, err := w.h.Signal(ctx, chat.Signal{SignalID: susp.Descriptor.SignalID, SessionID: sid, Payload: payload})
			settle(out, err, nil)
		case "cancel":
			if err := w.h.CancelSuspended(ctx, sid, susp.InvocationID); err != nil {
				fail("cancel: %v", err)
			}
			susp, step, decided = nil, nil, nil
		}
		// The tool's runs.
		w.tools.mu.Lock()
		for o, k := range w.tools.runs {
			if k != want[o] {
				w.tools.mu.Unlock()
				fail("order %s ran %d times, want %d (runs %v)", o, k, want[o], w.tools.runs)
			}
		}
		for o, k := range want {
			if w.tools.runs[o] != k {
				w.tools.mu.Unlock()
				fail("order %s ran %d times, want %d", o, w.tools.runs[o], k)
			}
		}
		w.tools.mu.Unlock()
		// The model's requests since the last step.
		reqs := w.m.requests()
		for _, req := range reqs[reqsSeen:] {
			checkRequest(fail, req, deleted)
		}
		reqsSeen = len(reqs)
	}
	t.Logf("ops: %s", strings.Join(trace, " "))
}

// checkRequest checks one request the model got: each tool call
// answered exactly once, after it, never with "requires confirmation";
// each user text once; nothing of a deleted conversation.
func checkRequest(fail func(string, ...any), req []llm.Message, deleted []string) {
	open := map[string]bool{}
	answered := map[string]int{}
	users := map[string]int{}
	for _, m := range req {
		for _, tc := range m.ToolCalls {
			if _, dup := open[tc.ID]; dup {
				fail("call id %s twice in a request: %v", tc.ID, req)
			}
			open[tc.ID] = true
		}
		if m.Role == llm.RoleTool {
			if !open[m.ToolCallID] {
				fail("a result of %s before or without its call: %v", m.ToolCallID, req)
			}
			answered[m.ToolCallID]++
			if strings.Contains(m.Text(), "requires confirmation") {
				fail("call %s answered %q", m.ToolCallID, m.Text())
			}
		}
		if m.Role == llm.RoleUser {
			users[m.Text()]++
			if slices.Contains(deleted, m.Text()) {
				fail("the deleted conversation's %q reached the model: %v", m.Text(), req)
			}
		}
	}
	for id := range open {
		if answered[id] != 1 {
			fail("call %s answered %d times in %v", id, answered[id], req)
		}
	}
	for u, k := range users {
		if k > 1 {
			fail("user message %q %d times in %v", u, k, req)
		}
	}
}

func dropSchema(url, schema string) {
	ctx := context.Background()
	if conn, err := pgx.Connect(ctx, url); err == nil {
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = conn.Close(ctx)
	}
}
