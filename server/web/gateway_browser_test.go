package web_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserGatewayTimeoutSettlesFromEvents: behind a proxy that gives
// up on a long turn (its 504 page in the server's place, as nginx or a
// load balancer answers a turn longer than its idle timeout; the turn
// runs on in the server), the page treats the message as one whose
// answer was lost, not as a failed turn, and shows the reply once the
// turn ends, from the session's events; the message ran once. Before,
// the page showed the proxy's "Gateway Timeout" as the turn's error.
func TestBrowserGatewayTimeoutSettlesFromEvents(t *testing.T) {
	ts, release := gatedDemo(t)
	t.Cleanup(release) // before the server closes: its turn ends
	target, err := url.Parse(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/messages") {
			rp.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte("gated")) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			rp.ServeHTTP(w, r)
			return
		}
		// The message reaches the server; the proxy gives up on it.
		req, _ := http.NewRequest(r.Method, ts.URL+r.URL.Path, bytes.NewReader(body))
		req.Header, req.Host = r.Header.Clone(), r.Host // the page's origin, as the proxy forwards it
		go func() {
			if resp, err := ts.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusGatewayTimeout)
		io.WriteString(w, "<html><head><title>504 Gateway Time-out</title></head><body><h1>504 Gateway Time-out</h1></body></html>\n")
	}))
	t.Cleanup(px.Close)
	ctx := browser(t)
	run(t, ctx, "a gated turn is sent behind the proxy", append(firstMessage(px.URL, "hello there"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		chromedp.SendKeys(chromedp.CSS("#input"), "a gated story"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .card.error')].some(e => e.textContent.includes('The connection dropped') || e.textContent.includes('could not be reached'))`),
	)...)
	if gw := value(t, ctx, "gateway text", chromedp.Evaluate[bool](`[...document.querySelectorAll('#live .card.error')].some(e => e.textContent.includes('Gateway'))`)); gw {
		t.Error("the page shows the proxy's 504 as the turn's error")
	}
	release()
	run(t, ctx, "the reply shows from the events",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant .body')].some(e => e.textContent === 'before the drop and after it')`),
		waitJS(`document.querySelector('#live .card.error') === null`),
	)
	if users := userMessages(t, ts.URL, sessionOf(t, ctx)); strings.Join(users, "|") != "hello there|a gated story" {
		t.Errorf("the session's user messages: %q", users)
	}
	noErrorCards(t, ctx, "after the gateway timeout")
}
