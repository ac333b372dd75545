package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
)

// bigReply is the text the test model streams for "big reply": 1 MiB in
// lines, so that a lost or repeated chunk shows.
var bigReply = func() string {
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "line %06d of the big reply, padded to make it longer than a short one\n", i)
	}
	return b.String()[:1<<20]
}()

// testModel is the demo model with more scripted answers to the last
// user message: "boom" fails the model call, "big reply" streams
// bigReply in 8 KiB chunks, "slow" streams a word every 50 ms until the
// turn is cancelled (at most a minute), "two refunds" calls issue_refund
// twice in one step (two approvals, asked one after the other), "padded
// refund" calls it with paddedArgs.
type testModel struct{ demo.Model }

// twoRefunds is the step "two refunds" answers with.
var twoRefunds = llm.AssistantToolCalls(
	llm.ToolCall{ID: "call_r1", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"7","amount":30}`)},
	llm.ToolCall{ID: "call_r2", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"9","amount":30}`)})

// paddedArgs are arguments a model padded so that the approval card
// would read as another call: a line separator and a fake line, unusual
// spaces, zero-width and bidi characters, a long unbroken value.
var paddedArgs = map[string]string{
	"order": "7\u2028amount: 1.00",
	"memo":  "a\u3000\u3000b\u200bc\u202ed\n\tamount: 2.00",
	"note":  strings.Repeat("x", 3000),
}

// paddedRefund is the step "padded refund" answers with.
var paddedRefund = func() llm.Message {
	b, _ := json.Marshal(paddedArgs)
	return llm.AssistantToolCalls(llm.ToolCall{ID: "call_p1", Name: "issue_refund", Arguments: b})
}()

// callsStream streams a step's tool calls as one chunk each.
func callsStream(step llm.Message) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		for i, tc := range step.ToolCalls {
			d := llm.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)}
			if !yield(&llm.Chunk{ToolCalls: []llm.ToolCallDelta{d}, Raw: json.RawMessage(`{}`)}, nil) {
				return
			}
		}
		yield(&llm.Chunk{FinishReason: llm.FinishToolCalls, Raw: json.RawMessage(`{}`)}, nil)
	}
}

func lastUser(req *llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == llm.RoleUser {
			return strings.ToLower(m.Text())
		}
		if req.Messages[i].Role == llm.RoleTool {
			return ""
		}
	}
	return ""
}

var errBoom = errors.New("test model: boom")

