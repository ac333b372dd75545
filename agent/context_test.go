package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/session"
)

// history builds a history from a compact spec, one word a message: u a
// user message, a an assistant reply, cN an assistant message making N
// tool calls, t the result of the group's next unanswered call, x an
// aside (an approval request inside the open group). Texts are "m<i>".
func history(spec string) []llm.Message {
	var out []llm.Message
	var pending []string
	calls := 0
	for i, w := range strings.Fields(spec) {
		text := "m" + strconv.Itoa(i)
		switch {
		case w == "u":
			out = append(out, llm.UserText(text))
		case w == "a", w == "x":
			out = append(out, llm.AssistantText(text))
		case w == "t":
			out = append(out, llm.ToolResult(pending[0], text))
			pending = pending[1:]
		case w[0] == 'c':
			n, _ := strconv.Atoi(w[1:])
			var tcs []llm.ToolCall
			for range n {
				calls++
				id := "call_" + strconv.Itoa(calls)
				tcs = append(tcs, llm.ToolCall{ID: id, Name: "get_weather", Arguments: json.RawMessage(`{}`)})
				pending = append(pending, id)
			}
			out = append(out, llm.AssistantToolCalls(tcs...))
		default:
			panic("bad spec word " + w)
		}
	}
	return out
}

// one costs every message one token.
func one(*llm.Message) int { return 1 }

func TestWindowStart(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "window.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if line = strings.TrimSpace(line); line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, "|")
		var w agent.Window
		var fixed, wantStart, wantCost int
		if len(f) != 4 {
			t.Fatalf("bad case %q", line)
		}
		if _, err := fmt.Sscan(f[2], &w.MaxMessages, &w.MaxTokens, &fixed); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if _, err := fmt.Sscan(f[3], &wantStart, &wantCost); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		t.Run(strings.TrimSpace(f[0]), func(t *testing.T) {
			start, cost := w.Start(history(f[1]), fixed, one)
			if start != wantStart || (w.MaxTokens > 0 && cost != wantCost) {
				t.Errorf("Start = %d, cost %d; want %d, cost %d", start, cost, wantStart, wantCost)
			}
		})
	}
}

// fuzzHistory builds a valid chat history from data: user messages,
// replies, tool-call groups of one to three calls whose results come in
// any order with asides and user messages among them; groups still open
// at the end are closed.
func fuzzHistory(data []byte) []llm.Message {
	var out []llm.Message
	var open []string
	calls := 0
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	for len(data) > 0 {
		b := next()
		text := strings.Repeat("w", int(b>>4)+1)
		switch op := b % 6; {
		case op == 0 || op == 5 && len(open) == 0:
			out = append(out, llm.UserText(text))
		case op == 1:
			out = append(out, llm.AssistantText(text)) // an aside when a group is open
		case op == 2 && len(open) == 0:
			var tcs []llm.ToolCall
			for range int(next()%3) + 1 {
				calls++
				id := "call_" + strconv.Itoa(calls)
				tcs = append(tcs, llm.ToolCall{ID: id, Name: "f", Arguments: json.RawMessage(`{"q":"` + text + `"}`)})
				open = append(open, id)
			}
			out = append(out, llm.AssistantToolCalls(tcs...))
		case len(open) > 0:
			k := int(next()) % len(open)
			out = append(out, llm.ToolResult(open[k], text))
			open = append(open[:k], open[k+1:]...)
		}
	}
	for _, id := range open {
		out = append(out, llm.ToolResult(id, "done"))
	}
	return out
}

