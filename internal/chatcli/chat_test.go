package chatcli_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/chatcli"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/server"
)

// newDemoServer serves the demo agent over an SQLite file in a temp dir.
func newDemoServer(t *testing.T, mutate ...func(*server.Config)) *httptest.Server {
	t.Helper()
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	return newServer(t, a, mutate...)
}

// newServer serves a over an SQLite file in a temp dir.
func newServer(t *testing.T, a *agent.Agent, mutate ...func(*server.Config)) *httptest.Server {
	t.Helper()
	return servertest.New(t, a, mutate...)
}

func newClient(t *testing.T, url, token string) *chatcli.Client {
	t.Helper()
	c, err := chatcli.NewClient(chatcli.ClientConfig{Server: url, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// screen is a concurrency-safe output buffer that can be waited on.
type screen struct {
	mu      sync.Mutex
	buf     strings.Builder
	changed chan struct{}
}

func newScreen() *screen { return &screen{changed: make(chan struct{}, 1)} }

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// session is a running chatcli.Run with scripted input.
type session struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *screen
	done chan error
	// mark is where the next wait starts looking.
	mark int
}

func startChat(t *testing.T, cfg chatcli.Config) *session {
	t.Helper()
	pr, pw := io.Pipe()
	s := &session{t: t, in: pw, out: newScreen(), done: make(chan error, 1)}
	cfg.In, cfg.Out = pr, s.out
	go func() { s.done <- chatcli.Run(context.Background(), cfg) }()
	t.Cleanup(func() {
		pw.Close()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return at the end of its input")
		}
	})
	return s
}

// waitFor waits until the output after the mark contains want, and moves
// the mark past it; it returns the output from the mark to want's end.
func (s *session) waitFor(want string) string {
	s.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		all := s.out.String()
		if i := strings.Index(all[s.mark:], want); i >= 0 {
			got := all[s.mark : s.mark+i+len(want)]
			s.mark += i + len(want)
			return got
		}
		select {
		case <-s.out.changed:
		case <-time.After(50 * time.Millisecond):
		case err := <-s.done:
			s.done <- err
			if all := s.out.String(); !strings.Contains(all[s.mark:], want) {
				s.t.Fatalf("Run returned (%v); output lacks %q after:\n%s", err, want, all[s.mark:])
			}
		case <-deadline:
			s.t.Fatalf("output lacks %q after:\n%s", want, all[s.mark:])
		}
	}
}

func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// quit sends /quit and waits for Run to return.
func (s *session) quit() {
	s.t.Helper()
	s.send("/quit")
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Fatalf("Run: %v", err)
		}
		s.done <- nil
	case <-time.After(10 * time.Second):
		s.t.Fatal("Run did not return after /quit")
	}
}