func (m testModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	u := lastUser(req)
	switch {
	case strings.Contains(u, "boom"):
		return nil, errBoom
	case strings.Contains(u, "big reply"):
		return &llm.Response{Message: llm.AssistantText(bigReply), FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil
	case strings.Contains(u, "two refunds"):
		return &llm.Response{Message: twoRefunds, FinishReason: llm.FinishToolCalls, Raw: json.RawMessage(`{}`)}, nil
	case strings.Contains(u, "padded refund"):
		return &llm.Response{Message: paddedRefund, FinishReason: llm.FinishToolCalls, Raw: json.RawMessage(`{}`)}, nil
	}
	return m.Model.Complete(ctx, req)
}

func (m testModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	u := lastUser(req)
	switch {
	case strings.Contains(u, "boom"):
		return func(yield func(*llm.Chunk, error) bool) { yield(nil, errBoom) }
	case strings.Contains(u, "two refunds"):
		return callsStream(twoRefunds)
	case strings.Contains(u, "padded refund"):
		return callsStream(paddedRefund)
	case strings.Contains(u, "big reply"):
		return func(yield func(*llm.Chunk, error) bool) {
			for s := bigReply; s != ""; {
				n := min(8192, len(s))
				if !yield(&llm.Chunk{Content: s[:n], Raw: json.RawMessage(`{}`)}, nil) {
					return
				}
				s = s[n:]
			}
			yield(&llm.Chunk{FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil)
		}
	case strings.Contains(u, "slow") || (u == "" && dawdles(req)):
		return func(yield func(*llm.Chunk, error) bool) {
			for i := 0; i < 1200; i++ {
				select {
				case <-ctx.Done():
					yield(nil, ctx.Err())
					return
				case <-time.After(50 * time.Millisecond):
				}
				if !yield(&llm.Chunk{Content: fmt.Sprintf("word%d ", i), Raw: json.RawMessage(`{}`)}, nil) {
					return
				}
			}
			yield(&llm.Chunk{FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil)
		}
	}
	return m.Model.Stream(ctx, req)
}

// dawdles reports whether the conversation's last user message asks
// to "dawdle": the model's answer after the tools streams slowly, as
// "slow" makes its first answer (a resumed turn to stop).
func dawdles(req *llm.Request) bool {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == llm.RoleUser {
			return strings.Contains(strings.ToLower(m.Text()), "dawdle")
		}
	}
	return false
}

// firstMessage opens the page at base and sends text as the first
// message of a new session; the actions that follow wait for its turn.
func firstMessage(base, text string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(base + "/"),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		chromedp.SendKeys(chromedp.CSS("#input"), text),
		enter(false),
	}
}

func testAgent(t *testing.T) *agent.Agent {
	t.Helper()
	a, err := agent.New(agent.Config{Provider: testModel{}, System: "You are the Armature demo agent.", Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// newTestServer serves the test model's agent.
func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	return servertest.New(t, testAgent(t))
}

// postJSON posts body to url and decodes the answer into out (if any).
func postJSON(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// suspendedRun returns the id of the session's suspended run.
func suspendedRun(t *testing.T, base, session string) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/v1/sessions/%s/runs", base, session))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Runs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"runs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Runs {
		if r.Status == "suspended" {
			return r.ID
		}
	}
	t.Fatalf("no suspended run in %+v", out.Runs)
	return ""
}

func sessionOf(t *testing.T, ctx context.Context) string {
	t.Helper()
	return value(t, ctx, "read the session id", chromedp.Evaluate[string](`decodeURIComponent(location.hash.slice('#/s/'.length))`))
}

func noErrorCards(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	if s := value(t, ctx, "read error cards", chromedp.Evaluate[string](`[...document.querySelectorAll('.card.error')].map(e => e.textContent).join(' | ')`)); s != "" {
		t.Fatalf("%s: error cards: %s", what, s)
	}
	if s := pageConsole(ctx).String(); strings.Contains(s, "Uncaught") {
		t.Fatalf("%s: page errors: %s", what, s)
	}
}

// swapHandler serves whichever handler was stored last.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// TestBrowserEventIDReset: after the server's event ids restart (a
// server on the same sessions with a fresh run store), the stream's
// last_event_id_unknown error resets the page's last id: it reconnects
// once, shows the turns it showed once each, and then a new turn.
func TestBrowserEventIDReset(t *testing.T) {
	store := servertest.SQLite(t)
	a := testAgent(t)
	newServer := func() http.Handler {
		srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: servertest.Harness(t, store, a), Model: demo.ModelName}}, Sessions: store})
		if err != nil {
			t.Fatal(err)
		}
		return srv.Handler()
	}
	sw := &swapHandler{}
	sw.set(newServer())
	ts := httptest.NewServer(sw)
	t.Cleanup(ts.Close)
	ctx := browser(t)
	run(t, ctx, "two turns", append(firstMessage(ts.URL, "hello there"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		chromedp.SendKeys(chromedp.CSS("#input"), "where is order 5?"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 5: shipped'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`(window.streams = 0, window.fetch = ((f) => (u, o) => { if (String(u).endsWith('/events')) window.streams++; return f(u, o); })(window.fetch), true)`),
	)...)
	session := sessionOf(t, ctx)

	// The server restarts on the same sessions with a fresh run store.
	sw.set(newServer())
	ts.CloseClientConnections()
	run(t, ctx, "the stream resets",
		waitJS(`window.streams >= 2 && document.querySelector('#conn').dataset.state === 'live'`),
	)
	sendREST(t, ts.URL, session, "where is order 77?")
	run(t, ctx, "a new turn arrives",
		waitJS(`[...document.querySelectorAll('.msg.assistant')].some(e => e.textContent.includes('order 77: shipped'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
	)
	for text, want := range map[string]int{"offline demo agent": 1, "order 5: shipped": 1, "order 77: shipped": 1} {
		n := value(t, ctx, "count", chromedp.Evaluate[int](fmt.Sprintf(`[...document.querySelectorAll('.msg.assistant')].filter(e => e.textContent.includes(%q)).length`, text)))
		if n != want {
			t.Errorf("%q shows %d times, want %d", text, n, want)
		}
	}
	if n := value(t, ctx, "count streams", chromedp.Evaluate[int](`window.streams`)); n > 3 {
		t.Errorf("the page opened the event stream %d times after the restart", n)
	}
	noErrorCards(t, ctx, "after the reset")
}

// TestBrowserPendingApprovalAfterFailedTurn: a turn that failed after a
// suspended one does not hide its approval on reload, and approving it
// works.
func TestBrowserPendingApprovalAfterFailedTurn(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	run(t, ctx, "a suspended refund, then a failed turn", append(firstMessage(ts.URL, "refund order 7"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		chromedp.SendKeys(chromedp.CSS("#input"), "boom"),
		enter(false),
		waitJS(`document.querySelector('#live .card.error') !== null`),
	)...)
	run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelector('.approval:not([data-resolved]) button.approve') !== null`),
		waitJS(`document.querySelector('details.tool[data-tool="issue_refund"]').dataset.status === 'waiting'`),
		chromedp.Click(chromedp.CSS(".approval button.approve")),
		waitJS(`document.querySelector('.approval').dataset.resolved === 'approved'`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('refunded \x2430.00 for order 7'))`),
		waitJS(`document.querySelector('details.tool[data-tool="issue_refund"]').dataset.status === 'done'`),
	)
}

// TestBrowserBigReply: a 1 MiB reply streams in quickly and whole.
func TestBrowserBigReply(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	run(t, ctx, "open", append(firstMessage(ts.URL, "hello"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		chromedp.SendKeys(chromedp.CSS("#input"), "big reply"),
	)...)
	start := time.Now()
	run(t, ctx, "a 1 MiB reply",
		enter(false),
		waitJS(`!document.querySelector('#send').disabled && [...document.querySelectorAll('#live .msg.assistant .body')].some(e => e.textContent.length >= 1048576)`),
	)
	elapsed := time.Since(start)
	t.Logf("the 1 MiB reply took %v", elapsed)
	if elapsed > 15*time.Second {
		t.Errorf("the 1 MiB reply took %v", elapsed)
	}
	ok := value(t, ctx, "compare", chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const b = [...document.querySelectorAll('#live .msg.assistant .body')].find(e => e.textContent.length >= 1048576); return b.textContent.length === %d && b.textContent.startsWith(%q) && b.textContent.endsWith(%q); })()`,
		len(bigReply), bigReply[:200], bigReply[len(bigReply)-200:])))
	if !ok {
		t.Error("the reply's text is not the model's")
	}
	same := value(t, ctx, "compare whole", chromedp.Evaluate[bool](`(() => { const b = [...document.querySelectorAll('#live .msg.assistant .body')].find(e => e.textContent.length >= 1048576).textContent; const lines = b.split('\n'); return lines.every((l, i) => i === lines.length - 1 || l.startsWith('line ' + String(i).padStart(6, '0'))); })()`))
	if !same {
		t.Error("the reply's lines are out of order, lost or repeated")
	}
	noErrorCards(t, ctx, "after the big reply")
}