// FuzzWindowStart checks the window invariants on random histories with
// tool groups and asides, against a brute-force selection: the window is
// a suffix starting with a user message (or the history's start), never
// splits a group, holds the turn in progress, and is the longest such
// suffix within the bounds (or, when none fits, the turn in progress).
func FuzzWindowStart(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 3, 0, 3, 0, 1, 0}, uint8(3), uint16(0), uint8(0))
	f.Add([]byte{0, 2, 2, 1, 3, 0, 3, 1, 3, 2, 0x30, 1, 0, 0x71, 0}, uint8(0), uint16(40), uint8(7))
	f.Add([]byte{2, 1, 5, 3, 1, 3, 0, 2, 0, 3, 0}, uint8(2), uint16(25), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, maxMessages uint8, maxTokens uint16, fixed uint8) {
		h := fuzzHistory(data)
		if err := llm.CheckHistory(nil, h); err != nil {
			t.Fatalf("generated an invalid history: %v", err)
		}
		w := agent.Window{MaxMessages: int(maxMessages % 32), MaxTokens: int(maxTokens % 512)}
		start, cost := w.Start(h, int(fixed), llm.EstimateTokens)
		if w.IsZero() {
			if start != 0 {
				t.Fatalf("no bound, start %d", start)
			}
			return
		}
		// The asides, as the wire mappings see them.
		aside := make([]bool, len(h))
		var f llm.AsideFilter
		for i := range h {
			aside[i] = f.Aside(&h[i])
		}
		// boundary[i]: h[i:] is a window the policy may choose.
		boundary := make([]bool, len(h)+1)
		lastBoundary := 0
		for i := range h {
			boundary[i] = i == 0 || h[i].Role == llm.RoleUser && !splitsGroup(h, i)
			if boundary[i] {
				lastBoundary = i
			}
		}
		size := func(from int) (n, tokens int) {
			tokens = int(fixed)
			for i := from; i < len(h); i++ {
				if !aside[i] {
					n++
					tokens += llm.EstimateTokens(&h[i])
				}
			}
			return n, tokens
		}
		fits := func(from int) bool {
			n, tok := size(from)
			return (w.MaxMessages == 0 || n <= w.MaxMessages) && (w.MaxTokens == 0 || tok <= w.MaxTokens)
		}
		want := lastBoundary
		for i := len(h) - 1; i >= 0; i-- {
			if boundary[i] && fits(i) {
				want = i
			}
		}
		if len(h) == 0 {
			want = 0
		}
		if start != want {
			t.Fatalf("start %d, want %d (bounds %+v, fixed %d, history of %d)", start, want, w, fixed, len(h))
		}
		if start < len(h) {
			if h[start].Role == llm.RoleTool {
				t.Fatal("the window starts with a tool result")
			}
			if splitsGroup(h, start) {
				t.Fatal("the window splits a tool group")
			}
		}
		if _, tok := size(start); w.MaxTokens > 0 && cost != tok {
			t.Fatalf("cost %d, want %d", cost, tok)
		}
	})
}

// splitsGroup reports whether h[i:] holds a tool result whose call is in
// h[:i].
func splitsGroup(h []llm.Message, i int) bool {
	made := map[string]bool{}
	for _, m := range h[:i] {
		for _, tc := range m.ToolCalls {
			made[tc.ID] = true
		}
	}
	for _, m := range h[i:] {
		if m.Role == llm.RoleTool && made[m.ToolCallID] {
			return true
		}
	}
	return false
}

// BenchmarkWindowStart selects a window of at most 40 messages and 2 000
// tokens from histories of growing length: the cost stays flat, in
// proportion to the window.
func BenchmarkWindowStart(b *testing.B) {
	w := agent.Window{MaxMessages: 40, MaxTokens: 2000}
	for _, n := range []int{100, 10000, 100000} {
		h := history(strings.Repeat("u c1 x t a ", n/5))
		b.Run("history="+strconv.Itoa(len(h)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if start, _ := w.Start(h, 100, llm.EstimateTokens); start < len(h)-50 {
					b.Fatalf("start %d of %d", start, len(h))
				}
			}
		})
	}
}

// usageModel answers every call with a reply and reports prompt tokens
// of factor times its own estimate of the request; it records the
// messages of each call.
type usageModel struct {
	factor float64
	mu     sync.Mutex
	sent   [][]llm.Message
}

func (m *usageModel) Ready(context.Context) error { return nil }

func (m *usageModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	sys := llm.SystemText(req.System)
	est := llm.EstimateTokens(&sys)
	for i := range req.Messages {
		est += llm.EstimateTokens(&req.Messages[i])
	}
	m.mu.Lock()
	m.sent = append(m.sent, req.Messages)
	m.mu.Unlock()
	resp := &llm.Response{Message: llm.AssistantText("a reply of some forty bytes, more or less"), FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}
	if m.factor > 0 {
		resp.Usage.PromptTokens = new(int(float64(est) * m.factor))
	}
	return resp, nil
}

// windowChat returns a chat harness over an agent with window w and no
// tools, on p.
func windowChat(t *testing.T, p llm.Provider, w agent.Window) *chat.Harness {
	t.Helper()
	var unused atomic.Int32
	return newChat(t, p, &unused, func(c *agent.Config) { c.Tools, c.Window = nil, w })
}

