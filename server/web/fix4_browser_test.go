package web_test

// Regression tests for a fourth round of the page's defects: a failed
// tool call that read "done" after a reload, a reload while a reply
// streams that showed the reply from its middle without its message,
// and bidi control characters in model text that reordered a bubble.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
)

// stockArgs are check_stock's arguments.
type stockArgs struct {
	Order string `json:"order" jsonschema:"the order number"`
}

// errNoWarehouse is what check_stock fails with.
var errNoWarehouse = errors.New("the warehouse is unreachable")

// fix4Tools are the demo's tools and check_stock, which always fails.
func fix4Tools() []agent.Tool {
	stock := agent.MustTool("check_stock", "Check an order's stock (always fails)",
		func(ctx context.Context, a stockArgs) (string, error) { return "", errNoWarehouse }).WithRisk(agent.RiskSafe)
	return append(demo.Tools(), stock)
}

// fix4Model is the test model with more scripted answers to the last
// user message: "say: <text>" answers <text> as written (streamed a
// few characters at a time), "look up: <text>" calls lookup_order with
// <text> as the order, "check stock and refund" calls check_stock and
// issue_refund in one step (the refund awaits approval), and "check
// stock" calls check_stock.
type fix4Model struct{ testModel }

// lastUserText is the text of the conversation's last message if it is
// the user's, as written (lastUser lowercases it), else "".
func lastUserText(req *llm.Request) string {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == llm.RoleUser {
		return req.Messages[n-1].Text()
	}
	return ""
}

// step is fix4Model's scripted answer to req, if it has one.
func (fix4Model) step(req *llm.Request) (llm.Message, bool) {
	u := lastUserText(req)
	call := func(name string, args any) llm.ToolCall {
		b, _ := json.Marshal(args)
		return llm.ToolCall{ID: fmt.Sprintf("call_%s_%d", name, len(req.Messages)), Name: name, Arguments: b}
	}
	switch {
	case strings.HasPrefix(u, "say: "):
		return llm.AssistantText(strings.TrimPrefix(u, "say: ")), true
	case strings.HasPrefix(u, "look up: "):
		return llm.AssistantToolCalls(call("lookup_order", map[string]string{"order": strings.TrimPrefix(u, "look up: ")})), true
	case strings.Contains(u, "check stock and refund"):
		return llm.AssistantToolCalls(call("check_stock", map[string]string{"order": "6"}),
			call("issue_refund", map[string]any{"order": "6", "amount": 30})), true
	case strings.Contains(u, "check stock"):
		return llm.AssistantToolCalls(call("check_stock", map[string]string{"order": "5"})), true
	}
	return llm.Message{}, false
}

func (m fix4Model) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	msg, ok := m.step(req)
	if !ok {
		return m.testModel.Complete(ctx, req)
	}
	finish := llm.FinishStop
	if len(msg.ToolCalls) > 0 {
		finish = llm.FinishToolCalls
	}
	return &llm.Response{Message: msg, FinishReason: finish, Raw: json.RawMessage(`{}`)}, nil
}

func (m fix4Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	msg, ok := m.step(req)
	switch {
	case !ok:
		return m.testModel.Stream(ctx, req)
	case len(msg.ToolCalls) > 0:
		return callsStream(msg)
	}
	return func(yield func(*llm.Chunk, error) bool) {
		for r := []rune(msg.Text()); len(r) > 0; {
			n := min(3, len(r))
			if !yield(&llm.Chunk{Content: string(r[:n]), Raw: json.RawMessage(`{}`)}, nil) {
				return
			}
			r = r[n:]
		}
		yield(&llm.Chunk{FinishReason: llm.FinishStop, Raw: json.RawMessage(`{}`)}, nil)
	}
}

