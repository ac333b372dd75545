package runtime

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
)

// TestAdapterPayload: Adapter's payload is byte for byte what
// json.Marshal makes of the map it describes.
func TestAdapterPayload(t *testing.T) {
	for _, data := range []map[string]any{
		nil,
		{},
		{"text": "a <b> & \u2028 \"q\""},
		{"adapter": "upstream", "phase": "ignored", "nodeId": "model", "workflowId": "w"},
		{"tools": []string{"a", "b"}, "modelRef": "m", "zeta": nil, "nested": map[string]any{"y": 1, "x": []any{true, 2.5}}},
		{"Adapter": 1, "PHASE": 2, "": 3, "é": 4},
	} {
		ev := map[string]any{"adapter": "armature"}
		maps.Copy(ev, data)
		ev["phase"] = "agent.output.delta"
		want, err := json.Marshal(map[string]any{"event": ev})
		if err != nil {
			t.Fatal(err)
		}
		got, err := adapterPayload("armature", "agent.output.delta", data)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("adapterPayload(%v) = %s, %v; want %s", data, got, err, want)
		}
	}
	if _, err := adapterPayload("a", "p", map[string]any{"bad": make(chan int)}); err == nil {
		t.Error("a value JSON cannot encode: no error")
	}
}

func BenchmarkAdapterPayload(b *testing.B) {
	data := map[string]any{"nodeId": "model", "workflowId": "demo"}
	b.Run("encoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = adapterPayload("armature", "agent.node.completed", data)
		}
	})
	b.Run("maps", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ev := map[string]any{"adapter": "armature"}
			maps.Copy(ev, data)
			ev["phase"] = "agent.node.completed"
			_, _ = json.Marshal(map[string]any{"event": ev})
		}
	})
}