// TestChatTurnsApprovalsAndSessions drives the client through a plain
// turn, a tool turn, an approval, the session commands, and a restart
// that continues the remembered session.
func TestChatTurnsApprovalsAndSessions(t *testing.T) {
	ts := newDemoServer(t)
	statePath := filepath.Join(t.TempDir(), "chat.json")
	cfg := chatcli.Config{Client: newClient(t, ts.URL, ""), StatePath: statePath}
	s := startChat(t, cfg)
	s.waitFor("new session ")
	first := strings.Fields(s.waitFor(" on "))[0]
	s.waitFor("you> ")

	s.send("hello there")
	got := s.waitFor("you> ")
	if strings.Count(got, `You said: "hello there"`) != 1 {
		t.Fatalf("reply printed %d times:\n%s", strings.Count(got, `You said: "hello there"`), got)
	}

	s.send("where is order 42?")
	got = s.waitFor("you> ")
	for _, want := range []string{
		`  · calling lookup_order {"order":"42"}`,
		"  · lookup_order returned: order 42: shipped, arriving Thursday",
		"agent> Here is what I found: order 42: shipped, arriving Thursday\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("tool turn lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "Here is what I found") != 1 {
		t.Errorf("reply repeated:\n%s", got)
	}

	s.send("refund order 7")
	got = s.waitFor("? [y/N/comment] ")
	if !strings.Contains(got, `Approve issue_refund {"amount":30,"order":"7"}? [y/N/comment] `) ||
		!strings.Contains(got, "agent> I need your approval to call issue_refund") {
		t.Fatalf("approval prompt:\n%s", got)
	}
	s.send("y")
	got = s.waitFor("you> ")
	for _, want := range []string{
		"  approved\n",
		"  · issue_refund returned: refunded $30.00 for order 7",
		"agent> Here is what I found: refunded $30.00 for order 7\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("resumed turn lacks %q:\n%s", want, got)
		}
	}

	s.send("/new")
	second := strings.TrimSpace(strings.TrimPrefix(s.waitFor("\n"), "new session "))
	if second == first || second == "" {
		t.Fatalf("/new gave %q (first %q)", second, first)
	}
	s.waitFor("you> ")
	s.send("/sessions")
	got = s.waitFor("you> ")
	if !strings.Contains(got, "* "+second) || !strings.Contains(got, "  "+first) {
		t.Fatalf("/sessions:\n%s", got)
	}
	s.send("/switch " + first)
	s.waitFor("switched to session " + first + " (11 messages")
	s.waitFor("you> ")
	s.send("/history")
	got = s.waitFor("for order 7\nyou> ")
	for _, want := range []string{"you> hello there\n", "you> where is order 42?\n", "you> refund order 7\n",
		`  · calling issue_refund {"amount":30,"order":"7"}`, "agent> Here is what I found: refunded $30.00 for order 7\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("/history lacks %q:\n%s", want, got)
		}
	}
	s.send("/switch nope")
	if got := s.waitFor("you> "); !strings.Contains(got, "! error [not_found]: session not found") {
		t.Errorf("/switch to a missing session:\n%s", got)
	}
	s.quit()

	// A restarted client continues the last session, and streams.
	s2 := startChat(t, cfg)
	s2.waitFor("continuing session " + first)
	s2.waitFor("you> ")
	s2.send("hi again")
	if got := s2.waitFor("you> "); strings.Count(got, `You said: "hi again"`) != 1 || strings.Contains(got, "hello there") {
		t.Fatalf("after restart:\n%s", got)
	}
	s2.quit()
}

func TestChatDenyWithComment(t *testing.T) {
	ts := newDemoServer(t)
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, "")})
	s.waitFor("you> ")
	s.send("refund order 9")
	s.waitFor("[y/N/comment] ")
	s.send("not without a receipt")
	got := s.waitFor("you> ")
	if !strings.Contains(got, "  denied (answer y to approve)") || !strings.Contains(got, "agent> ") {
		t.Fatalf("denial:\n%s", got)
	}
	s.quit()
}

// TestChatErrors: a server's error answers print its text and code.
func TestChatErrors(t *testing.T) {
	ts := newDemoServer(t, func(c *server.Config) { c.Tokens = []server.Token{{Secret: "s3cret-s3cret-s3cret", Tenant: "acme"}} })
	err := chatcli.Run(context.Background(), chatcli.Config{Client: newClient(t, ts.URL, "wrong"),
		In: strings.NewReader(""), Out: io.Discard})
	var ae *chatcli.APIError
	if !errors.As(err, &ae) || !errors.Is(err, chatcli.ErrUnauthorized) || ae.Code != "unauthorized" {
		t.Fatalf("wrong token: %v", err)
	}

	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, "s3cret-s3cret-s3cret"), Session: "mine"})
	s.waitFor("new session mine")
	s.waitFor("you> ")
	s.send("/switch bad/id")
	if got := s.waitFor("you> "); !strings.Contains(got, "! error [") {
		t.Fatalf("bad id:\n%s", got)
	}
	s.quit()
}

