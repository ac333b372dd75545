package graph_test

import (
	"context"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// TestResumeNoSpuriousConflict: node a writes a session
// field of type any holding a struct (as an approval or tool-state
// record often is); node b suspends for a human decision; on Resume it
// writes the field again. No other turn ran, the session has
// Optimistic concurrency, and the resume happens in the same process
// (the session cache holds what the suspension wrote: the struct
// itself). newRebase compares the paused state's encoding (the record
// decoded: a map, sorted keys) with the cached state's (the struct, in
// field order), takes the field for another turn's write, and the
// resumed run's own write fails with session_write_conflict.
func TestResumeNoSpuriousConflict(t *testing.T) {
	for name, v := range map[string][2]any{
		"struct in any": {stepInfo{Step: "asked", Count: 1}, stepInfo{Step: "approved", Count: 2}},
		"invalid utf-8": {"caf\xc3", "done"},
	} {
		t.Run(name, func(t *testing.T) {
			ss := session.NewMemoryStore(session.MemoryConfig{})
			log := graph.NewListField[string]("log", graph.Append)
			val := graph.NewField[any]("val")
			ok := graph.NewField[bool]("ok")
			g := mustCompile(t, graph.NewBuilder(graph.MustSchema(log, val, ok)).
				AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
					return val.Set(v[0]).With(log.Add("a")), nil
				}).
				AddNode("b", func(ctx context.Context, s graph.State) (graph.Update, error) {
					if !ok.Get(s) {
						return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "approve"}, graph.RerunOnResume())
					}
					return val.Set(v[1]).With(log.Add("b")), nil
				}).AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"),
				graph.WithSessions(graph.SessionConfig{Store: ss, Fields: []string{"log", "val"}, Optimistic: true}))
			first, err := g.Invoke(t.Context(), log.Add("q"), graph.WithSessionID("s"))
			if err != nil || first.Status != graph.Suspended {
				t.Fatal(first.Status, err)
			}
			if _, err := g.Resume(t.Context(), first.InvocationID, graph.Update{"ok": true}); err != nil {
				t.Fatalf("Resume with no other writer failed (%s): %v", errcat.Of(err), err)
			}
		})
	}
}
