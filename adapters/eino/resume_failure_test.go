package eino_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/llm"
)

// refundThenFailModel calls the refund tool on its first call and fails every
// later call with a transient provider error (a 503).
type refundThenFailModel struct{ calls atomic.Int64 }

func (m *refundThenFailModel) next() (*schema.Message, error) {
	if m.calls.Add(1) == 1 {
		return schema.AssistantMessage("", []schema.ToolCall{{ID: "call_1", Type: "function",
			Function: schema.FunctionCall{Name: "refund", Arguments: `{"order":"7"}`}}}), nil
	}
	return nil, errors.New("provider unavailable (HTTP 503), retry later")
}

func (m *refundThenFailModel) Generate(context.Context, []*schema.Message, ...model.Option) (*schema.Message, error) {
	return m.next()
}

func (m *refundThenFailModel) Stream(context.Context, []*schema.Message, ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.next()
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

func (m *refundThenFailModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

// TestApprovedToolRanThenTransientFailure: an approval resumes the run,
// the approved tool runs (its side effect happened), and the model call
// after it fails with a transient provider error. The resume is not
// reported as eino.ErrNoCheckpoint ("the tool did not run", not
// retryable): the run was resumed and the tool ran. Engine.resume takes
// a resume that fails before its first event as one Eino cannot resume
// only when it never reached the call it targets.
func TestApprovedToolRanThenTransientFailure(t *testing.T) {
	ctx := context.Background()
	var ran atomic.Int64
	refund := agent.Tool{Definition: llm.Tool{Name: "refund", Description: "refund an order", Parameters: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}}}`)},
		NeedsApproval: true,
		Call: func(context.Context, json.RawMessage) (string, error) {
			ran.Add(1)
			return "refunded", nil
		}}
	e, err := eino.NewEngine(ctx, eino.Config{Tools: []agent.Tool{refund}, Model: &refundThenFailModel{}, Store: eino.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Send(ctx, "acme/s/run1", []*schema.Message{schema.UserMessage("refund order 7")}, func(eino.Event) {})
	if err != nil || res.Pending == nil {
		t.Fatalf("send: %+v %v; want an approval pending", res, err)
	}
	var events []eino.Event
	_, err = e.Resume(ctx, *res.Pending, eino.Decision{Approved: true}, func(ev eino.Event) { events = append(events, ev) })
	if ran.Load() != 1 {
		t.Fatalf("the approved tool ran %d times, want 1 (events %+v, err %v)", ran.Load(), events, err)
	}
	if errors.Is(err, eino.ErrNoCheckpoint) {
		t.Errorf("the approved tool ran, then the model failed transiently; the resume is reported as %v (events %+v): "+
			"eino.ErrNoCheckpoint says the tool did not run and is not retryable", err, events)
	}
}

// TestApprovedToolPanicsAfterEffect: the approved tool runs and panics
// (after its side effect). Eino recovers the panic, and the resumed run's
// first event is its error; the resume reached its call, so it is not
// reported as eino.ErrNoCheckpoint, whose diagnostic would say "the tool
// did not run" though it ran.
func TestApprovedToolPanicsAfterEffect(t *testing.T) {
	ctx := context.Background()
	var ran atomic.Int64
	refund := agent.Tool{Definition: llm.Tool{Name: "refund", Description: "refund an order", Parameters: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}}}`)},
		NeedsApproval: true,
		Call: func(context.Context, json.RawMessage) (string, error) {
			ran.Add(1)
			panic("the refund's bug, after the money moved")
		}}
	e, err := eino.NewEngine(ctx, eino.Config{Tools: []agent.Tool{refund}, Model: &refundThenFailModel{}, Store: eino.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Send(ctx, "acme/s/run1", []*schema.Message{schema.UserMessage("refund order 7")}, func(eino.Event) {})
	if err != nil || res.Pending == nil {
		t.Fatalf("send: %+v %v; want an approval pending", res, err)
	}
	var events []eino.Event
	_, err = e.Resume(ctx, *res.Pending, eino.Decision{Approved: true}, func(ev eino.Event) { events = append(events, ev) })
	t.Logf("ran %d, events %+v, err %v", ran.Load(), events, err)
	if ran.Load() == 1 && errors.Is(err, eino.ErrNoCheckpoint) {
		t.Errorf("the approved tool ran (and panicked); the resume is reported as %v: eino.ErrNoCheckpoint says the tool did not run", err)
	}
}
