package chatcli_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/chatcli"
)

// TestChatHistoryPages: armature chat reads a session's length, not its
// history, on entering it; /history shows the newest 50 messages from a
// turn's start and says how many came before, /history <n> the newest
// n, /history all every one, and a bad argument its usage. Before, the
// client read the whole history on entering a session and on every
// /history.
func TestChatHistoryPages(t *testing.T) {
	ts := newDemoServer(t)
	c := newClient(t, ts.URL, "")
	const turns = 30
	for i := range turns {
		if _, err := c.Send(t.Context(), "long", fmt.Sprintf("where is order %d?", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	whole, err := c.GetSession(t.Context(), "long")
	if err != nil {
		t.Fatal(err)
	}
	n := len(whole.Messages)
	if n != 4*turns || whole.MessageCount != n || whole.MessageOffset != 0 {
		t.Fatalf("the whole history: %d messages, count %d from %d", n, whole.MessageCount, whole.MessageOffset)
	}
	page, err := c.SessionPage(t.Context(), "long", 6, 10)
	if err != nil || page.MessageOffset != 4 || page.MessageCount != n || len(page.Messages) != 6 || page.Messages[0].Text() != whole.Messages[4].Text() {
		t.Fatalf("SessionPage(6 before 10): %+v, %v", page, err)
	}
	for _, bad := range []int{0, -1, chatcli.MaxHistoryPage + 1} {
		if _, err := c.SessionPage(t.Context(), "long", bad, -1); err == nil {
			t.Errorf("SessionPage of %d messages: no error", bad)
		}
	}

	var gets []string
	counted := &countTransport{seen: func(r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/long" {
			gets = append(gets, r.URL.RawQuery)
		}
	}}
	cc, err := chatcli.NewClient(chatcli.ClientConfig{Server: ts.URL, HTTPClient: &http.Client{Transport: counted}})
	if err != nil {
		t.Fatal(err)
	}
	s := startChat(t, chatcli.Config{Client: cc, Session: "long"})
	s.waitFor(fmt.Sprintf("continuing session long on %s (%d messages; /history shows them)\n", ts.URL, n))
	s.waitFor("you> ")
	s.send("/history")
	end := fmt.Sprintf("found: order %d: shipped, arriving Thursday\nyou> ", turns) // the last reply, then the prompt
	got := s.waitFor(end)
	if !strings.HasPrefix(got, fmt.Sprintf("(%d earlier messages: /history <n> or /history all shows them)\nyou> where is order %d?\n", n-48, turns-11)) {
		t.Errorf("/history begins:\n%.300s", got)
	}
	if c := strings.Count(got, "you> where is order"); c != 12 {
		t.Errorf("/history shows %d turns, want 12 (48 messages from a turn's start)", c)
	}
	s.send("/history 4")
	got = s.waitFor(end)
	if !strings.HasPrefix(got, fmt.Sprintf("(%d earlier messages", n-4)) || !strings.Contains(got, fmt.Sprintf("you> where is order %d?\n", turns)) {
		t.Errorf("/history 4:\n%s", got)
	}
	s.send("/history all")
	got = s.waitFor(end)
	if strings.Contains(got, "earlier messages") || strings.Count(got, "you> where is order") != turns {
		t.Errorf("/history all:\n%.300s", got)
	}
	for _, bad := range []string{"/history x", "/history 0", "/history 10001"} {
		s.send(bad)
		if got := s.waitFor("you> "); !strings.HasPrefix(got, "usage: /history [n | all]") {
			t.Errorf("%s: %s", bad, got)
		}
	}
	s.quit()
	want := []string{"limit=1", "limit=50", "limit=4", ""}
	if strings.Join(gets, " ") != strings.Join(want, " ") {
		t.Errorf("the client read the history as %q, want %q", gets, want)
	}
}

// countTransport calls seen with every request it sends.
type countTransport struct{ seen func(*http.Request) }

func (c *countTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.seen(r)
	return http.DefaultTransport.RoundTrip(r)
}