// TestBrowserApprovalClosedElsewhere: an approval card closes when its
// turn is cancelled (POST /v1/runs/{id}/cancel) or superseded by another
// client's message, and its tool call is marked not run.
func TestBrowserApprovalClosedElsewhere(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	run(t, ctx, "a suspended refund", append(firstMessage(ts.URL, "refund order 7"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
	)...)
	session := sessionOf(t, ctx)
	var res map[string]any
	if code := postJSON(t, ts.URL+"/v1/runs/"+suspendedRun(t, ts.URL, session)+"/cancel", map[string]any{}, &res); code != http.StatusAccepted || res["cancelled"] != true {
		t.Fatalf("cancel: %d %v", code, res)
	}
	run(t, ctx, "the card closes as cancelled",
		waitJS(`document.querySelector('.approval').dataset.resolved === 'closed: cancelled'`),
		waitJS(`document.querySelector('.approval button.approve').disabled`),
		waitJS(`document.querySelector('details.tool[data-tool="issue_refund"]').dataset.status === 'not-run'`),
	)
	noErrorCards(t, ctx, "after the cancel")

	run(t, ctx, "another suspended refund",
		chromedp.SendKeys(chromedp.CSS("#input"), "refund order 9"),
		enter(false),
		waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 1`),
	)
	sendREST(t, ts.URL, session, "where is order 4?")
	run(t, ctx, "the card closes as superseded",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 4'))`),
		waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 0`),
		waitJS(`document.querySelectorAll('.approval')[1].dataset.resolved === 'closed: a newer message'`),
		waitJS(`[...document.querySelectorAll('details.tool[data-tool="issue_refund"]')].every(e => e.dataset.status === 'not-run')`),
	)
	noErrorCards(t, ctx, "after the supersession")

	run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelectorAll('#history details.tool').length >= 3`),
	)
	if n := value(t, ctx, "count approval cards", chromedp.Evaluate[int](`document.querySelectorAll('.approval').length`)); n != 0 {
		t.Fatalf("%d approval cards after reload", n)
	}
}

