package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// FlakySessions is a session store whose next writes fail, as a
// database that went away between an upstream's write and the
// runtime's would: for the upstream, the same as the process dying
// there. It implements session.Appender when its Store does.
type FlakySessions struct {
	session.Store
	fail atomic.Int32
}

// ErrFlakyWrite is the error of a write FlakySessions failed.
var ErrFlakyWrite = errors.New("adaptertest: the session write failed")

// FailNext makes the next n writes (Save or Append) fail.
func (f *FlakySessions) FailNext(n int) { f.fail.Store(int32(n)) }

func (f *FlakySessions) failing() bool {
	for {
		n := f.fail.Load()
		if n <= 0 {
			return false
		}
		if f.fail.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Save implements session.Store.
func (f *FlakySessions) Save(ctx context.Context, req session.SaveRequest) (session.WriteResult, error) {
	if f.failing() {
		return session.WriteResult{}, ErrFlakyWrite
	}
	return f.Store.Save(ctx, req)
}

// Append implements session.Appender, writing through Save when the
// Store has no Append.
func (f *FlakySessions) Append(ctx context.Context, req session.AppendRequest) (session.WriteResult, error) {
	if f.failing() {
		return session.WriteResult{}, ErrFlakyWrite
	}
	a, ok := f.Store.(session.Appender)
	if !ok {
		return session.WriteResult{}, fmt.Errorf("%w: the store cannot append", session.ErrInvalidRequest)
	}
	return a.Append(ctx, req)
}

// rollbackModel is the model of CheckRollback: it records what each
// call sends, fails the next calls it is told to fail with a 429, asks
// for issue_refund when the user mentions a refund, and otherwise
// answers the last message.
type rollbackModel struct {
	mu    sync.Mutex
	fail  int
	calls int
	sent  [][]llm.Message
}

func (m *rollbackModel) Ready(context.Context) error { return nil }

func (m *rollbackModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleUser && strings.Contains(last.Text(), SlowWord) {
		m.mu.Lock()
		m.sent = append(m.sent, slices.Clone(req.Messages))
		m.mu.Unlock()
		<-ctx.Done() // answered only once the turn is cancelled
		return nil, ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, slices.Clone(req.Messages))
	if m.fail > 0 {
		m.fail--
		return nil, &llm.ProviderError{Cat: errcat.ProviderRateLimit, Provider: "openai", Op: "complete",
			StatusCode: http.StatusTooManyRequests, Message: "slow down"}
	}
	m.calls++
	var msg llm.Message
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == llm.RoleUser && strings.Contains(last.Text(), "refund"):
		msg = llm.AssistantToolCalls(llm.ToolCall{ID: fmt.Sprintf("call-%d", m.calls), Name: "issue_refund",
			Arguments: json.RawMessage(`{"order":"7","amount":30}`)})
	case last.Role == llm.RoleTool:
		msg = llm.AssistantText("done: " + last.Text())
	default:
		msg = llm.AssistantText("ok: " + last.Text())
	}
	return &llm.Response{Message: msg, FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}

// rollbackAgent returns a rollbackModel and an agent of backend bridged
// to it, with the demo tools and the backend-native section (JSON, ""
// for none).
func rollbackAgent(backend, section string) (*rollbackModel, *adapter.Agent) {
	m := &rollbackModel{}
	ag := &adapter.Agent{ID: "x", Backend: backend, Model: "m", Provider: m, Tools: demo.Tools()}
	if section != "" {
		ag.Config = json.RawMessage(section)
	}
	return m, ag
}

// failNext makes the next n calls fail; last returns what the latest
// call sent.
func (m *rollbackModel) failNext(n int) {
	m.mu.Lock()
	m.fail = n
	m.mu.Unlock()
}

func (m *rollbackModel) last() []llm.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sent) == 0 {
		return nil
	}
	return m.sent[len(m.sent)-1]
}