// newFix4Server serves fix4Model's agent with fix4Tools.
func newFix4Server(t *testing.T) string {
	t.Helper()
	a, err := agent.New(agent.Config{Provider: fix4Model{}, System: "You are the Armature demo agent.", Tools: fix4Tools()})
	if err != nil {
		t.Fatal(err)
	}
	return servertest.New(t, a).URL
}

// TestBrowserFailedToolAfterReload: a tool call that failed (the tool
// returned an error) still reads failed after a reload, as it did live,
// with its error under "Error": in a turn that completed, and in a turn
// that suspended for an approval after it (whose run's output lists no
// tool results). A call that succeeded still reads done. Before, after
// a reload every failed call read done, its error shown as its result:
// the stored tool messages do not say that a call failed, and the page
// read the runs' events for the approval decisions only.
func TestBrowserFailedToolAfterReload(t *testing.T) {
	for _, tc := range []struct {
		name  string
		strip bool // the run listing without failed_tools (runs an earlier build recorded)
	}{{"runs report their tools", false}, {"runs recorded without failed_tools", true}} {
		t.Run(tc.name, func(t *testing.T) {
			base := newFix4Server(t)
			if tc.strip {
				failedToolAfterReload(t, withoutToolReports(t, base))
				return
			}
			failedToolAfterReload(t, base)
			checkToolReports(t, base)
		})
	}
}

// withoutToolReports serves base with "failed_tools" taken out of the
// run outputs of its run listings.
func withoutToolReports(t *testing.T, base string) string {
	return rewritingProxy(t, base, func(path string) bool { return strings.HasSuffix(path, "/runs") }, func(page map[string]any) {
		runs, _ := page["runs"].([]any)
		for _, r := range runs {
			if out, ok := r.(map[string]any)["output"].(map[string]any); ok {
				delete(out, "failed_tools")
			}
		}
	})
}

// rewritingProxy serves base with edit applied to the JSON objects it
// answers (200) to the paths match accepts; everything else, event
// streams included, passes as it is.
func rewritingProxy(t *testing.T, base string, match func(path string) bool, edit func(map[string]any)) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if !match(resp.Request.URL.Path) || resp.StatusCode != 200 {
			return nil
		}
		var page map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			return err
		}
		resp.Body.Close()
		edit(page)
		b, err := json.Marshal(page)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ts := httptest.NewServer(proxy)
	t.Cleanup(ts.Close)
	return ts.URL
}

// checkToolReports: the runs of a turn whose tool succeeded, one whose
// tool failed and one with no tool report their tools in their output
// (failed_tools), or nothing.
func checkToolReports(t *testing.T, base string) {
	t.Helper()
	for _, tc := range []struct {
		content string
		want    string
	}{{"where is order 3?", "[]"}, {"check stock of order 5", `["call_check_stock_`}, {"hello", "<none>"}} {
		var out struct {
			RunID string `json:"run_id"`
		}
		if code := postJSON(t, base+"/v1/sessions/reports/messages", map[string]string{"content": tc.content}, &out); code != 200 || out.RunID == "" {
			t.Fatalf("%s: %d %+v", tc.content, code, out)
		}
		resp, err := http.Get(base + "/v1/runs/" + out.RunID)
		if err != nil {
			t.Fatal(err)
		}
		var run struct {
			Output map[string]json.RawMessage `json:"output"`
		}
		err = json.NewDecoder(resp.Body).Decode(&run)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := run.Output["failed_tools"]
		if !ok {
			got = json.RawMessage("<none>")
		}
		if string(got) != tc.want && (!strings.HasPrefix(string(got), tc.want) || strings.Count(string(got), ",") > 0) {
			t.Errorf("%s: the run's failed_tools is %s, want %s", tc.content, got, tc.want)
		}
	}
}

