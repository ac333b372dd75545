// Package bench holds the standard workloads of BENCHMARKS.md as
// functions every backend runs identically:
//
//	func BenchmarkW1SQLite(b *testing.B) {
//		bench.W1(b, openStore(b), 1000)
//	}
//
// Each workload uses a scripted node in place of a model (no network, no
// sleep), so what it measures is the engine and the store.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// Message is the chat message shape of the workloads.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Messages is the workloads' history field.
var Messages = graph.NewListField[Message]("messages", graph.Append)

const reply = "Sure — here is a short answer to your question, about as long as a typical chat reply."

// ChatGraph returns the one-node chat graph of W1/W2: it appends one
// assistant reply per turn, with sessions on store.
func ChatGraph(store session.Store) (*graph.Graph, error) {
	schema, err := graph.NewSchema(Messages)
	if err != nil {
		return nil, err
	}
	return graph.NewBuilder(schema).
		AddNode("model", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return Messages.Add(Message{Role: "assistant", Content: reply}), nil
		}).
		AddEdge("model", graph.End).
		SetEntry("model").
		Compile(graph.WithSessions(graph.SessionConfig{Store: store, SchemaVersion: "v1"}))
}

// Seed stores a session with history messages.
func Seed(ctx context.Context, store session.Store, id string, history int) error {
	msgs := make([]Message, history)
	for i := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs[i] = Message{Role: role, Content: fmt.Sprintf("message %d of the conversation so far", i)}
	}
	raw, err := json.Marshal(msgs)
	if err != nil {
		return err
	}
	_, err = store.Save(ctx, session.SaveRequest{SessionID: id, SchemaVersion: "v1",
		State: map[string]json.RawMessage{"messages": raw}})
	return err
}

// W1 measures a warm chat turn at a given history length: one invocation
// bound to an existing session that appends the user's message and one
// reply. One warm-up turn runs before the timer, so the engine holds the
// decoded session as a long-running server would.
func W1(b *testing.B, store session.Store, history int) {
	b.Helper()
	ctx := context.Background()
	g, err := ChatGraph(store)
	if err != nil {
		b.Fatal(err)
	}
	const id = "w1-session"
	if err := Seed(ctx, store, id, history); err != nil {
		b.Fatal(err)
	}
	user := Messages.Add(Message{Role: "user", Content: "And what about tomorrow?"})
	if _, err := g.Invoke(ctx, user, graph.WithSessionID(id)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := g.Invoke(ctx, user, graph.WithSessionID(id)); err != nil {
			b.Fatal(err)
		}
	}
}

var approved = graph.NewField[bool]("approved")

// SuspendResume measures one approval cycle on the engine: an invocation
// that suspends at a gate node, then its resume with the approval payload
// running to completion.
func SuspendResume(b *testing.B, opts ...graph.CompileOption) {
	b.Helper()
	ctx := context.Background()
	schema, err := graph.NewSchema(approved, Messages)
	if err != nil {
		b.Fatal(err)
	}
	g, err := graph.NewBuilder(schema).
		AddNode("plan", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return Messages.Add(Message{Role: "assistant", Content: "I will send the email."}), nil
		}).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if !approved.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "approve-email"})
			}
			return nil, nil
		}).
		AddNode("send", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return Messages.Add(Message{Role: "assistant", Content: "Email sent."}), nil
		}).
		AddEdge("plan", "gate").AddEdge("gate", "send").AddEdge("send", graph.End).
		SetEntry("plan").
		Compile(opts...)
	if err != nil {
		b.Fatal(err)
	}
	payload := approved.Set(true)
	b.ReportAllocs()
	for b.Loop() {
		res, err := g.Invoke(ctx, nil)
		if err != nil || res.Status != graph.Suspended {
			b.Fatalf("invoke: %v, %v", res.Status, err)
		}
		res, err = g.Resume(ctx, res.InvocationID, payload)
		if err != nil || res.Status != graph.Completed {
			b.Fatalf("resume: %v, %v", res.Status, err)
		}
	}
}