// cancelMidCall sends text (which contains SlowWord) on session id of h
// and cancels the turn once its model call is under way: the turn's
// outcome, or an error when the call never came.
func (m *rollbackModel) cancelMidCall(ctx context.Context, h *chat.Harness, id, text string) (chat.Outcome, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan chat.Outcome, 1)
	go func() {
		out, _ := h.Send(cctx, id, llm.UserText(text))
		done <- out
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if sent := m.last(); len(sent) > 0 && sent[len(sent)-1].Text() == text {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			return nil, errors.New("the turn to cancel never reached the model")
		}
	}
	cancel()
	return <-done, nil
}

// CheckRollback checks that an upstream which keeps a session of its
// own (adapter.Result.Cursor) holds exactly the conversation the runtime
// committed after turns the runtime did not commit, so that the model
// is never sent what the user was told failed:
//
//   - the first turn of a session created with a history (a
//     conversation sent whole to the OpenAI endpoint) whose model call
//     failed, then another message: the model gets the history and that
//     message only;
//   - a turn whose model call failed (a 429), sent again: the model gets
//     the user's message once;
//   - a turn the upstream completed but whose session write failed (the
//     process dying between the upstream's write and the runtime's is
//     the same for the upstream), followed by a restart when restart is
//     set (the adapter built again by f over the same section, as a new
//     process would): the next turn's model call holds nothing of it;
//   - a turn cancelled while its model call runs: the same;
//   - an approved resume whose model call failed (the paused turn ends
//     errored, as a resume is not retried), then a new message: the
//     model gets a valid history, the refund's call once, answered once
//     with the refund's result (the refund ran: the runtime saved its
//     result as it came, so the model is not told it did not).
//
// The agent is built by f for backend with the given backend-native
// section (JSON, "" for none), the demo tools (issue_refund needs
// approval) and a bridged model (adapter.Agent.Provider).
func CheckRollback(t *testing.T, backend string, f adapter.Factory, section string, restart bool) {
	t.Helper()
	ctx := context.Background()
	m, ag := rollbackAgent(backend, section)
	sessions := &FlakySessions{Store: session.NewMemoryStore(session.MemoryConfig{})}
	build := func() (*chat.Harness, func()) {
		a, err := f(ctx, adapter.FactoryRequest{Agent: ag})
		if err != nil {
			t.Fatal(err)
		}
		closeIt := func() {
			if c, ok := a.(io.Closer); ok {
				_ = c.Close()
			}
		}
		return Harness(t, a, ag, sessions), closeIt
	}
	h, closeIt := build()
	defer func() { closeIt() }()
	const id = "acme/s"
	send := func(text string) chat.Outcome {
		t.Helper()
		out, err := h.Send(ctx, id, llm.UserText(text))
		if out == nil {
			t.Fatalf("send %q: %v", text, err)
		}
		return out
	}
	wantUsers := func(step string, want ...string) {
		t.Helper()
		var got []string
		for _, msg := range m.last() {
			if msg.Role == llm.RoleUser {
				got = append(got, msg.Text())
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: the model was sent the user messages %q, want %q", step, got, want)
		}
	}

	// A session created with a history (as the OpenAI endpoint stores
	// a conversation sent whole) whose first turn failed, and the same
	// message sent again: no turn committed a cursor yet.
	const seeded = "acme/seeded"
	earlier, err := json.Marshal([]llm.Message{llm.UserText("earlier"), llm.AssistantText("an earlier answer")})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if _, err := sessions.Save(ctx, session.SaveRequest{SessionID: seeded, ExpectedVersion: &zero,
		State: map[string]json.RawMessage{chat.MessagesField: earlier}}); err != nil {
		t.Fatal(err)
	}
	m.failNext(1)
	if out, _ := h.Send(ctx, seeded, llm.UserText("hello")); !errored(out, errcat.ProviderRateLimit) {
		t.Fatalf("a seeded session's first turn whose model call failed: %#v", out)
	}
	if out, _ := h.Send(ctx, seeded, llm.UserText("hello again")); !isCompleted(out) {
		t.Fatalf("the seeded session's next turn: %#v", out)
	}
	wantUsers("a seeded session's failed first turn, then another message", "earlier", "hello again")

	// A failed model call, and the same message sent again.
	m.failNext(1)
	if out := send("hello"); !errored(out, errcat.ProviderRateLimit) {
		t.Fatalf("a turn whose model call failed: %#v", out)
	}
	if out := send("hello"); !isCompleted(out) {
		t.Fatalf("the retried turn: %#v", out)
	}
	wantUsers("a failed turn sent again", "hello")

	// A turn the upstream completed that the runtime did not commit.
	sessions.FailNext(1)
	if out := send("lost"); !isErrored(out) {
		t.Fatalf("a turn whose session write failed: %#v", out)
	}
	if restart {
		closeIt()
		h, closeIt = build()
	}
	if out := send("again"); !isCompleted(out) {
		t.Fatalf("the turn after an uncommitted one: %#v", out)
	}
	wantUsers("the turn after an uncommitted one", "hello", "again")

	// A turn cancelled while its model call runs.
	if out, err := m.cancelMidCall(ctx, h, id, "answer "+SlowWord); err != nil || !isErrored(out) {
		t.Fatalf("a cancelled turn: %#v, %v", out, err)
	}
	if out := send("after the cancel"); !isCompleted(out) {
		t.Fatalf("the turn after a cancelled one: %#v", out)
	}
	wantUsers("the turn after a cancelled one", "hello", "again", "after the cancel")

	// An approved resume whose model call failed (the paused turn ends
	// errored: a resume is not retried), then a new message.
	s, ok := send("refund order 7").(*chat.Suspended)
	if !ok {
		t.Fatal("the refund did not ask for approval")
	}
	m.failNext(1)
	out, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: id, Payload: agent.Approve("")})
	if !errored(out, errcat.ProviderRateLimit) {
		t.Fatalf("a resume whose model call failed: %#v, %v", out, err)
	}
	if out := send("status?"); !isCompleted(out) {
		t.Fatalf("the turn after a failed resume: %#v", out)
	}
	wantUsers("the turn after a failed resume", "hello", "again", "after the cancel", "refund order 7", "status?")
	calls, refunded := map[string]int{}, 0
	for _, msg := range m.last() {
		for _, c := range msg.ToolCalls {
			calls[c.ID]++
		}
		if msg.Role == llm.RoleTool {
			calls[msg.ToolCallID] += 100
			if strings.Contains(msg.Text(), "refunded $30.00 for order 7") {
				refunded++
			}
		}
	}
	if refunded != 1 {
		// The approved refund ran before the model call failed: the
		// runtime keeps its result (the turn saved it once it ran), so
		// the model is not told a refund that happened did not.
		t.Fatalf("the turn after a failed resume told the model the refund's result %d times, want once: %v", refunded, m.last())
	}
	for id, n := range calls {
		if n != 101 {
			t.Fatalf("the turn after a failed resume sent the model tool call %s %d times with %d results, want once with one: %v",
				id, n%100, n/100, m.last())
		}
	}
	if len(calls) > 1 {
		t.Fatalf("the turn after a failed resume sent the model %d tool calls, want at most the refund's: %v", len(calls), m.last())
	}
}

