package graph_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

type stepInfo struct {
	Step  string `json:"step"`
	Count int    `json:"count"`
}

// canonicalBasisGraph: node a writes the value field and saves the
// session at once (graph.SaveSession, as agent.Agent does after an
// approved tool call); node b fails while fail is set (after a's
// checkpoint) and otherwise writes the value field again. No other turn
// touches the session.
func canonicalBasisGraph[T any](t *testing.T, ss session.Store, cs checkpoint.Store, first, second T, fail *atomic.Bool) (*graph.Graph, graph.Field[T]) {
	t.Helper()
	log := graph.NewListField[string]("log", graph.Append)
	val := graph.NewField[T]("val")
	g := mustCompile(t, graph.NewBuilder(graph.MustSchema(log, val)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
			u := val.Set(first).With(log.Add("a"))
			if err := graph.SaveSession(ctx, u); err != nil {
				return nil, err
			}
			return u, nil
		}).
		AddNode("b", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if fail.Load() {
				return nil, errors.New("outage")
			}
			return val.Set(second).With(log.Add("b")), nil
		}).AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"),
		graph.WithSessions(graph.SessionConfig{Store: ss, Optimistic: true}), graph.WithCheckpointer(cs))
	return g, val
}

func runBasisResume[T any](t *testing.T, first, second T) {
	var fail atomic.Bool
	fail.Store(true)
	ss, cs := rebaseStores(t)["sqlite"]()
	g, _ := canonicalBasisGraph(t, ss, cs, first, second, &fail)
	res, err := g.Invoke(t.Context(), nil, graph.WithSessionID("s"))
	if err == nil {
		t.Fatal("the turn must fail at b")
	}
	fail.Store(false)
	// The process restarts (the usual reason to resume a checkpoint): a
	// new graph on the same stores, with a cold session cache.
	g, val := canonicalBasisGraph(t, ss, cs, first, second, &fail)
	// Nobody else wrote the session: the resume must succeed.
	if _, err := g.ResumeCheckpoint(t.Context(), res.InvocationID); err != nil {
		t.Fatalf("ResumeCheckpoint with no concurrent writer failed: %v", err)
	}
	after, err := g.SessionState(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(val.Get(after)), fmt.Sprint(second); got != want {
		t.Errorf("val = %s, want %s", got, want)
	}
}

// TestCheckpointResumeNoSpuriousConflictStructInAny: a session field of type any holding
// a struct, saved by SaveSession before the checkpoint. The basis hashes
// the in-memory struct's encoding (field order), the resume hashes the
// stored value decoded as a map (sorted keys): they differ, so the
// resume takes the field for another turn's write and, under
// Optimistic, the run's own second write fails with
// session_write_conflict although no other turn ran.
func TestCheckpointResumeNoSpuriousConflictStructInAny(t *testing.T) {
	runBasisResume[any](t, stepInfo{Step: "a", Count: 1}, stepInfo{Step: "b", Count: 2})
}

// TestCheckpointResumeNoSpuriousConflictInvalidUTF8: the same with a plain string field
// whose value holds a byte that is not UTF-8 (a string cut at a byte
// limit): json.Marshal writes \ufffd as an escape, the decoded string's
// re-encoding holds the raw rune.
func TestCheckpointResumeNoSpuriousConflictInvalidUTF8(t *testing.T) {
	runBasisResume[string](t, "caf\xc3", "done")
}

// TestCheckpointResumeNoSpuriousConflictMapOfStructs: a typed map whose values are any.
func TestCheckpointResumeNoSpuriousConflictMapOfStructs(t *testing.T) {
	runBasisResume[map[string]any](t, map[string]any{"x": stepInfo{Step: "a", Count: 1}}, map[string]any{"x": 2})
}
