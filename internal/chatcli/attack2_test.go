package chatcli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/armature-go/armature/internal/chatcli"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// TestChatOddInputLines: lines a user pastes or pipes that are not plain
// chat (longer than MaxLine, not UTF-8, empty, holding a NUL or a CR
// line end) do not end the client: a too long line, or one that is not
// UTF-8 (sent, its bytes would reach the agent as U+FFFD), is refused
// with a note, at the message prompt and at the approval prompt (where
// it answers nothing), and the client goes on. Before, a line over 1 MiB ended the client as
// if its input had ended, without a word.
func TestChatOddInputLines(t *testing.T) {
	ts := newDemoServer(t)
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, "")})
	s.waitFor("you> ")
	for _, tc := range []struct {
		name, line, want string
	}{
		{"longer than MaxLine", strings.Repeat("x", chatcli.MaxLine+1), "  ! that line is longer than 1048576 bytes: not used\nyou> "},
		{"far longer", strings.Repeat("y", 3*chatcli.MaxLine), "  ! that line is longer than 1048576 bytes: not used\nyou> "},
		{"empty", "", ""},
		{"blank", " \t ", ""},
		{"NUL", "a\x00b", `agent> You said: "a\x00b"`},
		{"CR line end", "crlf\r", `agent> You said: "crlf"`},
		{"not UTF-8", "caf\xe9 cr\xe8me", "  ! that line is not valid UTF-8 (is the terminal's encoding UTF-8?): not used\nyou> "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.sendNow(tc.line)
			s.sendNow("still here")
			got := s.waitFor(`You said: "still here"`)
			if !strings.Contains(got, tc.want) {
				t.Fatalf("after the line, the screen lacks %q:\n%.2000s", tc.want, got)
			}
			s.waitFor("you> ")
		})
	}

	// At the approval prompt a too long line answers nothing: the prompt
	// is shown again and the next line answers it.
	s.send("refund order 7")
	s.waitFor("[y/N/comment] ")
	s.sendNow(strings.Repeat("y", chatcli.MaxLine+1))
	s.waitFor("  ! that line is longer than 1048576 bytes: not used\nApprove issue_refund")
	s.waitFor("[y/N/comment] ")
	// Nor does a line that is not UTF-8 (a Latin-1 terminal's "oui,
	// r\xe9duit"): its comment would reach the agent changed.
	s.sendNow("oui, r\xe9duit")
	s.waitFor("  ! that line is not valid UTF-8 (is the terminal's encoding UTF-8?): not used\nApprove issue_refund")
	s.waitFor("[y/N/comment] ")
	s.send("no")
	if got := s.waitFor("you> "); !strings.Contains(got, "  denied\n") {
		t.Fatalf("the answer after the long line:\n%s", got)
	}
	s.quit()
}

// hostile is a chat server (or a model behind one) that puts terminal
// control sequences, line breaks and raw 8-bit C1 bytes in everything
// the client prints: the session id, tool names and arguments, a reply,
// an approval request and error answers.
type hostile struct {
	events chan string // SSE frames for the session's stream
}