// errored reports whether out is an errored turn of category c.
func errored(out chat.Outcome, c errcat.Category) bool {
	e, ok := out.(*chat.Errored)
	return ok && e.Category == c
}

// isCompleted reports whether out is a completed turn.
func isCompleted(out chat.Outcome) bool {
	_, ok := out.(*chat.Completed)
	return ok
}

// isErrored reports whether out is an errored turn.
func isErrored(out chat.Outcome) bool {
	_, ok := out.(*chat.Errored)
	return ok
}

// CheckImages checks that an adapter of backend, built by f with the
// scripted Model as its agent's model, hands the model a user message's
// images: the model is sent the message's text and images in order (a
// URL image with its detail, an inline image with its media type and
// data) on its turn, and again as history on the session's next turn.
func CheckImages(t *testing.T, backend string, f adapter.Factory) {
	t.Helper()
	ctx := context.Background()
	m := NewModel()
	ag := &adapter.Agent{ID: "x", Backend: backend, Provider: m}
	a, err := f(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	h := Harness(t, a, ag, session.NewMemoryStore(session.MemoryConfig{}))
	img := llm.UserBlocks(llm.TextBlock("what is on these?"), llm.ImageURL("https://example.com/a.png").WithDetail(llm.DetailLow),
		llm.TextBlock("and"), llm.ImageInline(llm.MediaTypePNG, "iVBORw0KGgo="))
	for i, msg := range []llm.Message{img, llm.UserText("which is larger?")} {
		out, _ := h.Send(ctx, "acme/s", msg)
		if !isCompleted(out) {
			t.Fatalf("turn %d: %#v", i+1, out)
		}
		var users []llm.Message
		for _, u := range m.LastTranscript() {
			if u.Role == llm.RoleUser {
				users = append(users, u)
			}
		}
		if len(users) != i+1 || !users[0].Content.Equal(img.Content) {
			t.Fatalf("turn %d: the model was sent the user messages %#v, want the first %#v", i+1, users, img)
		}
	}
}

// ImageMessage is a user message for fuzz targets of an adapter's
// content conversion: text (left out when empty), an image by url with
// one of the four details (picked by detail), and an inline image of
// mediaType and base64Data.
func ImageMessage(text, url, mediaType, base64Data string, detail uint8) llm.Message {
	details := [...]llm.Detail{"", llm.DetailAuto, llm.DetailLow, llm.DetailHigh}
	blocks := make([]llm.Block, 0, 3)
	if text != "" {
		blocks = append(blocks, llm.TextBlock(text))
	}
	blocks = append(blocks, llm.ImageURL(url).WithDetail(details[int(detail)%len(details)]), llm.ImageInline(mediaType, base64Data))
	return llm.UserBlocks(blocks...)
}

// CheckUsage checks that an adapter of backend, built by f with a model
// that reports usage, reports each model call's usage to the runtime
// (adapter.ReportModelCall): a plain turn (one call) and a tool turn
// (two calls) end with the sum of their calls' usage and the last call's
// finish reason, on the non-streamed and the streamed model path, once
// per backend-native section given (none: one run without a section;
// give one that turns the upstream's streaming on, where it has one).
func CheckUsage(t *testing.T, backend string, f adapter.Factory, sections ...string) {
	t.Helper()
	if len(sections) == 0 {
		sections = []string{""}
	}
	for i := range 2 * len(sections) {
		streams, section := i%2 == 1, sections[i/2]
		ctx := context.Background()
		var p llm.Provider = usageModel{}
		if streams {
			p = usageStreamer{}
		}
		h := sectionHarness(t, backend, f, p, section)
		for _, c := range []struct {
			text  string
			calls int
		}{{"hello", 1}, {"where is order 7?", 2}} {
			out, _ := h.Send(ctx, "acme/s", llm.UserText(c.text))
			done, ok := out.(*chat.Completed)
			if !ok {
				t.Fatalf("section %s, streams %v, %q: %#v", section, streams, c.text, out)
			}
			u := done.Usage
			if u.PromptTokens == nil || *u.PromptTokens != 11*c.calls || u.CompletionTokens == nil || *u.CompletionTokens != 7*c.calls ||
				u.TotalTokens == nil || *u.TotalTokens != 18*c.calls || done.FinishReason != llm.FinishStop {
				t.Fatalf("section %s, streams %v, %q (%d model calls): usage %s, finish %q; want %d/%d/%d, stop", section, streams, c.text, c.calls,
					usageString(u), done.FinishReason, 11*c.calls, 7*c.calls, 18*c.calls)
			}
		}
	}
}

// usageModel answers as the scripted demo model does, with usage 11/7/18
// and the finish reason of its answer.
type usageModel struct{}

func (usageModel) Ready(context.Context) error { return nil }

func (usageModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp, err := demo.Model{}.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	resp.Usage = llm.Usage{PromptTokens: ptr(11), CompletionTokens: ptr(7), TotalTokens: ptr(18)}
	resp.FinishReason = llm.FinishStop
	if len(resp.Message.ToolCalls) > 0 {
		resp.FinishReason = llm.FinishToolCalls
	}
	return resp, nil
}

// usageStreamer is usageModel streamed: its text, its tool calls, and a
// last chunk with the finish reason and the usage.
type usageStreamer struct{ usageModel }

func (u usageStreamer) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		resp, err := u.Complete(ctx, req)
		if err != nil {
			yield(nil, err)
			return
		}
		var deltas []llm.ToolCallDelta
		for i, tc := range resp.Message.ToolCalls {
			deltas = append(deltas, llm.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)})
		}
		if text := resp.Message.Text(); text != "" && !yield(&llm.Chunk{Content: text}, nil) {
			return
		}
		if len(deltas) > 0 && !yield(&llm.Chunk{ToolCalls: deltas}, nil) {
			return
		}
		yield(&llm.Chunk{FinishReason: resp.FinishReason, Usage: &resp.Usage}, nil)
	}
}

