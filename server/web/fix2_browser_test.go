package web_test

// Regression tests for the page's reconstruction of a session from its
// runs (decisions beyond the first page of runs, runs with more events
// than one answer holds), its own resent messages, and what a second
// attack on the page in a real browser found.

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
)

// TestBrowserDeniedBeyondFirstRunsPage: a call denied more than a page
// of runs ago (the run listing answers 50 at a time) still reads denied
// after a reload. Before, the page read the decisions of the newest 50
// runs only: after 51 more turns the denied call read done.
func TestBrowserDeniedBeyondFirstRunsPage(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	status := `(() => { const c = document.querySelector('details.tool[data-tool="issue_refund"]'); return c.dataset.status + ' ' + c.querySelector('.badge').textContent; })()`
	run(t, ctx, "deny a refund", append(firstMessage(ts.URL, "refund order 7"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.deny")),
		chromedp.Click(chromedp.CSS(".approval button.deny")),
		waitJS(`document.querySelector('.approval').dataset.resolved === 'denied'`),
		waitJS(`!document.querySelector('#send').disabled`),
	)...)
	session := sessionOf(t, ctx)
	// 51 more turns: the denial's runs are beyond the first page.
	for i := range 51 {
		var out struct {
			Outcome string `json:"outcome"`
		}
		if code := postJSON(t, ts.URL+"/v1/sessions/"+session+"/messages", map[string]any{"content": fmt.Sprintf("where is order %d?", i)}, &out); code != http.StatusOK || out.Outcome != "completed" {
			t.Fatalf("turn %d: %d %+v", i, code, out)
		}
	}
	run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelector('#history').textContent.includes('order 50: shipped')`),
	)
	// The history is longer than the page shows at first (see
	// TestBrowserLongHistoryPages): its first turns come with a click.
	for range 3 {
		if value(t, ctx, "look for the card", chromedp.Evaluate[bool](`document.querySelector('details.tool[data-tool="issue_refund"]') !== null`)) {
			break
		}
		run(t, ctx, "show earlier messages",
			chromedp.Click(chromedp.CSS("#history .earlier button")),
			waitJS(`!document.querySelector('#history .earlier button')?.disabled`),
		)
	}
	if got := value(t, ctx, "read the tool card", chromedp.Evaluate[string](status)); got != "denied denied" {
		t.Fatalf("after the reload the denied call's card reads %q, want %q", got, "denied denied")
	}
	noErrorCards(t, ctx, "after the reload")
}

// TestBrowserRetryIsNotAnotherClientsTurn: Retry after a drop resends
// the message under its message_id while the first send's turn still
// runs; the server opens a run for the resend (its started event names
// the same messageId) that ends as a replay of the first. The page
// knows the resend for its own: no other turn appears. Before, the
// resend's run showed as another client's turn (its "working" dots)
// until it ended.
func TestBrowserRetryIsNotAnotherClientsTurn(t *testing.T) {
	base, ctx, release := dropWhileStreaming(t)
	run(t, ctx, "retry while the turn still runs",
		// Every turn element added to the live log from now on.
		waitJS(`(window.addedTurns = [], new MutationObserver((ms) => { for (const m of ms) for (const n of m.addedNodes) if (n.classList?.contains('turn')) window.addedTurns.push(n); }).observe(document.querySelector('#live'), { childList: true }), true)`),
		chromedp.Click(chromedp.CSS("#live .card.error button.retry")),
		waitJS(`window.messageIDs.length === 2`),
	)
	// The resend's run has begun (it waits for the first): the session's
	// third run, after "hello there"'s and the first send's.
	waitRuns(t, base, sessionOf(t, ctx), 3)
	release()
	run(t, ctx, "the reply shows",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant .body')].some(e => e.textContent === 'before the drop and after it')`),
		waitJS(`!document.querySelector('#send').disabled && document.querySelector('#live .card.error') === null`),
	)
	if added := laterTurn(t, ctx, base, sessionOf(t, ctx)); len(added) != 0 {
		t.Errorf("turns added to the log after Retry: %q", strings.Join(added, " | "))
	}
	noErrorCards(t, ctx, "after the retry")
}

// chunkyModel is the test model whose answer to "many chunks" streams
// manyChunks words, one chunk each, a millisecond apart (chunks that
// come faster than the server records them are recorded together).
type chunkyModel struct{ testModel }

const manyChunks = 2000

