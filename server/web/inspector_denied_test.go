package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestInspectorDeniedArgs: the run inspector's tool table shows
// the arguments of a call the user denied, as it shows those of an
// approved one. The resumed run that answers a denied call records no
// agent.tool.start (the call never ran): its row takes the arguments
// from the suspended run's runtime.request.suspended event, so a denied
// refund of order 7 does not read as a call with no arguments.
func TestInspectorDeniedArgs(t *testing.T) {
	ts := newDemoServer(t)
	ctx := browser(t)
	run(t, ctx, "a refund, denied", append(firstMessage(ts.URL, "refund order 7"),
		chromedp.WaitVisible(chromedp.CSS(".approval button.deny")),
		chromedp.Click(chromedp.CSS(".approval button.deny")),
		waitJS(`document.querySelector('details.tool[data-tool="issue_refund"]')?.dataset.status === 'denied'`),
	)...)
	run(t, ctx, "the inspector",
		chromedp.Navigate(ts.URL+"/#/runs/"+sessionOf(t, ctx)),
		waitJS(`document.querySelectorAll('#runs article.run').length === 2`),
		waitJS(`[...document.querySelectorAll('#runs table.tools code')].some(e => e.textContent === 'issue_refund')`),
	)
	args := value(t, ctx, "read the denied call's arguments", chromedp.Evaluate[string](`[...document.querySelectorAll('#runs table.tools tbody tr')].filter(r => r.querySelector('code')?.textContent === 'issue_refund').map(r => r.querySelector('td:nth-child(2) pre').textContent).join(' | ')`))
	if args == "" || args == "{}" || !strings.Contains(args, `"order": "7"`) {
		t.Errorf("the inspector shows the denied refund's arguments as %q, want those of the call (order 7)", args)
	}
}
