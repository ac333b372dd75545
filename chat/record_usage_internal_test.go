package chat

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
)

// TestRecordKeepsUsage: the model usage recorded with a turn's outcome
// comes back on the replayed outcome, a counter the calls did not report
// left nil; a record written before usage was recorded replays without
// it. A record with usage takes the object form, which earlier builds
// read (they ignore the usage): never a compact form they would refuse.
func TestRecordKeepsUsage(t *testing.T) {
	p, c := 7, 5
	u := &usageRecord{Calls: 2, Finish: "length", Prompt: &p, Completion: &c}
	for _, rec := range []outcomeRecord{
		{Kind: "completed", InvocationID: "i", Path: harness.PathNewSession, RepliesAt: &repliesRef{}, Usage: u},
		{Kind: "completed", InvocationID: "i", Path: harness.PathNewSession, RepliesAt: &repliesRef{}, RecordKey: "run:x", Usage: u},
		{Kind: "suspended", InvocationID: "i", Path: harness.PathExistingSession, Descriptor: &graph.SignalDescriptor{SignalID: "s"}, Usage: u},
	} {
		raw, err := appendRecord(nil, &rec)
		if err != nil {
			t.Fatal(err)
		}
		if raw[0] != '{' {
			t.Fatalf("a record with usage in the compact form, which earlier builds refuse: %s", raw)
		}
		var earlier struct {
			Kind         string `json:"kind"`
			InvocationID string `json:"invocation_id"`
		}
		if err := json.Unmarshal(raw, &earlier); err != nil || earlier.Kind != rec.Kind {
			t.Fatalf("%s: %v", raw, err)
		}
		got, err := parseRecord(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if !reflect.DeepEqual(got.Usage, u) || got.RecordKey != rec.RecordKey {
			t.Fatalf("%s: usage %+v, key %q", raw, got.Usage, got.RecordKey)
		}
		o, _, err := got.decode("sess", func(int) ([]llm.Message, int, error) { return nil, 0, nil })
		if err != nil {
			t.Fatal(err)
		}
		tu := o.Info()
		if tu.ModelCalls != 2 || tu.FinishReason != llm.FinishLength || *tu.Usage.PromptTokens != 7 || *tu.Usage.CompletionTokens != 5 || tu.Usage.TotalTokens != nil {
			t.Fatalf("%s: replayed usage %+v, %d calls, finish %q", raw, tu.Usage, tu.ModelCalls, tu.FinishReason)
		}
	}
	for _, old := range []string{`[1,"i",0,0,0,0]`, `[1,"i",0,0,0,0,"k"]`, `{"kind":"completed","invocation_id":"i"}`} {
		rec, err := parseRecord([]byte(old))
		if err != nil {
			t.Fatalf("%s: %v", old, err)
		}
		o, _, err := rec.decode("sess", func(int) ([]llm.Message, int, error) { return nil, 0, nil })
		if err != nil || o.Info().ModelCalls != 0 {
			t.Fatalf("%s: %v, %+v", old, err, o)
		}
	}
}