// TestBrowserSecondApprovalClosedElsewhere: a step calling two
// approval-gated tools asks for them one after the other; the second
// request is suspended by the resumed run (its own run id, not its
// invocation's), and cancelling it closes its card too.
func TestBrowserSecondApprovalClosedElsewhere(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	run(t, ctx, "approve the first of two refunds", append(firstMessage(ts.URL, "two refunds please"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		chromedp.Click(chromedp.CSS(".approval button.approve")),
		waitJS(`document.querySelectorAll('.approval').length === 2 && document.querySelectorAll('.approval:not([data-resolved])').length === 1`),
	)...)
	session := sessionOf(t, ctx)
	var res map[string]any
	if code := postJSON(t, ts.URL+"/v1/runs/"+suspendedRun(t, ts.URL, session)+"/cancel", map[string]any{}, &res); code != http.StatusAccepted || res["cancelled"] != true {
		t.Fatalf("cancel: %d %v", code, res)
	}
	run(t, ctx, "the second card closes as cancelled",
		waitJS(`document.querySelectorAll('.approval')[1].dataset.resolved === 'closed: cancelled'`),
		waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 0`),
	)
	noErrorCards(t, ctx, "after the cancel")
}

// TestBrowserStaleCardAfterDelete: another client deletes the session
// and begins it again, and the new conversation asks under the same
// signal id. The page closes the old card (its conversation is gone)
// and keeps the new one usable; approving the new one refunds the new
// order. Before, the old card stayed open beside it, and clicking it
// (refused) disabled the new one.
func TestBrowserStaleCardAfterDelete(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	run(t, ctx, "a suspended refund", append(firstMessage(ts.URL, "refund order 7"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
	)...)
	session := sessionOf(t, ctx)
	req, err := http.NewRequest(http.MethodDelete, ts.URL+"/v1/sessions/"+session, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v, %v", resp, err)
	}
	var out struct {
		Outcome string `json:"outcome"`
	}
	if code := postJSON(t, ts.URL+"/v1/sessions/"+session+"/messages", map[string]any{"content": "refund order 555"}, &out); code != http.StatusOK || out.Outcome != "suspended" {
		t.Fatalf("the new conversation's refund: %d %+v", code, out)
	}
	run(t, ctx, "the old card closes, the new one is open",
		waitJS(`document.querySelectorAll('.approval').length === 2`),
		waitJS(`document.querySelectorAll('.approval')[0].dataset.resolved === 'no longer pending: its conversation was deleted'`),
		waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 1`),
		chromedp.Click(chromedp.CSS(".approval:not([data-resolved]) button.approve")),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('refunded \x2430.00 for order 555'))`),
	)
	noErrorCards(t, ctx, "after the approval")
}

// TestBrowserTwoApprovals: a step calling two approval-gated tools asks
// for them one after the other; once both are approved, the reply shows
// once.
func TestBrowserTwoApprovals(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	run(t, ctx, "approve both refunds", append(firstMessage(ts.URL, "two refunds please"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		chromedp.Click(chromedp.CSS(".approval button.approve")),
		waitJS(`document.querySelectorAll('.approval').length === 2 && document.querySelectorAll('.approval:not([data-resolved])').length === 1`),
		chromedp.Click(chromedp.CSS(".approval:not([data-resolved]) button.approve")),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 9'))`),
		waitJS(`!document.querySelector('#send').disabled`),
	)...)
	caughtUp(t, ctx, ts.URL, sessionOf(t, ctx)) // a late duplicate shows by then
	n := value(t, ctx, "count the replies", chromedp.Evaluate[int](`[...document.querySelectorAll('#live .msg.assistant')].filter(e => e.textContent.includes('Here is what I found') && !e.textContent.includes('order 3: shipped')).length`))
	if n != 1 {
		t.Fatalf("the reply after both approvals shows %d times", n)
	}
	noErrorCards(t, ctx, "after both approvals")
}