func TestParseApproval(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want chatcli.Approval
	}{
		{"y", chatcli.Approval{Approved: true}},
		{"Yes", chatcli.Approval{Approved: true}},
		{"y, but only once", chatcli.Approval{Approved: true, Comment: "but only once"}},
		{"", chatcli.Approval{}},
		{"n", chatcli.Approval{}},
		{"no: too much", chatcli.Approval{Comment: "too much"}},
		{"ask the manager first", chatcli.Approval{Comment: "ask the manager first"}},
	} {
		if got := chatcli.ParseApproval(tc.in); got != tc.want {
			t.Errorf("ParseApproval(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// spyTransport records the event-stream connections and can hold back
// the answer of a send.
type spyTransport struct {
	mu      sync.Mutex
	streams []io.ReadCloser
	lastIDs []string
	// beforeAnswer runs before a send's answer reaches the client.
	beforeAnswer func()
}

func (s *spyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/events"):
		s.mu.Lock()
		s.streams = append(s.streams, resp.Body)
		s.lastIDs = append(s.lastIDs, r.Header.Get("Last-Event-ID"))
		s.mu.Unlock()
	case strings.HasSuffix(r.URL.Path, "/messages") && s.beforeAnswer != nil:
		s.beforeAnswer()
	}
	return resp, nil
}

// TestChatStreamsBeforeTheAnswer: the reply is printed from the event
// stream while the send's answer is still held back, is not printed
// again when the answer arrives, and streaming goes on after the stream
// drops and reconnects with Last-Event-ID.
func TestChatStreamsBeforeTheAnswer(t *testing.T) {
	ts := newDemoServer(t)
	spy := &spyTransport{}
	c, err := chatcli.NewClient(chatcli.ClientConfig{Server: ts.URL, HTTPClient: &http.Client{Transport: spy}})
	if err != nil {
		t.Fatal(err)
	}
	s := startChat(t, chatcli.Config{Client: c})
	s.waitFor("you> ")
	var streamedEarly atomic.Bool
	want := ""
	spy.beforeAnswer = func() {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if strings.Contains(s.out.String(), want) {
				streamedEarly.Store(true)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i, msg := range []string{"first words", "second words"} {
		want = `agent> You said: "` + msg + `". I'm the offline demo agent`
		streamedEarly.Store(false)
		s.send(msg)
		got := s.waitFor("or for a refund.\nyou> ")
		if !streamedEarly.Load() {
			t.Errorf("turn %d: the reply was not streamed before the answer:\n%s", i, got)
		}
		if n := strings.Count(got, "You said"); n != 1 {
			t.Errorf("turn %d: reply printed %d times:\n%s", i, n, got)
		}
		if i == 0 {
			// Drop the stream: the client reconnects from the last event.
			spy.mu.Lock()
			spy.streams[0].Close()
			spy.mu.Unlock()
			deadline := time.Now().Add(5 * time.Second)
			for {
				spy.mu.Lock()
				n := len(spy.streams)
				spy.mu.Unlock()
				if n > 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the client did not reconnect")
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	spy.mu.Lock()
	ids := slices.Clone(spy.lastIDs)
	spy.mu.Unlock()
	if len(ids) < 2 || ids[0] != "" || ids[1] == "" || ids[1] == "0" {
		t.Errorf("Last-Event-ID of the connections: %q", ids)
	}
	s.quit()
}

// failing is a provider that always fails, non-retryably.
type failing struct{}

func (failing) Ready(context.Context) error { return nil }

func (failing) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, &llm.ProviderError{Cat: errcat.ProviderAuthentication, Provider: "test", Op: "complete", StatusCode: 401, Message: "bad key"}
}

// TestChatErroredTurn: an errored turn prints the server's reply text
// and the error bucket.
func TestChatErroredTurn(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: failing{}})
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, a)
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, ""), CatchUp: 500 * time.Millisecond})
	s.waitFor("you> ")
	s.send("hello")
	got := s.waitFor("you> ")
	if !strings.Contains(got, "  ! error [user_correctable]: That request couldn't be processed") {
		t.Fatalf("errored turn:\n%s", got)
	}
	s.quit()
}