func (m chunkyModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	if !strings.Contains(lastUser(req), "many chunks") {
		return m.testModel.Stream(ctx, req)
	}
	return func(yield func(*llm.Chunk, error) bool) {
		for i := range manyChunks {
			time.Sleep(time.Millisecond)
			if !yield(&llm.Chunk{Content: fmt.Sprintf("w%d ", i), Raw: json.RawMessage(`{}`)}, nil) {
				return
			}
		}
		yield(&llm.Chunk{FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil)
	}
}

// TestBrowserReloadAfterLongReply: the newest turn streamed more events
// than the server answers at once (a reply of 2000 chunks, one event
// each while the page watched); after a reload it shows once, in the
// history, and the inspector shows every event of its run. Before, the
// page took the last of the run's first 1000 events for the end of the
// stream: the event stream replayed the rest of the run, which showed
// again as another client's turn; and the inspector showed the first
// 1000 events only.
func TestBrowserReloadAfterLongReply(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: chunkyModel{}, System: "You are the Armature demo agent.", Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	// Every chunk recorded as it comes: a run of more than 1000 events.
	ts := servertest.New(t, a, func(c *server.Config) { c.LiveTextEvery = -1 })
	ctx := browser(t)
	last := fmt.Sprintf("w%d", manyChunks-1)
	run(t, ctx, "a long reply, streamed", append(firstMessage(ts.URL, "hello"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		chromedp.SendKeys(chromedp.CSS("#input"), "many chunks please"),
		enter(false),
		waitJS(fmt.Sprintf(`!document.querySelector('#send').disabled && [...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes(%q))`, last)),
	)...)
	run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(fmt.Sprintf(`document.querySelector('#history').textContent.includes(%q)`, last)),
	)
	caughtUp(t, ctx, ts.URL, sessionOf(t, ctx)) // a replayed turn shows by then
	if n := value(t, ctx, "count", chromedp.Evaluate[int](fmt.Sprintf(`[...document.querySelectorAll('.msg.assistant')].filter(e => e.textContent.includes(%q)).length`, last))); n != 1 {
		t.Errorf("the long reply shows %d times after the reload", n)
	}
	if n := value(t, ctx, "count turns", chromedp.Evaluate[int](`[...document.querySelectorAll('#live .turn')].filter(e => !e.textContent.includes('order 3: shipped')).length`)); n != 0 {
		t.Errorf("%d turns in the live log after the reload, but the later turn", n)
	}
	noErrorCards(t, ctx, "after the reload")

	// The inspector shows the run's every event (the long run is the
	// second newest, before the later turn's). Before, its first 1000: a
	// timeline without the run's end, its count 1000.
	run(t, ctx, "the inspector",
		chromedp.Navigate(ts.URL+"/#/runs/"+sessionOf(t, ctx)),
		waitJS(`document.querySelectorAll('#runs article.run').length === 3`),
	)
	got := value(t, ctx, "read the timeline", chromedp.Evaluate[string](`(() => { const r = document.querySelectorAll('#runs article.run')[1]; return r.querySelector("details.timeline summary").textContent + " " + [...r.querySelectorAll(".events li code.type")].at(-1).textContent ; })()`))
	t.Logf("the long run's timeline: %s", got)
	var n int
	var end string
	if _, err := fmt.Sscanf(got, "Event timeline (%d events) %s", &n, &end); err != nil || n <= 1000 || end != "request.completed" {
		t.Errorf("the long run's timeline reads %q, want more than 1000 events ending with request.completed", got)
	}
}

// TestRunListingSizes: GET /v1/sessions/{id}/runs takes ?page_size= and
// GET /v1/runs/{id}/events ?limit= (the page reads a long session in
// few requests); a size out of range is a 400. Before, both were
// ignored: 50 runs and 1000 events at most.
func TestRunListingSizes(t *testing.T) {
	ts := newDemoServer(t)
	var created struct {
		SessionID string `json:"session_id"`
	}
	postJSON(t, ts.URL+"/v1/sessions", map[string]any{}, &created)
	session := created.SessionID
	for i := range 3 {
		sendREST(t, ts.URL, session, fmt.Sprintf("where is order %d?", i))
	}
	var runs struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
		Next string `json:"next_page_token"`
	}
	getJSON := func(path string, out any) int {
		t.Helper()
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil && resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	if code := getJSON("/v1/sessions/"+session+"/runs?page_size=2", &runs); code != http.StatusOK || len(runs.Runs) != 2 || runs.Next == "" {
		t.Fatalf("page_size=2: %d, %d runs, next %q", code, len(runs.Runs), runs.Next)
	}
	first := runs.Runs[0].ID
	if code := getJSON("/v1/sessions/"+session+"/runs?page_size=2&page_token="+runs.Next, &runs); code != http.StatusOK || len(runs.Runs) != 1 || runs.Next != "" {
		t.Fatalf("the second page: %d, %d runs, next %q", code, len(runs.Runs), runs.Next)
	}
	var evs struct {
		Events []struct {
			ID int64 `json:"id"`
		} `json:"events"`
	}
	if code := getJSON("/v1/runs/"+first+"/events?limit=1", &evs); code != http.StatusOK || len(evs.Events) != 1 {
		t.Fatalf("limit=1: %d, %d events", code, len(evs.Events))
	}
	if code := getJSON(fmt.Sprintf("/v1/runs/%s/events?limit=1&after=%d", first, evs.Events[0].ID), &evs); code != http.StatusOK || len(evs.Events) != 1 {
		t.Fatalf("limit=1 after the first: %d, %d events", code, len(evs.Events))
	}
	for _, path := range []string{
		"/v1/sessions/" + session + "/runs?page_size=0",
		"/v1/sessions/" + session + "/runs?page_size=1001",
		"/v1/sessions/" + session + "/runs?page_size=ten",
		"/v1/runs/" + first + "/events?limit=0",
		"/v1/runs/" + first + "/events?limit=10001",
		"/v1/runs/" + first + "/events?limit=-1",
	} {
		if code := getJSON(path, nil); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", path, code)
		}
	}
}

