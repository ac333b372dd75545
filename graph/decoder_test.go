package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// A field declared WithDecoder decodes its stored value with its own
// function on a session load, and a failing decoder fails the load.
func TestWithDecoder(t *testing.T) {
	var calls atomic.Int32
	fail := atomic.Bool{}
	decode := func(data []byte) ([]string, error) {
		calls.Add(1)
		if fail.Load() {
			return nil, errors.New("refused")
		}
		var out []string
		err := json.Unmarshal(data, &out)
		return out, err
	}
	msgs := graph.NewListField[string]("messages", graph.Append, graph.WithDecoder(decode))
	schema, err := graph.NewSchema(msgs)
	if err != nil {
		t.Fatal(err)
	}
	store := session.NewMemoryStore(session.MemoryConfig{})
	g, err := graph.NewBuilder(schema).
		AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return msgs.Add("reply to " + msgs.Get(s)[len(msgs.Get(s))-1]), nil
		}).
		SetEntry("reply").AddEdge("reply", graph.End).
		Compile(graph.WithSessions(graph.SessionConfig{Store: store, SchemaVersion: "v1", CacheSize: -1}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, m := range []string{"a", "b"} {
		if _, err := g.Invoke(ctx, msgs.Add(m), graph.WithSessionID("s")); err != nil {
			t.Fatal(err)
		}
	}
	res, err := g.Invoke(ctx, msgs.Add("c"), graph.WithSessionID("s"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(msgs.Get(res.State), ","); got != "a,reply to a,b,reply to b,c,reply to c" {
		t.Fatalf("history %s", got)
	}
	if calls.Load() < 2 {
		t.Fatalf("decoder called %d times over two cold loads", calls.Load())
	}
	fail.Store(true)
	if _, err := g.Invoke(ctx, msgs.Add("d"), graph.WithSessionID("s")); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("load with a failing decoder: %v", err)
	}
}

// WithDecoder on a field of another type fails schema construction.
func TestWithDecoderWrongType(t *testing.T) {
	f := graph.NewListField[string]("messages", graph.Append, graph.WithDecoder(func([]byte) (int, error) { return 0, nil }))
	_, err := graph.NewSchema(f)
	if !errors.Is(err, errcat.InvalidGraph) {
		t.Fatalf("NewSchema = %v, want invalid_graph", err)
	}
}
