package chatcli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/chatcli"
	"github.com/armature-go/armature/internal/demo"
)

// TestInterruptWhileWaitingCancelsOnlyOwnTurn: the terminal client's
// turn waits for its session behind another client's turn; Ctrl-C
// cancels the client's own turn, not the other client's. The waiting
// turn has a run but no event yet (its runtime.request.started comes
// once it holds the session), so the client finds its run by the id of
// the message it sent (before, it cancelled every started run of the
// session).
func TestInterruptWhileWaitingCancelsOnlyOwnTurn(t *testing.T) {
	m := adaptertest.NewModel()
	a, err := agent.New(agent.Config{Provider: m, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, a)
	other := newClient(t, ts.URL, "")
	type res struct {
		out *chatcli.Outcome
		err error
	}
	otherDone := make(chan res, 1)
	go func() {
		out, err := other.Send(t.Context(), "shared", "answer "+adaptertest.SlowWord)
		otherDone <- res{out, err}
	}()
	<-m.Blocked() // the other client's turn holds the session

	intr := make(chan struct{}, 1)
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, ""), Session: "shared", Interrupt: intr})
	s.waitFor("you> ")
	s.send("hello")
	// Let the client's turn reach the server and wait for the session.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids, err := other.StartedRuns(t.Context(), "shared")
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("started runs: %v", ids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	intr <- struct{}{}
	s.waitFor("(cancelling the turn)")
	select {
	case r := <-otherDone:
		cat := ""
		if r.out != nil && r.out.Error != nil {
			cat = r.out.Error.Category
		}
		t.Errorf("Ctrl-C in the terminal client ended ANOTHER client's turn: outcome %q category %q err %v", outcomeOf(r.out), cat, r.err)
	case <-time.After(2 * time.Second):
		t.Log("the other client's turn still runs (expected)")
	}
	// End the other client's turn (a fixed client left it running).
	if ids, err := other.StartedRuns(t.Context(), "shared"); err == nil {
		for _, id := range ids {
			_, _ = other.CancelRun(t.Context(), id)
		}
	}
	got := s.waitFor("you> ")
	if strings.Contains(got, "another client") {
		t.Logf("client output:\n%s", got)
	}
}

func outcomeOf(o *chatcli.Outcome) string {
	if o == nil {
		return ""
	}
	return o.Outcome
}
