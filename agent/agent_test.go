package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/session"
)

type sendArgs struct {
	To string `json:"to"`
}

// emailTool is a send_email tool counting the emails it sends in sent.
func emailTool(t *testing.T, sent *atomic.Int32) agent.Tool {
	t.Helper()
	email, err := agent.NewTool("send_email", "Send an email", func(ctx context.Context, a sendArgs) (string, error) {
		sent.Add(1)
		return "sent to " + a.To, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return email
}

// newChat builds a chat harness over an agent with a weather tool and an
// approval-gated send_email tool; sent counts executed emails.
func newChat(t *testing.T, p llm.Provider, sent *atomic.Int32, mutate ...func(*agent.Config)) *chat.Harness {
	t.Helper()
	email := emailTool(t, sent)
	cfg := agent.Config{Provider: p, System: "Be brief.", Tools: []agent.Tool{weatherTool(t), email.WithApproval()}}
	for _, m := range mutate {
		m(&cfg)
	}
	return agentChat(t, cfg, session.NewMemoryStore(session.MemoryConfig{}))
}

// agentChat builds a chat harness over an agent for cfg, with its
// sessions on store.
func agentChat(t *testing.T, cfg agent.Config, store session.Store) *chat.Harness {
	t.Helper()
	return sessionsChat(t, cfg, graph.SessionConfig{Store: store})
}

// coldChat is agentChat without the session cache: every turn loads its
// session (by its tail, when the agent has a window).
func coldChat(t *testing.T, cfg agent.Config, store session.Store) *chat.Harness {
	t.Helper()
	return sessionsChat(t, cfg, graph.SessionConfig{Store: store, CacheSize: -1})
}

// sessionsChat builds a chat harness over an agent for cfg, with sessions
// per sc.
func sessionsChat(t *testing.T, cfg agent.Config, sc graph.SessionConfig) *chat.Harness {
	t.Helper()
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(sc))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func roles(msgs []llm.Message) string {
	var b []string
	for _, m := range msgs {
		b = append(b, string(m.Role))
	}
	return strings.Join(b, ",")
}

func TestToolLoop(t *testing.T) {
	ctx := context.Background()
	p := llmtest.New(
		llmtest.CallTools(call("c1", "get_weather", `{"city":"Paris"}`)),
		llmtest.Reply("It is sunny in Paris."),
	)
	var sent atomic.Int32
	h := newChat(t, p, &sent)
	out, err := h.Send(ctx, "s1", llm.UserText("Weather in Paris?"))
	if err != nil {
		t.Fatal(err)
	}
	c := out.(*chat.Completed)
	if roles(c.Replies) != "assistant,tool,assistant" || c.Replies[1].Text() != "Sunny in Paris ()" || c.Replies[2].Text() != "It is sunny in Paris." {
		t.Fatalf("replies = %+v", c.Replies)
	}
	reqs := p.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls", len(reqs))
	}
	// The second call sees system, user, the tool call and its result,
	// and both tools.
	if roles(reqs[1].Transcript()) != "system,user,assistant,tool" || len(reqs[1].Tools) != 2 {
		t.Fatalf("second request: %s, %d tools", roles(reqs[1].Transcript()), len(reqs[1].Tools))
	}
}

func TestToolErrorsGoBackToTheModel(t *testing.T) {
	ctx := context.Background()
	p := llmtest.New(
		llmtest.CallTools(call("c1", "get_weather", `{"city":"Atlantis"}`), call("c2", "nope", `{}`), call("c3", "get_weather", `{"town":1}`)),
		llmtest.Reply("Sorry."),
	)
	var sent atomic.Int32
	out, err := newChat(t, p, &sent).Send(ctx, "s1", llm.UserText("?"))
	if err != nil {
		t.Fatal(err)
	}
	c := out.(*chat.Completed)
	want := []string{"error: no such city", `error: there is no tool named "nope"`, "error: agent: tool get_weather: invalid arguments"}
	for i, w := range want {
		if got := c.Replies[1+i].Text(); !strings.HasPrefix(got, w) || c.Replies[1+i].ToolCallID == "" {
			t.Errorf("result %d = %q, want prefix %q", i, got, w)
		}
	}
}

func TestApprovalApproveAndDeny(t *testing.T) {
	for _, tc := range []struct {
		name     string
		payload  graph.Update
		wantSent int32
		wantTool string
	}{
		{"approve", agent.Approve("ok"), 1, "sent to bob@example.com"},
		{"deny", agent.Deny("not now"), 0, "The user denied this call. Reason: not now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p := llmtest.New(
				llmtest.CallTools(call("c9", "send_email", `{"to":"bob@example.com"}`)),
				llmtest.Reply("Done."),
			)
			var sent atomic.Int32
			h := newChat(t, p, &sent)
			var got []chat.Outcome
			defer h.Subscribe("s1", func(o chat.Outcome) { got = append(got, o) })()
			out, err := h.Send(ctx, "s1", llm.UserText("Email Bob"))
			if err != nil {
				t.Fatal(err)
			}
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("outcome %T", out)
			}
			if s.Descriptor.SignalID != agent.SignalPrefix+"c9" || s.Descriptor.Metadata["tool"] != "send_email" {
				t.Fatalf("descriptor %+v", s.Descriptor)
			}
			if len(s.PendingMessages) != 2 || !strings.Contains(s.PendingMessages[1].Text(), "send_email") {
				t.Fatalf("pending %+v", s.PendingMessages)
			}
			if sent.Load() != 0 {
				t.Fatal("the tool ran before approval")
			}
			if _, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s1", Payload: tc.payload}); err != nil {
				t.Fatal(err)
			}
			if sent.Load() != tc.wantSent || len(got) != 1 {
				t.Fatalf("sent %d, %d callbacks", sent.Load(), len(got))
			}
			c := got[0].(*chat.Completed)
			if roles(c.Replies) != "tool,assistant" || c.Replies[0].Text() != tc.wantTool {
				t.Fatalf("resumed replies %+v", c.Replies)
			}
			// The model never sees the approval request between the call
			// and its result.
			if r := p.Requests()[1]; roles(r.Transcript()) != "system,user,assistant,tool" {
				t.Fatalf("second request: %s", roles(r.Transcript()))
			}
		})
	}
}

