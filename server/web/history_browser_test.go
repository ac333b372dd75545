package web_test

import (
	"context"
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

	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
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

// TestBrowserLongTurnOpensAtItsStart: a session whose last turn is
// longer than a page (a model that called a tool 150 times: 302
// messages, after 150 short turns) opens with that turn from its user
// message, every call's card with its result, and the turns before it
// on the page it read to find that message; "Show earlier messages"
// then shows the rest, every user message once, in order. Before, the
// page opened 200 messages from the end, mid-turn, on a tool result
// whose call was on the page before: 100 cards and no user message.
func TestBrowserLongTurnOpensAtItsStart(t *testing.T) {
	store := servertest.SQLite(t)
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.On(t, store, a)
	const id, short, calls = "longturn", 150, 150
	var msgs, users []string
	for i := range short {
		users = append(users, fmt.Sprintf("Youquestion %d", i))
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"question %d"}`, i), fmt.Sprintf(`{"role":"assistant","content":"answer %d"}`, i))
	}
	users = append(users, "Youcheck every order")
	msgs = append(msgs, `{"role":"user","content":"check every order"}`)
	for i := range calls {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","tool_calls":[{"id":"call_%d","name":"lookup_order","arguments":{"order":"%d"}}]}`, i, i),
			fmt.Sprintf(`{"role":"tool","content":"order %d: shipped","tool_call_id":"call_%d"}`, i, i))
	}
	msgs = append(msgs, `{"role":"assistant","content":"Every order has shipped."}`)
	ctx := context.Background()
	key := server.DefaultTenant + "/" + id
	w, err := store.Save(ctx, session.SaveRequest{SessionID: key, State: map[string]json.RawMessage{"messages": json.RawMessage(`[]`)}})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		items[i] = json.RawMessage(m)
	}
	if _, err := store.Append(ctx, session.AppendRequest{SessionID: key, ExpectedVersion: w.Version,
		Append: map[string][]json.RawMessage{"messages": items}}); err != nil {
		t.Fatal(err)
	}
	bctx := browser(t)
	run(t, bctx, "open the session",
		chromedp.Navigate(ts.URL+"/#/s/"+id),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelectorAll('#history details.tool').length > 0`),
	)
	const read = `(() => {
		const h = document.querySelector('#history');
		const users = [...h.querySelectorAll('.msg.user')].map((e) => e.textContent);
		const cards = [...h.querySelectorAll('details.tool')];
		const done = cards.filter((c) => c.dataset.status === 'done').length;
		return JSON.stringify({users, cards: cards.length, done, earlier: !!h.querySelector('.earlier button')});
	})()`
	type shown struct {
		Users       []string
		Cards, Done int
		Earlier     bool
	}
	var got shown
	if err := json.Unmarshal([]byte(value(t, bctx, "read the history", chromedp.Evaluate[string](read))), &got); err != nil {
		t.Fatal(err)
	}
	// The page read to the turn's start began at message 202, question 101.
	if got.Cards != calls || got.Done != calls || !got.Earlier || strings.Join(got.Users, "|") != strings.Join(users[101:], "|") {
		t.Fatalf("opened: %d cards, %d done, earlier %v, users %q; want %d done, earlier, users from %q", got.Cards, got.Done, got.Earlier, got.Users, calls, users[101])
	}
	for more := 0; got.Earlier; more++ {
		if more > 5 {
			t.Fatal("still earlier messages after 5 pages")
		}
		n := len(got.Users)
		run(t, bctx, "show earlier messages",
			chromedp.Click(chromedp.CSS("#history .earlier button")),
			waitJS(fmt.Sprintf(`document.querySelectorAll('#history .msg.user').length > %d`, n)),
		)
		if err := json.Unmarshal([]byte(value(t, bctx, "read the history", chromedp.Evaluate[string](read))), &got); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got.Users, "|") != strings.Join(users, "|") || got.Done != calls {
		t.Fatalf("after showing every earlier message: %d done, users %q", got.Done, got.Users)
	}
	noErrorCards(t, bctx, "the long turn")
}
