package web_test

// Regression tests for what an attack on the page in a real browser
// found (CHANGELOG: "Fixed (the web page: attack findings)").

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
)

// TestBrowserApprovalKeepsFocus: an approval card never takes the focus.
// Before, the page moved it to the card's Approve button when a turn
// suspended, so that a user still typing approved the call with the next
// Space, and a card another client's turn brought stole the focus from a
// tab where someone typed. The card is announced instead.
func TestBrowserApprovalKeepsFocus(t *testing.T) {
	ts, a, b := twoTabsOnACard(t)
	run(t, a, "tab A: the focus stays in the message box, where the user types on",
		waitJS(`document.activeElement === document.querySelector('#input')`),
		waitJS(`document.querySelector('#announce').textContent.startsWith('Approval needed: the agent wants to run issue_refund')`),
		chromedp.KeyEvent("and then "),
		waitJS(`document.querySelector('#input').value === 'and then '`),
	)
	run(t, b, "tab B: someone types",
		chromedp.Focus(chromedp.CSS("#input")),
		chromedp.KeyEvent("draft"),
	)
	var out struct {
		Outcome string `json:"outcome"`
	}
	if code := postJSON(t, ts.URL+"/v1/sessions/"+sessionOf(t, a)+"/messages", map[string]any{"content": "refund order 9"}, &out); code != http.StatusOK || out.Outcome != "suspended" {
		t.Fatalf("another client's refund: %d %+v", code, out)
	}
	for _, tab := range []struct {
		name  string
		ctx   context.Context
		typed string
	}{{"A", a, "and then  "}, {"B", b, "draft "}} {
		run(t, tab.ctx, "tab "+tab.name+": another client's card does not take the focus",
			waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 1 && document.querySelectorAll('.approval').length === 2`),
			waitJS(`document.activeElement === document.querySelector('#input')`),
			chromedp.KeyEvent(" "),
			waitJS(fmt.Sprintf(`document.querySelector('#input').value === %q`, tab.typed)),
		)
		if s := value(t, tab.ctx, "read the cards", chromedp.Evaluate[string](`[...document.querySelectorAll('.approval')].map(c => c.dataset.resolved ?? 'open').join(', ')`)); s != "closed: a newer message, open" {
			t.Errorf("tab %s: the cards read %q", tab.name, s)
		}
	}
	// The card is within reach of the keyboard: Alt+A moves to it.
	run(t, a, "Alt+A goes to the card",
		chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierAlt)),
		waitJS(`document.activeElement === document.querySelector('.approval:not([data-resolved])')`),
	)
	noErrorCards(t, a, "after the cards")
}

// TestBrowserCommentEnterDecidesNothing: Enter in the approval card's
// comment box decides nothing. Before, it approved (and ran the call)
// while users typed objections there.
func TestBrowserCommentEnterDecidesNothing(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	run(t, ctx, "a suspended refund", append(firstMessage(ts.URL, "refund order 7"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		waitJS(`(window.signals = 0, window.fetch = ((f) => (u, o) => { if (String(u).includes('/signals')) window.signals++; return f(u, o); })(window.fetch), true)`),
		chromedp.SendKeys(chromedp.CSS(".approval input"), "no, do not refund it"),
		enter(false),
		chromedp.Sleep(700),
	)...)
	if s := value(t, ctx, "read the card", chromedp.Evaluate[string](`(() => { const c = document.querySelector('.approval'); return (c.dataset.resolved ?? 'open') + ' ' + window.signals + ' ' + c.querySelector('button.approve').disabled + ' ' + c.querySelector('input').value; })()`)); s != "open 0 false no, do not refund it" {
		t.Fatalf("after Enter in the comment box the card reads %q", s)
	}
	run(t, ctx, "a click denies",
		chromedp.Click(chromedp.CSS(".approval button.deny")),
		waitJS(`document.querySelector('.approval').dataset.resolved === 'denied'`),
		waitJS(`window.signals === 1`),
	)
}

// TestBrowserUnknownSessionID: #/s/<an id with no session yet> is a new
// conversation under that id, its event stream live: the first message
// creates the session, and another client's turn streams in. Before, it
// showed "Could not load the session: session not found" and never
// opened the stream ("Not connected").
func TestBrowserUnknownSessionID(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	const id = "fresh-conversation.1"
	run(t, ctx, "open the new id",
		chromedp.Navigate(ts.URL+"/#/s/"+id),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelector('#chat-title').textContent === 'Session fresh-conversation.1'`),
	)
	noErrorCards(t, ctx, "on opening")
	run(t, ctx, "the first message",
		chromedp.SendKeys(chromedp.CSS("#input"), "hello there"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#sessions li[data-session="fresh-conversation.1"] a[aria-current="page"]') !== null`),
	)
	sendREST(t, ts.URL, id, "where is order 12?")
	run(t, ctx, "another client's turn streams in",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 12: shipped'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`location.hash === '#/s/fresh-conversation.1'`),
	)
	noErrorCards(t, ctx, "after the turns")
}

// TestBrowserMalformedHash: an address whose hash is not validly
// percent-encoded shows that it names no session. Before, route() threw
// an uncaught URIError.
func TestBrowserMalformedHash(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	for _, hash := range []string{"#/s/%E0%A4%A", "#/runs/%"} {
		run(t, ctx, "open "+hash,
			chromedp.Navigate(ts.URL+"/"+hash),
			chromedp.WaitVisible(chromedp.CSS("#input")),
			waitJS(`document.querySelector('#live .card.error')?.textContent.includes('This address names no session') === true`),
			waitJS(`document.querySelector('#chat-title').textContent === 'Not found'`),
		)
		if s := pageConsole(ctx).String(); strings.Contains(s, "URIError") || strings.Contains(s, "Uncaught") {
			t.Fatalf("%s: page errors: %s", hash, s)
		}
	}
	run(t, ctx, "a new conversation from there",
		chromedp.Navigate(ts.URL+"/#/new"),
		waitJS(`document.querySelector('#live .card.error') === null && document.querySelector('#chat-title').textContent === 'New conversation'`),
	)
}

// TestBrowserApprovalArgsShown: the approval card shows the arguments a
// model padded exactly: a line separator, unusual spaces, zero-width and
// bidi characters and a line feed as escapes (no fake "amount: 1.00"
// line under the real order), and a long unbroken value wrapped within
// the card. Before, the value spilled out of the card (the chat area
// grew thousands of pixels wide) and the padding drew fake lines.
func TestBrowserApprovalArgsShown(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	run(t, ctx, "a padded refund", append(firstMessage(ts.URL, "padded refund please"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
	)...)
	got := value(t, ctx, "read the arguments", chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelectorAll('.approval .args dt')].map(dt => [dt.textContent, dt.nextElementSibling.textContent]))`))
	want := map[string]string{
		"order": `7\u2028amount: 1.00`,
		"memo":  `a\u3000\u3000b\u200bc\u202ed\n\tamount: 2.00`,
		"note":  strings.Repeat("x", 3000),
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("argument %s reads %q, want %q", k, got[k], w)
		}
	}
	lines := value(t, ctx, "count the lines", chromedp.Evaluate[int](`(() => { const dd = [...document.querySelectorAll('.approval .args dt')].find(dt => dt.textContent === 'order').nextElementSibling; return Math.round(dd.getBoundingClientRect().height / parseFloat(getComputedStyle(dd).lineHeight)); })()`))
	if lines != 1 {
		t.Errorf("the order's value takes %d lines", lines)
	}
	fits := value(t, ctx, "measure", chromedp.Evaluate[string](`(() => {
		const card = document.querySelector('.approval').getBoundingClientRect();
		const log = document.querySelector('#log');
		const dd = [...document.querySelectorAll('.approval .args dd')].map(e => e.getBoundingClientRect().right);
		return [Math.max(...dd) <= card.right + 1, card.right <= log.getBoundingClientRect().right, log.scrollWidth <= log.clientWidth, document.documentElement.scrollWidth <= innerWidth].join(' ');
	})()`))
	if fits != "true true true true" {
		t.Errorf("the long value does not fit (values in the card, card in the log, log, page): %s", fits)
	}
	// A card taller than the log is shown from its top: its title and
	// first arguments, not only its last lines above the buttons.
	run(t, ctx, "the card's top is in view",
		waitJS(`(() => { const log = document.querySelector('#log').getBoundingClientRect(); const top = document.querySelector('.approval h3').getBoundingClientRect(); return document.querySelector('.approval').offsetHeight > document.querySelector('#log').clientHeight && top.top >= log.top - 1 && top.bottom <= log.bottom + 1; })()`),
	)
	screenshot(t, ctx, artifacts(t), "approval-padded-args.png")
	noErrorCards(t, ctx, "after the card")
}

// TestBrowserLongSessionID: a session id of 128 characters (the most the
// server takes) keeps the page within the window: Send and the Run
// inspector link stay on screen. Before, the title widened the chat
// column and pushed them off.
func TestBrowserLongSessionID(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	id := strings.Repeat("L", 128)
	if code := postJSON(t, ts.URL+"/v1/sessions", map[string]any{"session_id": id}, nil); code != http.StatusCreated {
		t.Fatalf("creating the session: %d", code)
	}
	inWindow := `[document.querySelector('#send'), document.querySelector('#inspect-link'), document.querySelector('#chat-link'), document.querySelector('#theme')].filter(e => e.offsetParent !== null).every(e => e.getBoundingClientRect().right <= innerWidth) && document.documentElement.scrollWidth <= innerWidth`
	run(t, ctx, "the chat",
		chromedp.Navigate(ts.URL+"/#/s/"+id),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(inWindow),
	)
	run(t, ctx, "the inspector",
		chromedp.Navigate(ts.URL+"/#/runs/"+id),
		waitJS(`!document.querySelector('#runs-view').hidden`),
		waitJS(inWindow),
	)
}

// gatedModel is the test model whose answer to "gated" streams "before
// the drop ", then waits for gate to close, then streams "and after it".
type gatedModel struct {
	testModel
	gate <-chan struct{}
	// fail, when set, is what the stream fails with once the gate opens.
	fail error
}

func (m gatedModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if !strings.Contains(lastUser(req), "gated") {
		return m.testModel.Complete(ctx, req)
	}
	select {
	case <-m.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llm.Response{Message: llm.AssistantText("before the drop and after it"), FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
}

func (m gatedModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	if !strings.Contains(lastUser(req), "gated") {
		return m.testModel.Stream(ctx, req)
	}
	return func(yield func(*llm.Chunk, error) bool) {
		if !yield(&llm.Chunk{Content: "before the drop ", Raw: json.RawMessage(`{}`)}, nil) {
			return
		}
		select {
		case <-m.gate:
		case <-ctx.Done():
			yield(nil, ctx.Err())
			return
		}
		if m.fail != nil {
			yield(nil, m.fail)
			return
		}
		if yield(&llm.Chunk{Content: "and after it", Raw: json.RawMessage(`{}`)}, nil) {
			yield(&llm.Chunk{FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil)
		}
	}
}

// dropProxy is a TCP proxy to a server that can drop the network: reset
// every connection and refuse new ones for a while.
type dropProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
	down  time.Time
	drops int // drops so far: a connection accepted before one goes too
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.drop(0)
		p.wg.Wait()
	})
	return p
}

func (p *dropProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *dropProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse, drops := time.Now().Before(p.down), p.drops
		p.mu.Unlock()
		if refuse {
			reset(c)
			continue
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			reset(c)
			continue
		}
		p.mu.Lock()
		if p.drops != drops || time.Now().Before(p.down) {
			// Dropped while it was being dialed.
			p.mu.Unlock()
			reset(c)
			reset(u)
			continue
		}
		p.conns[c], p.conns[u] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

func (p *dropProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	reset(dst)
	reset(src)
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// drop resets every connection and refuses new ones for d, or until up.
func (p *dropProxy) drop(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = time.Now().Add(d)
	p.drops++
	for c := range p.conns {
		reset(c)
	}
	clear(p.conns)
}

// up ends a drop: new connections are accepted again.
func (p *dropProxy) up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = time.Time{}
}

// reset closes c with a TCP reset, as a dropped network does.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// dropWhileStreaming serves the gated model behind a dropProxy, sends
// "a gated story" in the page (its message ids recorded in
// window.messageIDs) and drops the network while its reply streams: the
// POST gets no answer (an error card), the turn goes on on the server,
// held until release is called. The network stays down until the page
// shows the error (a browser's own retransmission of the POST is
// refused too, however late a loaded machine sends it), and the page is
// live again when it returns.
func dropWhileStreaming(t *testing.T) (base string, ctx context.Context, release func()) {
	t.Helper()
	return dropWhileStreamingFails(t, nil)
}

// dropWhileStreamingFails is dropWhileStreaming whose gated turn fails
// with fail (when not nil) once released.
func dropWhileStreamingFails(t *testing.T, fail error) (base string, ctx context.Context, release func()) {
	t.Helper()
	gate := make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	a, err := agent.New(agent.Config{Provider: gatedModel{gate: gate, fail: fail}, System: "You are the Armature demo agent.", Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.New(t, a)
	t.Cleanup(release) // before the server closes: its turn ends
	px := newDropProxy(t, ts.Listener.Addr().String())
	ctx = browser(t)
	run(t, ctx, "a gated turn streams", append(firstMessage(px.url(), "hello there"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`(window.messageIDs = [], window.fetch = ((f) => (u, o) => { if (String(u).endsWith('/messages')) window.messageIDs.push(JSON.parse(o.body).message_id); return f(u, o); })(window.fetch), true)`),
		chromedp.SendKeys(chromedp.CSS("#input"), "a gated story"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('before the drop'))`),
	)...)
	px.drop(time.Minute)
	run(t, ctx, "the POST gets no answer",
		waitJS(`[...document.querySelectorAll('#live .card.error')].some(e => e.textContent.includes('The connection dropped'))`),
	)
	px.up()
	run(t, ctx, "the stream is back",
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
	)
	return ts.URL, ctx, release
}