// evil is what the hostile server's strings carry: an OSC title, a
// screen clear, an OSC 52 clipboard write, an OSC 8 hyperlink, a C1 CSI,
// a bidi override and a carriage return that would overwrite the line.
const evil = "\x1b]0;title\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4K\x07\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\u009b2J\u202eabc\rAmount: 1"

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	frame := func(id int, v any) string {
		b, _ := json.Marshal(v)
		return fmt.Sprintf("id: %d\ndata: %s\n\n", id, b)
	}
	adapterEv := func(id int, ev map[string]any) string {
		return frame(id, map[string]any{"id": id, "type": runtime.EventAdapterEvent, "requestId": "r1", "data": map[string]any{"event": ev}})
	}
	args, _ := json.Marshal(map[string]string{"a": evil})
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/evil":
		writeJSON(200, map[string]any{"session_id": "evil", "messages": []llm.Message{
			llm.UserText("hi" + evil),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "tool\n  approved\n" + evil, Arguments: args}}},
		}})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/evil/events":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for {
			select {
			case f := <-h.events:
				_, _ = io.WriteString(w, f)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions/evil/messages":
		sig := map[string]any{"signal_id": "approval:1\nApprove nothing? [y/N/comment] ", "metadata": map[string]any{
			"tool": "issue_refund\nApprove lookup_order {}? [y/N/comment] " + evil, "arguments": map[string]any{"a_pad": strings.Repeat(" ", 5000), "amount": "1000\rAmount: 1" + evil, "url": "https://x.test/?a=1&b=<2>"}}}
		for _, f := range []string{
			frame(1, map[string]any{"id": 1, "type": runtime.EventRequestStarted, "requestId": "r1"}),
			adapterEv(2, map[string]any{"phase": runtime.PhaseToolStart, "name": "lookup\n  approved\n" + evil, "args": map[string]any{"q": evil, "url": "https://x.test/?a=1&b=<2>"}}),
			adapterEv(3, map[string]any{"phase": runtime.PhaseToolResult, "name": "lookup" + evil, "output": evil}),
			adapterEv(4, map[string]any{"phase": runtime.PhaseToolResult, "name": "lookup" + evil, "error": evil}),
			adapterEv(5, map[string]any{"phase": runtime.PhaseOutputDelta, "text": "reply " + evil}),
			frame(6, map[string]any{"id": 6, "type": runtime.EventArtifactCreated, "requestId": "r1", "data": map[string]any{"artifact": map[string]any{"name": "file\n" + evil, "uri": "http://x\n" + evil}}}),
			frame(7, map[string]any{"id": 7, "type": runtime.EventRequestSuspended, "requestId": "r1", "data": map[string]any{"invocationId": "i1", "signal": sig}}),
		} {
			h.events <- f
		}
		writeJSON(200, map[string]any{"outcome": "suspended", "session_id": "evil", "run_id": "r1", "invocation_id": "i1",
			"pending_messages": []llm.Message{llm.AssistantText("reply " + evil)}, "signal": sig})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions/evil/signals":
		// Not JSON: the client shows the body's first line, which holds
		// raw 8-bit C1 bytes (CSI, OSC) besides the escapes.
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "boom "+evil+" \x9b2J \x9d0;t\x07 \xc2")
	case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions":
		writeJSON(200, map[string]any{"sessions": []map[string]any{{"session_id": "evil"}, {"session_id": "other\n* evil" + evil}}})
	default:
		writeJSON(http.StatusNotFound, map[string]any{"error": map[string]any{"code": "not_found\n" + evil, "message": "no such thing\nyou> " + evil}})
	}
}

// TestChatHostileServerText: whatever a server or its model puts in what
// the client prints reaches the terminal as text: no escape sequence,
// C1 control (as a character or a raw 8-bit byte), bidi override or
// carriage return, and no line break inside a one-line field (a tool's
// name, a session or signal id, an error), so that the approval prompt
// is one line the model cannot forge or overwrite. Before, a line break
// in a tool's name drew a fake approval prompt or "  approved" line, and
// a server's error answer that was not JSON passed raw 8-bit C1 bytes,
// which a terminal not in UTF-8 mode takes for CSI and OSC. Arguments
// show as they are (a URL's "&" was shown as \u0026), long ones above
// the question, which keeps the tool's name beside it (5000 spaces of
// padding pushed it off the screen).
func TestChatHostileServerText(t *testing.T) {
	h := &hostile{events: make(chan string, 16)}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, ""), Session: "evil", CatchUp: 200 * time.Millisecond})
	s.waitFor("you> ")
	s.send("/history")
	s.waitFor("you> ")
	s.send("/sessions")
	s.waitFor("you> ")
	s.send("/switch nope")
	s.waitFor("you> ")
	s.send("refund")
	prompt := s.waitFor(`(with the arguments above)? [y/N/comment] `)
	s.send("y")
	s.waitFor("error [502]: boom")
	// Asked again. The whole question: the forged one in the tool's
	// name, on the arguments' line printed before it, is not the
	// question, and a line sent on seeing it is typed before the
	// question (the client says so and waits for an answer).
	s.waitFor("(with the arguments above)? [y/N/comment] ")
	s.quit()

	out := s.out.String()
	if strings.ContainsAny(out, "\x1b\x07\r\u009b\u009d\u202e") {
		t.Errorf("the terminal was sent control characters:\n%q", out)
	}
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRuneInString(out[i:])
		if r == utf8.RuneError && size == 1 && out[i] >= 0x80 && out[i] <= 0x9f {
			t.Errorf("the terminal was sent the raw C1 byte %#x at %d: %q", out[i], i, out[max(0, i-20):i+1])
		}
		i += size
	}
	// Every line the client prints starts as the client starts its lines:
	// no line was begun by a server's text.
	starts := []string{"armature chat: ", "Type a message", "you> ", "agent> ", "  · ", "  ! ", "  (",
		"A turn of this session", "Approve issue_refund", "* evil", "  evil", "  other", ""}
	for _, line := range strings.Split(out, "\n") {
		if !slices.ContainsFunc(starts, func(p string) bool { return strings.HasPrefix(line, p) }) {
			t.Errorf("a line the client did not begin: %q", line)
		}
	}
	// The approval question is one line naming the tool; its long
	// arguments (padded by the model, so that they would push the tool's
	// name off the screen) show whole on the line above it.
	lines := strings.Split(prompt, "\n")
	question, args := lines[len(lines)-1], lines[len(lines)-2]
	if !strings.HasPrefix(question, `Approve issue_refund\nApprove lookup_order {}? [y/N/comment] \x1b]0;title\a`) || len(question) > 400 {
		t.Errorf("the approval question:\n%q", question)
	}
	for _, want := range []string{`  · issue_refund\nApprove lookup_order {}? [y/N/comment] \x1b]0;title\a`, " would be called with {\"a_pad\":\"     ",
		`","amount":"1000\rAmount: 1\u001b]0;title\u0007`, `"url":"https://x.test/?a=1&b=<2>"}`} {
		if !strings.Contains(args, want) {
			t.Errorf("the arguments above the approval question lack %q:\n%.300q", want, args)
		}
	}
	if !strings.Contains(out, `"url":"https://x.test/?a=1&b=<2>"}`+"\n") {
		t.Errorf("a tool call's arguments are not shown as they are:\n%s", out)
	}
	if n := strings.Count(out, `(with the arguments above)? [y/N/comment]   approved`+"\n"); n != 1 {
		t.Errorf("the user's approval shown %d times, want once:\n%s", n, out)
	}
}

