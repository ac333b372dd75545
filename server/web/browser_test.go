package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/armature-go/armature/internal/servertest"
)

// chromium finds the browser: $ARMATURE_CHROMIUM, else Debian's chromium
// (or chrome) on PATH. Without one the browser tests skip locally and
// fail in CI.
func chromium(t *testing.T) string { return servertest.Chromium(t) }

// artifacts is where screenshots go: $ARMATURE_ARTIFACTS, else a temp dir.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARMATURE_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// console collects the page's console messages and exceptions.
type console struct {
	mu   sync.Mutex
	msgs []string
}

func (c *console) add(m string) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
}

func (c *console) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.msgs, "\n")
}

type consoleKey struct{}

// browser starts a headless Chromium and returns a tab's context, whose
// console messages are collected (see pageConsole).
func browser(t *testing.T) context.Context {
	t.Helper()
	exe := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelTab)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTime)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	c := &console{}
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			c.add(fmt.Sprintf("%s: %s", m.Type, m.Text))
		}
	}()
	t.Cleanup(func() { cancelTab(); <-done })
	return context.WithValue(ctx, consoleKey{}, c)
}

func pageConsole(ctx context.Context) *console { return ctx.Value(consoleKey{}).(*console) }

// run runs actions, failing the test with what the page shows.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		fail(t, ctx, what, err)
	}
}

// value runs an action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		fail(t, ctx, what, err)
	}
	return v
}

func fail(t *testing.T, ctx context.Context, what string, err error) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.msg, .tool, .card')].map(e => (e.closest('#history') ? 'H ' : 'L ') + e.className + (e.dataset.streamed !== undefined ? '[streamed]' : '') + (e.dataset.status ? '[' + e.dataset.status + ']' : '') + ': ' + e.textContent.replace(/\s+/g, ' ').slice(0, 80)).join('\n')`))
	t.Fatalf("%s: %v\npage:\n%s\nconsole:\n%s", what, err, body, pageConsole(ctx))
}

// waitJS polls a JavaScript expression until it is true.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, t)
		if err != nil {
			err = fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return chromedp.Void{}, err
	}
}

// enter presses Enter (with Shift) as a keyboard does: one keyDown that
// carries the text, so the page's preventDefault suppresses the newline.
func enter(shift bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		var mods int64
		if shift {
			mods = int64(kb.ModifierShift)
		}
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: "Enter", Code: "Enter",
			WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13, Text: "\r", UnmodifiedText: "\r", Modifiers: mods}
		if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, down); err != nil {
			return err
		}
		up := down
		up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, up)
		return err
	})
}

