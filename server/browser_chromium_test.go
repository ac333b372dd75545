package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/armature-go/armature/internal/servertest"
)

// evilPage is a page of another origin that tries, with fetch, what a
// hostile site would against the server at API.
const evilPage = `<!doctype html><title>evil</title><script>
const api = API;
async function attempt(name, url, init) {
  try {
    const r = await fetch(api + url, init);
    let body = '';
    try { body = await r.text(); } catch (e) {}
    return name + ': ' + r.type + ' ' + r.status + ' ' + body.slice(0, 60);
  } catch (e) {
    return name + ': blocked (' + e.name + ')';
  }
}
window.results = (async () => [
  await attempt('approve', '/v1/sessions/c1/signals', {method: 'POST', mode: 'no-cors',
    headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({signal_id: SIGNAL, payload: {approval: {approved: true}}})}),
  await attempt('approve-json', '/v1/sessions/c1/signals', {method: 'POST',
    headers: {'Content-Type': 'application/json'}, body: JSON.stringify({signal_id: SIGNAL, payload: {approval: {approved: true}}})}),
  await attempt('send', '/v1/sessions/evil/messages', {method: 'POST', mode: 'no-cors',
    headers: {'Content-Type': 'text/plain'}, body: '{"content":"where is order 1?"}'}),
  await attempt('list', '/v1/sessions', {}),
  await attempt('read', '/v1/sessions/c1', {}),
  await attempt('events', '/v1/sessions/c1/events', {}),
])();
</script>`

// A page served by another local server (another origin) cannot
// approve, send, list or read through a real browser; the server's own
// page still can.
func TestBrowserSafetyInChromium(t *testing.T) {
	exe := servertest.Chromium(t)
	ts := newDemoServer(t)
	signalID, history := pendingRefund(t, ts.URL)
	before := history()

	sig, _ := json.Marshal(signalID)
	api, _ := json.Marshal(ts.URL)
	page := strings.NewReplacer("API", string(api), "SIGNAL", string(sig)).Replace(evilPage)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(evil.Close)

	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelTab)
	ctx, cancelTime := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancelTime)

	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL)); err != nil {
		t.Fatalf("opening the other origin's page: %v", err)
	}
	results, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.results`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("running the page's attempts: %v", err)
	}
	t.Logf("the other origin's attempts:\n%s", strings.Join(results, "\n"))
	if len(results) != 6 {
		t.Fatalf("got %d results: %q", len(results), results)
	}
	for _, r := range results {
		// A no-cors request leaves an opaque response (status 0) that
		// hides the server's answer: what counts is the server's state,
		// checked below. A CORS request must be blocked.
		if !strings.Contains(r, "blocked") && !strings.Contains(r, "opaque 0") {
			t.Errorf("the other origin read an answer: %s", r)
		}
	}
	if got := history(); got != before {
		t.Fatalf("the other origin changed c1: %d messages, had %d", got, before)
	}
	if code := getJSON(t, ts.URL+"/v1/sessions/evil", nil); code != http.StatusNotFound {
		t.Fatalf("the other origin created a session: GET /v1/sessions/evil = %d", code)
	}

	// The server's own page approves the refund.
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatalf("opening the server's page: %v", err)
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`fetch('v1/sessions/c1/signals', {method: 'POST',
		headers: {'Content-Type': 'application/json'}, body: JSON.stringify({signal_id: `+string(sig)+`, payload: {approval: {approved: true}}})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if err != nil || status != 200 {
		t.Fatalf("the server's own page approving: %v %v, want 200", status, err)
	}
	if got := history(); got <= before {
		t.Fatalf("after the approval c1 has %d messages, had %d", got, before)
	}
}
