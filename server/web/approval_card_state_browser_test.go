package web_test

import (
	"context"
	"io"
	"iter"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
)

// refundCards reads the issue_refund tool cards: each one's status and
// badge.
const refundCards = `[...document.querySelectorAll('details.tool[data-tool="issue_refund"]')].map(e => e.dataset.status + ' ' + e.querySelector('.badge').textContent).join(', ')`

// approvalCardState reads the approval card: its label and whether its
// buttons are enabled.
const approvalCardState = `(() => { const c = document.querySelector('.approval'); return (c.dataset.resolved ?? 'open') + ' | ' + c.querySelector('.status').textContent + ' | Approve enabled: ' + !c.querySelector('button.approve').disabled + ', Deny enabled: ' + !c.querySelector('button.deny').disabled; })()`

// reloadSettled reloads the page and waits until its history shows the
// refund's tool card and whatever the runs tell has arrived.
func reloadSettled(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		waitJS(`document.querySelector('#conn').dataset.state === 'live'`),
		waitJS(`document.querySelectorAll('#history details.tool[data-tool="issue_refund"]').length === 1`),
		chromedp.Sleep(time.Second),
	)
}

// historyOf returns the session's history as the REST API serves it.
func historyOf(t *testing.T, base, session string) string {
	t.Helper()
	resp, err := http.Get(base + "/v1/sessions/" + session)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestBrowserCancelledApprovalNotRunAfterReload: a refund whose
// suspended turn was cancelled (POST /v1/runs/{id}/cancel) reads "not
// run" live, and still after a reload, before any next message closes
// the call in the history (until then the history has the call and no
// result). Before, after the reload its card read "running" until the
// next message.
func TestBrowserCancelledApprovalNotRunAfterReload(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	run(t, ctx, "a suspended refund", append(firstMessage(ts.URL, "refund order 8"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
	)...)
	session := sessionOf(t, ctx)
	var res map[string]any
	if code := postJSON(t, ts.URL+"/v1/runs/"+suspendedRun(t, ts.URL, session)+"/cancel", map[string]any{}, &res); code != http.StatusAccepted || res["cancelled"] != true {
		t.Fatalf("cancel: %d %v", code, res)
	}
	run(t, ctx, "the cancelled card closes live",
		waitJS(`document.querySelectorAll('details.tool[data-tool="issue_refund"][data-status="not-run"]').length === 1`),
	)
	const want = "not-run not run"
	if got := value(t, ctx, "read the tool card", chromedp.Evaluate[string](refundCards)); got != want {
		t.Fatalf("live the cancelled refund's card reads %q, want %q", got, want)
	}
	reloadSettled(t, ctx)
	if got := value(t, ctx, "read the tool card", chromedp.Evaluate[string](refundCards)); got != want {
		t.Fatalf("after a reload the cancelled refund's card reads %q, want %q", got, want)
	}
	if n := value(t, ctx, "count approval cards", chromedp.Evaluate[int](`document.querySelectorAll('.approval').length`)); n != 0 {
		t.Fatalf("after a reload %d approval cards show for a cancelled turn", n)
	}
	noErrorCards(t, ctx, "after the reload")
}

// TestBrowserStopAfterApprovalKeepsDecision: the user approves a
// refund, the refund runs, and the user stops the reply after it. The
// approval card reads Approved, its buttons closed: the decision took
// effect (the session holds the refund's result), and the turn's end
// shows below it as cancelled. After a reload the refund's card reads
// done, as it did live. Before, the card said "Not sent: retry below."
// and offered Approve and Deny again.
func TestBrowserStopAfterApprovalKeepsDecision(t *testing.T) {
	ts := newTestServer(t)
	ctx := browser(t)
	run(t, ctx, "approve, then stop the slow reply", append(append(firstMessage(ts.URL, "refund order 7, then dawdle"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
		chromedp.Click(chromedp.CSS(".approval button.approve")),
	), stopAtWord3()...)...)
	run(t, ctx, "the card settles", waitJS(`document.querySelector('.approval').dataset.resolved !== undefined`))
	if h := historyOf(t, ts.URL, sessionOf(t, ctx)); !strings.Contains(h, "refunded $30.00") {
		t.Fatalf("the refund did not run: %s", h)
	}
	if got, want := value(t, ctx, "read the card", chromedp.Evaluate[string](approvalCardState)), "approved | Approved | Approve enabled: false, Deny enabled: false"; got != want {
		t.Fatalf("the approved refund ran, yet its approval card reads %q, want %q", got, want)
	}
	noErrorCards(t, ctx, "after the stop")
	const want = "done done"
	if got := value(t, ctx, "read the tool card", chromedp.Evaluate[string](refundCards)); got != want {
		t.Fatalf("live the refund's card reads %q, want %q", got, want)
	}
	reloadSettled(t, ctx)
	if got := value(t, ctx, "read the tool card", chromedp.Evaluate[string](refundCards)); got != want {
		t.Fatalf("after a reload the refund's card reads %q, want %q", got, want)
	}
}

// flakyAfterModel is the test model, except that its answer to a tool
// result in a conversation whose last user message says "flaky" fails
// as an upstream that is down for now (retryable).
type flakyAfterModel struct{ testModel }

func flakyAfter(req *llm.Request) bool {
	n := len(req.Messages)
	if n == 0 || req.Messages[n-1].Role != llm.RoleTool {
		return false
	}
	for i := n - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleUser {
			return strings.Contains(req.Messages[i].Text(), "flaky")
		}
	}
	return false
}

var errFlaky = &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "openai", Op: "stream", Message: "overloaded"}

func (m flakyAfterModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if flakyAfter(req) {
		return nil, errFlaky
	}
	return m.testModel.Complete(ctx, req)
}

func (m flakyAfterModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	if flakyAfter(req) {
		return func(yield func(*llm.Chunk, error) bool) { yield(nil, errFlaky) }
	}
	return m.testModel.Stream(ctx, req)
}

// upstreamFailsAfterDecision decides a refund (approve or deny) whose
// reply after the decision fails upstream (retryably), and checks the
// page: the approval card keeps the decision (label, buttons closed),
// the turn's error shows below it with no Retry (the decision took
// effect: a new message goes on), and the refund's tool card reads
// wantTool live and after a reload.
func upstreamFailsAfterDecision(t *testing.T, button, label, wantTool string) {
	a, err := agent.New(agent.Config{Provider: flakyAfterModel{}, System: "You are the Armature demo agent.", Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.New(t, a)
	ctx := browser(t)
	run(t, ctx, "decide a refund whose reply after it fails", append(firstMessage(ts.URL, "refund order 7, flaky"),
		chromedp.WaitVisible(chromedp.CSS(".approval button."+button)),
		chromedp.Click(chromedp.CSS(".approval button."+button)),
		waitJS(`document.querySelector('#live .card.error') !== null && !document.querySelector('#send').disabled`),
		waitJS(`document.querySelector('.approval').dataset.resolved !== undefined`),
	)...)
	h := historyOf(t, ts.URL, sessionOf(t, ctx))
	if button == "approve" && !strings.Contains(h, "refunded $30.00") {
		t.Fatalf("the refund did not run: %s", h)
	}
	if got, want := value(t, ctx, "read the card", chromedp.Evaluate[string](approvalCardState)), strings.ToLower(label)+" | "+label+" | Approve enabled: false, Deny enabled: false"; got != want {
		t.Fatalf("the decision took effect, yet its approval card reads %q, want %q", got, want)
	}
	errCard := value(t, ctx, "read the error card", chromedp.Evaluate[string](`(() => { const e = document.querySelector('#live .card.error'); const below = document.querySelector('.approval').compareDocumentPosition(e) & Node.DOCUMENT_POSITION_FOLLOWING; return e.dataset.bucket + ' | retry: ' + (e.querySelector('button.retry') !== null) + ' | below the card: ' + Boolean(below) + ' | ' + e.textContent; })()`))
	if !strings.HasPrefix(errCard, "retryable_transient | retry: false | below the card: true | ") || !strings.Contains(errCard, "The decision took effect") {
		t.Fatalf("the turn's error card reads %q", errCard)
	}
	if got := value(t, ctx, "read the tool card", chromedp.Evaluate[string](refundCards)); got != wantTool {
		t.Fatalf("live the refund's card reads %q, want %q", got, wantTool)
	}
	reloadSettled(t, ctx)
	if got := value(t, ctx, "read the tool card", chromedp.Evaluate[string](refundCards)); got != wantTool {
		t.Fatalf("after a reload the refund's card reads %q, want %q", got, wantTool)
	}
	if n := value(t, ctx, "count open approval cards", chromedp.Evaluate[int](`document.querySelectorAll('.approval:not([data-resolved])').length`)); n != 0 {
		t.Fatalf("after a reload %d approval cards are open for a decided call", n)
	}
}

// TestBrowserUpstreamFailAfterApprovalKeepsDecision: the upstream fails
// (retryably) on the reply after an approved refund ran. The approval
// card reads Approved, its buttons closed, and the failure shows below
// it as the turn's error. Before, the card said "Not sent: retry below."
// with Approve and Deny enabled again.
func TestBrowserUpstreamFailAfterApprovalKeepsDecision(t *testing.T) {
	upstreamFailsAfterDecision(t, "approve", "Approved", "done done")
}

// TestBrowserUpstreamFailAfterDenialKeepsDecision: as
// TestBrowserUpstreamFailAfterApprovalKeepsDecision, for a denial: the
// card reads Denied, and the refund's card denied, after a reload too.
func TestBrowserUpstreamFailAfterDenialKeepsDecision(t *testing.T) {
	upstreamFailsAfterDecision(t, "deny", "Denied", "denied denied")
}
