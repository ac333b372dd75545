package server

import (
	"encoding/json"
	"testing"
)

// TestOpenHarnessTookUpFailureRetryableMatchesBucket: PROTOCOLS.md §2:
// errored → "error: {code, message, retryable: <bucket ==
// retryable_transient>, details: {error_bucket}}". The took-up failure,
// final, must not say retryable false beside error_bucket
// "retryable_transient" (a first fix did): a Shell that reads the bucket
// would retry a continuation that can never run again.
func TestOpenHarnessTookUpFailureRetryableMatchesBucket(t *testing.T) {
	m := &failAfterRefund{}
	e := newOHEnvAgent(t, m)
	s := e.post(t, ohBody("rid-s", `{"session_id": "s-rb", "user_intent": "refund order 7"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("no continuation: %s", s.raw)
	}
	m.fail.Store(true)
	r := e.post(t, ohDecide("rid-c", "s-rb", cont.RunID, cont.ContinuationToken, "approve"))
	m.fail.Store(false)
	er := r.msg.Response.Error
	if er == nil || er.Retryable == nil {
		t.Fatalf("want an error with retryable: %s", r.raw)
	}
	var d struct {
		Bucket string `json:"error_bucket"`
	}
	if err := json.Unmarshal(er.Details, &d); err != nil {
		t.Fatal(err)
	}
	if *er.Retryable != (d.Bucket == "retryable_transient") {
		t.Errorf("retryable %v but details.error_bucket %q (PROTOCOLS.md §2: retryable = bucket == retryable_transient): %s", *er.Retryable, d.Bucket, r.raw)
	}
}