// TestBrowserDenied: a denied tool call's card says denied.
func TestBrowserDenied(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	run(t, ctx, "deny a refund", append(firstMessage(ts.URL, "refund order 7"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.deny")),
		chromedp.Click(chromedp.CSS(".approval button.deny")),
		waitJS(`document.querySelector('.approval').dataset.resolved === 'denied'`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('denied'))`),
		waitJS(`!document.querySelector('#send').disabled`),
	)...)
	status := value(t, ctx, "read the tool card", chromedp.Evaluate[string](`(() => { const c = document.querySelector('details.tool[data-tool="issue_refund"]'); return c.dataset.status + ' ' + c.querySelector('.badge').textContent; })()`))
	if status != "denied denied" {
		t.Fatalf("the denied call's card: %q", status)
	}
	noErrorCards(t, ctx, "after the denial")
}

// TestBrowserDeniedAfterReload: a denied call's card still says denied
// after a reload (the messages do not say it; the run that resumed the
// turn records the decision), and an approved one beside it done. Here
// one step asks for two refunds: the first approved, the second denied.
// Before, after a reload both read done.
func TestBrowserDeniedAfterReload(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	statuses := `[...document.querySelectorAll('details.tool[data-tool="issue_refund"]')].map(e => e.dataset.status + ' ' + e.querySelector('.badge').textContent + ' ' + (e.querySelector('.result h4')?.textContent ?? '')).join(', ')`
	const want = "done done Result, denied denied Denied"
	run(t, ctx, "approve the first refund, deny the second", append(firstMessage(ts.URL, "two refunds please"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		chromedp.Click(chromedp.CSS(".approval button.approve")),
		waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 1 && document.querySelectorAll('.approval').length === 2`),
		chromedp.Click(chromedp.CSS(".approval:not([data-resolved]) button.deny")),
		waitJS(`document.querySelectorAll('.approval')[1].dataset.resolved === 'denied'`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('denied'))`),
		waitJS(`!document.querySelector('#send').disabled`),
	)...)
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

// TestBrowserTwoTabsApprove: two tabs approve the same card at once; the
// refund runs once, the tab that lost shows it approved elsewhere with
// the resumed reply, and neither shows an error.
func TestBrowserTwoTabsApprove(t *testing.T) {
	ts, a, b := twoTabsOnACard(t)
	run(t, b, "tab B answers when A's approval has run",
		// B's answer is held until A's approval has run: both click at
		// once, B loses.
		waitJS(`(window.fetch = ((f) => async (u, o) => { if (String(u).includes('/signals')) { while (!window.release) await new Promise((r) => setTimeout(r, 20)); } return f(u, o); })(window.fetch), true)`),
		waitJS(`(document.querySelector('.approval button.approve').click(), true)`),
	)
	run(t, a, "tab A approves",
		waitJS(`(document.querySelector('.approval button.approve').click(), true)`),
		waitJS(`document.querySelector('.approval').dataset.resolved === 'approved'`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('refunded \x2430.00 for order 7'))`),
	)
	run(t, b, "tab B loses",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('refunded \x2430.00 for order 7'))`),
		waitJS(`(window.release = true)`),
		waitJS(`document.querySelector('.approval').dataset.resolved === 'approved elsewhere'`),
		waitJS(`!document.querySelector('.turn .thinking')`),
		waitJS(`document.querySelector('details.tool[data-tool="issue_refund"]').dataset.status === 'done'`),
	)
	// Let the loser's failed run reach both pages' event streams.
	sendREST(t, ts.URL, sessionOf(t, a), "where is order 3?")
	for _, c := range []context.Context{a, b} {
		run(t, c, "a later turn", waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 3: shipped'))`))
		if n := value(t, c, "count replies", chromedp.Evaluate[int](`[...document.querySelectorAll('#live .msg.assistant')].filter(e => e.textContent.includes('refunded \x2430.00 for order 7')).length`)); n != 1 {
			t.Errorf("the resumed reply shows %d times", n)
		}
		noErrorCards(t, c, "after both approvals")
	}
}

