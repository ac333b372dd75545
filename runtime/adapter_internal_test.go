package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
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

// TestAdapterFields: AdapterFields' payload is Adapter's for the map of
// its fields, the last of a repeated key winning.
func TestAdapterFields(t *testing.T) {
	for _, fields := range [][]Field{
		nil,
		{TextField("text", "a <b> & \u2028 \"q\"")},
		{TextField("nodeId", "model"), TextField("workflowId", "w")},
		{TextField("adapter", "upstream"), TextField("phase", "ignored"), TextField("toolId", "c1"), TextField("output", "")},
		{TextField("k", "first"), TextField("k", "second"), TextField("", "empty"), TextField("é", "\xff")},
		{TextField("toolId", "c1"), JSONField("args", json.RawMessage(`{"order":"7"}`))},
		{JSONField("args", json.RawMessage(` { "q" : "<b> & \u2028" , "n": [1, 2.50] } `))},
		{JSONField("args", nil), JSONField("more", json.RawMessage(`"x"`))},
	} {
		data := map[string]any{}
		for _, f := range fields {
			if f.JSON != nil {
				data[f.Key] = f.JSON
			} else {
				data[f.Key] = f.Text
			}
		}
		want, err := adapterPayload("armature", "agent.tool.start", data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fieldsPayload("armature", "agent.tool.start", fields)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("fields payload %q = %s, %v; want %s", fields, got, err, want)
		}
		if once, err := AdapterJSON("armature", "agent.tool.start", fields...); err != nil || !bytes.Equal(once, want) {
			t.Errorf("AdapterJSON(%q) = %s, %v; want %s", fields, once, err, want)
		}
	}
	if _, err := AdapterJSON("a", "p", JSONField("args", json.RawMessage(`[`))); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("AdapterJSON with a JSON field that is not JSON: %v, want ErrInvalidRequest", err)
	}
	if _, err := fieldsPayload("a", "p", []Field{JSONField("args", json.RawMessage(`{"a":`))}); err == nil {
		t.Error("a JSON field that is not JSON: no error")
	}
}

// FuzzAdapterFields holds AdapterFields' payload to json.Marshal's
// bytes for the map of its fields, and refuses a JSON field that is not
// JSON as json.Marshal does.
func FuzzAdapterFields(f *testing.F) {
	f.Add("text", "a <b> & \u2028", "phase", "x\xff", "args", `{"order":"7"}`)
	f.Add("adapter", "", "", "é", "args", ` [1, "<"] `)
	f.Add("k", "v", "k", "w", "k", `{"a":`)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, j3 string) {
		fields := []Field{TextField(k1, v1), TextField(k2, v2), JSONField(k3, json.RawMessage(j3))}
		ev := map[string]any{"adapter": "armature"}
		for _, f := range fields {
			if f.JSON != nil {
				ev[f.Key] = f.JSON
			} else {
				ev[f.Key] = f.Text
			}
		}
		ev["phase"] = "agent.tool.start"
		want, werr := json.Marshal(map[string]any{"event": ev})
		got, err := fieldsPayload("armature", "agent.tool.start", fields)
		if (werr != nil) != (err != nil) || !bytes.Equal(got, want) {
			t.Errorf("fields payload %q = %s, %v; want %s, %v", fields, got, err, want, werr)
		}
	})
}

func BenchmarkAdapterPayload(b *testing.B) {
	data := map[string]any{"nodeId": "model", "workflowId": "demo"}
	b.Run("fields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = fieldsPayload("armature", "agent.node.completed", []Field{TextField("nodeId", "model"), TextField("workflowId", "demo")})
		}
	})
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

// FuzzAdapterPayload holds adapterPayload to json.Marshal's bytes for
// any keys and string or number values.
func FuzzAdapterPayload(f *testing.F) {
	f.Add("text", "a <b> & \u2028", "adapter", "x\xff", 1.5)
	f.Add("phase", "", "", "é", 1e300)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, n float64) {
		data := map[string]any{k1: v1, k2: v2, k1 + k2 + "n": n}
		ev := map[string]any{"adapter": "armature"}
		maps.Copy(ev, data)
		ev["phase"] = "agent.tool.start"
		want, werr := json.Marshal(map[string]any{"event": ev})
		got, err := adapterPayload("armature", "agent.tool.start", data)
		if (werr != nil) != (err != nil) || !bytes.Equal(got, want) {
			t.Errorf("adapterPayload(%q) = %s, %v; want %s, %v", data, got, err, want, werr)
		}
	})
}

// A record the Recorder built is not scanned again (its JSON is encoded
// or checked on the way in); any other record is.
func TestTurnRecordEncoded(t *testing.T) {
	bad := TurnRecord{Append: AppendRequest{RunID: "r", Events: []Event{{Type: "t", Data: []byte(`{"a":`)}},
		Finish: &FinishRequest{Status: StatusCompleted, Output: []byte(`nope`)}}}
	if err := bad.Validate(); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a record with invalid JSON: %v", err)
	}
	bad.Append.Events = nil
	if err := bad.Validate(); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a record with an invalid output: %v", err)
	}
	r, err := NewRecorder(RecorderConfig{Store: NewMemoryStore(MemoryConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	turn, _, err := r.Begin(t.Context(), BeginRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	turn.mu.Lock()
	rec := turn.record(nil)
	turn.mu.Unlock()
	if !rec.encoded {
		t.Fatal("the Recorder's record is not marked encoded")
	}
}