// userMessages returns the session's user messages.
func userMessages(t *testing.T, base, session string) []string {
	t.Helper()
	resp, err := http.Get(base + "/v1/sessions/" + session)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Messages []llm.Message `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, m := range out.Messages {
		if m.Role == llm.RoleUser {
			users = append(users, m.Text())
		}
	}
	return users
}

// TestBrowserDropSettlesFromEvents: the network drops while a reply
// streams; the turn completes on the server, and once the event stream
// is back the page shows its reply (whole, once) in place of the error.
// Before, the error card ("The server could not be reached", Retry)
// stayed until a reload: the turn's late events were ignored.
func TestBrowserDropSettlesFromEvents(t *testing.T) {
	base, ctx, release := dropWhileStreaming(t)
	release()
	run(t, ctx, "the reply shows",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant .body')].some(e => e.textContent === 'before the drop and after it')`),
		waitJS(`document.querySelector('#live .card.error') === null`),
		waitJS(`!document.querySelector('#live .turn:last-child .thinking, #live [aria-busy="true"]')`),
	)
	if n := value(t, ctx, "count", chromedp.Evaluate[int](`[...document.querySelectorAll('#live .msg')].filter(e => e.textContent.includes('before the drop') || e.textContent.includes('a gated story')).length`)); n != 2 {
		t.Errorf("the turn shows %d messages, want its message and its reply", n)
	}
	if users := userMessages(t, base, sessionOf(t, ctx)); strings.Join(users, "|") != "hello there|a gated story" {
		t.Errorf("the session's user messages: %q", users)
	}
	noErrorCards(t, ctx, "after the drop")
}