func ptr(n int) *int { return &n }

func usageString(u llm.Usage) string {
	n := func(p *int) string {
		if p == nil {
			return "-"
		}
		return strconv.Itoa(*p)
	}
	return n(u.PromptTokens) + "/" + n(u.CompletionTokens) + "/" + n(u.TotalTokens)
}

// CheckToolCallKey checks that an adapter of backend, built by f with
// the scripted Model and the demo tools, runs each Armature tool with
// the call's identity in its context (agent.ToolCallOf): the id the
// session's history stores the call under, its name and the session.
// A call needing approval carries, when the approval resumes it, the id
// of the call the approval named, so that its IdempotencyKey is the
// same however often the resume runs.
func CheckToolCallKey(t *testing.T, backend string, f adapter.Factory) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[string]agent.ToolCallInfo{} // tool name → the last call's identity
	tools := demo.Tools()
	for i := range tools {
		call := tools[i].Call
		tools[i].Call = func(ctx context.Context, args json.RawMessage) (string, error) {
			info, ok := agent.ToolCallOf(ctx)
			if ok {
				mu.Lock()
				seen[info.Name] = info
				mu.Unlock()
			}
			return call(ctx, args)
		}
	}
	ag := &adapter.Agent{ID: "x", Backend: backend, Provider: NewModel(), Tools: tools}
	a, err := f(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	h := Harness(t, a, ag, sessions)
	if out, _ := h.Send(ctx, "acme/s", llm.UserText("where is order 7?")); !isCompleted(out) {
		t.Fatalf("lookup: %#v", out)
	}
	out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("refund: %#v", out)
	}
	if out, _ := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")}); !isCompleted(out) {
		t.Fatalf("approval: %#v", out)
	}
	rec, err := sessions.Load(ctx, session.LoadRequest{SessionID: "acme/s"})
	if err != nil {
		t.Fatal(err)
	}
	history, err := llm.DecodeMessages(rec.State[chat.MessagesField])
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{} // tool name → the id the history stores its call under
	for _, m := range history {
		for _, tc := range m.ToolCalls {
			stored[tc.Name] = tc.ID
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"lookup_order", "issue_refund"} {
		info := seen[name]
		if info.ID == "" || info.ID != stored[name] || info.SessionID == "" || info.IdempotencyKey() == "" {
			t.Errorf("%s ran with the call identity %+v; the history stores its call as %q", name, info, stored[name])
		}
	}
	if want := agent.SignalPrefix + seen["issue_refund"].ID; s.Descriptor.SignalID != want {
		t.Errorf("the approved call ran as %q, the approval named %q", want, s.Descriptor.SignalID)
	}
}

// CheckLostApproval checks how an approval fails when the upstream lost
// its state (its in-memory state, across a restart): a (an adapter whose
// agent has the demo tools and whose model asks for issue_refund when the
// user wants a refund, as the scripted demo model does) suspends a
// refund; lose drops the upstream's state of it; the approval must then
// fail as user-correctable, harness_signal_correlation_failed, with an
// error wrapping want, not as a transient failure whose retry could never
// succeed.
func CheckLostApproval(t *testing.T, a adapter.Adapter, lose func(), want error) {
	t.Helper()
	ctx := context.Background()
	h := Harness(t, a, &adapter.Agent{ID: "x", Backend: a.Name(), Tools: demo.Tools()}, session.NewMemoryStore(session.MemoryConfig{}))
	out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("refund: %#v", out)
	}
	lose()
	out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	e, ok := out.(*chat.Errored)
	if !ok || e.Category != errcat.HarnessSignalCorrelationFailed || e.Bucket != harness.UserCorrectable || !errors.Is(e.Err, want) {
		t.Fatalf("the approval of a lost upstream state: %#v", out)
	}
}
