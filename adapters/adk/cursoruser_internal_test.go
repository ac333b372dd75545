package adk

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/adk/v2/session"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	armsession "github.com/armature-go/armature/session"
)

// recentReads counts the reads of a session's recent events (the
// look-up of another agent's turns, syncForeign).
type recentReads struct {
	session.Service
	n atomic.Int64
}

func (r *recentReads) Get(ctx context.Context, req *session.GetRequest) (*session.GetResponse, error) {
	if req.NumRecentEvents == recentEvents {
		r.n.Add(1)
	}
	return r.Service.Get(ctx, req)
}

// TestCursorSparesForeignRead: a session only this agent serves is
// checked for another agent's turns by the committed cursor's sum of its
// last user message, without reading ADK-Go's recent events (a query
// per turn on a session database); once another agent's turn ends the
// history with another message, the events are read and the session is
// given the history again (TestSessionSharedWithNativeAgent).
func TestCursorSparesForeignRead(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(ctx, Config{Tools: demo.Tools(), LLM: NewProviderModel("m", demo.Model{}), Session: SessionConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reads := &recentReads{Service: e.sessions}
	e.sessions = reads // the engine's own reads; the runner keeps its service
	h := adaptertest.Harness(t, &Adapter{Engine: e}, &adapter.Agent{ID: "x", Backend: Name, Tools: demo.Tools()}, armsession.NewMemoryStore(armsession.MemoryConfig{}))
	for _, text := range []string{"hello", "where is order 3?", "hello again"} {
		if _, err := h.Send(ctx, "acme/s", llm.UserText(text)); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.n.Load(); n != 0 {
		t.Errorf("%d reads of recent events for a session only this agent serves, want 0", n)
	}
	// A cursor of an earlier build (no user sum) reads them, once.
	req := &adapter.Request{History: []llm.Message{llm.UserText("hello")}, Cursor: cursor{Position: 1}.json()}
	at, known, last := committed(req)
	if !known || at != 1 || last != "" {
		t.Fatalf("committed = %d, %v, %q", at, known, last)
	}
	if sum := lastUserSum(&adapter.Request{Input: llm.UserText("hello")}); sum == "" || sum != historyUserSum(req.History) {
		t.Fatalf("the sums of one message differ: %q, %q", sum, historyUserSum(req.History))
	}
}