// TestBrowserDropThenRetryableFailure: the network drops while a reply
// streams, and the turn then fails on the server with a retryable error
// (as a run a crash interrupted ends): once the event stream is back
// the page shows the failure with the Retry the lost message had.
// Before, the retryable card came without Retry, and the message had to
// be typed again.
func TestBrowserDropThenRetryableFailure(t *testing.T) {
	_, ctx, release := dropWhileStreamingFails(t, &llm.ProviderError{Cat: errcat.ProviderUnavailable, Op: "stream", Message: "the upstream went away"})
	release()
	run(t, ctx, "the failure shows, with Retry",
		waitJS(`[...document.querySelectorAll('#live .card.error')].some(e => e.dataset.bucket === 'retryable_transient' && !e.textContent.includes('The connection dropped') && e.querySelector('button.retry'))`),
	)
}

// TestBrowserDropRetrySameMessageID: Retry after a drop resends the
// message under the same message_id, so that the server answers the
// turn that ran (waiting for it) instead of running it again, and the
// reply shows once in the turn. Before, Retry sent a new message_id:
// the server ran the turn twice.
func TestBrowserDropRetrySameMessageID(t *testing.T) {
	base, ctx, release := dropWhileStreaming(t)
	run(t, ctx, "retry while the turn still runs",
		chromedp.Click(chromedp.CSS("#live .card.error button.retry")),
		waitJS(`window.messageIDs.length === 2`),
	)
	release()
	run(t, ctx, "the reply shows",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant .body')].some(e => e.textContent === 'before the drop and after it')`),
		waitJS(`!document.querySelector('#send').disabled && document.querySelector('#live .card.error') === null`),
	)
	ids := value(t, ctx, "read the message ids", chromedp.Evaluate[[]string](`window.messageIDs`))
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] {
		t.Errorf("the message ids sent: %q, want the same one twice", ids)
	}
	caughtUp(t, ctx, base, sessionOf(t, ctx)) // a late duplicate shows by then
	if n := value(t, ctx, "count", chromedp.Evaluate[int](`[...document.querySelectorAll('.msg')].filter(e => e.textContent.includes('before the drop') || e.textContent.includes('a gated story')).length`)); n != 2 {
		t.Errorf("the turn shows %d messages, want its message and its reply", n)
	}
	if users := userMessages(t, base, sessionOf(t, ctx)); strings.Join(users, "|") != "hello there|a gated story|where is order 3?" {
		t.Errorf("the session's user messages: %q (the turn ran twice?)", users)
	}
	noErrorCards(t, ctx, "after the retry")
}