// TestBrowserStop: the Stop button cancels the streaming turn.
func TestBrowserStop(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	run(t, ctx, "a slow turn, stopped", append(append(firstMessage(ts.URL, "hello"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		chromedp.SendKeys(chromedp.CSS("#input"), "tell a slow story"),
		enter(false),
	), stopAtWord3()...)...)
	txt := value(t, ctx, "read the card", chromedp.Evaluate[string](`document.querySelector('#live .card.cancelled').textContent`))
	if !strings.Contains(txt, "Cancelled") || strings.Contains(txt, "Please adjust") {
		t.Fatalf("the cancelled turn's card: %q", txt)
	}
}

// stopAtWord3 waits for the slow demo reply's third word, clicks Stop
// and waits for the turn's cancelled card, the send button back and the
// Stop button gone.
func stopAtWord3() []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('word3'))`),
		waitJS(`document.querySelector('#live button.stop') !== null`),
		chromedp.Click(chromedp.CSS("#live button.stop")),
		waitJS(`document.querySelector('#live .card.cancelled') !== null`),
		waitJS(`!document.querySelector('#send').disabled`),
		waitJS(`document.querySelector('#live button.stop') === null`),
		// The focus is back in the message box, not on the page's body
		// where the removed button left it.
		waitJS(`document.activeElement === document.querySelector('#input')`),
	}
}

// TestBrowserStopResumed: the turn an approval resumes can be stopped
// too (its run is the one resuming the card's). Before, only a new
// message's turn had a Stop button.
func TestBrowserStopResumed(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	run(t, ctx, "approve, then stop the slow reply", append(append(firstMessage(ts.URL, "refund order 7, then dawdle"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		chromedp.Click(chromedp.CSS(".approval button.approve")),
	), stopAtWord3()...)...)
	noErrorCards(t, ctx, "after the stop")
}

// TestBrowserTwoTabsApproveAtOnce: two tabs approve the same card at
// the same moment, neither held back. Whichever loses ends up showing
// the winner's reply once under a card approved elsewhere, and the
// winner shows its reply once under a card approved.
func TestBrowserTwoTabsApproveAtOnce(t *testing.T) { twoTabsApproveAtOnce(t, 0) }

// TestBrowserTwoTabsApproveLaggingStream: as TestBrowserTwoTabsApproveAtOnce,
// with tab B's event stream 200 ms behind the server, as behind a slow
// network or a buffering proxy: B's answer comes back before the other
// tab's run reaches B's stream. Before, when B lost it closed the card
// as no longer pending (and, when the winner's run had begun to stream,
// removed its turn: no reply), and when B won it showed its reply twice.
func TestBrowserTwoTabsApproveLaggingStream(t *testing.T) { twoTabsApproveAtOnce(t, 200) }

// twoTabsApproveAtOnce has tabs A and B click Approve on the same card
// at the same instant; B's event stream lags by lag milliseconds.
func twoTabsApproveAtOnce(t *testing.T, lag int) {
	ts, a, b := twoTabsOnACard(t)
	lagStream(t, b, lag)
	// Both tabs click at the same instant of the shared clock.
	at := time.Now().Add(300 * time.Millisecond).UnixMilli()
	click := fmt.Sprintf(`(setTimeout(() => document.querySelector('.approval button.approve').click(), %d - Date.now()), true)`, at)
	run(t, a, "tab A clicks", waitJS(click))
	run(t, b, "tab B clicks", waitJS(click))
	tabs := []struct {
		name string
		ctx  context.Context
	}{{"A", a}, {"B", b}}
	labels := map[string]int{}
	for _, tab := range tabs {
		run(t, tab.ctx, "tab "+tab.name+" shows the reply",
			waitJS(`['approved', 'approved elsewhere'].includes(document.querySelector('.approval').dataset.resolved)`),
			waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('refunded \x2430.00 for order 7'))`),
			waitJS(`!document.querySelector('.turn .thinking')`),
			waitJS(`document.querySelector('details.tool[data-tool="issue_refund"]').dataset.status === 'done'`),
		)
		labels[value(t, tab.ctx, "read the label", chromedp.Evaluate[string](`document.querySelector('.approval').dataset.resolved`))]++
	}
	if labels["approved"] != 1 || labels["approved elsewhere"] != 1 {
		t.Errorf("the cards read %v, want one approved and one approved elsewhere", labels)
	}
	// Let every run of both answers reach both pages' streams.
	sendREST(t, ts.URL, sessionOf(t, a), "where is order 3?")
	for _, tab := range tabs {
		run(t, tab.ctx, "a later turn in tab "+tab.name, waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 3: shipped'))`))
		if n := value(t, tab.ctx, "count replies", chromedp.Evaluate[int](`[...document.querySelectorAll('#live .msg.assistant')].filter(e => e.textContent.includes('refunded \x2430.00 for order 7')).length`)); n != 1 {
			t.Errorf("tab %s: the resumed reply shows %d times", tab.name, n)
		}
		if l := value(t, tab.ctx, "read the label", chromedp.Evaluate[string](`document.querySelector('.approval').dataset.resolved`)); l != "approved" && l != "approved elsewhere" {
			t.Errorf("tab %s: the card reads %q after the later turn", tab.name, l)
		}
		noErrorCards(t, tab.ctx, "tab "+tab.name+" after both approvals")
	}
}