// TestChatPendingApprovalSurvivesRestart: a turn left suspended at the
// approval prompt is asked again when the client restarts, and a client
// that never saw it finds it on the session's event stream.
func TestChatPendingApprovalSurvivesRestart(t *testing.T) {
	ts := newDemoServer(t)
	cfg := chatcli.Config{Client: newClient(t, ts.URL, ""), StatePath: filepath.Join(t.TempDir(), "chat.json"), Session: "shop"}
	s := startChat(t, cfg)
	s.waitFor("you> ")
	s.send("refund order 5")
	s.waitFor("[y/N/comment] ")
	s.send("/history")
	s.waitFor("  (the turn stays suspended)\n")
	s.waitFor("you> refund order 5\n")
	s.waitFor("A turn of this session awaits your answer.\nApprove issue_refund")
	s.waitFor("[y/N/comment] ")
	s.quit()

	s = startChat(t, cfg)
	s.waitFor("continuing session shop")
	s.waitFor("A turn of this session awaits your answer.\nApprove issue_refund")
	s.waitFor("[y/N/comment] ")
	s.quit()

	// Another client, without state, in the same session.
	other := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, ""), Session: "shop"})
	other.waitFor("A turn of this session awaits your answer.\n")
	other.waitFor("[y/N/comment] ")
	other.send("yes")
	got := other.waitFor("you> ")
	if !strings.Contains(got, "agent> Here is what I found: refunded $30.00 for order 5\n") {
		t.Fatalf("resumed turn:\n%s", got)
	}
	other.quit()

	// The first client's state still names the suspension; the stream
	// tells it the turn was resumed.
	s = startChat(t, cfg)
	s.waitFor("continuing session shop")
	s.send("/history")
	got = s.waitFor("for order 5\nyou> ")
	if strings.Contains(got, "awaits your answer") {
		t.Fatalf("asked again for an answered approval:\n%s", got)
	}
	s.quit()
}

// TestChatAnswerToSupersededApproval: another client's message
// supersedes the approval this client is asked for: the client shows
// that turn as it runs and closes its prompt, and goes on; an answer
// sent anyway resumes nothing.
func TestChatAnswerToSupersededApproval(t *testing.T) {
	ts := newDemoServer(t)
	first := newClient(t, ts.URL, "")
	susp, err := first.Send(t.Context(), "shop", "refund order 5")
	if err != nil || susp.Outcome != chatcli.OutcomeSuspended {
		t.Fatalf("the refund: %+v, %v", susp, err)
	}
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, ""), Session: "shop"})
	s.waitFor("[y/N/comment] ")
	other := newClient(t, ts.URL, "")
	out, err := other.Send(t.Context(), "shop", "where is order 3?")
	if err != nil || out.Outcome != chatcli.OutcomeCompleted || len(out.Superseded) != 1 {
		t.Fatalf("the other client's message: %+v, %v", out, err)
	}
	// The stream shows the other client's turn, and the prompt closes.
	got := s.waitFor("(answered elsewhere")
	if !strings.Contains(got, "(another client's turn)") || !strings.Contains(got, "order 3") {
		t.Fatalf("the other client's turn:\n%s", got)
	}
	s.waitFor("you> ")
	// An answer sent anyway (a client whose stream lags) resumes nothing.
	sig := chatcli.Signal{SignalID: susp.Signal.SignalID, InvocationID: susp.InvocationID}
	if out, err := first.Approve(t.Context(), "shop", sig, chatcli.Approval{Approved: true}); err != nil ||
		out.Error == nil || out.Error.Category != chatcli.CategorySignalCorrelationFailed {
		t.Fatalf("an answer to the superseded approval: %+v, %v", out, err)
	}
	s.send("where is order 4?")
	if got := s.waitFor("you> "); !strings.Contains(got, "order 4") || strings.Contains(got, "awaits your answer") {
		t.Fatalf("the next turn:\n%s", got)
	}
	s.quit()
}

