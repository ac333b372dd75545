package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// basisGraph is a two-node graph on a session whose second node fails
// while fail is set (after the checkpoint of the first) and otherwise
// replies to the last log item; reply, when not nil, sets the summary
// too.
func basisGraph(t *testing.T, ss session.Store, cs checkpoint.Store, optimistic bool, fail *atomic.Bool, summaryWrite *atomic.Pointer[string]) (*graph.Graph, graph.ListField[string], graph.Field[string]) {
	t.Helper()
	log := graph.NewListField[string]("log", graph.Append)
	summary := graph.NewField[string]("summary")
	g := mustCompile(t, graph.NewBuilder(graph.MustSchema(log, summary)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) { return nil, nil }).
		AddNode("b", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if fail.Load() {
				return nil, errors.New("outage")
			}
			l := log.Get(s)
			u := log.Add("reply to " + l[len(l)-1])
			if summaryWrite != nil {
				if v := summaryWrite.Load(); v != nil {
					u = u.With(summary.Set(*v))
				}
			}
			return u, nil
		}).AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"),
		graph.WithSessions(graph.SessionConfig{Store: ss, Optimistic: optimistic}), graph.WithCheckpointer(cs))
	return g, log, summary
}

// TestCheckpointResumeKeepsLaterScalarWrites: turn 1 never writes the
// scalar summary and fails after its checkpoint; turn 2 sets it;
// ResumeCheckpoint of turn 1 keeps turn 2's value (the checkpoint
// records the value turn 1 loaded, so its unchanged copy is no write),
// with and without optimistic concurrency, on every store.
func TestCheckpointResumeKeepsLaterScalarWrites(t *testing.T) {
	for name, open := range rebaseStores(t) {
		for _, optimistic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/optimistic=%v", name, optimistic), func(t *testing.T) {
				ss, cs := open()
				var fail atomic.Bool
				g, log, summary := basisGraph(t, ss, cs, optimistic, &fail, nil)
				if _, err := g.Invoke(t.Context(), summary.Set("S0").With(log.Add("hello")), graph.WithSessionID("s")); err != nil {
					t.Fatal(err)
				}
				fail.Store(true)
				first, err := g.Invoke(t.Context(), log.Add("q1"), graph.WithSessionID("s"))
				if err == nil {
					t.Fatal("turn 1 must fail")
				}
				fail.Store(false)
				if _, err := g.Invoke(t.Context(), summary.Set("S2").With(log.Add("q2")), graph.WithSessionID("s")); err != nil {
					t.Fatal(err)
				}
				if _, err := g.ResumeCheckpoint(t.Context(), first.InvocationID); err != nil {
					t.Fatal(err)
				}
				after, err := g.SessionState(t.Context(), "s")
				if err != nil {
					t.Fatal(err)
				}
				if got := summary.Get(after); got != "S2" {
					t.Errorf("summary = %q, want turn 2's S2 kept", got)
				}
				want := []string{"hello", "reply to hello", "q2", "reply to q2", "q1", "reply to q1"}
				if diff := cmp.Diff(want, log.Get(after)); diff != "" {
					t.Errorf("log (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestCheckpointResumeScalarWrittenByBoth: the resumed run writes the
// summary another turn wrote after the checkpoint, with a third value:
// under Optimistic the write fails with session_write_conflict (nothing
// of the run is stored); otherwise the run's value wins.
func TestCheckpointResumeScalarWrittenByBoth(t *testing.T) {
	for _, optimistic := range []bool{false, true} {
		t.Run(fmt.Sprintf("optimistic=%v", optimistic), func(t *testing.T) {
			ss, cs := rebaseStores(t)["sqlite"]()
			var fail atomic.Bool
			var write atomic.Pointer[string]
			g, log, summary := basisGraph(t, ss, cs, optimistic, &fail, &write)
			if _, err := g.Invoke(t.Context(), summary.Set("S0").With(log.Add("hello")), graph.WithSessionID("s")); err != nil {
				t.Fatal(err)
			}
			fail.Store(true)
			first, err := g.Invoke(t.Context(), log.Add("q1"), graph.WithSessionID("s"))
			if err == nil {
				t.Fatal("turn 1 must fail")
			}
			fail.Store(false)
			if _, err := g.Invoke(t.Context(), summary.Set("S2").With(log.Add("q2")), graph.WithSessionID("s")); err != nil {
				t.Fatal(err)
			}
			s1 := "S1"
			write.Store(&s1)
			_, rerr := g.ResumeCheckpoint(t.Context(), first.InvocationID)
			after, err := g.SessionState(t.Context(), "s")
			if err != nil {
				t.Fatal(err)
			}
			if optimistic {
				if errcat.Of(rerr) != errcat.SessionWriteConflict {
					t.Fatalf("resume error = %v, want session_write_conflict", rerr)
				}
				if got := summary.Get(after); got != "S2" {
					t.Errorf("summary = %q after a refused write, want S2", got)
				}
				return
			}
			if rerr != nil {
				t.Fatal(rerr)
			}
			if got := summary.Get(after); got != "S1" {
				t.Errorf("summary = %q, want the resumed run's S1 (last write wins)", got)
			}
		})
	}
}

// TestCheckpointResumeKeepsResentMessage: turn 1 (q) fails after its
// checkpoint; the user sends the same text again (turn 2 completes);
// ResumeCheckpoint of turn 1 appends turn 1's q and its reply after turn
// 2's: the record says how much of the list turn 1 loaded, so an equal
// item another turn stored is not taken for turn 1's own.
func TestCheckpointResumeKeepsResentMessage(t *testing.T) {
	for name, open := range rebaseStores(t) {
		t.Run(name, func(t *testing.T) {
			ss, cs := open()
			var fail atomic.Bool
			g, log, _ := basisGraph(t, ss, cs, false, &fail, nil)
			if _, err := g.Invoke(t.Context(), log.Add("hello"), graph.WithSessionID("s")); err != nil {
				t.Fatal(err)
			}
			fail.Store(true)
			first, err := g.Invoke(t.Context(), log.Add("what time is it"), graph.WithSessionID("s"))
			if err == nil {
				t.Fatal("turn 1 must fail")
			}
			fail.Store(false)
			if _, err := g.Invoke(t.Context(), log.Add("what time is it"), graph.WithSessionID("s")); err != nil {
				t.Fatal(err)
			}
			if _, err := g.ResumeCheckpoint(t.Context(), first.InvocationID); err != nil {
				t.Fatal(err)
			}
			after, _ := g.SessionState(t.Context(), "s")
			want := []string{"hello", "reply to hello", "what time is it", "reply to what time is it", "what time is it", "reply to what time is it"}
			if diff := cmp.Diff(want, log.Get(after)); diff != "" {
				t.Errorf("log (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckpointRecordsSessionBasis: a session-bound invocation's
// checkpoint records what it loaded of its session (list lengths, value
// hashes), and the record's Session survives Encode and DecodeCheckpoint.
func TestCheckpointRecordsSessionBasis(t *testing.T) {
	ss, cs := session.NewMemoryStore(session.MemoryConfig{}), checkpoint.NewMemoryStore(nil)
	var fail atomic.Bool
	g, log, summary := basisGraph(t, ss, cs, false, &fail, nil)
	if _, err := g.Invoke(t.Context(), summary.Set("S0").With(log.Add("hello")), graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	first, err := g.Invoke(t.Context(), log.Add("q1"), graph.WithSessionID("s"))
	if err == nil {
		t.Fatal("turn 1 must fail")
	}
	stored, err := cs.Load(t.Context(), checkpoint.Key{InvocationID: first.InvocationID, Kind: checkpoint.KindCheckpoint})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := graph.DecodeCheckpoint(stored)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Session == nil {
		t.Fatal("the checkpoint records no session basis")
	}
	if diff := cmp.Diff(map[string]int{"log": 2}, rec.Session.Lists); diff != "" {
		t.Errorf("Lists (-want +got):\n%s", diff)
	}
	if h := rec.Session.Values["summary"]; len(h) != 64 {
		t.Errorf("Values[summary] = %q, want a hex SHA-256", h)
	}
	again, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := graph.DecodeCheckpoint(&again)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec.Session, back.Session); diff != "" {
		t.Errorf("Session after Encode/DecodeCheckpoint (-want +got):\n%s", diff)
	}
}

// TestCheckpointResumeOldRecord: a checkpoint record in the format older
// builds wrote (no session basis) still loads and resumes, with the
// common-prefix rule: the items the checkpoint and the stored session
// begin with are the session, the rest the invocation's own.
func TestCheckpointResumeOldRecord(t *testing.T) {
	ss, cs := session.NewMemoryStore(session.MemoryConfig{}), checkpoint.NewMemoryStore(nil)
	var fail atomic.Bool
	g, log, summary := basisGraph(t, ss, cs, false, &fail, nil)
	if _, err := g.Invoke(t.Context(), summary.Set("S0").With(log.Add("hello")), graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(t.Context(), summary.Set("S2").With(log.Add("q2")), graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	// Turn 1's checkpoint as an older build wrote it, saved before turn 2.
	const data = `{"format":1,"positions":[{"node":"b","state":{"log":["hello","reply to hello","q1"],"summary":"S0"}}],` +
		`"descriptor":{"signal_id":""},"rerun_on_resume":true,"node_name":"b","namespace":["b"],` +
		`"completed_positions":[{"namespace":[],"node_name":"a","step":0,"attempt_index":0}]}`
	err := cs.Save(t.Context(), checkpoint.Record{
		InvocationID: "old-turn-1", Kind: checkpoint.KindCheckpoint, SessionID: "s", Data: json.RawMessage(data),
		SavedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), CompletedNodeCount: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := cs.Load(t.Context(), checkpoint.Key{InvocationID: "old-turn-1", Kind: checkpoint.KindCheckpoint})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := graph.DecodeCheckpoint(stored)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Session != nil {
		t.Fatalf("an old record decodes with a session basis: %+v", rec.Session)
	}
	if _, err := g.ResumeCheckpoint(t.Context(), "old-turn-1"); err != nil {
		t.Fatal(err)
	}
	after, err := g.SessionState(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"hello", "reply to hello", "q2", "reply to q2", "q1", "reply to q1"}
	if diff := cmp.Diff(want, log.Get(after)); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	// Without a basis the run's other fields are its to write (last
	// write wins): the checkpoint's summary replaces turn 2's.
	if got := summary.Get(after); got != "S0" {
		t.Errorf("summary = %q, want the old record's S0 (last write wins)", got)
	}
}

// TestResumeDedupeAppendKeepsNoDuplicates: a dedupe_append session field
// holds no item twice after a resume whose run added an item another
// turn added meanwhile — from a checkpoint and from a suspension: the
// run's items are merged into the stored list through the reducer.
func TestResumeDedupeAppendKeepsNoDuplicates(t *testing.T) {
	noDup := func(t *testing.T, got []string) {
		t.Helper()
		if len(slices.Compact(slices.Sorted(slices.Values(got)))) != len(got) {
			t.Errorf("dedupe_append field holds duplicates: %q", got)
		}
	}
	for name, open := range rebaseStores(t) {
		t.Run("checkpoint/"+name, func(t *testing.T) {
			ss, cs := open()
			var fail atomic.Bool
			tags := graph.NewListField[string]("tags", graph.DedupeAppend(nil))
			g := mustCompile(t, graph.NewBuilder(graph.MustSchema(tags)).
				AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) { return tags.Add("x"), nil }).
				AddNode("b", func(ctx context.Context, s graph.State) (graph.Update, error) {
					if fail.Load() {
						return nil, errors.New("outage")
					}
					return tags.Add("w"), nil
				}).AddEdge("a", "b").AddEdge("b", graph.End).SetEntry("a"),
				graph.WithSessions(graph.SessionConfig{Store: ss}), graph.WithCheckpointer(cs))
			if _, err := g.Invoke(t.Context(), tags.Add("base"), graph.WithSessionID("s")); err != nil {
				t.Fatal(err)
			}
			fail.Store(true)
			first, err := g.Invoke(t.Context(), tags.Add("y"), graph.WithSessionID("s"))
			if err == nil {
				t.Fatal("turn 1 must fail")
			}
			fail.Store(false)
			if _, err := g.Invoke(t.Context(), tags.Add("z", "y"), graph.WithSessionID("s")); err != nil {
				t.Fatal(err)
			}
			if _, err := g.ResumeCheckpoint(t.Context(), first.InvocationID); err != nil {
				t.Fatal(err)
			}
			after, _ := g.SessionState(t.Context(), "s")
			noDup(t, tags.Get(after))
			if diff := cmp.Diff([]string{"base", "x", "w", "z", "y"}, tags.Get(after)); diff != "" {
				t.Errorf("tags (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("suspension", func(t *testing.T) {
		ss := session.NewMemoryStore(session.MemoryConfig{})
		tags := graph.NewListField[string]("tags", graph.DedupeAppend(nil))
		ok := graph.NewField[bool]("ok")
		g := mustCompile(t, graph.NewBuilder(graph.MustSchema(tags, ok)).
			AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
				if slices.Contains(tags.Get(s), "q1") && !ok.Get(s) {
					return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "x"}, graph.RerunOnResume())
				}
				if ok.Get(s) {
					return tags.Add("shared", "own"), nil
				}
				return nil, nil
			}).AddEdge("a", graph.End).SetEntry("a"),
			graph.WithSessions(graph.SessionConfig{Store: ss, Fields: []string{"tags"}}))
		first, err := g.Invoke(t.Context(), tags.Add("q1"), graph.WithSessionID("s"))
		if err != nil || first.Status != graph.Suspended {
			t.Fatal(first, err)
		}
		if _, err := g.Invoke(t.Context(), tags.Add("shared"), graph.WithSessionID("s")); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Resume(t.Context(), first.InvocationID, graph.Update{"ok": true}); err != nil {
			t.Fatal(err)
		}
		after, _ := g.SessionState(t.Context(), "s")
		noDup(t, tags.Get(after))
		if diff := cmp.Diff([]string{"q1", "shared", "own"}, tags.Get(after)); diff != "" {
			t.Errorf("tags (-want +got):\n%s", diff)
		}
	})
}

// TestResumeMergeByKeyKeepsNoDuplicates: a merge_by_key session field is
// not an append-only list: a resume whose run merged an item another
// turn added meanwhile writes the run's list (last write wins), which
// holds each key once.
func TestResumeMergeByKeyKeepsNoDuplicates(t *testing.T) {
	ss := session.NewMemoryStore(session.MemoryConfig{})
	items := graph.NewListField[map[string]any]("items", graph.MergeByKey(graph.FieldKey("id")))
	ok := graph.NewField[bool]("ok")
	g := mustCompile(t, graph.NewBuilder(graph.MustSchema(items, ok)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if !ok.Get(s) && len(items.Get(s)) == 1 {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "x"}, graph.RerunOnResume())
			}
			if ok.Get(s) {
				return items.Add(map[string]any{"id": "b", "v": "resumed"}), nil
			}
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a"),
		graph.WithSessions(graph.SessionConfig{Store: ss, Fields: []string{"items"}}))
	first, err := g.Invoke(t.Context(), items.Add(map[string]any{"id": "a"}), graph.WithSessionID("s"))
	if err != nil || first.Status != graph.Suspended {
		t.Fatal(first, err)
	}
	if _, err := g.Invoke(t.Context(), items.Add(map[string]any{"id": "b", "v": "turn 2"}), graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Resume(t.Context(), first.InvocationID, graph.Update{"ok": true}); err != nil {
		t.Fatal(err)
	}
	after, _ := g.SessionState(t.Context(), "s")
	want := []map[string]any{{"id": "a"}, {"id": "b", "v": "resumed"}}
	if diff := cmp.Diff(want, items.Get(after)); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}

// TestCheckpointResumeOfResumedRunWithInterimSave: a run resumed from a
// checkpoint onto a session that moved on saves the session mid-run
// (SaveSession) and fails; ResumeCheckpoint of that run stores each of
// its items once: its checkpoint counts what its interim save stored.
func TestCheckpointResumeOfResumedRunWithInterimSave(t *testing.T) {
	ss, cs := rebaseStores(t)["sqlite"]()
	var failB, failC atomic.Bool
	log := graph.NewListField[string]("log", graph.Append)
	g := mustCompile(t, graph.NewBuilder(graph.MustSchema(log)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) { return nil, nil }).
		AddNode("b", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if failB.Load() {
				return nil, errors.New("outage")
			}
			u := log.Add("draft")
			if err := graph.SaveSession(ctx, u); err != nil {
				return nil, err
			}
			return u, nil
		}).
		AddNode("c", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if failC.Load() {
				return nil, errors.New("outage")
			}
			return log.Add("final"), nil
		}).AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", graph.End).SetEntry("a"),
		graph.WithSessions(graph.SessionConfig{Store: ss}), graph.WithCheckpointer(cs))
	failB.Store(true)
	first, err := g.Invoke(t.Context(), log.Add("q1"), graph.WithSessionID("s"))
	if err == nil {
		t.Fatal("turn 1 must fail")
	}
	failB.Store(false)
	if _, err := g.Invoke(t.Context(), log.Add("q2"), graph.WithSessionID("s")); err != nil {
		t.Fatal(err)
	}
	failC.Store(true)
	second, err := g.ResumeCheckpoint(t.Context(), first.InvocationID)
	if err == nil {
		t.Fatal("the resumed run must fail at c")
	}
	failC.Store(false)
	if _, err := g.ResumeCheckpoint(t.Context(), second.InvocationID); err != nil {
		t.Fatal(err)
	}
	after, _ := g.SessionState(t.Context(), "s")
	want := []string{"q2", "draft", "final", "q1", "draft", "final"}
	if diff := cmp.Diff(want, log.Get(after)); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
