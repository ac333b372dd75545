package server

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
)

// failAfterRefund is the demo model, except that once the approved
// refund ran (the last message is a tool result) the upstream is
// overloaded (503, retryable_transient), while fail is set.
type failAfterRefund struct {
	demo.Model
	fail      atomic.Bool
	afterTool atomic.Int32
}

func (m *failAfterRefund) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if msgs := req.Transcript(); len(msgs) > 0 && msgs[len(msgs)-1].Role == llm.RoleTool {
		m.afterTool.Add(1)
		if m.fail.Load() {
			return nil, &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "openai", Op: "complete", StatusCode: 503, Message: "overloaded"}
		}
	}
	return m.Model.Complete(ctx, req)
}

// TestOpenHarnessTookUpFailureIsNotRetryable: a continuation whose resume ran the
// approved refund and then failed on an overloaded upstream is final
// (ohSpent keeps it; a resend is refused / replays it): its answer must
// not say retryable: true (doc.go: "A retryable error is not recorded,
// so retrying it runs again"), as the OpenAI surface marks the same
// failure final (Error.Final). Before, the Shell was told to retry, and
// every retry (same request_id: the memo; new request_id: "took
// effect") answered the same without running the turn again.
func TestOpenHarnessTookUpFailureIsNotRetryable(t *testing.T) {
	m := &failAfterRefund{}
	e := newOHEnvAgent(t, m)
	s := e.post(t, ohBody("rid-s", `{"session_id": "s-tu", "user_intent": "refund order 7"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("no continuation: %s", s.raw)
	}
	m.fail.Store(true)
	r := e.post(t, ohDecide("rid-c", "s-tu", cont.RunID, cont.ContinuationToken, "approve"))
	m.fail.Store(false)
	t.Logf("first: %s", r.raw)
	er := r.msg.Response.Error
	if er == nil {
		t.Fatalf("want an error: %s", r.raw)
	}
	again := e.post(t, ohDecide("rid-c", "s-tu", cont.RunID, cont.ContinuationToken, "approve"))
	t.Logf("same request_id: %s", again.raw)
	other := e.post(t, ohDecide("rid-c2", "s-tu", cont.RunID, cont.ContinuationToken, "approve"))
	t.Logf("new request_id: %s", other.raw)
	if n := m.afterTool.Load(); n != 1 {
		t.Errorf("the model saw the refund's result %d times, want 1 (the refund ran twice?)", n)
	}
	if x := again.ext(t); x.Outcome == "completed" {
		t.Fatalf("resend completed the turn: the took-up failure was not final")
	}
	if er.Retryable != nil && *er.Retryable {
		t.Errorf("the took-up resume's failure says retryable: true, but the retry (same request_id) answers %q retryable=%v and a new request_id answers %q: the retry never runs it again",
			again.errCode(), again.msg.Response.Error != nil && again.msg.Response.Error.Retryable != nil && *again.msg.Response.Error.Retryable, other.errCode())
	}
}

// TestOpenHarnessTookUpFailureByRunIDSaysItTookEffect: after a resume
// that took its suspension up and failed, the same continuation under a
// new request_id resumes nothing: it gets the first resume's recorded
// outcome. doc.go: "any later continuation of it (the same token with
// any request_id, ...) gets the recorded outcome of the turn that
// resumed it, marked replayed". By run_id it is answered "the run no
// longer awaits a decision (a later message may have superseded it)
// ... Please adjust your message": no message superseded it, the refund
// ran; the token form of the same continuation replays the failure.
// It is now told the decision took effect.
func TestOpenHarnessTookUpFailureByRunIDSaysItTookEffect(t *testing.T) {
	m := &failAfterRefund{}
	e := newOHEnvAgent(t, m)
	s := e.post(t, ohBody("rid-s", `{"session_id": "s-tr", "user_intent": "refund order 7"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("no continuation: %s", s.raw)
	}
	m.fail.Store(true)
	first := e.post(t, ohDecide("rid-c", "s-tr", cont.RunID, cont.ContinuationToken, "approve"))
	m.fail.Store(false)
	if first.ext(t).Outcome != "errored" {
		t.Fatalf("first: %s", first.raw)
	}
	for _, body := range []string{
		ohDecide("rid-c2", "s-tr", cont.RunID, cont.ContinuationToken, "approve"),
		ohDecide("rid-c3", "s-tr", cont.RunID, "", "approve"),
	} {
		r := e.post(t, body)
		x := r.ext(t)
		if x.Outcome == "completed" {
			t.Fatalf("a later continuation resumed again: %s", r.raw)
		}
		took := r.msg.Response.Error != nil && strings.Contains(r.msg.Response.Error.Message, "took effect")
		if !x.Replayed && r.header.Get("Idempotent-Replayed") != "true" && !took {
			t.Errorf("a later continuation (new request_id) of a suspension a failed resume took up: %s (Idempotent-Replayed %q), want the first resume's outcome marked replayed (or: the decision took effect)",
				r.raw, r.header.Get("Idempotent-Replayed"))
		}
	}
}
