package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserLongHistoryPages: a session longer than a page opens at
// its newest messages (from a turn's start) with a button for the
// earlier ones; the button reads them a page at a time until the first
// message, with the decisions recorded long ago (a denied refund among
// the first turns) shown as they were, and a turn sent then is shown
// after the history with its message. The session's runs are listed as
// far back as the history shown. Before, the page read and drew the
// whole history on opening, with every run of the session and the
// events of every resumed one, and read the history whole again after
// every turn it sent.
func TestBrowserLongHistoryPages(t *testing.T) {
	// The run listing answers 5 runs a page here (the page asks for
	// 1000): the page lists the runs only as far back as the history it
	// shows.
	backend := newDemoServer(t)
	u, err := url.Parse(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var runPages, eventReads atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/runs/") && strings.HasSuffix(r.URL.Path, "/events") {
			eventReads.Add(1)
		}
		if strings.HasSuffix(r.URL.Path, "/runs") {
			q := r.URL.Query()
			q.Set("page_size", "5")
			r.URL.RawQuery = q.Encode()
			runPages.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	const session = "long"
	var sus struct {
		Signal struct {
			SignalID string `json:"signal_id"`
		} `json:"signal"`
	}
	if code := postJSON(t, ts.URL+"/v1/sessions/"+session+"/messages", map[string]string{"content": "refund order 3"}, &sus); code != 200 || sus.Signal.SignalID == "" {
		t.Fatalf("refund: %d %+v", code, sus)
	}
	if code := postJSON(t, ts.URL+"/v1/sessions/"+session+"/signals", map[string]any{"signal_id": sus.Signal.SignalID,
		"payload": map[string]any{"approval": map[string]any{"approved": false}}}, nil); code != 200 {
		t.Fatalf("deny: %d", code)
	}
	const turns = 250 // about 1000 messages: five pages
	for i := range turns {
		sendREST(t, ts.URL, session, fmt.Sprintf("where is order %d?", i+1))
	}
	resp, err := http.Get(backend.URL + "/v1/sessions/" + session)
	if err != nil {
		t.Fatal(err)
	}
	var whole struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	err = json.NewDecoder(resp.Body).Decode(&whole)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, m := range whole.Messages {
		if m.Role == "user" {
			users++
		}
	}
	if len(whole.Messages) < 4*turns || users != turns+1 {
		t.Fatalf("the session holds %d messages, %d from the user", len(whole.Messages), users)
	}
	ctx := browser(t)
	userCount := `document.querySelectorAll('#history .msg.user').length`
	run(t, ctx, "open the long session",
		chromedp.Navigate(ts.URL+"/#/s/"+session),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelector('#history .earlier button') !== null`),
	)
	// The newest 50 turns' runs and 20 more, five a page: 15 pages of
	// the 51 the session has (and one for a run listed meanwhile).
	t.Logf("opening the session read %d pages of runs and the events of runs %d times", runPages.Load(), eventReads.Load())
	if n := runPages.Load(); n > 16 {
		t.Errorf("opening the session read %d pages of runs; its history shown needs 15", n)
	}
	// The newest run's events (where the stream goes on), not those of
	// every run: the runs report their failed tools.
	if n := eventReads.Load(); n > 5 {
		t.Errorf("opening the session read runs' events %d times", n)
	}
	first := value(t, ctx, "count the user messages", chromedp.Evaluate[int](userCount))
	if first < 40 || first > 51 {
		t.Fatalf("the page opened with %d user messages; want a page's (about 50)", first)
	}
	if lead := value(t, ctx, "read the first message", chromedp.Evaluate[string](`document.querySelector('#history .turn > .msg').className`)); lead != "msg user" {
		t.Errorf("the history shown begins with %q, not a turn's user message", lead)
	}
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("the button never reached the first message")
		}
		more := value(t, ctx, "look for the button", chromedp.Evaluate[bool](`document.querySelector('#history .earlier button') !== null`))
		if !more {
			break
		}
		before := value(t, ctx, "count", chromedp.Evaluate[int](userCount))
		run(t, ctx, "show earlier messages",
			chromedp.Click(chromedp.CSS("#history .earlier button")),
			waitJS(userCount+` > `+fmt.Sprint(before)),
			waitJS(`!document.querySelector('#history .earlier button')?.disabled`),
		)
	}
	t.Logf("the whole history read %d pages of runs", runPages.Load())
	if n := runPages.Load(); n > 52 {
		t.Errorf("the whole history read %d pages of runs; the session has 51", n)
	}
	if n := value(t, ctx, "count", chromedp.Evaluate[int](userCount)); n != turns+1 {
		t.Errorf("the whole history shows %d user messages, want %d", n, turns+1)
	}
	texts := value(t, ctx, "read the user messages", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#history .msg.user .body')].map(e => e.textContent)`))
	for i, want := range append([]string{"refund order 3"}, func() []string {
		var w []string
		for i := range turns {
			w = append(w, fmt.Sprintf("where is order %d?", i+1))
		}
		return w
	}()...) {
		if i >= len(texts) || texts[i] != want {
			t.Fatalf("user message %d reads %q, want %q (the pages out of order or repeated)", i, texts[min(i, len(texts)-1)], want)
		}
	}
	status := value(t, ctx, "read the refund's card", chromedp.Evaluate[string](`document.querySelector('#history details.tool[data-tool="issue_refund"]').dataset.status`))
	if status != "denied" {
		t.Errorf("the refund denied in the first turn shows %q", status)
	}
	if n := value(t, ctx, "count the tool cards", chromedp.Evaluate[int](`document.querySelectorAll('#history details.tool[data-status="done"]').length`)); n != turns {
		t.Errorf("%d lookups show done, want %d", n, turns)
	}
	run(t, ctx, "a turn after the history",
		chromedp.SendKeys(chromedp.CSS("#input"), "where is order 999?"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .msg.user')].some(e => e.textContent.includes('where is order 999?'))`),
		waitJS(`!document.querySelector('#send').disabled`),
		waitJS(`[...document.querySelectorAll('#live details.tool[data-status="done"]')].length === 1`),
	)
	noErrorCards(t, ctx, "the long session")
}
