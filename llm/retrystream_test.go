package llm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

// A streamed call with a retry policy is retried while its attempts
// fail before their first chunk; once a chunk reached the consumer
// (OnChunk), a transient failure is returned, not retried: the consumer
// showed part of an answer a retry would contradict.
func TestCompleteRetryStreamedOnlyBeforeTheFirstChunk(t *testing.T) {
	reset := &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "p", Op: "stream", Message: "connection reset"}
	for _, tc := range []struct {
		name     string
		steps    []llmtest.Step
		calls    int
		streamed string
		fails    bool
	}{
		{name: "fails before any chunk", steps: []llmtest.Step{llmtest.Fail(reset), llmtest.Reply("whole answer")},
			calls: 2, streamed: "whole answer"},
		{name: "fails after a chunk", steps: []llmtest.Step{{Chunks: []*llm.Chunk{{Content: "part of"}}, Err: reset}, llmtest.Reply("another answer")},
			calls: 1, streamed: "part of", fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := llmtest.New(tc.steps...)
			var streamed strings.Builder
			resp, err := llm.Complete(context.Background(), p, &llm.Request{
				Messages: []llm.Message{llm.UserText("hi")}, Stream: true,
				OnChunk: func(c *llm.Chunk) { streamed.WriteString(c.Content) },
				Retry:   &llm.RetryPolicy{MaxAttempts: 3, Backoff: func(int) time.Duration { return 0 }},
			})
			if p.Calls() != tc.calls || streamed.String() != tc.streamed || (err != nil) != tc.fails {
				t.Fatalf("%d calls, streamed %q, %v, %v; want %d calls, %q streamed, failing %v", p.Calls(), streamed.String(), resp, err, tc.calls, tc.streamed, tc.fails)
			}
			if tc.fails && errcat.Of(err) != errcat.ProviderUnavailable {
				t.Fatalf("error %v, want the attempt's provider_unavailable", err)
			}
			if !tc.fails && resp.Message.Text() != tc.streamed {
				t.Fatalf("answer %q, streamed %q", resp.Message.Text(), tc.streamed)
			}
		})
	}
}
