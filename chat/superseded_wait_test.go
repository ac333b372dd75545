package chat_test

import (
	"errors"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// TestSignalWaitingBehindSupersedingMessage: a decision that waits for
// the session while a new message supersedes its suspended turn is
// refused (harness_signal_correlation_failed) with chat.ErrSuperseded as
// its cause, so a surface can tell the caller that no decision took
// effect; a decision that loses to another decision does not carry it.
func TestSignalWaitingBehindSupersedingMessage(t *testing.T) {
	e := newDemoEnv(t)
	s := want[*chat.Suspended](t, e.send("x", "refund order 91"))
	g := &gateProvider{entered: make(chan struct{}), release: make(chan struct{})}
	e.wrap = func(p llm.Provider) llm.Provider { g.Provider = p; return g }
	e.restart()
	msg := make(chan chat.Outcome, 1)
	go func() { msg <- e.send("x", "where is order 92?") }()
	<-g.entered // the message holds the session
	sig := make(chan chat.Outcome, 1)
	go func() { sig <- e.approve("x", s.Descriptor.SignalID, agent.Approve("")) }()
	time.Sleep(200 * time.Millisecond) // the decision resolves its turn and waits
	close(g.release)
	if c := want[*chat.Completed](t, <-msg); len(c.Superseded) != 1 {
		t.Fatalf("the message superseded %v", c.Superseded)
	}
	out := <-sig
	wantCategory(t, out, errcat.HarnessSignalCorrelationFailed)
	if err := want[*chat.Errored](t, out).Err; !errors.Is(err, chat.ErrSuperseded) {
		t.Errorf("the decision that waited: %v, want chat.ErrSuperseded", err)
	}

	// Two decisions: the loser was not superseded.
	s = want[*chat.Suspended](t, e.send("y", "refund order 93"))
	want[*chat.Completed](t, e.approve("y", s.Descriptor.SignalID, agent.Approve("")))
	out = e.approve("y", s.Descriptor.SignalID, agent.Deny(""))
	wantCategory(t, out, errcat.HarnessSignalCorrelationFailed)
	if err := want[*chat.Errored](t, out).Err; errors.Is(err, chat.ErrSuperseded) {
		t.Errorf("a decision that lost to another: %v, want no chat.ErrSuperseded", err)
	}
}
