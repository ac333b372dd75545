package graph_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/graph"
)

// interimGraph: node a appends "a"; node b saves the session at
// once with its update (graph.SaveSession: its list item and a scalar
// naming the attempt) and then, while fail is set, fails. The checkpoint
// of a (saved before b's interim save) is what ResumeCheckpoint resumes.
func interimGraph(t *testing.T, optimistic bool, fail *atomic.Bool, attempts *atomic.Int32) (*graph.Graph, graph.ListField[string], graph.Field[string]) {
	ss, cs := rebaseStores(t)["sqlite"]()
	log := graph.NewListField[string]("log", graph.Append)
	summary := graph.NewField[string]("summary")
	g := mustCompile(t, graph.NewBuilder(graph.MustSchema(log, summary)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return log.Add("a"), nil
		}).
		AddNode("b", func(ctx context.Context, s graph.State) (graph.Update, error) {
			n := attempts.Add(1)
			u := log.Add("b").With(summary.Set(fmt.Sprintf("attempt %d", n)))
			if err := graph.SaveSession(ctx, u); err != nil {
				return nil, err
			}
			if fail.Load() {
				return nil, errors.New("outage after the interim save")
			}
			return u, nil
		}).AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"),
		graph.WithSessions(graph.SessionConfig{Store: ss, Optimistic: optimistic}), graph.WithCheckpointer(cs))
	return g, log, summary
}

// TestCheckpointResumeAfterInterimSaveStoresOnce: b's interim save stored
// "b"; b then failed, and the failure's checkpoint record (a rerun of b:
// its state is b's input, [q a]) carries session_basis lists.log = 3 —
// the session holds b's item. ResumeCheckpoint rejects that basis
// because 3 exceeds the record's list (n <= cur.Len()), falls back to
// the common-prefix guess (2), and the re-run of b appends "b" again
// after the one its own interim save stored: the log holds "b" twice. SaveSession promises
// "Later saves, including the one at End, overwrite it" — as they do
// when b is retried inside the invocation.
func TestCheckpointResumeAfterInterimSaveStoresOnce(t *testing.T) {
	var fail atomic.Bool
	var attempts atomic.Int32
	fail.Store(true)
	g, log, _ := interimGraph(t, false, &fail, &attempts)
	res, err := g.Invoke(t.Context(), log.Add("q"), graph.WithSessionID("s"))
	if err == nil {
		t.Fatal("the turn must fail at b")
	}
	fail.Store(false)
	if _, err := g.ResumeCheckpoint(t.Context(), res.InvocationID); err != nil {
		t.Fatal(err)
	}
	after, err := g.SessionState(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"q", "a", "b"}, log.Get(after)); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
