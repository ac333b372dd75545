package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserLaggingStreamStillStreams: with the page's event stream 300
// ms behind the server, a turn's POST answers before its run's events
// arrive. The reply still streams in, once: the page waits for the live
// stream's last events of the run before it settles the turn from the
// answer. Before, it replaced the half-streamed reply with the answer's
// copy (read twice by a screen reader, and a CI flake of TestBrowser on
// a loaded machine).
func TestBrowserLaggingStreamStillStreams(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	run(t, ctx, "a first turn", append(firstMessage(ts.URL, "hello there"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`))...)
	lagStream(t, ctx, 300)
	streamed := func(text string) string {
		return `[...document.querySelectorAll('#live .msg.assistant[data-streamed]')].some(e => e.textContent.includes('` + text + `'))`
	}
	run(t, ctx, "a tool turn over the lagging stream",
		chromedp.SendKeys(chromedp.CSS("#input"), "where is order 7?"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live details.tool[data-tool="lookup_order"][data-status="done"]')].length === 1`),
		waitJS(streamed("arriving Thursday")),
		waitJS(`!document.querySelector('#send').disabled`),
	)
	run(t, ctx, "an approval over the lagging stream",
		chromedp.SendKeys(chromedp.CSS("#input"), "refund order 7"),
		enter(false),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		chromedp.Click(chromedp.CSS(".approval button.approve")),
		waitJS(`document.querySelector('.approval').dataset.resolved === 'approved'`),
		waitJS(streamed("refunded \x2430.00 for order 7")),
		waitJS(`!document.querySelector('#send').disabled`),
	)
	for _, text := range []string{"arriving Thursday", "refunded \x2430.00 for order 7"} {
		if n := value(t, ctx, "count replies", chromedp.Evaluate[int](`[...document.querySelectorAll('#live .msg.assistant')].filter(e => e.textContent.includes('`+text+`')).length`)); n != 1 {
			t.Errorf("the reply %q shows %d times", text, n)
		}
	}
	noErrorCards(t, ctx, "the page")
}
