package web_test

// Regression tests for what a third attack on the page in a real
// browser found: background tabs holding every connection, a turn in one
// session blocking the composer of another, and session ids of dots.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
)

// waitStreams waits until the server holds want event streams.
func waitStreams(t *testing.T, base string, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for got := servertest.Gauge(t, base, "armature_sse_streams"); got != want; got = servertest.Gauge(t, base, "armature_sse_streams") {
		if time.Now().After(deadline) {
			t.Fatalf("event streams: %v, want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hide makes the page hidden (a background tab) or shown again, as the
// browser tells it: document.visibilityState and a visibilitychange
// event.
func hide(hidden bool) chromedp.Action[chromedp.Void] {
	js := `(delete document.visibilityState, document.dispatchEvent(new Event('visibilitychange')), true)`
	if hidden {
		js = `(Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' }), document.dispatchEvent(new Event('visibilitychange')), true)`
	}
	return waitJS(js)
}

// TestBrowserHiddenTabPausesStream: a hidden page (a background tab)
// closes its event stream, and reopens it from its last event once
// shown, with what happened meanwhile. Before, every tab held a stream
// open: a browser allows six connections to a server over HTTP/1.1 for
// all its tabs, so with six tabs open every message of every tab waited
// forever, and a seventh tab never loaded.
func TestBrowserHiddenTabPausesStream(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	run(t, ctx, "open the session",
		chromedp.Navigate(ts.URL+"/#/s/bg"),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
	)
	waitStreams(t, ts.URL, 1)
	run(t, ctx, "hidden", hide(true), waitJS(`document.querySelector('#conn').dataset.state === 'paused'`))
	waitStreams(t, ts.URL, 0)
	sendREST(t, ts.URL, "bg", "where is order 12?")
	run(t, ctx, "shown again: the turn meanwhile streams in",
		hide(false),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 12: shipped'))`),
	)
	waitStreams(t, ts.URL, 1)
	noErrorCards(t, ctx, "after the pause")
}

// TestBrowserSendWhileAnotherSessionsTurnRuns: a message sent in one
// session while this page's turn in another still runs is sent. Before,
// the composer stayed disabled (Enter did nothing) until the other
// session's turn ended, up to the model's timeout.
func TestBrowserSendWhileAnotherSessionsTurnRuns(t *testing.T) {
	ts, ctx, release := gatedTurn(t, "a")
	run(t, ctx, "its composer waits", waitJS(`document.querySelector('#send').disabled`))
	run(t, ctx, "session b: its message is sent and answered",
		chromedp.Navigate(ts.URL+"/#/s/b"),
		waitJS(`document.querySelector('#chat-title').textContent === 'Session b'`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`!document.querySelector('#send').disabled`),
		chromedp.SendKeys(chromedp.CSS("#input"), "hello b"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
	)
	if got := userMessages(t, ts.URL, "b"); len(got) != 1 || got[0] != "hello b" {
		t.Fatalf("session b's messages: %q", got)
	}
	run(t, ctx, "back in a, its turn still runs: the composer waits for it",
		chromedp.Navigate(ts.URL+"/#/s/a"),
		waitJS(`document.querySelector('#chat-title').textContent === 'Session a'`),
		waitJS(`document.querySelector('#send').disabled`),
	)
	release()
	run(t, ctx, "a's turn ends: the composer is free",
		waitJS(`!document.querySelector('#send').disabled`),
	)
}

// TestBrowserDotSessionIDs: "." and ".." in the address name no session:
// the page says so and calls nothing of the API with them. Before,
// "#/s/.." called /v1/, /v1/runs and POST /v1/messages (the URL resolved
// the dots away), and "#/s/." read the session named "runs".
func TestBrowserDotSessionIDs(t *testing.T) {
	ts := newDemoServer(t)
	sendREST(t, ts.URL, "runs", "hello")
	ctx := browser(t)
	for _, id := range []string{".", ".."} {
		run(t, ctx, "open #/s/"+id,
			chromedp.Navigate(ts.URL+"/#/new"),
			chromedp.WaitVisible(chromedp.CSS("#input")),
			waitJS(`(window.calls = [], window.fetch = ((f) => (u, o) => { window.calls.push(String(u)); return f(u, o); })(window.fetch), true)`),
			waitJS(`(location.hash = '#/s/`+id+`', true)`),
			waitJS(`document.querySelector('#chat-title').textContent === 'Not found'`),
			waitJS(`document.querySelector('#live .card.error').textContent.includes('are not session ids')`),
			waitJS(`!document.querySelector('#history').textContent.includes('hello')`),
			waitJS(`window.calls.every(u => u.endsWith('v1/sessions'))`),
		)
	}
}

// TestBrowserLostDenialNotTakenForAnotherClientsApproval: a Deny clicked
// while the network is down (its POST gets no answer) loses to an
// approval another client gave meanwhile. Once the stream is back the
// card says "Approved elsewhere". Before, the page took the other
// client's resumed run for its own lost answer and labelled the card
// "Approved", the opposite of what this user clicked, as if their click
// had approved.
func TestBrowserLostDenialNotTakenForAnotherClientsApproval(t *testing.T) {
	ts := newTestServer(t)
	px := newDropProxy(t, ts.Listener.Addr().String())
	ctx := browser(t)
	run(t, ctx, "a refund awaits approval", append(firstMessage(px.url(), "please refund order 7"),
		waitJS(`document.querySelector('#live .card.approval:not([data-resolved])') !== null`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
	)...)
	session := value(t, ctx, "the session id", chromedp.Evaluate[string](`decodeURIComponent(location.hash.slice('#/s/'.length))`))
	signal := value(t, ctx, "the signal id", chromedp.Evaluate[string](`document.querySelector('#live .card.approval').dataset.signal`))
	px.drop(time.Minute)
	run(t, ctx, "the page is offline", waitJS(`document.querySelector('#conn').dataset.state !== 'live'`))
	if st := postJSON(t, ts.URL+"/v1/sessions/"+session+"/signals", map[string]any{"signal_id": signal,
		"payload": map[string]any{"approval": map[string]any{"approved": true}}}, nil); st != http.StatusOK {
		t.Fatalf("another client's approval: %d", st)
	}
	run(t, ctx, "Deny gets no answer",
		chromedp.Click(chromedp.CSS("#live .card.approval button.deny")),
		waitJS(`[...document.querySelectorAll('#live .card.error')].some(e => e.textContent.includes('could not be reached'))`),
	)
	px.up()
	run(t, ctx, "the stream is back: approved elsewhere",
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelector('#live .card.approval .status').textContent === 'Approved elsewhere'`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('refunded'))`),
	)
	noErrorCards(t, ctx, "once the other client's approval showed")
}

// TestBrowserHiddenTabKeepsStreamForItsTurn: a tab hidden while its turn
// runs keeps its event stream until the turn's events came (the page
// matches a turn to its run's events within time windows: paused past
// them, a lost answer's run would read as another client's).
func TestBrowserHiddenTabKeepsStreamForItsTurn(t *testing.T) {
	ts, ctx, release := gatedTurn(t, "h")
	run(t, ctx, "hidden while it runs",
		hide(true),
		chromedp.Sleep(500*time.Millisecond),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
	)
	waitStreams(t, ts.URL, 1)
	release()
	run(t, ctx, "its reply streams in while hidden",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('before the drop and after it'))`),
		hide(false),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
	)
	noErrorCards(t, ctx, "after the turn")
}

// gatedDemo serves the demo agent whose model answers only once release
// is called (gatedModel).
func gatedDemo(t *testing.T) (*httptest.Server, func()) {
	t.Helper()
	gate := make(chan struct{})
	a, err := agent.New(agent.Config{Provider: gatedModel{gate: gate}, System: "You are the Armature demo agent.", Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	return servertest.New(t, a), sync.OnceFunc(func() { close(gate) })
}

// gatedTurn serves the gated model and opens the page on session, whose
// turn ("a gated story") is left waiting, half streamed, until release
// is called.
func gatedTurn(t *testing.T, session string) (*httptest.Server, context.Context, func()) {
	t.Helper()
	ts, release := gatedDemo(t)
	t.Cleanup(release)
	ctx := browser(t)
	run(t, ctx, "a turn that waits, in session "+session,
		chromedp.Navigate(ts.URL+"/#/s/"+session),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		chromedp.SendKeys(chromedp.CSS("#input"), "a gated story"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('before the drop'))`),
	)
	return ts, ctx, release
}
