package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// toolingModel answers summarizing calls with a summary of the first
// line it was given, a user message asking for "tools" with n weather
// calls, and anything else with a reply; it records the requests.
type toolingModel struct {
	mu   sync.Mutex
	reqs []llm.Request
}

func (m *toolingModel) Ready(context.Context) error { return nil }

func (m *toolingModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, *req)
	msg := llm.AssistantText("a reply")
	last := req.Messages[len(req.Messages)-1]
	switch {
	case req.System == agent.DefaultCompactionPrompt:
		first, _, _ := strings.Cut(req.Messages[0].Text(), "\n")
		msg = llm.AssistantText("S: " + first)
	case last.Role == llm.RoleUser && strings.HasPrefix(last.Text(), "tools "):
		var n int
		_, _ = fmt.Sscanf(last.Text(), "tools %d", &n)
		msg = llm.Message{Role: llm.RoleAssistant}
		for i := range n {
			msg.ToolCalls = append(msg.ToolCalls, call(fmt.Sprintf("%s-%d", strings.ReplaceAll(last.Text(), " ", "-"), i), "get_weather", `{"city":"Oslo"}`))
		}
	}
	return &llm.Response{Message: msg, FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}

// noAppend hides a store's Appender: the agent's tail hint is then
// ignored and every turn loads the whole history.
type noAppend struct{ session.Store }

// With a window bounded by messages, an agent on a session without a
// cache loads only the history's tail, and sends every model call
// exactly what it sends with the whole history loaded — with tool
// calls, turns longer than the tail, and compaction summaries — while
// the stored histories stay equal.
func TestAgentTailMatchesWhole(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, w := range []agent.Window{{MaxMessages: 1}, {MaxMessages: 3}, {MaxMessages: 4, MaxTokens: 400}} {
		for _, compaction := range []bool{false, true} {
			name := fmt.Sprintf("max=%d/tokens=%d/compaction=%v", w.MaxMessages, w.MaxTokens, compaction)
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				pt, pw := &toolingModel{}, &toolingModel{}
				tailStore := session.NewMemoryStore(session.MemoryConfig{})
				wholeStore := session.NewMemoryStore(session.MemoryConfig{})
				build := func(p llm.Provider, store session.Store) *chat.Harness {
					cfg := agent.Config{Provider: p, System: "Be brief.", Tools: []agent.Tool{weatherTool(t)}, Window: w, MaxSteps: 100}
					if compaction {
						cfg.Compaction = &agent.Compaction{}
					}
					return coldChat(t, cfg, store)
				}
				ht, hw := build(pt, tailStore), build(pw, noAppend{wholeStore})
				partial := 0
				for i := range 40 {
					text := fmt.Sprint("question ", i)
					if rng.IntN(3) == 0 {
						// Sometimes a turn longer than the tail.
						text = fmt.Sprintf("tools %d %d", []int{1, 3, 60}[rng.IntN(3)], i)
					}
					ot, err := ht.Send(ctx, "s", llm.UserText(text))
					if err != nil {
						t.Fatalf("seed %d turn %d: %v", seed, i, err)
					}
					ow, err := hw.Send(ctx, "s", llm.UserText(text))
					if err != nil {
						t.Fatalf("seed %d turn %d (whole): %v", seed, i, err)
					}
					if !reflect.DeepEqual(canonIDs(ot.(*chat.Completed).Replies), canonIDs(ow.(*chat.Completed).Replies)) {
						t.Fatalf("seed %d turn %d: replies differ", seed, i)
					}
					if ot.(*chat.Completed).FinalState.IsZero() {
						continue
					}
					if n := len(chat.Messages.Get(ot.(*chat.Completed).FinalState)); n < len(chat.Messages.Get(ow.(*chat.Completed).FinalState)) {
						partial++
					}
				}
				if len(pt.reqs) != len(pw.reqs) {
					t.Fatalf("seed %d: %d model calls with the tail, %d with the whole history", seed, len(pt.reqs), len(pw.reqs))
				}
				for i := range pt.reqs {
					a, b := pt.reqs[i], pw.reqs[i]
					if a.System != b.System || !reflect.DeepEqual(canonIDs(a.Messages), canonIDs(b.Messages)) {
						t.Fatalf("seed %d: call %d differs:\ntail:  %q %v\nwhole: %q %v", seed, i, a.System, texts(a.Messages), b.System, texts(b.Messages))
					}
				}
				ct, err := tailStore.Load(ctx, session.LoadRequest{SessionID: "s"})
				if err != nil {
					t.Fatal(err)
				}
				cw, err := wholeStore.Load(ctx, session.LoadRequest{SessionID: "s"})
				if err != nil {
					t.Fatal(err)
				}
				var mt, mw []llm.Message
				if json.Unmarshal(ct.State[chat.MessagesField], &mt) != nil || json.Unmarshal(cw.State[chat.MessagesField], &mw) != nil ||
					!reflect.DeepEqual(canonIDs(mt), canonIDs(mw)) || string(ct.State[agent.SummaryField]) != string(cw.State[agent.SummaryField]) {
					t.Fatalf("seed %d: the stored sessions differ: %d vs %d messages, summary %s vs %s", seed, len(mt), len(mw), ct.State[agent.SummaryField], cw.State[agent.SummaryField])
				}
				if err := llm.CheckHistory(nil, mt); err != nil {
					t.Fatalf("seed %d: stored history invalid: %v", seed, err)
				}
				if partial == 0 {
					t.Errorf("no turn loaded a partial history")
				}
			})
		}
	}
}