func failedToolAfterReload(t *testing.T, base string) {
	ctx := browser(t)
	// The cards but the refund's (awaiting approval).
	cards := `[...document.querySelectorAll('details.tool:not([data-tool="issue_refund"])')].map(e => e.dataset.tool + ' ' + e.dataset.status + ' ' + e.querySelector('.badge').textContent + (e.querySelector('.result h4')?.textContent ?? '')).join(', ')`
	const want = "lookup_order done doneResult, check_stock failed failedError, check_stock failed failedError"
	run(t, ctx, "a call that runs, one that fails, one that fails before an approval", append(firstMessage(base, "where is order 3?"),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 3: shipped'))`),
		waitJS(`!document.querySelector('#send').disabled`),
		chromedp.SendKeys(chromedp.CSS("#input"), "check stock of order 5"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('warehouse is unreachable'))`),
		waitJS(`!document.querySelector('#send').disabled`),
		chromedp.SendKeys(chromedp.CSS("#input"), "check stock and refund order 6"),
		enter(false),
		waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 1`),
	)...)
	live := value(t, ctx, "read the tool cards", chromedp.Evaluate[string](cards))
	if live != want {
		t.Fatalf("live, the tool cards read %q, want %q", live, want)
	}
	run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelectorAll('#history details.tool').length === 4`),
		waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 1`),
	)
	got := value(t, ctx, "read the tool cards", chromedp.Evaluate[string](cards))
	if got != want {
		t.Fatalf("after the reload the tool cards read %q, want %q (as live)", got, want)
	}
	if got := value(t, ctx, "read an error", chromedp.Evaluate[string](`document.querySelector('#history details.tool[data-tool="check_stock"] .result pre').textContent`)); !strings.Contains(got, errNoWarehouse.Error()) {
		t.Fatalf("after the reload the failed call's error reads %q", got)
	}
	noErrorCards(t, ctx, "after the reload")
}

// TestBrowserReloadWhileStreaming: a page reloaded while a turn's reply
// streams shows the turn from its beginning: the reply streamed so far,
// which goes on streaming, and its message (this tab's, which it kept
// across the reload, with its Stop button) or, for a message another
// client sent, a note that it shows once the reply ends; then the turn
// ends with its message and its reply, each once. Before, the page
// showed nothing of the turn until its next delta, then the reply from
// there on, without its message, until the turn ended.
func TestBrowserReloadWhileStreaming(t *testing.T) {
	for _, tc := range []struct {
		name string
		mine bool // this tab sent the message
		// inFlight holds while the turn streams after the reload.
		inFlight string
	}{
		{"this tab's message", true, `(() => { const turn = [...document.querySelectorAll('#live .turn')].find(e => e.textContent.includes('before the drop'));
			return turn && turn.querySelector('.msg.user')?.textContent === 'Youa gated story' && turn.querySelector('.msg.user + .msg.assistant') !== null
				&& turn.querySelector('button.stop') !== null && !turn.querySelector('.pending-user'); })()`},
		{"another client's message", false, `(() => { const turn = [...document.querySelectorAll('#live .turn')].find(e => e.textContent.includes('before the drop'));
			return turn && turn.querySelector('.pending-user + .msg.assistant') !== null && !turn.querySelector('.msg.user'); })()`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				base    string
				ctx     context.Context
				release func()
			)
			if tc.mine {
				ts, c, r := gatedTurn(t, "r")
				base, ctx, release = ts.URL, c, r
			} else {
				base, ctx, release = gatedElsewhere(t, "r")
			}
			run(t, ctx, "reload while the reply streams",
				chromedp.Reload(),
				chromedp.WaitVisible(chromedp.CSS("#input")),
				waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
				waitJS(tc.inFlight),
			)
			release()
			run(t, ctx, "the turn ends",
				waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('before the drop and after it'))`),
				waitJS(`[...document.querySelectorAll('#live .msg.user')].some(e => e.textContent === 'Youa gated story')`),
				waitJS(`document.querySelector('#live button.stop') === null`),
			)
			got := value(t, ctx, "read the page", chromedp.Evaluate[string](`[...document.querySelectorAll('.msg, .pending-user')].map(e => e.textContent).join(' | ')`))
			if want := "Youa gated story | Agentbefore the drop and after it"; got != want {
				t.Fatalf("once the turn ended the page reads %q, want %q", got, want)
			}
			noErrorCards(t, ctx, "after the turn")
			if got := userMessages(t, base, "r"); len(got) != 1 || got[0] != "a gated story" {
				t.Fatalf("the session's messages: %q", got)
			}
		})
	}
}

// gatedElsewhere serves the gated model and opens the page on session,
// where another client's message ("a gated story") is answered, half
// streamed, until release is called; the page shows the reply so far.
func gatedElsewhere(t *testing.T, session string) (string, context.Context, func()) {
	t.Helper()
	ts, release := gatedDemo(t)
	ctx := browser(t)
	run(t, ctx, "open the session "+session,
		chromedp.Navigate(ts.URL+"/#/s/"+session),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
	)
	done := make(chan error, 1)
	t.Cleanup(func() { release(); <-done })
	go func() {
		body := strings.NewReader(`{"content": "a gated story"}`)
		resp, err := http.Post(ts.URL+"/v1/sessions/"+session+"/messages", "application/json", body)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	run(t, ctx, "another client's turn streams",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('before the drop'))`),
	)
	return ts.URL, ctx, release
}