func TestAgentWindow(t *testing.T) {
	ctx := context.Background()
	t.Run("messages", func(t *testing.T) {
		p := &usageModel{}
		h := windowChat(t, p, agent.Window{MaxMessages: 3})
		for i := range 4 {
			if _, err := h.Send(ctx, "s", llm.UserText(fmt.Sprintf("question %d", i))); err != nil {
				t.Fatal(err)
			}
		}
		last := p.sent[len(p.sent)-1]
		if len(last) != 3 || last[0].Text() != "question 2" || last[2].Text() != "question 3" {
			t.Errorf("the last call sent %+v", last)
		}
		st, _ := h.Harness().Graph().SessionState(ctx, "s")
		if n := len(chat.Messages.Get(st)); n != 8 {
			t.Errorf("the session holds %d messages, want all 8", n)
		}
	})
	// With a provider that counts three times the estimate, the window
	// shrinks once the first call's usage is known.
	t.Run("tokens corrected by usage", func(t *testing.T) {
		sizes := map[float64]int{}
		for _, factor := range []float64{0, 3} {
			p := &usageModel{factor: factor}
			h := windowChat(t, p, agent.Window{MaxTokens: 200})
			for i := range 12 {
				if _, err := h.Send(ctx, "s", llm.UserText(fmt.Sprintf("question %d, asked at some length", i))); err != nil {
					t.Fatal(err)
				}
			}
			last := p.sent[len(p.sent)-1]
			sizes[factor] = len(last)
			sys := llm.SystemText("Be brief.")
			est := llm.EstimateTokens(&sys)
			for i := range last {
				est += llm.EstimateTokens(&last[i])
			}
			f := max(factor, 1)
			if float64(est)*f > 200 {
				t.Errorf("factor %v: the last window costs %v tokens as the provider counts, over the bound", factor, float64(est)*f)
			}
			if last[0].Role != llm.RoleUser {
				t.Errorf("factor %v: the window starts with %s", factor, last[0].Role)
			}
		}
		if sizes[3] >= sizes[0] {
			t.Errorf("windows of %d messages with the correction and %d without", sizes[3], sizes[0])
		}
	})
	// An approved call's group, approval request included, is sent whole;
	// the wire leaves the request out.
	t.Run("approval inside the window", func(t *testing.T) {
		p := llmtest.New(llmtest.Reply("Hi."), llmtest.CallTools(call("c9", "send_email", `{"to":"bob@example.com"}`)), llmtest.Reply("Done."))
		var sent atomic.Int32
		h := newChat(t, p, &sent, func(c *agent.Config) { c.Window = agent.Window{MaxMessages: 4} })
		for _, text := range []string{"Hello", "Email Bob"} {
			if _, err := h.Send(ctx, "s1", llm.UserText(text)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.Signal(ctx, chat.Signal{SignalID: agent.SignalPrefix + "c9", SessionID: "s1", Payload: agent.Approve("")}); err != nil {
			t.Fatal(err)
		}
		reqs := p.Requests()
		if len(reqs) != 3 || sent.Load() != 1 {
			t.Fatalf("%d model calls, %d emails", len(reqs), sent.Load())
		}
		r := reqs[2]
		if len(r.Messages) != 4 || r.Messages[0].Text() != "Email Bob" || roles(r.Transcript()) != "system,user,assistant,tool" {
			t.Errorf("the last call sent %s (as sent: %s)", roles(r.Messages), roles(r.Transcript()))
		}
	})
	t.Run("negative bound", func(t *testing.T) {
		if _, err := agent.New(agent.Config{Provider: &usageModel{}, Window: agent.Window{MaxTokens: -1}}); err == nil {
			t.Error("New accepted a negative bound")
		}
	})
}

// A window of at most five messages: the model sees the last two turns
// (the tool call with its result), not the greeting; the session keeps
// everything.
func ExampleWindow() {
	w := agent.Window{MaxMessages: 5}
	history := []llm.Message{
		llm.UserText("Hi"), llm.AssistantText("Hello!"),
		llm.UserText("Weather in Paris?"),
		llm.AssistantToolCalls(llm.ToolCall{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}),
		llm.ToolResult("c1", "Sunny"), llm.AssistantText("Sunny in Paris."),
		llm.UserText("And tomorrow?"),
	}
	start, _ := w.Start(history, 0, llm.EstimateTokens)
	for _, m := range history[start:] {
		fmt.Printf("%s %q\n", m.Role, m.Text())
	}
	// Output:
	// user "Weather in Paris?"
	// assistant ""
	// tool "Sunny"
	// assistant "Sunny in Paris."
	// user "And tomorrow?"
}

// summarizingModel answers summarizing calls (those with the default
// compaction prompt) with "S<n>: " and the first line of what it was
// given, and every other call with a reply; it records the requests.
type summarizingModel struct {
	mu   sync.Mutex
	reqs []llm.Request
	sums int
	// fail, when positive, makes summarizing calls after the fail-th
	// fail.
	fail int
}

func (m *summarizingModel) Ready(context.Context) error { return nil }

func (m *summarizingModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, *req)
	text := "a reply"
	if req.System == agent.DefaultCompactionPrompt {
		if m.fail > 0 && m.sums >= m.fail {
			return nil, errors.New("summarizer down")
		}
		m.sums++
		first, _, _ := strings.Cut(req.Messages[0].Text(), "\n")
		text = fmt.Sprintf("S%d: %s", m.sums, first)
	}
	return &llm.Response{Message: llm.AssistantText(text), FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}

// With a window of four messages, a summary is made every other turn
// from the turn after which the next call's window would drop a message: each covers the previous one and every
// message since, no message is dropped before a summary covers it, and
// the model sees the summary in place while the window holds it, after
// the system prompt once it does not.
func TestCompaction(t *testing.T) {
	ctx := context.Background()
	p := &summarizingModel{}
	var unused atomic.Int32
	h := newChat(t, p, &unused, func(c *agent.Config) {
		c.Tools, c.Window, c.Compaction = nil, agent.Window{MaxMessages: 4}, &agent.Compaction{}
	})
	var replies [][]llm.Message
	for i := range 7 {
		out, err := h.Send(ctx, "s", llm.UserText(fmt.Sprintf("question %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, out.(*chat.Completed).Replies)
	}
	var summaries []string
	for i, r := range replies {
		if len(r) == 2 {
			summaries = append(summaries, fmt.Sprintf("turn %d: %s", i, r[1].Text()))
		}
	}
	want := []string{
		"turn 1: " + agent.SummaryPrefix + "S1: user: question 0",
		"turn 3: " + agent.SummaryPrefix + "S2: Earlier summary:",
		"turn 5: " + agent.SummaryPrefix + "S3: Earlier summary:",
	}
	if strings.Join(summaries, "\n") != strings.Join(want, "\n") {
		t.Errorf("summaries:\n%s\nwant:\n%s", strings.Join(summaries, "\n"), strings.Join(want, "\n"))
	}
	var calls []llm.Request
	for _, r := range p.reqs {
		if r.System != agent.DefaultCompactionPrompt {
			calls = append(calls, r)
		}
	}
	for i, r := range calls {
		if len(r.Messages) > 4 || r.Messages[0].Role != llm.RoleUser {
			t.Errorf("call %d sent %d messages starting with %s", i, len(r.Messages), r.Messages[0].Role)
		}
	}
	// Turn 4's call holds summary 2 in its window; turn 5's window starts
	// after it, so it follows the system prompt.
	if r := calls[4]; r.System != "Be brief." || r.Messages[2].Text() != agent.SummaryPrefix+"S2: Earlier summary:" {
		t.Errorf("turn 4 sent %q and %+v", r.System, r.Messages)
	}
	if r := calls[5]; r.System != "Be brief.\n\n"+agent.SummaryPrefix+"S2: Earlier summary:" || len(r.Messages) != 3 {
		t.Errorf("turn 5 sent %q and %d messages", r.System, len(r.Messages))
	}
	st, _ := h.Harness().Graph().SessionState(ctx, "s")
	if n := len(chat.Messages.Get(st)); n != 17 {
		t.Errorf("the session holds %d messages, want 14 and 3 summaries", n)
	}
	if _, err := agent.New(agent.Config{Provider: p, Compaction: &agent.Compaction{}}); err == nil {
		t.Error("New accepted Compaction without a Window")
	}
}

// When a summary cannot be made, the turn still completes, and the next
// calls keep every message after the latest summary, over the bound,
// rather than drop what no summary covers.
func TestCompactionFailure(t *testing.T) {
	ctx := context.Background()
	p := &summarizingModel{fail: 1}
	var unused atomic.Int32
	h := newChat(t, p, &unused, func(c *agent.Config) {
		c.Tools, c.Window, c.Compaction = nil, agent.Window{MaxMessages: 4}, &agent.Compaction{}
	})
	for i := range 5 {
		if _, err := h.Send(ctx, "s", llm.UserText(fmt.Sprintf("question %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var last llm.Request
	for _, r := range p.reqs {
		if r.System != agent.DefaultCompactionPrompt {
			last = r
		}
	}
	if len(last.Messages) != 5 || last.Messages[0].Text() != "question 2" || !strings.Contains(last.System, "S1: ") {
		t.Errorf("the last call sent %q and %d messages from %q", last.System, len(last.Messages), last.Messages[0].Text())
	}
}

// The summary's place is durable: a harness started afresh on the same
// store (a restarted server) finds it and sends it after the system
// prompt.
func TestCompactionDurable(t *testing.T) {
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	p := &summarizingModel{}
	start := func() *chat.Harness {
		return agentChat(t, agent.Config{Provider: p, System: "Be brief.", Window: agent.Window{MaxMessages: 4}, Compaction: &agent.Compaction{}}, store)
	}
	h := start()
	for i := range 3 { // a summary after turn 1, in the window of turn 2
		if _, err := h.Send(ctx, "s", llm.UserText(fmt.Sprintf("question %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := start().Send(ctx, "s", llm.UserText("question 3")); err != nil {
		t.Fatal(err)
	}
	last := p.reqs[len(p.reqs)-1]
	if last.System == agent.DefaultCompactionPrompt { // the turn's summary, after its call
		last = p.reqs[len(p.reqs)-2]
	}
	if !strings.HasSuffix(last.System, agent.SummaryPrefix+"S1: user: question 0") {
		t.Errorf("after a restart the call's system prompt is %q", last.System)
	}
}

// With a window of four messages and compaction, the second turn ends
// with a summary of the conversation so far: the next call's window would
// leave the first turn out.
func ExampleCompaction() {
	p := llmtest.New(llmtest.Reply("Hello!"), llmtest.Reply("It is sunny."), llmtest.Reply("The user greeted me and asked about the weather."))
	a, _ := agent.New(agent.Config{Provider: p, System: "Be brief.",
		Window: agent.Window{MaxMessages: 4}, Compaction: &agent.Compaction{}})
	g, _ := a.Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
	h, _ := chat.New(chat.Config{Graph: g})
	ctx := context.Background()
	for _, text := range []string{"Hi", "Weather?"} {
		out, _ := h.Send(ctx, "s", llm.UserText(text))
		for _, m := range out.(*chat.Completed).Replies {
			fmt.Println(m.Text())
		}
	}
	// Output:
	// Hello!
	// It is sunny.
	// Summary of the earlier conversation: The user greeted me and asked about the weather.
}

// TestWindowedCallIDsStayUnique: a model that numbers its tool calls by
// the messages it is sent (the demo model: call_<n>) reuses, behind a
// window, the id of a call the window left out; the agent gives such a
// call a fresh id, so every turn completes and the stored history keeps
// its ids unique (a duplicate would fail the turn, and every later one
// like it, as provider_invalid_response).
func TestWindowedCallIDsStayUnique(t *testing.T) {
	ctx := context.Background()
	h := agentChat(t, agent.Config{Provider: demo.Model{}, Tools: demo.Tools(), Window: agent.Window{MaxMessages: 4}},
		session.NewMemoryStore(session.MemoryConfig{}))
	// 4 messages a turn: the ids of the first 16 turns are made unique
	// by a scan of the history, those of the later ones through the
	// session's call index.
	const turns = 24
	for i := range turns {
		out, err := h.Send(ctx, "s", llm.UserText(fmt.Sprintf("where is order %d?", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := out.(*chat.Completed); !ok {
			t.Fatalf("turn %d: %#v", i, out)
		}
	}
	st, _ := h.Harness().Graph().SessionState(ctx, "s")
	checkCallIDs(t, chat.Messages.Get(st), turns)
}

// checkCallIDs checks that msgs is a valid history whose want tool calls
// all have ids of their own.
func checkCallIDs(t *testing.T, msgs []llm.Message, want int) {
	t.Helper()
	if err := llm.CheckHistory(nil, msgs); err != nil {
		t.Fatalf("stored history: %v", err)
	}
	ids := map[string]bool{}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			if ids[tc.ID] {
				t.Fatalf("call id %s stored twice", tc.ID)
			}
			ids[tc.ID] = true
		}
	}
	if len(ids) != want {
		t.Errorf("%d tool calls stored, want %d", len(ids), want)
	}
}

// On a session read by its tail (every turn cold), tool-call ids stay
// unique in the whole stored history, though the agent sees only the
// tail: a model that numbers its calls by what it sees reuses ids the
// tail left out.
func TestTailCallIDsStayUnique(t *testing.T) {
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	h := coldChat(t, agent.Config{Provider: demo.Model{}, Tools: demo.Tools(), Window: agent.Window{MaxMessages: 4}}, store)
	const turns = 12
	for i := range turns {
		out, err := h.Send(ctx, "s", llm.UserText(fmt.Sprintf("where is order %d?", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := out.(*chat.Completed); !ok {
			t.Fatalf("turn %d: %#v", i, out)
		}
	}
	rec, err := store.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := llm.DecodeMessages(rec.State[chat.MessagesField])
	if err != nil {
		t.Fatal(err)
	}
	checkCallIDs(t, msgs, turns)
}
