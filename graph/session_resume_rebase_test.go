package graph_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// rebaseStores opens a session store and a checkpoint store of each
// kind the checkpoint-resume tests run against.
func rebaseStores(t *testing.T) map[string]func() (session.Store, checkpoint.Store) {
	return map[string]func() (session.Store, checkpoint.Store){
		"memory": func() (session.Store, checkpoint.Store) {
			return session.NewMemoryStore(session.MemoryConfig{}), checkpoint.NewMemoryStore(nil)
		},
		"sqlite": func() (session.Store, checkpoint.Store) {
			st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close(context.Background()) })
			return st, st.Checkpoints()
		},
	}
}

// TestCheckpointResumeKeepsLaterTurns: turn 1 on a session fails after
// its first node; turns 2 (of one or several messages) complete on the
// session; ResumeCheckpoint then finishes turn 1. The session keeps turn
// 2's messages and gains turn 1's (its input and its reply) after them,
// with or without optimistic concurrency.
func TestCheckpointResumeKeepsLaterTurns(t *testing.T) {
	for name, open := range rebaseStores(t) {
		for _, turn2 := range [][]string{{"q2"}, {"q2", "q2b", "q2c"}} {
			for _, optimistic := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/turn2=%d/optimistic=%v", name, len(turn2), optimistic), func(t *testing.T) {
					ss, cs := open()
					var fail atomic.Bool
					log := graph.NewListField[string]("log", graph.Append)
					g := mustCompile(t, graph.NewBuilder(graph.MustSchema(log)).
						AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
							return nil, nil
						}).
						AddNode("b", func(ctx context.Context, s graph.State) (graph.Update, error) {
							if fail.Load() {
								return nil, errors.New("outage")
							}
							return log.Add("reply"), nil
						}).AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"),
						graph.WithSessions(graph.SessionConfig{Store: ss, Optimistic: optimistic}), graph.WithCheckpointer(cs))
					if _, err := g.Invoke(t.Context(), log.Add("hello"), graph.WithSessionID("s")); err != nil {
						t.Fatal(err)
					}
					fail.Store(true)
					first, err := g.Invoke(t.Context(), log.Add("q1"), graph.WithSessionID("s"))
					if err == nil {
						t.Fatal("turn 1 must fail")
					}
					fail.Store(false)
					if _, err := g.Invoke(t.Context(), log.Add(turn2...), graph.WithSessionID("s")); err != nil {
						t.Fatal(err)
					}
					if _, err := g.ResumeCheckpoint(t.Context(), first.InvocationID); err != nil {
						t.Fatal(err)
					}
					after, err := g.SessionState(t.Context(), "s")
					if err != nil {
						t.Fatal(err)
					}
					want := append(append([]string{"hello", "reply"}, turn2...), "reply", "q1", "reply")
					if got := log.Get(after); !slices.Equal(got, want) {
						t.Errorf("session after the checkpoint resume = %v, want %v", got, want)
					}
				})
			}
		}
	}
}

// TestCheckpointResumeKeepsItsOwnWrites: a checkpoint resume with no turn
// in between writes what the invocation had done before the checkpoint
// (an appended item, a scalar) and what it does after, once each.
func TestCheckpointResumeKeepsItsOwnWrites(t *testing.T) {
	for name, open := range rebaseStores(t) {
		t.Run(name, func(t *testing.T) {
			ss, cs := open()
			var fail atomic.Bool
			log := graph.NewListField[string]("log", graph.Append)
			summary := graph.NewField[string]("summary")
			g := mustCompile(t, graph.NewBuilder(graph.MustSchema(log, summary)).
				AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
					return summary.Set("S1").With(log.Add("a")), nil
				}).
				AddNode("b", func(ctx context.Context, s graph.State) (graph.Update, error) {
					if fail.Load() {
						return nil, errors.New("outage")
					}
					return log.Add("b"), nil
				}).AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"),
				graph.WithSessions(graph.SessionConfig{Store: ss, Optimistic: true}), graph.WithCheckpointer(cs))
			if _, err := g.Invoke(t.Context(), summary.Set("S0"), graph.WithSessionID("s")); err != nil {
				t.Fatal(err)
			}
			fail.Store(true)
			first, err := g.Invoke(t.Context(), log.Add("q1"), graph.WithSessionID("s"))
			if err == nil {
				t.Fatal("turn 1 must fail")
			}
			fail.Store(false)
			if _, err := g.ResumeCheckpoint(t.Context(), first.InvocationID); err != nil {
				t.Fatal(err)
			}
			after, _ := g.SessionState(t.Context(), "s")
			if got, want := log.Get(after), []string{"a", "b", "q1", "a", "b"}; !slices.Equal(got, want) {
				t.Errorf("log = %v, want %v", got, want)
			}
			if got := summary.Get(after); got != "S1" {
				t.Errorf("summary = %q, want the invocation's S1", got)
			}
		})
	}
}