// order is a JavaScript function: whether the characters of word, in
// the first element sel matches that holds it, are laid out left to
// right ("ltr") or right to left ("rtl") on the screen, or "" when
// neither (or it is not found).
const order = `((sel, word) => {
	for (const root of document.querySelectorAll(sel)) {
		root.normalize(); // a streamed reply's text nodes in one
		const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			const at = n.data.indexOf(word);
			if (at < 0) continue;
			const xs = [...word].map((_, i) => { const r = document.createRange(); r.setStart(n, at + i); r.setEnd(n, at + i + 1); return r.getBoundingClientRect().left; });
			if (xs.every((x, i) => i === 0 || x > xs[i - 1])) return 'ltr';
			if (xs.every((x, i) => i === 0 || x < xs[i - 1])) return 'rtl';
			return '';
		}
	}
	return '';
})`

// leftOf is a JavaScript function: whether, in the first element sel
// matches whose text holds b, the character a stands left of b's first.
const leftOf = `((sel, a, b) => {
	const root = [...document.querySelectorAll(sel)].find(e => e.textContent.includes(b));
	if (!root) return false;
	root.normalize();
	const x = (c) => {
		const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			const at = n.data.indexOf(c);
			if (at >= 0) { const r = document.createRange(); r.setStart(n, at); r.setEnd(n, at + 1); return r.getBoundingClientRect().left; }
		}
		return NaN;
	};
	return x(a) < x(b);
})`

