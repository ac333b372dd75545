package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

var personSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`)

func TestCompleteRetry(t *testing.T) {
	unavailable := &llm.ProviderError{Cat: errcat.ProviderUnavailable}
	tests := []struct {
		name      string
		steps     []llmtest.Step
		policy    llm.RetryPolicy
		schema    json.RawMessage
		wantErr   errcat.Category
		wantText  string
		wantCalls int
		reasons   []llm.RetryReason
	}{
		{name: "transient then ok", steps: []llmtest.Step{llmtest.Fail(unavailable), llmtest.Reply("ok")},
			policy: llm.RetryPolicy{MaxAttempts: 2}, wantText: "ok", wantCalls: 2, reasons: []llm.RetryReason{"", llm.RetryTransient}},
		{name: "exhausted", steps: []llmtest.Step{llmtest.Fail(unavailable), llmtest.Fail(unavailable)},
			policy: llm.RetryPolicy{MaxAttempts: 2}, wantErr: errcat.ProviderUnavailable, wantCalls: 2, reasons: []llm.RetryReason{"", llm.RetryTransient}},
		{name: "non-transient", steps: []llmtest.Step{llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderAuthentication}), llmtest.Reply("ok")},
			policy: llm.RetryPolicy{MaxAttempts: 3}, wantErr: errcat.ProviderAuthentication, wantCalls: 1, reasons: []llm.RetryReason{""}},
		{name: "reask", steps: []llmtest.Step{llmtest.Reply(`{"name":"A"}`), llmtest.Reply(`{"name":"A","age":3}`)}, schema: personSchema,
			policy:   llm.RetryPolicy{MaxAttempts: 2, Reask: func(e *llm.StructuredOutputError) string { return "fix " + e.OutputContent }},
			wantText: `{"name":"A","age":3}`, wantCalls: 2, reasons: []llm.RetryReason{"", llm.RetryReask}},
		{name: "structured invalid without reask", steps: []llmtest.Step{llmtest.Reply(`{"name":"A"}`), llmtest.Reply(`{}`)}, schema: personSchema,
			policy: llm.RetryPolicy{MaxAttempts: 2}, wantErr: errcat.StructuredOutputInvalid, wantCalls: 1, reasons: []llm.RetryReason{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := llmtest.New(tt.steps...)
			var reasons []llm.RetryReason
			pol := tt.policy
			pol.Backoff = func(int) time.Duration { return 0 }
			pol.OnAttempt = func(_ context.Context, a llm.Attempt) { reasons = append(reasons, a.Reason) }
			msgs := []llm.Message{llm.UserText("go")}
			resp, err := llm.Complete(context.Background(), p, &llm.Request{Messages: msgs, ResponseSchema: tt.schema, Retry: &pol})
			if tt.wantErr != "" {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %s", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if got := resp.Message.Text(); got != tt.wantText {
				t.Fatalf("text = %q, want %q", got, tt.wantText)
			}
			if p.Calls() != tt.wantCalls {
				t.Fatalf("calls = %d, want %d", p.Calls(), tt.wantCalls)
			}
			if diff := cmp.Diff(tt.reasons, reasons); diff != "" {
				t.Fatalf("reasons (-want +got):\n%s", diff)
			}
			if len(msgs) != 1 {
				t.Fatal("caller messages mutated")
			}
		})
	}
}

func TestCompleteReaskTranscript(t *testing.T) {
	p := llmtest.New(llmtest.Reply(`{"name":"A"}`), llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderUnavailable}), llmtest.Reply(`{"name":"A","age":3}`))
	pol := &llm.RetryPolicy{MaxAttempts: 3, Backoff: func(int) time.Duration { return 0 },
		Reask:              func(e *llm.StructuredOutputError) string { return "fix " + e.OutputContent },
		PerAttemptOverride: []llm.Config{{Temperature: new(0.5)}}}
	req := &llm.Request{Messages: []llm.Message{llm.UserText("go")}, ResponseSchema: personSchema, Retry: pol, Config: llm.Config{Temperature: new(0.0)}}
	resp, err := llm.Complete(context.Background(), p, req)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Parsed) != `{"name":"A","age":3}` {
		t.Fatalf("parsed = %s", resp.Parsed)
	}
	reqs := p.Requests()
	want := []llm.Message{llm.UserText("go"), llm.AssistantText(`{"name":"A"}`), llm.UserText(`fix {"name":"A"}`)}
	for i := 1; i < 3; i++ {
		if diff := cmp.Diff(want, reqs[i].Messages); diff != "" {
			t.Fatalf("request %d messages (-want +got):\n%s", i, diff)
		}
		if *reqs[i].Config.Temperature != 0.5 {
			t.Fatalf("request %d temperature = %v", i, *reqs[i].Config.Temperature)
		}
	}
	if *reqs[0].Config.Temperature != 0 || len(req.Messages) != 1 || *req.Config.Temperature != 0 {
		t.Fatal("base attempt or caller request changed")
	}
}

func TestCompleteStream(t *testing.T) {
	p := llmtest.New(llmtest.Step{Chunks: []*llm.Chunk{
		{Reasoning: "hmm"}, {Content: "Hel"}, {Content: "lo"},
		{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "c1", Name: "f", Arguments: `{"a":`}}},
		{ToolCalls: []llm.ToolCallDelta{{Index: 0, Arguments: `1}`}}}, {FinishReason: llm.FinishToolCalls, Usage: &llm.Usage{TotalTokens: new(3)}, Raw: json.RawMessage(`{"usage":{"total_tokens":3}}`)},
	}})
	var n int
	resp, err := llm.Complete(context.Background(), p, &llm.Request{Messages: []llm.Message{llm.UserText("go")}, Stream: true, OnChunk: func(*llm.Chunk) { n++ }})
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(llm.ThinkingBlock("hmm", ""), llm.TextBlock("Hello")),
		ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}}
	if diff := cmp.Diff(want, resp.Message); diff != "" {
		t.Fatalf("message (-want +got):\n%s", diff)
	}
	if n != 6 || resp.FinishReason != llm.FinishToolCalls || *resp.Usage.TotalTokens != 3 || string(resp.Raw) != `{"usage":{"total_tokens":3}}` {
		t.Fatalf("n=%d resp=%+v raw=%s", n, resp, resp.Raw)
	}
}

type atomicOnly struct{ llm.Provider }

func TestCompleteStreamUnsupported(t *testing.T) {
	p := llmtest.New(llmtest.Reply("x"))
	_, err := llm.Complete(context.Background(), atomicOnly{p}, &llm.Request{Messages: []llm.Message{llm.UserText("go")}, Stream: true})
	if !errors.Is(err, llm.ErrStreamUnsupported) || !errors.Is(err, errcat.ProviderInvalidRequest) || p.Calls() != 0 {
		t.Fatalf("err = %v, calls = %d", err, p.Calls())
	}
}

func TestResolveExtras(t *testing.T) {
	tests := []struct {
		name    string
		extras  map[string]any
		managed []llm.ManagedField
		pass    map[string]any
		lists   map[string][]string
		wantErr bool
	}{
		{name: "unmanaged rides", extras: map[string]any{"x": 1}, pass: map[string]any{"x": 1}},
		{name: "equal no-op", extras: map[string]any{"temperature": 1}, managed: []llm.ManagedField{{Key: "temperature", Value: 1.0}}, pass: map[string]any{}},
		{name: "conflict", extras: map[string]any{"model": "b"}, managed: []llm.ManagedField{{Key: "model", Value: "a"}}, wantErr: true},
		{name: "object equality", extras: map[string]any{"so": json.RawMessage(`{"b":1,"a":true}`)}, managed: []llm.ManagedField{{Key: "so", Value: map[string]any{"a": true, "b": 1}}}, pass: map[string]any{}},
		{name: "merge", extras: map[string]any{"stop": []string{"END", "STOP"}}, managed: []llm.ManagedField{{Key: "stop", List: []string{"STOP"}}}, pass: map[string]any{}, lists: map[string][]string{"stop": {"STOP", "END"}}},
		{name: "coerce", extras: map[string]any{"stop": "END"}, managed: []llm.ManagedField{{Key: "stop", List: []string{"STOP"}, CoerceString: true}}, pass: map[string]any{}, lists: map[string][]string{"stop": {"STOP", "END"}}},
		{name: "no coerce", extras: map[string]any{"stop": "END"}, managed: []llm.ManagedField{{Key: "stop", List: []string{"STOP"}}}, pass: map[string]any{}, lists: map[string][]string{"stop": {"STOP"}}},
		{name: "malformed", extras: map[string]any{"stop": []any{"END", 1}}, managed: []llm.ManagedField{{Key: "stop", List: []string{"STOP"}}}, pass: map[string]any{}, lists: map[string][]string{"stop": {"STOP"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pass, lists, err := llm.ResolveExtras(tt.extras, tt.managed)
			if tt.wantErr {
				if !errors.Is(err, llm.ErrManagedField) || !errors.Is(err, errcat.ProviderInvalidRequest) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.pass, pass); diff != "" {
				t.Errorf("pass (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.lists, lists); diff != "" {
				t.Errorf("lists (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCounter(t *testing.T) {
	for raw, want := range map[string]int{"0": 0, "12": 12} {
		if got := llm.ParseCounter(json.RawMessage(raw)); got == nil || *got != want {
			t.Errorf("ParseCounter(%s) = %v", raw, got)
		}
	}
	for _, raw := range []string{"", "null", `"abc"`, "-5", "true", "1.5", "1e3"} {
		if got := llm.ParseCounter(json.RawMessage(raw)); got != nil {
			t.Errorf("ParseCounter(%s) = %d, want nil", raw, *got)
		}
	}
}

func TestToolChoiceValidate(t *testing.T) {
	tools := []llm.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}
	ok := []struct {
		tc    llm.ToolChoice
		tools []llm.Tool
	}{{llm.ToolChoice{}, nil}, {llm.ToolChoice{Mode: llm.ToolChoiceAuto}, nil}, {llm.ToolChoice{Mode: llm.ToolChoiceNone}, nil},
		{llm.ToolChoice{Mode: llm.ToolChoiceRequired}, tools}, {llm.ForceTool("f"), tools}}
	for _, c := range ok {
		if err := c.tc.Validate(c.tools); err != nil {
			t.Errorf("%+v: %v", c.tc, err)
		}
	}
	bad := []struct {
		tc    llm.ToolChoice
		tools []llm.Tool
	}{{llm.ToolChoice{Mode: llm.ToolChoiceRequired}, nil}, {llm.ForceTool("f"), nil}, {llm.ForceTool("g"), tools}, {llm.ToolChoice{Mode: "bogus"}, tools}}
	for _, c := range bad {
		if err := c.tc.Validate(c.tools); !errors.Is(err, errcat.ProviderInvalidRequest) {
			t.Errorf("%+v: err = %v", c.tc, err)
		}
	}
}

func TestParseStructured(t *testing.T) {
	tests := []struct {
		content, mention string
	}{{`{"name":"A","age":1}`, ""}, {`{"name": "A" "age": 1}`, "JSON"}, {`{"name":"A"}`, "age"}, {`{"name":"A","age":1.5}`, "integer"}, {`{"name":"A","age":1,"x":0}`, "x"}}
	for _, tt := range tests {
		r := &llm.Response{Message: llm.AssistantText(tt.content), FinishReason: llm.FinishStop}
		err := llm.ParseStructured(r, personSchema)
		if tt.mention == "" {
			if err != nil || r.Parsed == nil {
				t.Errorf("%s: err = %v", tt.content, err)
			}
			continue
		}
		var soe *llm.StructuredOutputError
		if !errors.As(err, &soe) || !strings.Contains(soe.ErrorMessage, tt.mention) || soe.OutputContent != tt.content {
			t.Errorf("%s: err = %v", tt.content, err)
		}
	}
}

func TestErrorPrefixes(t *testing.T) {
	for _, err := range []error{llm.ErrStreamUnsupported, llm.ErrManagedField, &llm.ProviderError{Cat: errcat.ProviderUnavailable}, &llm.StructuredOutputError{}, llmtest.ErrExhausted} {
		if !strings.HasPrefix(err.Error(), "llm: ") && !strings.HasPrefix(err.Error(), "llmtest: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
	}
}

func TestRedact(t *testing.T) {
	got := llm.Redact(`bad key sk-secret123 in "Authorization: Bearer sk-secret123"`, "sk-secret123")
	if strings.Contains(got, "secret123") {
		t.Fatal(got)
	}
	if got := llm.Redact("Authorization: Bearer abcdef"); strings.Contains(got, "abcdef") {
		t.Fatal(got)
	}
}
