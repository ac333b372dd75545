package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// pausedListsGraph is a session-bound graph whose turn adds a message,
// suspends at gate until approved, then adds another; seen records the
// log the node after the gate saw.
func pausedListsGraph(t *testing.T, ss session.Store, cs checkpoint.Store, tail int, seen *[]string) (*graph.Graph, graph.ListField[string], graph.Field[bool]) {
	t.Helper()
	log := graph.NewListField[string]("log", graph.Append)
	ok := graph.NewField[bool]("ok")
	cfg := graph.SessionConfig{Store: ss}
	if tail > 0 {
		cfg.Tail = []session.ListTail{{Field: "log", Max: tail}}
	}
	g := mustCompile(t, graph.NewBuilder(graph.MustSchema(log, ok)).
		AddNode("ask", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return log.Add("asked"), nil
		}).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if !ok.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "approve"})
			}
			return nil, nil
		}).
		AddNode("act", func(ctx context.Context, s graph.State) (graph.Update, error) {
			*seen = slices.Clone(log.Get(s))
			return log.Add("done").With(ok.Set(false)), nil
		}).
		AddEdge("ask", "gate").AddEdge("gate", "act").AddEdge("act", graph.End).SetEntry("ask"),
		graph.WithSessions(cfg), graph.WithCheckpointer(cs))
	return g, log, ok
}

// history is n distinct log items.
func history(n int) []string {
	h := make([]string, n)
	for i := range h {
		h[i] = fmt.Sprintf("message %d of the history", i)
	}
	return h
}

// TestPausedRecordLeavesHistoryToSession: a suspension of an invocation
// bound to a session stores its session lists' length in the paused
// record, not their items (the suspension's session write stores them,
// with the record): the record's size does not grow with the history.
// The resume puts them back: the node after the gate sees the whole
// history, and the session ends with it and the turn's messages once.
// With the session loaded by its tail, the same.
func TestPausedRecordLeavesHistoryToSession(t *testing.T) {
	for name, open := range rebaseStores(t) {
		for _, tail := range []int{0, 5} {
			t.Run(fmt.Sprintf("%s/tail=%d", name, tail), func(t *testing.T) {
				ss, cs := open()
				var seen []string
				g, log, ok := pausedListsGraph(t, ss, cs, tail, &seen)
				sizes := map[int]int{}
				for _, n := range []int{10, 3000} {
					id := fmt.Sprintf("s%d", n)
					hist := history(n)
					if _, err := g.Invoke(t.Context(), log.Add(hist...).With(ok.Set(true)), graph.WithSessionID(id)); err != nil {
						t.Fatal(err)
					}
					res, err := g.Invoke(t.Context(), log.Add("please"), graph.WithSessionID(id))
					if err != nil || res.Status != graph.Suspended {
						t.Fatalf("turn: %v %+v", err, res)
					}
					rec, err := cs.Load(t.Context(), checkpoint.Key{InvocationID: res.InvocationID, Kind: checkpoint.KindSuspended})
					if err != nil {
						t.Fatal(err)
					}
					sizes[n] = len(rec.Data)
					if strings.Contains(string(rec.Data), "of the history") {
						t.Errorf("the paused record holds the history (%d bytes)", len(rec.Data))
					}
					var data struct {
						Format       int            `json:"format"`
						SessionLists map[string]int `json:"session_lists"`
					}
					if err := json.Unmarshal(rec.Data, &data); err != nil {
						t.Fatal(err)
					}
					// The history, "asked", "done" of the seeding turn, then "please", "asked".
					if want := n + 4; data.Format != 2 || data.SessionLists["log"] != want {
						t.Errorf("record: format %d, session_lists %v, want log %d", data.Format, data.SessionLists, want)
					}
					if _, err := g.Resume(t.Context(), res.InvocationID, graph.Update{"ok": true}); err != nil {
						t.Fatal(err)
					}
					want := append(slices.Clone(hist), "asked", "done", "please", "asked")
					if !slices.Equal(seen, want) {
						t.Errorf("the resumed node saw %d items, want %d: ...%v", len(seen), len(want), seen[max(0, len(seen)-5):])
					}
					after, err := g.SessionState(t.Context(), id)
					if err != nil {
						t.Fatal(err)
					}
					if got := log.Get(after); !slices.Equal(got, append(want, "done")) {
						t.Errorf("session after the resume: %d items, ...%v", len(got), got[max(0, len(got)-5):])
					}
				}
				if sizes[3000] > sizes[10]+64 {
					t.Errorf("the paused record grew with the history: %d bytes at 10 items, %d at 3000", sizes[10], sizes[3000])
				}
			})
		}
	}
}