// TestChatAnswerToADeletedConversation: while this client is asked for
// an approval, another deletes the session and begins it again, and its
// new refund asks under the same signal id. The client closes the old
// prompt and asks for the new request, naming it; an answer to the old
// one (naming its invocation, as the client's answers do) resumes
// nothing. Before, it approved the new refund.
func TestChatAnswerToADeletedConversation(t *testing.T) {
	ts := newDemoServer(t)
	first := newClient(t, ts.URL, "")
	old, err := first.Send(t.Context(), "shop", "refund order 5")
	if err != nil || old.Outcome != chatcli.OutcomeSuspended {
		t.Fatalf("the refund: %+v, %v", old, err)
	}
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, ""), Session: "shop"})
	s.waitFor(`Approve issue_refund {"amount":30,"order":"5"}? [y/N/comment] `)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, ts.URL+"/v1/sessions/shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := ts.Client().Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v, %v", resp, err)
	}
	other := newClient(t, ts.URL, "")
	out, err := other.Send(t.Context(), "shop", "refund order 555")
	if err != nil || out.Outcome != chatcli.OutcomeSuspended || out.Signal.SignalID != old.Signal.SignalID {
		t.Fatalf("the new conversation's refund: %+v, %v (the test needs the old one's signal id %s)", out, err, old.Signal.SignalID)
	}
	s.waitFor("(answered elsewhere")
	s.waitFor(`Approve issue_refund {"amount":30,"order":"555"}? [y/N/comment] `)
	sig := chatcli.Signal{SignalID: old.Signal.SignalID, InvocationID: old.InvocationID}
	if out, err := first.Approve(t.Context(), "shop", sig, chatcli.Approval{Approved: true}); err != nil ||
		out.Error == nil || out.Error.Category != chatcli.CategorySignalCorrelationFailed {
		t.Fatalf("an answer to the deleted conversation's request: %+v, %v", out, err)
	}
	s.send("no")
	s.waitFor("you> ")
	s.quit()
	sess, err := other.GetSession(t.Context(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sess.Messages {
		if m.Role == llm.RoleTool && strings.Contains(m.Text(), "refunded") {
			t.Fatalf("a refund ran: %v", m.Text())
		}
	}
}

// TestChatRememberedPositionDeleted: the client restarts on a session
// whose remembered stream position was deleted with the session (another
// client deleted it and began again). The server answers that position
// with last_event_id_unknown; the client follows the stream again from
// the start and shows the next turn of another client. Before, it
// reconnected with the forgotten position forever and showed nothing.
func TestChatRememberedPositionDeleted(t *testing.T) {
	ts := newDemoServer(t)
	cfg := chatcli.Config{Client: newClient(t, ts.URL, ""), StatePath: filepath.Join(t.TempDir(), "chat.json"), Session: "shop"}
	s := startChat(t, cfg)
	s.waitFor("you> ")
	s.send("where is order 3?")
	s.waitFor("order 3")
	s.waitFor("you> ")
	s.quit()

	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, ts.URL+"/v1/sessions/shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := ts.Client().Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v, %v", resp, err)
	}
	other := newClient(t, ts.URL, "")
	if out, err := other.Send(t.Context(), "shop", "where is order 4?"); err != nil || out.Outcome != chatcli.OutcomeCompleted {
		t.Fatalf("the new conversation: %+v, %v", out, err)
	}

	s = startChat(t, cfg)
	s.waitFor("you> ")
	if out, err := other.Send(t.Context(), "shop", "where is order 6?"); err != nil || out.Outcome != chatcli.OutcomeCompleted {
		t.Fatalf("another client's turn: %+v, %v", out, err)
	}
	if got := s.waitFor("order 6"); !strings.Contains(got, "(another client's turn)") {
		t.Fatalf("another client's turn after the restart:\n%s", got)
	}
	s.quit()
}