// colorScheme emulates prefers-color-scheme.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) string {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBrowser drives the real page in headless Chromium against the
// server over the demo agent: a new session, a streamed reply, the
// approval-gated refund approved in the page with its resumed reply
// streamed in, a reply that arrives from another client over the event
// stream after the connection dropped, history after a reload, the run
// inspector, and the dark theme. Screenshots go to $ARMATURE_ARTIFACTS
// (else a temp dir); with ARMATURE_UPDATE_SCREENSHOTS=1 the light and
// dark ones are copied to docs/ for the README.
func TestBrowser(t *testing.T) {
	ts := newDemoServer(t) // before the browser: cleanups close the browser first
	ctx := browser(t)
	dir := artifacts(t)
	url := ts.URL + "/"

	run(t, ctx, "open the page",
		colorScheme("light"),
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.activeElement === document.querySelector('#input')`),
	)

	// A new session: the first message creates it. Its reply streams
	// when the session's new event stream is live within the page's
	// wait for it (1.5 s), else it comes with the POST's answer: on a
	// loaded machine either may win, so only the later turns, sent once
	// the stream is live, must stream.
	run(t, ctx, "send a message",
		chromedp.SendKeys(chromedp.CSS("#input"), "hello there"),
		enter(false),
		waitJS(`location.hash.startsWith('#/s/')`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('offline demo agent'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelectorAll('#sessions li').length === 1`),
	)
	session := value(t, ctx, "read the session id", chromedp.Evaluate[string](`decodeURIComponent(location.hash.slice('#/s/'.length))`))

	// Shift+Enter adds a line instead of sending.
	run(t, ctx, "shift+enter",
		chromedp.SendKeys(chromedp.CSS("#input"), "where is"),
		enter(true),
		chromedp.SendKeys(chromedp.CSS("#input"), "order 7?"),
	)
	if v := value(t, ctx, "read the input", chromedp.Value(chromedp.CSS("#input"))); v != "where is\norder 7?" {
		t.Fatalf("after Shift+Enter the input is %q", v)
	}
	run(t, ctx, "a tool call",
		enter(false),
		waitJS(`[...document.querySelectorAll('#live details.tool[data-tool="lookup_order"][data-status="done"]')].length === 1`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant[data-streamed]')].some(e => e.textContent.includes('arriving Thursday'))`),
	)

	// The approval-gated tool: an approval card, approved in the page; the
	// resumed reply streams in over the event stream. The card does not
	// take the focus: it stays in the message box, where the user was
	// (the page used to move it to Approve, so that a user still typing
	// approved the call with the next Space; see
	// TestBrowserApprovalKeepsFocus). A screen reader hears it announced.
	run(t, ctx, "ask for a refund",
		chromedp.SendKeys(chromedp.CSS("#input"), "refund order 7"),
		enter(false),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		waitJS(`document.querySelector('.approval').textContent.includes('issue_refund')`),
		waitJS(`document.querySelector('#announce').textContent.includes('issue_refund')`),
		waitJS(`document.activeElement === document.querySelector('#input')`),
	)
	screenshot(t, ctx, dir, "approval-light.png")
	run(t, ctx, "approve",
		// The decision names the suspended invocation too, so it cannot
		// resume a later turn whose request has the same signal id.
		waitJS(`(window.signalBodies ??= (() => { const f = window.fetch; window.fetch = (u, o) => { if (String(u).includes('/signals')) window.signalBodies.push(o.body); return f(u, o); }; return []; })(), true)`),
		chromedp.SendKeys(chromedp.CSS(".approval input"), "ok by me"),
		chromedp.Click(chromedp.CSS(".approval button.approve")),
		waitJS(`document.querySelector('.approval').dataset.resolved === 'approved'`),
		waitJS(`window.signalBodies.length === 1 && JSON.parse(window.signalBodies[0]).invocation_id?.length > 0`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant[data-streamed]')].some(e => e.textContent.includes('refunded \x2430.00 for order 7'))`),
		waitJS(`document.querySelector('#live details.tool[data-tool="issue_refund"][data-status="done"]') !== null`),
	)
	light := screenshot(t, ctx, dir, "chat-light.png")

	// A network drop: the stream reconnects with Last-Event-ID and a turn
	// sent meanwhile by another client arrives without loss.
	ts.CloseClientConnections()
	sendREST(t, ts.URL, session, "where is order 99?")
	run(t, ctx, "the turn sent while disconnected arrives",
		waitJS(`[...document.querySelectorAll('#live .msg.user')].some(e => e.textContent.includes('where is order 99?'))`),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 99: shipped'))`),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
	)
	count := value(t, ctx, "count", chromedp.Evaluate[int](`[...document.querySelectorAll('#live .msg.assistant')].filter(e => e.textContent.includes('order 99: shipped')).length`))
	if count != 1 {
		t.Fatalf("the reply of the turn sent while disconnected shows %d times", count)
	}

	// Reload: the history is there, the approval resolved.
	run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#history').textContent.includes('refunded \x2430.00 for order 7')`),
		waitJS(`document.querySelector('#history').textContent.includes('order 99: shipped')`),
		waitJS(`document.querySelectorAll('#history details.tool').length === 3`),
		waitJS(`document.querySelector('.approval') === null`),
		waitJS(`document.querySelector('#sessions a[aria-current="page"]') !== null`),
	)

	// The run inspector: every turn with its timeline and tool calls.
	run(t, ctx, "inspector",
		chromedp.Navigate(url+"#/runs/"+session),
		waitJS(`document.querySelectorAll('#runs article.run').length === 5`),
		waitJS(`document.querySelectorAll('#runs article.run[data-status="suspended"]').length === 1`),
		waitJS(`[...document.querySelectorAll('#runs table.tools code')].some(e => e.textContent === 'issue_refund')`),
		chromedp.Click(chromedp.CSS("#runs article.run details.timeline summary")),
		waitJS(`document.querySelector('#runs .events li') !== null`),
	)
	screenshot(t, ctx, dir, "inspector-light.png")

	// The theme toggle: auto → light → dark.
	run(t, ctx, "dark theme",
		chromedp.Navigate(url+"#/s/"+session),
		waitJS(`document.querySelector('#history').textContent.includes('refunded')`),
		chromedp.Click(chromedp.CSS("#theme")),
		chromedp.Click(chromedp.CSS("#theme")),
		waitJS(`document.documentElement.dataset.theme === 'dark'`),
	)
	bg := value(t, ctx, "read the background", chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	if bg != "rgb(15, 17, 21)" {
		t.Fatalf("dark theme background = %s", bg)
	}
	dark := screenshot(t, ctx, dir, "chat-dark.png")
	t.Logf("screenshots in %s", dir)

	if os.Getenv("ARMATURE_UPDATE_SCREENSHOTS") != "" {
		for src, dst := range map[string]string{light: "screenshot-light.png", dark: "screenshot-dark.png"} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("..", "..", "docs", dst), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sendREST sends a message as another client would.
func sendREST(t *testing.T, base, session, content string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"content": content})
	resp, err := http.Post(fmt.Sprintf("%s/v1/sessions/%s/messages", base, session), "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Outcome string `json:"outcome"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Outcome != "completed" {
		t.Fatalf("REST send: %v %+v", err, out)
	}
}

// TestBrowserSupersededApproval: a message sent while a turn awaits
// approval closes its card (and marks its tool call not run); an
// approval card another client's message superseded closes as superseded
// (from the session's events), with no error and no resumed turn.
func TestBrowserSupersededApproval(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	run(t, ctx, "a suspended refund",
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		chromedp.SendKeys(chromedp.CSS("#input"), "refund order 8"),
		enter(false),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
	)
	run(t, ctx, "a new message supersedes it",
		chromedp.SendKeys(chromedp.CSS("#input"), "where is order 3?"),
		enter(false),
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 3'))`),
		waitJS(`document.querySelector('.approval').dataset.resolved === 'closed: you sent a new message'`),
		waitJS(`document.querySelector('.approval button.approve').disabled`),
		waitJS(`document.querySelector('#live details.tool[data-tool="issue_refund"]').dataset.status === 'not-run'`),
	)
	session := value(t, ctx, "read the session id", chromedp.Evaluate[string](`decodeURIComponent(location.hash.slice('#/s/'.length))`))

	run(t, ctx, "another suspended refund",
		chromedp.SendKeys(chromedp.CSS("#input"), "refund order 9"),
		enter(false),
		waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 1`),
	)
	sendREST(t, ts.URL, session, "where is order 4?") // another client supersedes it
	run(t, ctx, "the superseded card closes",
		waitJS(`[...document.querySelectorAll('#live .msg.assistant')].some(e => e.textContent.includes('order 4'))`),
		waitJS(`document.querySelectorAll('.approval[data-resolved="closed: a newer message"]').length === 1`),
		waitJS(`document.querySelectorAll('.approval:not([data-resolved])').length === 0`),
	)
	if n := value(t, ctx, "count error cards", chromedp.Evaluate[int](`document.querySelectorAll('#live .card.error').length`)); n != 0 {
		t.Fatalf("%d error cards after approving a superseded card", n)
	}
	if s := pageConsole(ctx).String(); strings.Contains(s, "Uncaught") {
		t.Fatalf("page errors: %s", s)
	}
}