// sendNow sends line as send does, and fails the test when the client
// does not read it: it stopped reading its input.
func (s *session) sendNow(line string) {
	s.t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := io.WriteString(s.in, line+"\n")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			s.t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		s.t.Fatalf("the client stopped reading its input; it printed:\n%.2000s", s.out.String()[s.mark:])
	}
}

// hangTransport holds back the requests hold matches until they are
// cancelled, as a server that stopped answering (stopped, or cut off by
// the network) would, or until the test ends.
type hangTransport struct {
	hold func(*http.Request) bool
	// held receives the method and path of each request held back.
	held chan string
	// release closes at the end of the test.
	release chan struct{}
}

func (h *hangTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.hold(r) {
		select {
		case h.held <- r.Method + " " + r.URL.Path:
		case <-h.release:
		}
		select {
		case <-r.Context().Done():
			return nil, context.Cause(r.Context())
		case <-h.release:
			return nil, errors.New("the test ended")
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestChatInterruptTwiceStopsWaiting: when the server stops answering
// during a turn, a first Ctrl-C asks it to cancel the turn, and a second
// (while that request hangs too, or after it) stops waiting: the client
// says so and goes back to the prompt, where it goes on. Before, the
// client waited for the server forever, and every Ctrl-C was lost on the
// cancel request that hung: only a kill ended it.
func TestChatInterruptTwiceStopsWaiting(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hang matches the requests the server does not answer.
		hang func(*http.Request) bool
		// held is how many requests hang before the second interrupt.
		held int
	}{
		{"the cancel hangs too", func(r *http.Request) bool {
			return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages") ||
				strings.HasSuffix(r.URL.Path, "/runs") || strings.HasSuffix(r.URL.Path, "/cancel")
		}, 2},
		{"the cancel is answered, the turn is not", func(r *http.Request) bool {
			return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages")
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newDemoServer(t)
			h := &hangTransport{held: make(chan string, 8), release: make(chan struct{})}
			var hanging atomic.Bool
			h.hold = func(r *http.Request) bool { return hanging.Load() && tc.hang(r) }
			c, err := chatcli.NewClient(chatcli.ClientConfig{Server: ts.URL, HTTPClient: &http.Client{Transport: h}})
			if err != nil {
				t.Fatal(err)
			}
			intr := make(chan struct{}, 1)
			s := startChat(t, chatcli.Config{Client: c, Session: "main", Interrupt: intr})
			t.Cleanup(func() { close(h.release) }) // before startChat's
			s.waitFor("you> ")
			hanging.Store(true)
			s.send("hello")
			<-h.held // the send
			intr <- struct{}{}
			s.waitFor("(cancelling the turn)")
			for range tc.held - 1 {
				<-h.held // the cancel's request
			}
			if tc.held == 1 {
				time.Sleep(100 * time.Millisecond) // the cancel's requests are answered
			}
			intr <- struct{}{}
			got := s.waitFor("you> ")
			if !strings.Contains(got, "(stopped waiting for the turn's answer: the turn may still run on the server)") || strings.Contains(got, "! ") {
				t.Fatalf("after the second interrupt:\n%s", got)
			}
			hanging.Store(false)
			s.send("still here")
			if got := s.waitFor("you> "); !strings.Contains(got, `You said: "still here"`) {
				t.Fatalf("the next turn:\n%s", got)
			}
			s.interruptEnds(intr)
		})
	}
}

// TestChatDotSessionIDs: "." and ".." cannot name a session in a URL
// path (a server cleans "/v1/sessions/.." to "/v1"): the client refuses
// them, as --session (Run returns ErrInvalidSessionID) and in /new and
// /switch (it says so and stays in its session). Before, --session .
// "continued" a session by reading the session list it was redirected
// to, and --session .. created a session that no request could reach.
func TestChatDotSessionIDs(t *testing.T) {
	ts := newDemoServer(t)
	c := newClient(t, ts.URL, "")
	for _, id := range []string{".", ".."} {
		var out strings.Builder
		err := chatcli.Run(t.Context(), chatcli.Config{Client: c, Session: id, In: strings.NewReader("hello\n"), Out: &out})
		if !errors.Is(err, chatcli.ErrInvalidSessionID) {
			t.Errorf("--session %s: %v, want ErrInvalidSessionID; printed:\n%s", id, err, out.String())
		}
	}
	s := startChat(t, chatcli.Config{Client: c, Session: "main"})
	s.waitFor("you> ")
	for _, cmd := range []string{"/switch .", "/switch ..", "/new ..", "/new ."} {
		s.send(cmd)
		if got := s.waitFor("you> "); !strings.Contains(got, "! chatcli: invalid session id") {
			t.Errorf("%s:\n%s", cmd, got)
		}
	}
	s.send("/sessions")
	if got := s.waitFor("you> "); !strings.Contains(got, "* main") || strings.Contains(got, " .") {
		t.Errorf("the sessions:\n%s", got)
	}
	s.quit()
	all, err := c.ListSessions(t.Context())
	if err != nil || len(all) != 1 || all[0].SessionID != "main" {
		t.Fatalf("the server's sessions: %+v, %v", all, err)
	}
}

// gateTransport holds back the requests hold matches until open closes.
type gateTransport struct {
	hold func(*http.Request) bool
	open chan struct{}
}

func (g *gateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if g.hold(r) {
		select {
		case <-g.open:
		case <-r.Context().Done():
			return nil, context.Cause(r.Context())
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestChatTypeAheadDoesNotAnswerAnApproval: lines typed while a turn
// runs, before its approval question shows (the next message typed
// ahead, a paste of several lines, a "yes" meant for something else),
// do not answer it: the client says so, asks again, and takes the line
// typed after the question. Before, the first line typed ahead answered
// the approval the user had not seen: "yes, and order 9?" approved a
// refund, and the next message was lost as a denial's comment.
func TestChatTypeAheadDoesNotAnswerAnApproval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ahead []string
	}{
		{"a yes", []string{"yes"}},
		{"the next message", []string{"yes, and where is order 9?"}},
		{"a paste", []string{"where is order 9?", "y", "/quit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newDemoServer(t)
			g := &gateTransport{open: make(chan struct{}),
				hold: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/messages") }}
			c, err := chatcli.NewClient(chatcli.ClientConfig{Server: ts.URL, HTTPClient: &http.Client{Transport: g}})
			if err != nil {
				t.Fatal(err)
			}
			s := startChat(t, chatcli.Config{Client: c, Session: "shop"})
			s.waitFor("you> ")
			s.send("refund order 7")
			s.send(strings.Join(tc.ahead, "\n")) // typed while the turn runs
			close(g.open)
			for _, line := range tc.ahead {
				s.waitFor("[y/N/comment] \n  ! typed before the question, so not its answer: " + line + "\nApprove issue_refund")
			}
			s.waitFor("[y/N/comment] ")
			s.send("no")
			if got := s.waitFor("you> "); !strings.Contains(got, "  denied\n") || strings.Contains(got, "approved") {
				t.Fatalf("the answer typed after the question:\n%s", got)
			}
			s.quit()
			sess, err := c.GetSession(t.Context(), "shop")
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range sess.Messages {
				if m.Role == llm.RoleTool && strings.Contains(m.Text(), "refunded") {
					t.Fatalf("the refund ran: %s", m.Text())
				}
			}
		})
	}
}
