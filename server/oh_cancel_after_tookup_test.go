package server

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
)

// stallOnceAfterRefund stalls the first model call after the refund ran
// until the turn's context ends, and counts calls that saw the result.
type stallOnceAfterRefund struct {
	demo.Model
	entered   chan struct{}
	afterTool atomic.Int32
}

func (m *stallOnceAfterRefund) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if msgs := req.Transcript(); len(msgs) > 0 && msgs[len(msgs)-1].Role == llm.RoleTool {
		if m.afterTool.Add(1) == 1 {
			close(m.entered)
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	return m.Model.Complete(ctx, req)
}

// TestOpenHarnessCancelAfterTakeUpIsFinal: a resume cancelled (its run, by
// Server.Cancel / shutdown) after the approved refund ran is final:
// answered not retryable-to-resume; resent, it never runs the turn again.
func TestOpenHarnessCancelAfterTakeUpIsFinal(t *testing.T) {
	m := &stallOnceAfterRefund{entered: make(chan struct{})}
	e := newOHEnvAgent(t, m)
	s := e.post(t, ohBody("rid-s", `{"session_id": "s-ca", "user_intent": "refund order 7"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("no continuation: %s", s.raw)
	}
	done := make(chan ohResult, 1)
	go func() { done <- e.post(t, ohDecide("rid-c", "s-ca", cont.RunID, cont.ContinuationToken, "approve")) }()
	<-m.entered
	e.srv.runs.CancelAll(context.Background())
	first := <-done
	t.Logf("cancelled after take-up: %s", first.raw)
	for _, body := range []string{
		ohDecide("rid-c", "s-ca", cont.RunID, cont.ContinuationToken, "approve"),
		ohDecide("rid-c2", "s-ca", cont.RunID, cont.ContinuationToken, "approve"),
		ohDecide("rid-c3", "s-ca", cont.RunID, "", "approve"),
	} {
		r := e.post(t, body)
		t.Logf("resent: %s", r.raw)
		if r.ext(t).Outcome == "completed" || m.afterTool.Load() != 1 {
			t.Fatalf("the continuation resent after a cancel that followed take-up resumed again: %s", r.raw)
		}
		if er := r.msg.Response.Error; er != nil && strings.Contains(er.Message, "superseded") {
			t.Errorf("resent: %s — says a later message superseded it; none did, the refund ran", r.raw)
		}
	}
	if er := first.msg.Response.Error; er != nil && er.Retryable != nil && *er.Retryable {
		t.Errorf("the cancelled took-up resume says retryable: true (%s); it can never be retried", er.Code)
	}
}