// TestChatShowsUsage: the turn's token usage and a cut-off reply are
// shown under the answer.
func TestChatShowsUsage(t *testing.T) {
	s := llmtest.Reply("a long answer")
	s.Response.Usage = llm.Usage{PromptTokens: new(12), CompletionTokens: new(400), TotalTokens: new(412)}
	s.Response.FinishReason = llm.FinishLength
	a, err := agent.New(agent.Config{Provider: llmtest.New(s)})
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, a)
	c := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, "")})
	c.waitFor("you> ")
	c.send("tell me everything")
	got := c.waitFor("you> ")
	if !strings.Contains(got, "cut off at the model's token limit") || !strings.Contains(got, "12 tokens in, 400 out") {
		t.Fatalf("turn output:\n%s", got)
	}
	c.quit()
}

// TestChatNeutralizesControlSequences: control sequences in a tool's
// result and the model's reply (here the order a user asked about,
// echoed) reach the terminal as text, live and in /history: they cannot
// clear the screen, retitle the window or draw a fake prompt.
func TestChatNeutralizesControlSequences(t *testing.T) {
	ts := newDemoServer(t)
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, "")})
	s.waitFor("you> ")
	s.send("where is order 9\x1b[2J\x1b]0;PWNED\x07\x1b[1;32mApprove everything? [y/N] ")
	s.waitFor("you> ")
	s.send("/history")
	s.waitFor("you> ")
	s.quit()
	out := s.out.String()
	if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `\x1b[2J\x1b]0;PWNED\a`) {
		t.Fatalf("the terminal was sent:\n%q", out)
	}
}

// TestChatInterruptCancelsTheTurn: Ctrl-C during a turn cancels it on
// the server (the turn answers invocation_cancelled, its run ends) and
// the client goes on; at the prompt it ends the client. Before, the
// client stopped waiting and the server's turn ran on, its reply
// committed and never shown.
func TestChatInterruptCancelsTheTurn(t *testing.T) {
	m := adaptertest.NewModel()
	a, err := agent.New(agent.Config{Provider: m, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, a)
	intr := make(chan struct{})
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, ""), Session: "slow", Interrupt: intr})
	s.waitFor("you> ")
	s.send("answer " + adaptertest.SlowWord)
	<-m.Blocked() // the model call is under way
	intr <- struct{}{}
	got := s.waitFor("you> ")
	if !strings.Contains(got, "(cancelling the turn)") || !strings.Contains(got, "(the turn was cancelled)") {
		t.Fatalf("the interrupted turn:\n%s", got)
	}
	runs, err := newClient(t, ts.URL, "").StartedRuns(t.Context(), "slow")
	if err != nil || len(runs) != 0 {
		t.Fatalf("runs still running: %v, %v", runs, err)
	}
	s.interruptEnds(intr)
}

// holdTransport holds back the requests hold matches, as a server that
// does not answer would, until the request is cancelled; after a while
// it lets them through (so that a client that does not cancel them goes
// on, and shows what it then does).
// interruptEnds sends an interrupt at the prompt and checks that it
// ends the client.
func (s *session) interruptEnds(intr chan<- struct{}) {
	s.t.Helper()
	intr <- struct{}{}
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Fatal(err)
		}
		s.done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		s.t.Fatal("an interrupt at the prompt did not end the client")
	}
}

type holdTransport struct {
	mu   sync.Mutex
	hold func(*http.Request) bool
	// held receives the method and path of each request held back.
	held chan string
}

func (h *holdTransport) set(hold func(*http.Request) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold = hold
}

