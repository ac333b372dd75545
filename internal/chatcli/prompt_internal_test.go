package chatcli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/syncbuf"

	"github.com/armature-go/armature/runtime"
)

// A note that arrives while an approval prompt waits (the event stream
// dropped) redraws that prompt, not the message prompt: the next line
// still answers the approval, and the screen says so. Before, the
// screen showed "you> " and a chat line approved the refund.
func TestNoteRedrawsTheApprovalPrompt(t *testing.T) {
	out := &syncbuf.Buffer{}
	lines := make(chan string)
	l := &chatLoop{out: out, lines: lines, w: &watcher{events: make(chan runtime.Event), notes: make(chan string, 1)}}
	l.w.notes <- "event stream lost; reconnecting"
	go func() {
		for !strings.Contains(out.String(), "event stream lost") {
			time.Sleep(time.Millisecond)
		}
		lines <- "no"
	}()
	sig := Signal{SignalID: "approval:c1", Metadata: map[string]any{"tool": "issue_refund"}}
	payload, _, ok := l.askSignal(context.Background(), sig)
	if !ok || payload == nil {
		t.Fatalf("askSignal: %v %v", payload, ok)
	}
	got := out.String()
	_, after, _ := strings.Cut(got, "event stream lost; reconnecting\n")
	if !strings.HasPrefix(after, "Approve issue_refund? [y/N/comment] ") {
		t.Fatalf("after the note the screen shows %q, want the approval prompt again", after)
	}
}