// TestBrowserTwoTabsApproveAndDenyAtOnce: tab A approves and tab B
// denies the same card at the same instant. One decision wins: both
// tabs then show its outcome (the refund done, or denied) once, the
// winner's card labelled with its decision and the loser's with the
// winner's, "elsewhere"; neither shows an error.
func TestBrowserTwoTabsApproveAndDenyAtOnce(t *testing.T) { approveAndDenyAtOnce(t, 0) }

// TestBrowserTwoTabsApproveAndDenyLaggingStream: as
// TestBrowserTwoTabsApproveAndDenyAtOnce, with tab B's event stream 200
// ms behind the server.
func TestBrowserTwoTabsApproveAndDenyLaggingStream(t *testing.T) { approveAndDenyAtOnce(t, 200) }

// approveAndDenyAtOnce has tab A approve and tab B deny the same card at
// the same instant; B's event stream lags by lag milliseconds.
func approveAndDenyAtOnce(t *testing.T, lag int) {
	ts, a, b := twoTabsOnACard(t)
	lagStream(t, b, lag)
	at := time.Now().Add(300 * time.Millisecond).UnixMilli()
	click := func(button string) chromedp.Action[chromedp.Void] {
		return waitJS(fmt.Sprintf(`(setTimeout(() => document.querySelector('.approval button.%s').click(), %d - Date.now()), true)`, button, at))
	}
	run(t, a, "tab A approves", click("approve"))
	run(t, b, "tab B denies", click("deny"))
	settled := `['approved', 'approved elsewhere', 'denied', 'denied elsewhere'].includes(document.querySelector('.approval').dataset.resolved) && !document.querySelector('.turn .thinking') && !document.querySelector('#send').disabled && ['done', 'denied'].includes(document.querySelector('details.tool[data-tool="issue_refund"]').dataset.status)`
	read := `document.querySelector('.approval').dataset.resolved + ' ' + document.querySelector('details.tool[data-tool="issue_refund"]').dataset.status`
	got := map[string]string{}
	for name, ctx := range map[string]context.Context{"A": a, "B": b} {
		run(t, ctx, "tab "+name+" settles", waitJS(settled))
	}
	// Let every run of both answers reach both pages' streams.
	sendREST(t, ts.URL, sessionOf(t, a), "where is order 3?")
	for name, ctx := range map[string]context.Context{"A": a, "B": b} {
		run(t, ctx, "a later turn in tab "+name, waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 3: shipped'))`))
		got[name] = value(t, ctx, "read tab "+name, chromedp.Evaluate[string](read))
		noErrorCards(t, ctx, "tab "+name)
	}
	approved := map[string]string{"A": "approved done", "B": "approved elsewhere done"}
	denied := map[string]string{"A": "denied elsewhere denied", "B": "denied denied"}
	if !maps.Equal(got, approved) && !maps.Equal(got, denied) {
		t.Fatalf("the tabs read %q, want %q or %q", got, approved, denied)
	}
	t.Logf("the tabs read %q", got)
	reply := map[string]string{"A": "refunded \x2430.00 for order 7", "B": "denied"}[map[bool]string{true: "A", false: "B"}[maps.Equal(got, approved)]]
	for name, ctx := range map[string]context.Context{"A": a, "B": b} {
		if n := value(t, ctx, "count replies", chromedp.Evaluate[int](fmt.Sprintf(`[...document.querySelectorAll('#live .msg.assistant')].filter(e => e.textContent.includes(%q)).length`, reply))); n != 1 {
			t.Errorf("tab %s: the resumed reply (%q) shows %d times", name, reply, n)
		}
	}
}

// TestBrowserInspectorArgsShown: the run inspector shows the arguments a
// model padded as the approval card does, every character that would
// not show as itself an escape, in its tool table and its timeline.
// Before, it showed them raw: a line separator drew a fake "amount:
// 1.00" line and a bidi override reversed the text after it, so the
// record of what ran read as another call.
func TestBrowserInspectorArgsShown(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	run(t, ctx, "a padded refund, approved", append(firstMessage(ts.URL, "padded refund please"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		chromedp.Click(chromedp.CSS(".approval button.approve")),
		waitJS(`['done', 'failed'].includes(document.querySelector('details.tool[data-tool="issue_refund"]').dataset.status)`),
	)...)
	run(t, ctx, "the inspector",
		chromedp.Navigate(ts.URL+"/#/runs/"+sessionOf(t, ctx)),
		waitJS(`[...document.querySelectorAll('#runs table.tools code')].some(e => e.textContent === 'issue_refund')`),
	)
	hidden := `/[\u2028\u3000\u200b\u202e\t]/`
	for _, c := range []struct{ what, sel string }{
		{"the tool table", `#runs table.tools tbody tr td:nth-child(2) pre`},
		{"the timeline", `#runs .events .detail`},
	} {
		got := value(t, ctx, "read "+c.what, chromedp.Evaluate[string](fmt.Sprintf(`[...document.querySelectorAll(%q)].map(e => e.textContent).filter(s => s.includes('amount: 1.00')).join(' | ')`, c.sel)))
		if got == "" || !strings.Contains(got, `7\u2028amount: 1.00`) || !strings.Contains(got, `c\u202ed`) {
			t.Errorf("%s shows the arguments as %q..., want their escapes", c.what, got[:min(len(got), 160)])
		}
		if raw := value(t, ctx, "look for raw characters in "+c.what, chromedp.Evaluate[bool](fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => %s.test(e.textContent))`, c.sel, hidden))); raw {
			t.Errorf("%s shows characters that do not show as themselves", c.what)
		}
	}
}

// TestBrowserResendSeenLate: the page's message is sent again under its
// message_id while its turn runs (as a browser retransmits a POST whose
// connection dropped); the resend's run (it waits for the first, then
// ends as its replay) reaches the page only after the page's POST was
// answered, its event stream 1.5 s behind. The page knows the run for
// its own message's: no turn is added. Before, it showed as another
// client's turn until its end came.
func TestBrowserResendSeenLate(t *testing.T) {
	ts, release := gatedDemo(t)
	t.Cleanup(release)
	ctx := browser(t)
	run(t, ctx, "a first turn; the stream lags", append(firstMessage(ts.URL, "hello there"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`(window.lagged = 0, window.messageIDs = [], window.fetch = ((f) => async (u, o) => {
			if (String(u).endsWith('/messages')) window.messageIDs.push(JSON.parse(o.body).message_id);
			const r = await f(u, o);
			if (!/\/sessions\/[^/]+\/events$/.test(String(u)) || !r.body) return r;
			window.lagged++;
			const src = r.body.getReader();
			const later = (fn) => setTimeout(fn, 1500);
			const body = new ReadableStream({ start(c) {
				(async () => { for (;;) { const { value, done } = await src.read(); if (done) return later(() => c.close()); later(() => c.enqueue(value)); } })().catch((e) => later(() => c.error(e)));
			}, cancel: (why) => src.cancel(why) });
			return new Response(body, { status: r.status, statusText: r.statusText, headers: r.headers });
		})(window.fetch), dispatchEvent(new Event('online')), true)`),
		waitJS(`window.lagged >= 1 && document.querySelector('#conn').dataset.state === 'live'`),
		chromedp.SendKeys(chromedp.CSS("#input"), "a gated story"),
		enter(false),
		waitJS(`window.messageIDs.length === 1`),
		waitJS(`(window.addedTurns = [], new MutationObserver((ms) => { for (const m of ms) for (const n of m.addedNodes) if (n.classList?.contains('turn')) window.addedTurns.push(n); }).observe(document.querySelector('#live'), { childList: true }), true)`),
		// The first send's run has begun.
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('before the drop'))`),
	)...)
	session := sessionOf(t, ctx)
	mid := value(t, ctx, "read the message id", chromedp.Evaluate[string](`window.messageIDs[0]`))
	resent := make(chan int, 1)
	go func() {
		b, _ := json.Marshal(map[string]string{"content": "a gated story", "message_id": mid})
		resp, err := http.Post(ts.URL+"/v1/sessions/"+session+"/messages", "application/json", strings.NewReader(string(b)))
		if err != nil {
			resent <- 0
			return
		}
		resp.Body.Close()
		resent <- resp.StatusCode
	}()
	// The resend's run has begun (it waits for the first): the session's
	// third run, after "hello there"'s and the first send's.
	waitRuns(t, ts.URL, session, 3)
	release()
	if code := <-resent; code != http.StatusOK {
		t.Fatalf("the resend: %d", code)
	}
	run(t, ctx, "the reply shows",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant .body')].some(e => e.textContent === 'before the drop and after it')`),
		waitJS(`!document.querySelector('#send').disabled`),
	)
	if added := laterTurn(t, ctx, ts.URL, session); len(added) != 0 {
		t.Errorf("turns added to the log after the send: %q", strings.Join(added, " | "))
	}
	if users := userMessages(t, ts.URL, session); strings.Join(users, "|") != "hello there|a gated story|where is order 3?" {
		t.Errorf("the session's user messages: %q (the turn ran twice?)", users)
	}
	noErrorCards(t, ctx, "after the resend")
}

// TestBrowserRemoteFailedTurn: another client's message fails (its turn
// commits nothing); the page shows its error without an earlier
// message's text as its message. Before, it showed the session's last
// user message, the previous turn's, as the failed turn's.
func TestBrowserRemoteFailedTurn(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	run(t, ctx, "a first turn", append(firstMessage(ts.URL, "hello there"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
	)...)
	session := sessionOf(t, ctx)
	var out struct {
		Outcome string `json:"outcome"`
	}
	postJSON(t, ts.URL+"/v1/sessions/"+session+"/messages", map[string]any{"content": "boom"}, &out)
	if out.Outcome != "errored" {
		t.Fatalf("the failing turn: %+v", out)
	}
	run(t, ctx, "the failed turn shows", waitJS(`document.querySelectorAll('#live .card.error').length === 1`))
	if n := value(t, ctx, "count", chromedp.Evaluate[int](`[...document.querySelectorAll('#live .msg.user')].filter(e => e.textContent.includes('hello there')).length`)); n != 1 {
		t.Errorf("the first message shows %d times", n)
	}
	// Another client's turn that completes shows its own message.
	sendREST(t, ts.URL, session, "where is order 5?")
	run(t, ctx, "a completed turn shows",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 5: shipped'))`),
		waitJS(`[...document.querySelectorAll('#live .msg.user')].some(e => e.textContent.includes('where is order 5?'))`))
	got := value(t, ctx, "read the user messages", chromedp.Evaluate[string](`[...document.querySelectorAll('#live .msg.user')].map(e => e.textContent).join(' | ')`))
	if got != "Youhello there | Youwhere is order 5?" {
		t.Errorf("the live log's user messages: %q", got)
	}
}

// TestBrowserNotRunAfterReload: a call whose approval a new message
// superseded, and one whose suspended turn was cancelled, still read
// "not run" after a reload, as they did before it (the messages say it
// only in words; the runs that closed their turns say it, by their
// cancelled event's cause). Before, after a reload both read done. The
// page goes by the cause, not by the reason's words (a proxy rewrites
// them), and for runs an earlier server recorded without a cause (a
// proxy strips it), by the reason's words.
func TestBrowserNotRunAfterReload(t *testing.T) {
	runEvents := func(path string) bool {
		return strings.HasPrefix(path, "/v1/runs/") && strings.HasSuffix(path, "/events")
	}
	cancelled := func(page map[string]any, edit func(data map[string]any)) {
		evs, _ := page["events"].([]any)
		for _, e := range evs {
			if ev, _ := e.(map[string]any); ev["type"] == "runtime.request.cancelled" {
				if data, ok := ev["data"].(map[string]any); ok {
					edit(data)
				}
			}
		}
	}
	for _, tc := range []struct {
		name  string
		serve func(t *testing.T, base string) string
	}{
		{"as recorded", func(_ *testing.T, base string) string { return base }},
		{"reasons reworded", func(t *testing.T, base string) string {
			return rewritingProxy(t, base, runEvents, func(page map[string]any) {
				cancelled(page, func(data map[string]any) { data["reason"] = "words the page must not go by" })
			})
		}},
		{"recorded without a cause", func(t *testing.T, base string) string {
			return rewritingProxy(t, base, runEvents, func(page map[string]any) {
				cancelled(page, func(data map[string]any) { delete(data, "cause") })
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { notRunAfterReload(t, tc.serve(t, newDemoServer(t).URL)) })
	}
}

// notRunAfterReload is TestBrowserNotRunAfterReload against the server
// at base.
func notRunAfterReload(t *testing.T, base string) {
	ts := struct{ URL string }{base}
	ctx := browser(t)
	statuses := `[...document.querySelectorAll('details.tool[data-tool="issue_refund"]')].map(e => e.dataset.status + ' ' + e.querySelector('.badge').textContent).join(', ')`
	const want = "not-run not run, not-run not run"
	run(t, ctx, "a refund superseded by a new message", append(firstMessage(ts.URL, "refund order 8"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		chromedp.SendKeys(chromedp.CSS("#input"), "where is order 3?"),
		enter(false),
		waitJS(`document.querySelector('#live details.tool[data-tool="issue_refund"]').dataset.status === 'not-run'`),
		waitJS(`!document.querySelector('#send').disabled`),
		chromedp.SendKeys(chromedp.CSS("#input"), "refund order 9"),
		enter(false),
		waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 1`),
	)...)
	session := sessionOf(t, ctx)
	var res map[string]any
	if code := postJSON(t, ts.URL+"/v1/runs/"+suspendedRun(t, ts.URL, session)+"/cancel", map[string]any{}, &res); code != http.StatusAccepted || res["cancelled"] != true {
		t.Fatalf("cancel: %d %v", code, res)
	}
	run(t, ctx, "the cancelled card closes",
		waitJS(`document.querySelectorAll('#live details.tool[data-tool="issue_refund"][data-status="not-run"]').length === 2`),
		// The next message closes the cancelled call in the history.
		chromedp.SendKeys(chromedp.CSS("#input"), "where is order 4?"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 4'))`),
		waitJS(`!document.querySelector('#send').disabled`),
	)
	if got := value(t, ctx, "read the tool cards", chromedp.Evaluate[string](statuses)); got != want {
		t.Fatalf("before the reload the tool cards read %q, want %q", got, want)
	}
	run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelectorAll('#history details.tool[data-tool="issue_refund"]').length === 2`),
	)
	if got := value(t, ctx, "read the tool cards", chromedp.Evaluate[string](statuses)); got != want {
		t.Fatalf("after the reload the tool cards read %q, want %q", got, want)
	}
	noErrorCards(t, ctx, "after the reload")
}

// waitRuns waits until the session has n runs or more (a run is listed
// from its start).
func waitRuns(t *testing.T, base, session string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var out struct {
			Runs []json.RawMessage `json:"runs"`
		}
		resp, err := http.Get(base + "/v1/sessions/" + session + "/runs")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Runs) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session has %d runs after 20s, want %d", len(out.Runs), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// caughtUp sends "where is order 3?" as another client and waits for
// its reply in the page: the page has handled every event before its
// run's by then (a late duplicate of an earlier turn would show).
func caughtUp(t *testing.T, ctx context.Context, base, session string) {
	t.Helper()
	sendREST(t, base, session, "where is order 3?")
	run(t, ctx, "a later turn shows", waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 3: shipped'))`))
}

// laterTurn sends "where is order 3?" as another client and waits for
// its reply in the page: every event before its run's (a resend's run
// the lagging stream brings late) has been handled by then. It returns
// the text of the turns added to the live log since window.addedTurns
// began to collect them (a MutationObserver's), but the later turn's.
func laterTurn(t *testing.T, ctx context.Context, base, session string) []string {
	t.Helper()
	caughtUp(t, ctx, base, session)
	return value(t, ctx, "read the added turns", chromedp.Evaluate[[]string](`window.addedTurns.filter(n => !n.textContent.includes('order 3: shipped')).map(n => n.textContent)`))
}
