package chatcli

import "testing"

// The prompt says what a decision does: a comment beside an approval
// does not change the call, and an answer that was neither yes nor no
// denied (it approved the full call for "yes but only $10" without a
// word, and denied "ok" as plainly as "no").
func TestDecisionNote(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"y", "approved"},
		{"yes but only refund 10 dollars", "approved: the call runs as shown; your comment is kept with the decision, not sent to the agent"},
		{"", "denied"},
		{"no", "denied"},
		{"no: too much", "denied"},
		{"ok", "denied (answer y to approve); your words go to the agent"},
		{"ask the manager", "denied (answer y to approve); your words go to the agent"},
	} {
		if got := decisionNote(ParseApproval(tc.line), tc.line); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.line, got, tc.want)
		}
	}
}