func TestMaxStepsAndProviderErrors(t *testing.T) {
	ctx := context.Background()
	var steps []llmtest.Step
	for i := range 5 {
		steps = append(steps, llmtest.CallTools(call("c"+string(rune('a'+i)), "get_weather", `{"city":"Oslo"}`)))
	}
	var sent atomic.Int32
	out, err := newChat(t, llmtest.New(steps...), &sent, func(c *agent.Config) { c.MaxSteps = 3 }).
		Send(ctx, "s1", llm.UserText("loop"))
	if err != nil {
		t.Fatal(err)
	}
	c := out.(*chat.Completed)
	if last := c.Replies[len(c.Replies)-1]; !strings.Contains(last.Text(), "stopped after 3 steps") {
		t.Fatalf("last reply %q", last.Text())
	}

	fail := llmtest.New(llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderUnavailable, Message: "down"}))
	out, err = newChat(t, fail, &sent).Send(ctx, "s2", llm.UserText("hi"))
	e, ok := out.(*chat.Errored)
	if !ok || !errors.Is(err, errcat.ProviderUnavailable) || e.Bucket != harness.RetryableTransient {
		t.Fatalf("outcome %#v, err %v", out, err)
	}
}

func TestStreamingTokens(t *testing.T) {
	ctx := context.Background()
	p := llmtest.New(llmtest.Step{Chunks: []*llm.Chunk{{Content: "Hel"}, {Content: "lo"}, {FinishReason: llm.FinishStop}}})
	var sent atomic.Int32
	h := newChat(t, p, &sent)
	var text strings.Builder
	var final chat.Outcome
	for ch, err := range h.SendStreaming(ctx, "s1", llm.UserText("hi")) {
		switch ch.Kind {
		case chat.ChunkText:
			text.WriteString(ch.Text)
		case chat.ChunkOutcome:
			final = ch.Outcome
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	c, ok := final.(*chat.Completed)
	if !ok || text.String() != "Hello" || c.Replies[0].Text() != "Hello" {
		t.Fatalf("streamed %q, outcome %#v", text.String(), final)
	}
}

// TestApprovalPerCall: a decision covers one call; the next gated call of
// the same group asks again.
func TestApprovalPerCall(t *testing.T) {
	ctx := context.Background()
	p := llmtest.New(
		llmtest.CallTools(call("a", "send_email", `{"to":"a@example.com"}`), call("b", "send_email", `{"to":"b@example.com"}`)),
		llmtest.Reply("Both handled."),
	)
	var sent atomic.Int32
	h := newChat(t, p, &sent)
	out, _ := h.Send(ctx, "s1", llm.UserText("Email both"))
	s := out.(*chat.Suspended)
	out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s1", Payload: agent.Approve("")})
	s2, ok := out.(*chat.Suspended)
	if !ok || s2.Descriptor.SignalID != agent.SignalPrefix+"b" || sent.Load() != 1 {
		t.Fatalf("after the first approval: %#v, sent %d", out, sent.Load())
	}
	out, err := h.Signal(ctx, chat.Signal{SignalID: s2.Descriptor.SignalID, SessionID: "s1", Payload: agent.Deny("")})
	if err != nil {
		t.Fatal(err)
	}
	c := out.(*chat.Completed)
	if sent.Load() != 1 || c.Replies[len(c.Replies)-1].Text() != "Both handled." {
		t.Fatalf("sent %d, replies %+v", sent.Load(), c.Replies)
	}
}

// TestWithInstructions: the context's instructions replace the system
// prompt in every model call of the turn ("" sends none); the next turn
// without them has the agent's own prompt, and nothing is stored.
func TestWithInstructions(t *testing.T) {
	for _, tc := range []struct {
		name, instructions string
		set                bool
		system             string // the system prompt the model sees ("" none)
	}{
		{"agent's own", "", false, "Be brief."},
		{"replaced", "Answer in French.", true, "Answer in French."},
		{"none", "", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := llmtest.New(llmtest.CallTools(call("c1", "get_weather", `{"city":"Oslo"}`)), llmtest.Reply("ok"), llmtest.Reply("next"))
			var sent atomic.Int32
			h := newChat(t, p, &sent)
			ctx := context.Background()
			if tc.set {
				ctx = agent.WithInstructions(ctx, tc.instructions)
			}
			if _, err := h.Send(ctx, "s1", llm.UserText("Weather?")); err != nil {
				t.Fatal(err)
			}
			reqs := p.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model calls", len(reqs))
			}
			for i, req := range reqs {
				first := req.Transcript()[0]
				switch {
				case tc.system == "" && first.Role != llm.RoleUser:
					t.Errorf("request %d: %s, want no system prompt", i, roles(req.Transcript()))
				case tc.system != "" && (first.Role != llm.RoleSystem || first.Text() != tc.system):
					t.Errorf("request %d: %s %q, want the system prompt %q", i, first.Role, first.Text(), tc.system)
				}
			}
			if _, err := h.Send(context.Background(), "s1", llm.UserText("again")); err != nil {
				t.Fatal(err)
			}
			if last := p.Requests()[len(p.Requests())-1]; last.Transcript()[0].Text() != "Be brief." {
				t.Errorf("the next turn's system prompt %q", last.Transcript()[0].Text())
			}
			st, _ := h.Harness().Graph().SessionState(context.Background(), "s1")
			for _, m := range chat.Messages.Get(st) {
				if m.Role == llm.RoleSystem {
					t.Error("a system prompt was stored")
				}
			}
		})
	}
}

// A tool-call id the model sent with bytes that are not printable ASCII
// (NUL, a space, a bidirectional override) is replaced before anything
// keeps it: the approval's signal id is printable, the turn suspends and
// resumes (it was suspension_persistence_failed, "this conversation
// can't continue"), and the tool runs once.
func TestUnprintableToolCallIDs(t *testing.T) {
	ctx := context.Background()
	p := llmtest.New(
		llmtest.CallTools(call("x\x00\u202e b", "send_email", `{"to":"a@example.com"}`)),
		llmtest.Reply("Sent."),
	)
	var sent atomic.Int32
	h := newChat(t, p, &sent)
	out, _ := h.Send(ctx, "s1", llm.UserText("Email a"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("%#v", out)
	}
	for _, r := range s.Descriptor.SignalID {
		if r < 0x21 || r > 0x7e {
			t.Fatalf("signal id %q", s.Descriptor.SignalID)
		}
	}
	out, err := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s1", Payload: agent.Approve("")})
	if err != nil || sent.Load() != 1 {
		t.Fatalf("%#v, %v, sent %d", out, err, sent.Load())
	}
}
