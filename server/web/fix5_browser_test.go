package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/armature-go/armature/server"
)

// TestBrowserUnsentMessageKept: the first message of a new conversation
// that could not be sent (the server refuses the page's token) goes back
// to the message box, with a card saying it was not sent. Before, the
// box was cleared and the text lost, under "Could not load the session".
// A delete the server refuses says the session was not deleted, and
// keeps it listed (it went to a new conversation as if deleted); the
// token dialog says a token set was refused.
func TestBrowserUnsentMessageKept(t *testing.T) {
	const secret = "0123456789abcdef-secret"
	ts := newDemoServer(t, func(c *server.Config) { c.Tokens = []server.Token{{Secret: secret, Tenant: "acme"}} })
	ctx := browser(t)
	run(t, ctx, "a new conversation without a token",
		chromedp.Navigate(ts.URL+"/#/new"),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#token-dialog').open`), // the session list was refused
		chromedp.Evaluate[chromedp.Void](`localStorage.removeItem('armature.token'); document.querySelector('#token-dialog').close()`),
		chromedp.SendKeys(chromedp.CSS("#input"), "keep this text"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .card.error')].some(e => e.textContent.includes('Your message was not sent'))`),
		waitJS(`document.querySelector('#input').value === 'keep this text'`),
	)

	run(t, ctx, "a session, then a delete the server refuses",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#token-dialog').close(); localStorage.setItem('armature.token', '`+secret+`')`),
		chromedp.Navigate(ts.URL+"/#/s/kept"),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#input').value = ''`),
		chromedp.SendKeys(chromedp.CSS("#input"), "hello"),
		enter(false),
		waitJS(`document.querySelector('#sessions li[data-session="kept"] button.delete') !== null`),
		chromedp.Evaluate[chromedp.Void](`localStorage.setItem('armature.token', 'a-wrong-token-000000')`),
		chromedp.Click(chromedp.CSS(`#sessions li[data-session="kept"] button.delete`)),
		chromedp.Click(chromedp.CSS(`#sessions li[data-session="kept"] button.delete`)),
		waitJS(`[...document.querySelectorAll('#live .card.error')].some(e => e.textContent.includes('Session kept was not deleted'))`),
		waitJS(`location.hash === '#/s/kept'`),
		// The token dialog says the token was refused (it asked for one
		// as if none was set).
		waitJS(`document.querySelector('#token-dialog').open && document.querySelector('#token-why').textContent.includes('refused this token')`),
	)
}
