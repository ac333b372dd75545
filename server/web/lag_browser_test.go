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

// TestBrowserPacedStreamStillStreams: with the page's event stream
// delivered one chunk every 150 ms (a slow link: a run's events reach
// the page one after the other, its last ones seconds after the run
// ended), a turn's POST answers while its reply is half streamed. The
// reply still streams in whole, once: the page waits for the run's last
// events as long as the stream keeps bringing them. Before, it waited a
// second at most and then replaced the half-streamed reply with the
// answer's copy.
func TestBrowserPacedStreamStillStreams(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	run(t, ctx, "a first turn", append(firstMessage(ts.URL, "hello there"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`))...)
	paceStream(t, ctx, 150)
	run(t, ctx, "watch the replies",
		// Every streamed reply removed from the page from now on.
		waitJS(`(window.removed = [], new MutationObserver((ms) => { for (const m of ms) for (const n of m.removedNodes) if (n.nodeType === 1 && (n.matches('.msg[data-streamed]') || n.querySelector('.msg[data-streamed]'))) window.removed.push(n.textContent); }).observe(document.querySelector('#live'), { childList: true, subtree: true }), true)`),
	)
	streamed := func(text string) string {
		return `[...document.querySelectorAll('#live .msg.assistant[data-streamed]')].some(e => e.textContent.includes('` + text + `'))`
	}
	run(t, ctx, "a tool turn over the paced stream",
		chromedp.SendKeys(chromedp.CSS("#input"), "where is order 7?"),
		enter(false),
		waitJS(`!document.querySelector('#send').disabled`),
		waitJS(`[...document.querySelectorAll('#live details.tool[data-tool="lookup_order"][data-status="done"]')].length === 1`),
		waitJS(streamed("arriving Thursday")),
	)
	run(t, ctx, "an approval over the paced stream",
		chromedp.SendKeys(chromedp.CSS("#input"), "refund order 7"),
		enter(false),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		waitJS(`!document.querySelector('#send').disabled`),
		chromedp.Click(chromedp.CSS(".approval button.approve")),
		waitJS(`document.querySelector('.approval').dataset.resolved === 'approved'`),
		waitJS(`!document.querySelector('#send').disabled && !document.querySelector('#live [aria-busy="true"]')`),
		waitJS(streamed("refunded \x2430.00 for order 7")),
	)
	for _, text := range []string{"arriving Thursday", "refunded \x2430.00 for order 7"} {
		if n := value(t, ctx, "count replies", chromedp.Evaluate[int](`[...document.querySelectorAll('#live .msg.assistant')].filter(e => e.textContent.includes('`+text+`')).length`)); n != 1 {
			t.Errorf("the reply %q shows %d times", text, n)
		}
	}
	if removed := value(t, ctx, "read the removed replies", chromedp.Evaluate[[]string](`window.removed`)); len(removed) != 0 {
		t.Errorf("streamed replies replaced: %q", removed)
	}
	noErrorCards(t, ctx, "the page")
}
