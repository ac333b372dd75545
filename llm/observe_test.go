package llm_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

func TestRedactImages(t *testing.T) {
	inline := llm.UserBlocks(llm.TextBlock("see"), llm.ImageInline(llm.MediaTypePNG, "AAAA").WithDetail(llm.DetailHigh))
	url := llm.UserBlocks(llm.ImageURL("https://x/y.png"))
	tests := []struct {
		name string
		in   []llm.Message
		want string
	}{
		{"inline", []llm.Message{inline}, `[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image","source":{"byte_count":4,"type":"inline_redacted"},"media_type":"image/png","detail":"high"}]}]`},
		{"url kept", []llm.Message{url}, `[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]`},
		{"text", []llm.Message{llm.UserText("hi")}, `[{"role":"user","content":"hi"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.in)
			got, err := json.Marshal(llm.RedactImages(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if after, _ := json.Marshal(tc.in); string(after) != string(before) {
				t.Error("RedactImages modified its argument")
			}
		})
	}
}

func TestResponseIdentity(t *testing.T) {
	tests := []struct{ raw, id, model string }{
		{`{"id":"cc-1","model":"gpt-x"}`, "cc-1", "gpt-x"},
		{`{"responseId":"g-1","modelVersion":"gemini-2"}`, "g-1", "gemini-2"},
		{`{"id":5}`, "", ""},
		{`not json`, "", ""},
		{``, "", ""},
	}
	for _, tc := range tests {
		id, model := (&llm.Response{Raw: json.RawMessage(tc.raw)}).ResponseIdentity()
		if id != tc.id || model != tc.model {
			t.Errorf("%s: got (%q, %q), want (%q, %q)", tc.raw, id, model, tc.id, tc.model)
		}
	}
}

type recObs struct {
	deltas []string
	out    *llm.CallOutcome
	info   *llm.CallInfo
}

func (r *recObs) BeginCall(_ context.Context, c *llm.CallInfo) llm.CallTracker { r.info = c; return r }
func (r *recObs) Token(k llm.DeltaKind, d string)                              { r.deltas = append(r.deltas, string(k)+":"+d) }
func (r *recObs) End(o *llm.CallOutcome)                                       { r.out = o }

func TestCallObserver(t *testing.T) {
	fail := &llm.ProviderError{Cat: errcat.ProviderUnavailable}
	tests := []struct {
		name     string
		steps    []llmtest.Step
		req      llm.Request
		attempts int
		deltas   int
		failed   bool
	}{
		{"atomic", []llmtest.Step{llmtest.Reply("x")}, llm.Request{}, 1, 0, false},
		{"retried", []llmtest.Step{llmtest.Fail(fail), llmtest.Reply("x")}, llm.Request{Retry: &llm.RetryPolicy{MaxAttempts: 2, Backoff: func(int) time.Duration { return 0 }}}, 2, 0, false},
		{"streamed", []llmtest.Step{{Chunks: []*llm.Chunk{{Reasoning: "r"}, {Content: "c", FinishReason: llm.FinishStop}}}}, llm.Request{Stream: true}, 1, 2, false},
		{"failed", []llmtest.Step{llmtest.Fail(fail)}, llm.Request{}, 1, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o recObs
			req := tc.req
			req.Messages = []llm.Message{llm.UserText("q")}
			_, err := llm.Complete(llm.WithCallObserver(t.Context(), &o), llmtest.New(tc.steps...), &req)
			if (err != nil) != tc.failed {
				t.Fatalf("err = %v", err)
			}
			if o.out == nil || len(o.out.Attempts) != tc.attempts || len(o.deltas) != tc.deltas || (o.out.Err != nil) != tc.failed {
				t.Fatalf("outcome %+v deltas %v", o.out, o.deltas)
			}
			for i, a := range o.out.Attempts {
				if a.Index != i || a.End.Before(a.Start) {
					t.Errorf("attempt %d: %+v", i, a)
				}
			}
		})
	}
}