// twoTabsOnACard serves the demo, asks for a refund's approval in tab A
// and opens the session in tab B, live, showing the card; B closes with
// the test.
func twoTabsOnACard(t *testing.T) (ts *httptest.Server, a, b context.Context) {
	ts = newDemoServer(t)
	a = browser(t)
	run(t, a, "a suspended refund in tab A", append(firstMessage(ts.URL, "refund order 7"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
	)...)
	session := sessionOf(t, a)
	b, cancelB := chromedp.NewContext(a)
	t.Cleanup(cancelB)
	b = context.WithValue(b, consoleKey{}, pageConsole(a))
	run(t, b, "tab B shows the card",
		chromedp.Navigate(ts.URL+"/#/s/"+session),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelector('.approval:not([data-resolved]) button.approve') !== null`),
	)
	return ts, a, b
}

// lagStream delays every chunk of tab's event stream by lag
// milliseconds (none when lag is 0), as a slow network or a buffering
// proxy would; the stream reopens (the page's "online" handler) to go
// through the delay.
func lagStream(t *testing.T, tab context.Context, lag int) {
	t.Helper()
	slowStream(t, tab, lag, false)
}

// paceStream delivers tab's event stream one event every gap
// milliseconds at most (each event gap after the one before it), as a
// slow link does: a run's events reach the page one after the other,
// the last ones well after the run ended.
func paceStream(t *testing.T, tab context.Context, gap int) {
	t.Helper()
	slowStream(t, tab, gap, true)
}

// slowStream delays tab's event stream: every chunk by ms, or (paced)
// every event (each frame of the stream) ms after the one before it, or
// after now if that was delivered already. The stream reopens (the
// page's "online" handler) to go through the delay.
func slowStream(t *testing.T, tab context.Context, ms int, paced bool) {
	t.Helper()
	if ms <= 0 {
		return
	}
	run(t, tab, "the tab's stream lags",
		waitJS(fmt.Sprintf(`(window.lagged = 0, window.fetch = ((f) => async (u, o) => {
			const r = await f(u, o);
			if (!/\/sessions\/[^/]+\/events$/.test(String(u)) || !r.body) return r;
			window.lagged++;
			const src = r.body.getReader();
			const paced = %t;
			let at = 0; // when the chunk before is delivered
			const later = (fn) => { at = Math.max(Date.now(), paced ? at : 0) + %d; setTimeout(fn, at - Date.now()); };
			const dec = new TextDecoder(), enc = new TextEncoder();
			let buf = '';
			const body = new ReadableStream({ start(c) {
				(async () => { for (;;) {
					const { value, done } = await src.read();
					if (done) return later(() => c.close());
					if (!paced) { later(() => c.enqueue(value)); continue; }
					buf += dec.decode(value, { stream: true });
					for (let i; (i = buf.indexOf('\n\n')) >= 0; buf = buf.slice(i + 2)) { const frame = enc.encode(buf.slice(0, i + 2)); later(() => c.enqueue(frame)); }
				} })().catch((e) => later(() => c.error(e)));
			}, cancel: (why) => src.cancel(why) });
			return new Response(body, { status: r.status, statusText: r.statusText, headers: r.headers });
		})(window.fetch), dispatchEvent(new Event('online')), true)`, paced, ms)),
		waitJS(`window.lagged >= 1 && document.querySelector('#conn').dataset.state === 'live'`),
	)
}