// TestBrowserBidiInBubbles: text with bidi control characters, in the
// model's replies (streamed, and after a reload), the user's messages
// and tool results, reorders nothing: an override, embedding or isolate
// shows as its escape (as on the approval card), and the text
// after it reads in its own order. Right-to-left text still reads right
// to left, its paragraph laid out right to left (its closing "!" at its
// left), its marks at work. Before, "\u202E" reversed the rest of its
// line ("fdp.exe" read "exe.pdf") in every bubble, and a Hebrew reply's
// "!" stood at its right, as in a left-to-right paragraph.
func TestBrowserBidiInBubbles(t *testing.T) {
	base := newFix4Server(t)
	ctx := browser(t)
	type layout struct {
		sel, word, dir string
	}
	cases := []struct {
		name, send string
		layouts    []layout
		escapes    []string    // the escapes its turn shows, in order
		left       [][3]string // {sel, a, b}: a stands left of b
	}{
		{name: "an override in a reply", send: "say: invoice \u202Efdp.exe is safe",
			layouts: []layout{{".msg.assistant .body", "fdp.exe", "ltr"}, {".msg.user .body", "fdp.exe", "ltr"}},
			escapes: []string{`\u202e`, `\u202e`}},
		{name: "an isolate and an embedding in a reply", send: "say: total \u2067\u202B12 00\u202C\u2069 due",
			layouts: []layout{{".msg.assistant .body", "12 00", "ltr"}},
			escapes: []string{`\u2067`, `\u202b`, `\u202c`, `\u2069`, `\u2067`, `\u202b`, `\u202c`, `\u2069`}},
		{name: "an override in a tool result", send: "look up: 7\u202Ecod.exe",
			layouts: []layout{{"details.tool .result pre", "cod.exe", "ltr"}, {".msg.assistant .body", "cod.exe", "ltr"}},
			escapes: []string{`\u202e`, `\u202e`, `\u202e`, `\u202e`}}, // the message, the arguments, the result, the reply
		{name: "Hebrew", send: "say: שלום עולם!",
			layouts: []layout{{".msg.assistant .body", "שלום", "rtl"}, {".msg.user .body", "שלום", "rtl"}},
			left:    [][3]string{{".msg.assistant .body", "!", "ש"}}},
		{name: "Arabic with a right-to-left mark", send: "say: مرحبا بكم (1)\u200F.",
			layouts: []layout{{".msg.assistant .body", "مرحبا", "rtl"}},
			left:    [][3]string{{".msg.assistant .body", ".", "م"}}},
	}
	// verify checks the layouts within root (#live or #history).
	verify := func(t *testing.T, root string, layouts []layout, left [][3]string) {
		t.Helper()
		for _, l := range layouts {
			js := fmt.Sprintf(`%s(%q, %q)`, order, root+" "+l.sel, l.word)
			if got := value(t, ctx, "read the layout", chromedp.Evaluate[string](js)); got != l.dir {
				t.Errorf("%s: %q in %s is laid out %q, want %q", root, l.word, l.sel, got, l.dir)
			}
		}
		for _, l := range left {
			js := fmt.Sprintf(`%s(%q, %q, %q)`, leftOf, root+" "+l[0], l[1], l[2])
			if !value(t, ctx, "read the layout", chromedp.Evaluate[bool](js)) {
				t.Errorf("%s: %q does not stand left of %q in %s", root, l[1], l[2], l[0])
			}
		}
	}
	run(t, ctx, "open the page", chromedp.Navigate(base+"/#/s/bidi"), chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run(t, ctx, "send",
				waitJS(`!document.querySelector('#send').disabled`),
				waitJS(fmt.Sprintf(`(document.querySelector('#input').value = %q, true)`, tc.send)),
				// The turns before this one: the send button is disabled
				// only while the turn runs, which a loaded machine's
				// polling can miss; the turn's own node is what to wait for.
				waitJS(`(window.turnsBefore = document.querySelectorAll('#live .turn').length, true)`),
				enter(false),
				waitJS(`document.querySelectorAll('#live .turn').length > window.turnsBefore`),
				waitJS(`!document.querySelector('#send').disabled`),
				waitJS(`[...document.querySelectorAll('#live .turn')].at(-1).querySelector('.msg.assistant') !== null`),
				waitJS(`(document.querySelectorAll('details.tool').forEach(e => e.open = true), true)`),
			)
			esc := value(t, ctx, "read the escapes", chromedp.Evaluate[[]string](`[...[...document.querySelectorAll('#live .turn')].at(-1).querySelectorAll('.esc')].map(e => e.textContent)`))
			if strings.Join(esc, " ") != strings.Join(tc.escapes, " ") {
				t.Errorf("the turn's escapes: %q, want %q", esc, tc.escapes)
			}
			verify(t, "#live", tc.layouts, tc.left)
		})
	}
	run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelectorAll('#history .msg.assistant').length === 5`),
		waitJS(`(document.querySelectorAll('details.tool').forEach(e => e.open = true), true)`),
	)
	for _, tc := range cases {
		verify(t, "#history", tc.layouts, tc.left)
	}
}
