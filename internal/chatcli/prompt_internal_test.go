package chatcli

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// syncBuffer is a bytes.Buffer safe for a reader beside the writer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A note that arrives while an approval prompt waits (the event stream
// dropped) redraws that prompt, not the message prompt: the next line
// still answers the approval, and the screen says so. Before, the
// screen showed "you> " and a chat line approved the refund.
func TestNoteRedrawsTheApprovalPrompt(t *testing.T) {
	out := &syncBuffer{}
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
