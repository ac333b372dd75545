package web_test

import (
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserOpenWhileATurnWaits: the page opens a session while one
// turn runs and another waits for the session behind it. The waiting
// turn's run has no event yet (its runtime.request.started comes once it
// holds the session), and the page's stream goes on after the newest run
// that has events: the conversation shows once. Before, the page took
// the newest run's events for where the stream stood, found none, and
// replayed the whole session from its first event, every past turn
// shown again as another client's.
func TestBrowserOpenWhileATurnWaits(t *testing.T) {
	ts, release := gatedDemo(t)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // the turns' requests, once they end...
	t.Cleanup(release) // ...which they do now (cleanups run last first)
	const session = "waiting"
	sendREST(t, ts.URL, session, "where is order 3?")
	sendREST(t, ts.URL, session, "where is order 4?")
	wg.Go(func() { sendREST(t, ts.URL, session, "a gated story") })
	waitRuns(t, ts.URL, session, 3)
	wg.Go(func() { sendREST(t, ts.URL, session, "where is order 5?") })
	waitRuns(t, ts.URL, session, 4) // it waits for the gated turn
	ctx := browser(t)
	count := `document.querySelectorAll('.msg.assistant').length`
	run(t, ctx, "open the session",
		chromedp.Navigate(ts.URL+"/#/s/"+session),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`[...document.querySelectorAll('.msg.assistant')].some(e => e.textContent.includes('order 4'))`),
	)
	time.Sleep(time.Second) // a replay of the session would show meanwhile
	if n := value(t, ctx, "count the replies", chromedp.Evaluate[int](count)); n != 2 {
		t.Fatalf("%d replies shown, want the history's 2 (the session replayed)", n)
	}
	release()
	run(t, ctx, "the two turns end",
		waitJS(`[...document.querySelectorAll('.msg.assistant')].some(e => e.textContent.includes('order 5'))`),
	)
	noErrorCards(t, ctx, "after the turns")
}

// TestBrowserStopWhileWaiting: the page's message waits for the session
// behind another client's turn; its Stop button shows meanwhile and
// cancels the page's turn, not the other client's. The waiting turn's
// run has no event yet, so the page finds it by the message's id. Before,
// Stop showed only once the turn held the session.
func TestBrowserStopWhileWaiting(t *testing.T) {
	ts, release := gatedDemo(t)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // the other client's request, once it ends...
	t.Cleanup(release) // ...which it does now (cleanups run last first)
	const session = "stopwait"
	sendREST(t, ts.URL, session, "where is order 3?")
	wg.Go(func() { sendREST(t, ts.URL, session, "a gated story") }) // another client's turn holds the session
	waitRuns(t, ts.URL, session, 2)
	ctx := browser(t)
	run(t, ctx, "send while the session is held",
		chromedp.Navigate(ts.URL+"/#/s/"+session),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		chromedp.SendKeys(chromedp.CSS("#input"), "where is order 4?"),
		enter(false),
	)
	waitRuns(t, ts.URL, session, 3) // the page's turn waits
	run(t, ctx, "stop the waiting turn",
		waitJS(`document.querySelector('#live button.stop') !== null`),
		chromedp.Click(chromedp.CSS("#live button.stop")),
		waitJS(`document.querySelector('#live .card.cancelled') !== null`),
		waitJS(`!document.querySelector('#send').disabled`),
	)
	// The other client's turn was not cancelled: it completes.
	release()
	wg.Wait()
}
