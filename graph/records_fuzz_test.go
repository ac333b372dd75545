package graph_test

import (
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// FuzzResumeRecord feeds arbitrary paused-record payloads to Resume: it
// must never panic, and every failure is suspension_record_invalid (or a
// payload error).
func FuzzResumeRecord(f *testing.F) {
	for _, seed := range []string{
		`{"format":1,"positions":[{"node":"gate","state":{"approved":false,"done":false,"trail":["work"]}}],"descriptor":{"signal_id":"s"}}`,
		`{"format":1,"positions":[{"node":"nope","state":{}}]}`,
		`{"format":1,"positions":[{"node":"gate","state":{"trail":"not a list"}}]}`,
		`{"format":2}`, `{}`, `null`, `[]`, `{"format":1,"positions":[]}`,
		`{"format":1,"positions":[{"node":"gate","state":null}],"rerun_on_resume":true}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // stores reject invalid JSON before the engine sees it
		}
		store := checkpoint.NewMemoryStore(nil)
		g := approvalGraph(t, nil, nil, graph.WithCheckpointStore(store))
		if err := store.Save(t.Context(), checkpoint.Record{InvocationID: "inv", Kind: checkpoint.KindSuspended, Data: data}); err != nil {
			t.Fatal(err)
		}
		res, err := g.Resume(t.Context(), "inv", approved.Set(true))
		if err == nil {
			return
		}
		if res == nil || res.Status != graph.Errored || errcat.Of(err) == "" {
			t.Fatalf("uncategorized resume failure: %v", err)
		}
	})
}

// FuzzSessionRecord feeds arbitrary stored field values to a session-bound
// invocation: no panic, and a record that does not fit the schema fails
// with session_load_failed before any node runs.
func FuzzSessionRecord(f *testing.F) {
	for _, seed := range []string{`["a","b"]`, `3`, `"three"`, `null`, `{"x":1}`, `[1,2,3]`, `[[]]`, `1e400`} {
		f.Add([]byte(seed), []byte(`2`))
	}
	f.Fuzz(func(t *testing.T, messages, turns []byte) {
		if !json.Valid(messages) || !json.Valid(turns) {
			return
		}
		store := session.NewMemoryStore(session.MemoryConfig{})
		if _, err := store.Save(t.Context(), session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{
			"messages": messages, "turns": turns,
		}}); err != nil {
			t.Fatal(err)
		}
		g := chatGraph(t, graph.SessionConfig{Store: store})
		res, err := turn(t, g, "s", "hi")
		switch {
		case err == nil:
			if res.Status != graph.Completed {
				t.Fatalf("status %v without an error", res.Status)
			}
		case errcat.Of(err) != errcat.SessionLoadFailed:
			t.Fatalf("a bad stored record = %v (category %q), want session_load_failed", err, errcat.Of(err))
		}
	})
}

// FuzzCheckpointRecord feeds arbitrary checkpoint payloads (positions,
// completed positions, fan-out progress) to ResumeCheckpoint over a graph
// with a fan-out: it must never panic, and every failure is categorized.
func FuzzCheckpointRecord(f *testing.F) {
	for _, seed := range []string{
		`{"format":1,"positions":[{"node":"fan","state":{"items":[1,2]}}],"rerun_on_resume":true,"fan_out_progress":[{"namespace":[],"fan_out_node_name":"fan","instance_count":2,"instances":[{"state":"completed","result":10,"result_is_error":false},{"state":"not_started","result_is_error":false}]}]}`,
		`{"format":1,"positions":[{"node":"fan","state":{"items":[1]}}],"rerun_on_resume":true,"fan_out_progress":[{"namespace":[],"fan_out_node_name":"fan","instance_count":1,"instances":[{"state":"completed","result":{"x":1},"result_is_error":true}]}]}`,
		`{"format":1,"positions":[{"node":"fan","state":{"items":[1]}}],"rerun_on_resume":true,"fan_out_progress":[{"namespace":[],"fan_out_node_name":"fan","instance_count":1,"instances":[]}]}`,
		`{"format":1,"positions":[{"node":"fan","state":{}}],"completed_positions":[{"namespace":[],"node_name":"fan","step":-1,"attempt_index":3}]}`,
		`{"format":1,"positions":[{"node":"fan","state":{"items":"x"}}]}`, `{"format":1}`, `{}`, `null`,
	} {
		f.Add([]byte(seed), "")
		f.Add([]byte(seed), "v0")
	}
	f.Fuzz(func(t *testing.T, data []byte, version string) {
		if !json.Valid(data) {
			return
		}
		store := checkpoint.NewMemoryStore(nil)
		g := mustCompile(t, graph.NewBuilder(fanParentSchema(t)).AddFanOut("fan", itemsFan(fanLeaf(t, times10))).
			AddEdge("fan", graph.End).SetEntry("fan"), graph.WithCheckpointer(store))
		if err := store.Save(t.Context(), checkpoint.Record{InvocationID: "inv", Kind: checkpoint.KindCheckpoint, SchemaVersion: version, Data: data}); err != nil {
			t.Fatal(err)
		}
		res, err := g.ResumeCheckpoint(t.Context(), "inv")
		if err == nil {
			return
		}
		if res == nil || res.Status != graph.Errored || errcat.Of(err) == "" {
			t.Fatalf("uncategorized resume failure: %v", err)
		}
	})
}