// TestBrowserLostTurnKeepsToItsMessage: a message sent while the network
// is down never reaches the server (an error card, Retry); another
// client's message meanwhile runs, and its turn streams in once the page
// reconnects. It is shown as the other client's turn, and the lost turn
// keeps its error card: a run's started event names its message's id
// (messageId), and this page's turn answers only its own. Before, the
// page took the first new-message run after the drop for its lost turn
// and showed the other client's reply under its own message.
func TestBrowserLostTurnKeepsToItsMessage(t *testing.T) {
	ts := newDemoServer(t)
	px := newDropProxy(t, ts.Listener.Addr().String())
	ctx := browser(t)
	run(t, ctx, "a first turn", append(firstMessage(px.url(), "hello there"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
	)...)
	session := sessionOf(t, ctx)
	// Down until the page's message has failed: on a loaded machine
	// typing it may take longer than any fixed outage.
	px.drop(time.Minute)
	run(t, ctx, "a message while the network is down",
		chromedp.SendKeys(chromedp.CSS("#input"), "hello again"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .card.error')].some(e => e.textContent.includes('could not be reached'))`),
	)
	sendREST(t, ts.URL, session, "where is order 5?") // another client, not behind the dropped network
	px.up()
	run(t, ctx, "the other client's turn streams in as theirs",
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`[...document.querySelectorAll('#live .msg.user')].some(e => e.textContent.includes('where is order 5?'))`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 5: shipped'))`),
		waitJS(`[...document.querySelectorAll('#live .card.error')].some(e => e.textContent.includes('could not be reached'))`),
	)
	if users := userMessages(t, ts.URL, session); strings.Join(users, "|") != "hello there|where is order 5?" {
		t.Errorf("the session's user messages: %q", users)
	}
}
