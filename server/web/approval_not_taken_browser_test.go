package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// waitingResumeRun returns the id of the session's started run (a
// decision's run waiting for the session), or "".
func waitingResumeRun(t *testing.T, base, session string) string {
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
	_ = json.NewDecoder(resp.Body).Decode(&out)
	for _, r := range out.Runs {
		if r.Status == "started" {
			return r.ID
		}
	}
	return ""
}

// runEventTypes returns the types of run's events, in order.
func runEventTypes(t *testing.T, base, run string) []string {
	t.Helper()
	resp, err := http.Get(base + "/v1/runs/" + run + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	types := make([]string, 0, len(out.Events))
	for _, e := range out.Events {
		types = append(types, e.Type)
	}
	return types
}

// TestBrowserApprovalStoppedWhileWaitingCanBeGivenAgain: the user
// clicks Approve while another process (another replica's turn) holds
// the session, and the decision's run is stopped (POST
// /v1/runs/{id}/cancel) while it waits for the session: before it took
// the suspension up. Nothing ran and the turn still awaits the
// decision. The card says "Not sent: retry below." with Approve and
// Deny enabled, and the turn's error offers Retry (no "The decision
// took effect"); after a reload the approval card is still there, and
// approving it from the page runs the refund. Before, the card read
// Approved, with no way to approve again, and it was gone after a
// reload (the cancelled run closed the suspension for the page).
func TestBrowserApprovalStoppedWhileWaitingCanBeGivenAgain(t *testing.T) {
	decisionNotTakenUp(t, false)
}

// TestBrowserApprovalGivenUpWaitingCanBeGivenAgain: as
// TestBrowserApprovalStoppedWhileWaitingCanBeGivenAgain, with no
// cancel: the server's session wait gives the waiting decision up
// (invocation_cancelled, "nothing ran, try again").
func TestBrowserApprovalGivenUpWaitingCanBeGivenAgain(t *testing.T) {
	decisionNotTakenUp(t, true)
}

func decisionNotTakenUp(t *testing.T, busy bool) {
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	ts := servertest.On(t, store, a, func(c *server.Config) {
		if busy {
			c.SessionWait = 1500 * time.Millisecond
		}
	})
	ctx := browser(t)
	run(t, ctx, "a suspended refund", append(firstMessage(ts.URL, "refund order 8"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
	)...)
	session := sessionOf(t, ctx)
	// Another process's turn holds the session.
	release, err := store.SessionLocker(sqlite.LockerConfig{}).Lock(context.Background(), "default/"+session)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	run(t, ctx, "approve while the session is held", chromedp.Click(chromedp.CSS(".approval button.approve")))
	var waiting string
	for i := 0; i < 100 && waiting == ""; i++ {
		time.Sleep(100 * time.Millisecond)
		waiting = waitingResumeRun(t, ts.URL, session)
	}
	if waiting == "" {
		t.Fatal("no waiting decision run")
	}
	if !busy {
		var res map[string]any
		if code := postJSON(t, ts.URL+"/v1/runs/"+waiting+"/cancel", map[string]any{}, &res); code != http.StatusAccepted {
			t.Fatalf("cancel: %d %v", code, res)
		}
	}
	run(t, ctx, "the answer arrives", waitJS(`document.querySelector('.card.error') !== null && !document.querySelector('#send').disabled`), chromedp.Sleep(time.Second))
	release()
	released = true
	for _, typ := range runEventTypes(t, ts.URL, waiting) {
		if typ == "runtime.approval.resolved" {
			t.Fatalf("the decision's run, stopped before it took the suspension up, recorded runtime.approval.resolved: %v", runEventTypes(t, ts.URL, waiting))
		}
	}
	if got, want := value(t, ctx, "the approval card live", chromedp.Evaluate[string](approvalCardState)),
		"open | Not sent: retry below. | Approve enabled: true, Deny enabled: true"; got != want {
		t.Errorf("the decision was stopped before it took the suspension up (nothing ran, the turn still awaits it), yet the approval card reads %q, want %q", got, want)
	}
	errs := value(t, ctx, "error cards", chromedp.Evaluate[string](`[...document.querySelectorAll('.card.error')].map(e => 'retry: ' + (e.querySelector('button.retry') !== null) + ' | ' + e.textContent).join(' || ')`))
	if strings.Contains(errs, "The decision took effect") || !strings.HasPrefix(errs, "retry: true") {
		t.Errorf("the decision did not take effect, yet its turn's error reads %q (want a Retry and no \"took effect\")", errs)
	}
	if got := value(t, ctx, "read the tool card", chromedp.Evaluate[string](refundCards)); got != "waiting awaiting approval" {
		t.Errorf("live the refund's card reads %q, want \"waiting awaiting approval\"", got)
	}

	reloadSettled(t, ctx)
	if n := value(t, ctx, "open approvals", chromedp.Evaluate[int](`document.querySelectorAll('.approval:not([data-resolved]) button.approve:not([disabled])').length`)); n != 1 {
		t.Fatalf("after the reload the page shows %d open approval cards (refund card %q), want 1: the turn still awaits the decision",
			n, value(t, ctx, "read the tool card", chromedp.Evaluate[string](refundCards)))
	}
	if got := value(t, ctx, "read the tool card", chromedp.Evaluate[string](refundCards)); got != "waiting awaiting approval" {
		t.Errorf("after the reload the refund's card reads %q, want \"waiting awaiting approval\"", got)
	}
	noErrorCards(t, ctx, "after the reload")
	// The suspension is live: the page's Approve resumes it.
	run(t, ctx, "approve again", chromedp.Click(chromedp.CSS(".approval button.approve")),
		waitJS(`document.querySelector('.approval').dataset.resolved !== undefined && !document.querySelector('#send').disabled`))
	if got, want := value(t, ctx, "read the card", chromedp.Evaluate[string](approvalCardState)), "approved | Approved | Approve enabled: false, Deny enabled: false"; got != want {
		t.Errorf("approved again, the card reads %q, want %q", got, want)
	}
	run(t, ctx, "the refund runs", waitJS(`document.querySelectorAll('details.tool[data-tool="issue_refund"][data-status="done"]').length === 1`))
	if h := historyOf(t, ts.URL, session); !strings.Contains(h, "refunded $") {
		t.Fatalf("approved again from the page, the refund did not run: %s", h)
	}
	noErrorCards(t, ctx, "after approving again")
}

// TestBrowserApprovalStoppedWhileWaitingRetries: the error of a
// decision stopped while it waited for the session offers Retry, which
// sends the same decision again (under the same request id) and runs
// the refund.
func TestBrowserApprovalStoppedWhileWaitingRetries(t *testing.T) {
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	ts := servertest.On(t, store, a)
	ctx := browser(t)
	run(t, ctx, "a suspended refund", append(firstMessage(ts.URL, "refund order 8"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
	)...)
	session := sessionOf(t, ctx)
	release, err := store.SessionLocker(sqlite.LockerConfig{}).Lock(context.Background(), "default/"+session)
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "approve while the session is held", chromedp.Click(chromedp.CSS(".approval button.approve")))
	var waiting string
	for i := 0; i < 100 && waiting == ""; i++ {
		time.Sleep(100 * time.Millisecond)
		waiting = waitingResumeRun(t, ts.URL, session)
	}
	if waiting == "" {
		release()
		t.Fatal("no waiting decision run")
	}
	var res map[string]any
	if code := postJSON(t, ts.URL+"/v1/runs/"+waiting+"/cancel", map[string]any{}, &res); code != http.StatusAccepted {
		release()
		t.Fatalf("cancel: %d %v", code, res)
	}
	run(t, ctx, "the answer arrives", waitJS(`document.querySelector('.card.error button.retry') !== null`))
	release()
	run(t, ctx, "retry", chromedp.Click(chromedp.CSS(".card.error button.retry")),
		waitJS(`document.querySelectorAll('details.tool[data-tool="issue_refund"][data-status="done"]').length === 1 && document.querySelector('.approval').dataset.resolved !== undefined`))
	if got, want := value(t, ctx, "read the card", chromedp.Evaluate[string](approvalCardState)), "approved | Approved | Approve enabled: false, Deny enabled: false"; got != want {
		t.Errorf("retried, the card reads %q, want %q", got, want)
	}
	if h := historyOf(t, ts.URL, session); !strings.Contains(h, "refunded $") {
		t.Fatalf("retried from the page, the refund did not run: %s", h)
	}
	noErrorCards(t, ctx, "after the retry")
}

// slowAfterToolModel is the test model, except that its answer to a
// tool result takes 3s (a slow upstream).
type slowAfterToolModel struct{ testModel }

func answersTool(req *llm.Request) bool {
	n := len(req.Messages)
	return n > 0 && req.Messages[n-1].Role == llm.RoleTool
}

func (m slowAfterToolModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if answersTool(req) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
	return m.testModel.Complete(ctx, req)
}

func (m slowAfterToolModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	if answersTool(req) {
		select {
		case <-ctx.Done():
			return func(yield func(*llm.Chunk, error) bool) { yield(nil, ctx.Err()) }
		case <-time.After(3 * time.Second):
		}
	}
	return m.testModel.Stream(ctx, req)
}

// TestBrowserDenialGivenUpWaitingLeavesRefundDone: client A approves a
// refund (REST), the refund runs and the reply after it is slow (A holds
// the session). Client B denies the same request meanwhile; B's denial
// waits for the session and gives up after the server's session wait
// (invocation_cancelled, "nothing ran"). After a reload the refund's
// tool card reads done, as it ran. Before, the server recorded B's
// decision (approved: false) on its run all the same, and the page
// counted the call as denied.
func TestBrowserDenialGivenUpWaitingLeavesRefundDone(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: slowAfterToolModel{}, System: "You are the Armature demo agent.", Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.New(t, a, func(c *server.Config) { c.SessionWait = time.Second })
	ctx := browser(t)
	run(t, ctx, "a suspended refund", append(firstMessage(ts.URL, "refund order 7"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.approve")),
	)...)
	session := sessionOf(t, ctx)
	signal := value(t, ctx, "the signal id", chromedp.Evaluate[string](`document.querySelector('.card.approval').dataset.signal`))
	decide := func(approved bool) (int, map[string]any) {
		var out map[string]any
		st := postJSON(t, ts.URL+"/v1/sessions/"+session+"/signals", map[string]any{"signal_id": signal,
			"payload": map[string]any{"approval": map[string]any{"approved": approved}}}, &out)
		return st, out
	}
	var wg sync.WaitGroup
	var aSt int
	var aOut map[string]any
	wg.Add(1)
	go func() { defer wg.Done(); aSt, aOut = decide(true) }()
	time.Sleep(700 * time.Millisecond) // A's refund ran; its reply is slow
	bSt, bOut := decide(false)
	wg.Wait()
	if aOut["outcome"] != "completed" {
		t.Fatalf("A's approval: %d %v", aSt, aOut)
	}
	if e, _ := bOut["error"].(map[string]any); e["category"] != "invocation_cancelled" {
		t.Fatalf("B's denial did not give up waiting for the session: %d %v", bSt, bOut)
	}
	if h := historyOf(t, ts.URL, session); !strings.Contains(h, "refunded $30.00") {
		t.Fatalf("the refund did not run: %s", h)
	}
	reloadSettled(t, ctx)
	if got := value(t, ctx, "read the tool card", chromedp.Evaluate[string](refundCards)); got != "done done" {
		t.Fatalf("the approved refund ran (B's denial gave up waiting: %v), yet after a reload its tool card reads %q, want \"done done\"", bOut["error"], got)
	}
	if n := value(t, ctx, "count approval cards", chromedp.Evaluate[int](`document.querySelectorAll('.approval').length`)); n != 0 {
		t.Fatalf("after a reload %d approval cards show for an approval that was answered", n)
	}
}