// canonIDs returns msgs with their tool-call ids renamed by order of
// first use (id0, id1, …): over a tail the agent gives every call an id
// of its own (the older ids are unknown), over a whole history it keeps
// the model's unless reused, so the two runs' ids differ while what they
// send and store is the same.
func canonIDs(msgs []llm.Message) []llm.Message {
	names := map[string]string{}
	name := func(id string) string {
		if id == "" {
			return ""
		}
		if n, ok := names[id]; ok {
			return n
		}
		n := fmt.Sprint("id", len(names))
		names[id] = n
		return n
	}
	out := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		if len(m.ToolCalls) > 0 {
			calls := make([]llm.ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				c.ID = name(c.ID)
				calls[j] = c
			}
			m.ToolCalls = calls
		}
		m.ToolCallID = name(m.ToolCallID)
		out[i] = m
	}
	return out
}

func texts(msgs []llm.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ":" + m.Text()
		for _, c := range m.ToolCalls {
			out[i] += "[" + c.ID + "]"
		}
	}
	return out
}

// approvalModel asks, on "tools N", for N weather calls and one email
// (which needs approval) in one message, and replies otherwise.
type approvalModel struct{}

func (approvalModel) Ready(context.Context) error { return nil }

func (approvalModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	msg := llm.AssistantText("a reply")
	var n int
	if last.Role == llm.RoleUser && strings.HasPrefix(last.Text(), "tools ") {
		_, _ = fmt.Sscanf(last.Text(), "tools %d", &n)
		msg = llm.Message{Role: llm.RoleAssistant}
		for i := range n {
			msg.ToolCalls = append(msg.ToolCalls, call(fmt.Sprint("w", i), "get_weather", `{"city":"Oslo"}`))
		}
		msg.ToolCalls = append(msg.ToolCalls, call("mail", "send_email", `{"to":"bob"}`))
	}
	return &llm.Response{Message: msg, FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}

// A message that supersedes a suspended turn longer than the loaded
// tail closes every call the turn left open, even those made before the
// tail: the stored history stays valid.
func TestAgentTailSupersedeLongTurn(t *testing.T) {
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	var sent atomic.Int32
	email := emailTool(t, &sent)
	h := coldChat(t, agent.Config{Provider: approvalModel{}, Tools: []agent.Tool{weatherTool(t), email.WithApproval()},
		Window: agent.Window{MaxMessages: 1}}, store)
	for i := range 20 {
		if _, err := h.Send(ctx, "s", llm.UserText(fmt.Sprint("question ", i))); err != nil {
			t.Fatal(err)
		}
	}
	out, err := h.Send(ctx, "s", llm.UserText("tools 50"))
	if _, ok := out.(*chat.Suspended); !ok || err != nil {
		t.Fatalf("long turn = %T, %v", out, err)
	}
	out, err = h.Send(ctx, "s", llm.UserText("never mind"))
	if _, ok := out.(*chat.Completed); !ok || err != nil {
		t.Fatalf("superseding turn = %T %v, %v", out, out, err)
	}
	rec, err := store.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var hist []llm.Message
	if err := json.Unmarshal(rec.State[chat.MessagesField], &hist); err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckHistory(nil, hist); err != nil {
		t.Fatalf("stored history invalid: %v", err)
	}
	if len(hist) < 40+50+4 || sent.Load() != 0 {
		t.Fatalf("stored %d messages, %d emails sent", len(hist), sent.Load())
	}
}

// A window holding more approval requests (asides, which do not count)
// than the tail's slack cannot be decided by the tail: the turn reads the
// history whole and sends what a whole load sends.
func TestAgentTailAsidesBeyondSlack(t *testing.T) {
	ctx := context.Background()
	const asides = 24 // more than the tail's slack
	seed := []llm.Message{llm.UserText("u0"), llm.AssistantText("a0"), llm.UserText("u1"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("c1", "get_weather", `{"city":"Oslo"}`)}}}
	for i := range asides {
		seed = append(seed, llm.AssistantText(fmt.Sprint("approve? ", i)))
	}
	seed = append(seed, llm.ToolResult("c1", "Sunny"), llm.AssistantText("a1"))
	raw, err := json.Marshal(seed)
	if err != nil {
		t.Fatal(err)
	}
	w := agent.Window{MaxMessages: 7}
	var reqs [2][]llm.Request
	for i, wrap := range []func(session.Store) session.Store{
		func(s session.Store) session.Store { return s },
		func(s session.Store) session.Store { return noAppend{s} },
	} {
		store := session.NewMemoryStore(session.MemoryConfig{})
		if _, err := store.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{chat.MessagesField: raw}}); err != nil {
			t.Fatal(err)
		}
		p := &toolingModel{}
		h := coldChat(t, agent.Config{Provider: p, Tools: []agent.Tool{weatherTool(t)}, Window: w}, wrap(store))
		for _, text := range []string{"warm", "u2"} { // the first turn moves the saved list to items
			if _, err := h.Send(ctx, "s", llm.UserText(text)); err != nil {
				t.Fatal(err)
			}
		}
		reqs[i] = p.reqs
	}
	last := reqs[0][len(reqs[0])-1].Messages
	if want := reqs[1][len(reqs[1])-1].Messages; !reflect.DeepEqual(last, want) {
		t.Fatalf("the tail sent %v\nthe whole history %v", texts(last), texts(want))
	}
	if len(last) < asides {
		t.Fatalf("window of %d messages; want the tool group with its %d approval requests", len(last), asides)
	}
}