// TestPausedRecordSessionGone: a paused record that leaves its history
// to the session cannot be resumed once the session holds fewer items
// than the record names (suspension_record_invalid; the record stays),
// nor once the session is deleted; a payload that sets the list itself
// replaces it, as any field.
func TestPausedRecordSessionGone(t *testing.T) {
	for name, open := range rebaseStores(t) {
		t.Run(name, func(t *testing.T) {
			ss, cs := open()
			var seen []string
			g, log, _ := pausedListsGraph(t, ss, cs, 0, &seen)
			res, err := g.Invoke(t.Context(), log.Add(history(20)...), graph.WithSessionID("gone"))
			if err != nil || res.Status != graph.Suspended {
				t.Fatalf("turn: %v %+v", err, res)
			}
			key := checkpoint.Key{InvocationID: res.InvocationID, Kind: checkpoint.KindSuspended}
			// The session written over, shorter: not the history.
			if _, err := ss.Save(t.Context(), session.SaveRequest{SessionID: "gone", State: map[string]json.RawMessage{"log": json.RawMessage(`["a"]`)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Resume(t.Context(), res.InvocationID, graph.Update{"ok": true}); !errors.Is(err, errcat.SuspensionRecordInvalid) {
				t.Fatalf("resume on a shorter session: %v", err)
			}
			if _, err := cs.Load(t.Context(), key); err != nil {
				t.Errorf("the paused record went: %v", err)
			}
			// The session deleted (a store may delete its records with it).
			if err := ss.Delete(t.Context(), "gone"); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Resume(t.Context(), res.InvocationID, graph.Update{"ok": true}); !errors.Is(err, errcat.SuspensionRecordInvalid) {
				t.Fatalf("resume after the session's delete: %v", err)
			}
			// A payload setting the list replaces it.
			res, err = g.Invoke(t.Context(), log.Add("q"), graph.WithSessionID("set"))
			if err != nil || res.Status != graph.Suspended {
				t.Fatalf("turn: %v %+v", err, res)
			}
			if _, err := g.Resume(t.Context(), res.InvocationID, graph.Update{"ok": true, "log": []string{"replaced"}}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(seen, []string{"replaced"}) {
				t.Errorf("the resumed node saw %v, want the payload's list", seen)
			}
		})
	}
}

// TestPausedRecordOldFormat: a paused record written before records left
// their history to the session (format 1, the whole state in it) still
// resumes.
func TestPausedRecordOldFormat(t *testing.T) {
	for name, open := range rebaseStores(t) {
		t.Run(name, func(t *testing.T) {
			ss, cs := open()
			var seen []string
			g, log, _ := pausedListsGraph(t, ss, cs, 0, &seen)
			res, err := g.Invoke(t.Context(), log.Add(history(3)...), graph.WithSessionID("old"))
			if err != nil || res.Status != graph.Suspended {
				t.Fatalf("turn: %v %+v", err, res)
			}
			key := checkpoint.Key{InvocationID: res.InvocationID, Kind: checkpoint.KindSuspended}
			rec, err := cs.Load(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			// Rewrite it as the earlier builds wrote it.
			var data map[string]any
			if err := json.Unmarshal(rec.Data, &data); err != nil {
				t.Fatal(err)
			}
			data["format"] = 1
			delete(data, "session_lists")
			pos := data["positions"].([]any)[0].(map[string]any)
			pos["state"].(map[string]any)["log"] = append(history(3), "asked")
			if rec.Data, err = json.Marshal(data); err != nil {
				t.Fatal(err)
			}
			if err := cs.Save(t.Context(), *rec); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Resume(t.Context(), res.InvocationID, graph.Update{"ok": true}); err != nil {
				t.Fatal(err)
			}
			if want := append(history(3), "asked"); !slices.Equal(seen, want) {
				t.Errorf("the resumed node saw %v, want %v", seen, want)
			}
		})
	}
}