func (h *holdTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	hold := h.hold != nil && h.hold(r)
	h.mu.Unlock()
	if hold {
		h.held <- r.Method + " " + r.URL.Path
		select {
		case <-r.Context().Done():
			return nil, context.Cause(r.Context())
		case <-time.After(3 * time.Second):
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestChatInterruptCancelsACommand: Ctrl-C while a command's request is
// under way (no turn runs, no prompt waits) cancels the request, prints
// "(cancelled)" and returns to the prompt, where the client goes on; the
// session stays the one it was. Before, the interrupt was left pending
// and the next prompt took it for a quit.
func TestChatInterruptCancelsACommand(t *testing.T) {
	ts := newDemoServer(t)
	if _, err := newClient(t, ts.URL, "").CreateSession(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	h := &holdTransport{held: make(chan string, 1)}
	c, err := chatcli.NewClient(chatcli.ClientConfig{Server: ts.URL, HTTPClient: &http.Client{Transport: h}})
	if err != nil {
		t.Fatal(err)
	}
	// Buffered, as armature chat's signal goroutine holds an interrupt
	// until the client takes it.
	intr := make(chan struct{}, 1)
	s := startChat(t, chatcli.Config{Client: c, Session: "main", Interrupt: intr})
	s.waitFor("you> ")
	for i, tc := range []struct {
		command, method, path string
		want                  string
	}{
		{"/sessions", http.MethodGet, "/v1/sessions", "  (cancelled)\nyou> "},
		{"/history", http.MethodGet, "/v1/sessions/main", "  (cancelled)\nyou> "},
		{"/switch other", http.MethodGet, "/v1/sessions/other", "  (cancelled)\nyou> "},
		{"/switch other", http.MethodGet, "/v1/sessions/other/events", "  (cancelled)\nyou> "},
		{"/new fresh", http.MethodPost, "/v1/sessions", "  (cancelled)\nyou> "},
	} {
		h.set(func(r *http.Request) bool { return r.Method == tc.method && r.URL.Path == tc.path })
		s.send(tc.command)
		select {
		case <-h.held:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: %s %s was not requested", tc.command, tc.method, tc.path)
		}
		intr <- struct{}{}
		got := s.waitFor(tc.want)
		h.set(nil)
		if strings.Contains(got, "! ") {
			t.Errorf("%s: a cancelled request printed an error:\n%s", tc.command, got)
		}
		// The client goes on, in the same session.
		msg := fmt.Sprintf("still here %d", i)
		s.send(msg)
		if got := s.waitFor("you> "); !strings.Contains(got, `agent> You said: "`+msg+`"`) {
			t.Fatalf("after %s was cancelled, the turn:\n%s", tc.command, got)
		}
	}
	s.send("/sessions")
	got := s.waitFor("you> ")
	if !strings.Contains(got, "* main") || strings.Contains(got, "fresh") {
		t.Errorf("the sessions after the cancelled commands:\n%s", got)
	}
	s.interruptEnds(intr)
}

// TestChatInterruptWhileStarting: Ctrl-C while the client starts (its
// session is being read) ends it at once, without a prompt.
func TestChatInterruptWhileStarting(t *testing.T) {
	ts := newDemoServer(t)
	h := &holdTransport{held: make(chan string, 1)}
	h.set(func(r *http.Request) bool { return r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/main" })
	c, err := chatcli.NewClient(chatcli.ClientConfig{Server: ts.URL, HTTPClient: &http.Client{Transport: h}})
	if err != nil {
		t.Fatal(err)
	}
	intr := make(chan struct{}, 1)
	s := startChat(t, chatcli.Config{Client: c, Session: "main", Interrupt: intr})
	<-h.held
	intr <- struct{}{}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatal(err)
		}
		s.done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("an interrupt while starting did not end the client")
	}
	if out := s.out.String(); strings.Contains(out, "you> ") {
		t.Fatalf("the client went on to a prompt:\n%s", out)
	}
}