// TestSuspendResumeAfterAnotherTurn: a suspension resumed after another
// turn completed on the session appends its items after that turn's.
func TestSuspendResumeAfterAnotherTurn(t *testing.T) {
	ss := session.NewMemoryStore(session.MemoryConfig{})
	log := graph.NewListField[string]("log", graph.Append)
	ok := graph.NewField[bool]("ok")
	g := mustCompile(t, graph.NewBuilder(graph.MustSchema(log, ok)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
			l := log.Get(s)
			if l[len(l)-1] == "q1" && !ok.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "x"}, graph.RerunOnResume())
			}
			return log.Add("reply"), nil
		}).AddEdge("a", graph.End).SetEntry("a"),
		graph.WithSessions(graph.SessionConfig{Store: ss, Fields: []string{"log"}}))
	if _, err := g.Invoke(t.Context(), log.Add("hello"), graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	first, err := g.Invoke(t.Context(), log.Add("q1"), graph.WithSessionID("s"))
	if err != nil || first.Status != graph.Suspended {
		t.Fatal(err)
	}
	if _, err := g.Invoke(t.Context(), log.Add("q2"), graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Resume(t.Context(), first.InvocationID, graph.Update{"ok": true}); err != nil {
		t.Fatal(err)
	}
	after, _ := g.SessionState(t.Context(), "s")
	if got, want := log.Get(after), []string{"hello", "reply", "q1", "q2", "reply", "reply"}; !slices.Equal(got, want) {
		t.Errorf("log = %v, want %v", got, want)
	}
}

// staleScalarGraph: node a suspends on q1 until ok; on q2 it sets the
// summary; on a resumed q1 it sets the summary to resumedSummary unless
// that is empty.
func staleScalarGraph(t *testing.T, ss session.Store, optimistic bool, resumedSummary string) (*graph.Graph, graph.ListField[string], graph.Field[string]) {
	log := graph.NewListField[string]("log", graph.Append)
	summary := graph.NewField[string]("summary")
	ok := graph.NewField[bool]("ok")
	g := mustCompile(t, graph.NewBuilder(graph.MustSchema(log, summary, ok)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
			l := log.Get(s)
			switch last := l[len(l)-1]; {
			case last == "q1" && !ok.Get(s):
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "x"}, graph.RerunOnResume())
			case last == "q1" && resumedSummary != "":
				return summary.Set(resumedSummary).With(log.Add("reply1")), nil
			case last == "q2":
				return summary.Set("S2").With(log.Add("reply2")), nil
			}
			return log.Add("reply"), nil
		}).AddEdge("a", graph.End).SetEntry("a"),
		graph.WithSessions(graph.SessionConfig{Store: ss, Fields: []string{"log", "summary"}, Optimistic: optimistic}))
	return g, log, summary
}

// runStaleScalar runs hello (summary S0), suspends q1, completes q2
// (summary S2) and resumes q1 with payload.
func runStaleScalar(t *testing.T, g *graph.Graph, log graph.ListField[string], summary graph.Field[string], payload graph.Update) (graph.State, error) {
	t.Helper()
	if _, err := g.Invoke(t.Context(), summary.Set("S0").With(log.Add("hello")), graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	first, err := g.Invoke(t.Context(), log.Add("q1"), graph.WithSessionID("s"))
	if err != nil || first.Status != graph.Suspended {
		t.Fatal(first, err)
	}
	if _, err := g.Invoke(t.Context(), log.Add("q2"), graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	_, rerr := g.Resume(t.Context(), first.InvocationID, payload)
	after, err := g.SessionState(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return after, rerr
}

// TestResumeKeepsLaterScalarWrites: a resumed run that never writes a
// scalar session field leaves the value a later turn stored, with or
// without optimistic concurrency.
func TestResumeKeepsLaterScalarWrites(t *testing.T) {
	for _, optimistic := range []bool{false, true} {
		t.Run(fmt.Sprintf("optimistic=%v", optimistic), func(t *testing.T) {
			g, log, summary := staleScalarGraph(t, session.NewMemoryStore(session.MemoryConfig{}), optimistic, "")
			after, err := runStaleScalar(t, g, log, summary, graph.Update{"ok": true})
			if err != nil {
				t.Fatal(err)
			}
			if got := summary.Get(after); got != "S2" {
				t.Errorf("summary = %q, want turn 2's S2 (the resumed run never wrote it)", got)
			}
			if got, want := log.Get(after), []string{"hello", "reply", "q1", "q2", "reply2", "reply"}; !slices.Equal(got, want) {
				t.Errorf("log = %v, want %v", got, want)
			}
		})
	}
}

// TestResumeScalarWrittenByBoth: a resumed run that writes a scalar a
// later turn also changed wins under last-write-wins, and fails with
// session_write_conflict, writing nothing, under optimistic concurrency.
// A resume payload that sets the field is the resumed run's write.
func TestResumeScalarWrittenByBoth(t *testing.T) {
	for _, viaPayload := range []bool{false, true} {
		for _, optimistic := range []bool{false, true} {
			t.Run(fmt.Sprintf("payload=%v/optimistic=%v", viaPayload, optimistic), func(t *testing.T) {
				node, payload := "S1", graph.Update{"ok": true}
				if viaPayload {
					node, payload["summary"] = "", "S1"
				}
				g, log, summary := staleScalarGraph(t, session.NewMemoryStore(session.MemoryConfig{}), optimistic, node)
				after, err := runStaleScalar(t, g, log, summary, payload)
				if optimistic {
					if errcat.Of(err) != errcat.SessionWriteConflict {
						t.Fatalf("resume error = %v (%s), want session_write_conflict", err, errcat.Of(err))
					}
					if got := summary.Get(after); got != "S2" {
						t.Errorf("summary = %q after the conflict, want turn 2's S2 kept", got)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := summary.Get(after); got != "S1" {
					t.Errorf("summary = %q, want the resumed run's S1 (last write wins)", got)
				}
			})
		}
	}
}

// TestResumeScalarBothWroteSameValue: a resumed run that writes the value
// a later turn stored is no conflict.
func TestResumeScalarBothWroteSameValue(t *testing.T) {
	g, log, summary := staleScalarGraph(t, session.NewMemoryStore(session.MemoryConfig{}), true, "S2")
	after, err := runStaleScalar(t, g, log, summary, graph.Update{"ok": true})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary.Get(after); got != "S2" {
		t.Errorf("summary = %q, want S2", got)
	}
}
