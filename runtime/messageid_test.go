package runtime_test

import (
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/runtime"
)

// TestStartedCarriesMessageID: a turn begun with the client's message id
// records it on its runtime.request.started event (any text, escaped), so
// that a client whose request got no answer knows its turn on the
// session's stream; without one, the event has no data, as before.
func TestStartedCarriesMessageID(t *testing.T) {
	ctx := t.Context()
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rec.Close(ctx) }()
	for _, id := range []string{"m-1", "line\nbreak \"quoted\" \xff", ""} {
		turn, _, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "t", SessionID: "s", AgentID: "a", MessageID: id})
		if err != nil {
			t.Fatalf("message id %q: %v", id, err)
		}
		if err := turn.Complete(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err := store.Events(ctx, runtime.EventsRequest{Tenant: "t", RunID: turn.ID()})
		if err != nil || len(evs) == 0 || evs[0].Type != runtime.EventRequestStarted {
			t.Fatalf("events %+v, %v", evs, err)
		}
		if id == "" {
			if evs[0].Data != nil {
				t.Fatalf("a turn without a message id: started data %s", evs[0].Data)
			}
			continue
		}
		var d struct {
			MessageID string `json:"messageId"`
		}
		if err := json.Unmarshal(evs[0].Data, &d); err != nil || d.MessageID == "" {
			t.Fatalf("message id %q: started data %s, %v", id, evs[0].Data, err)
		}
	}
}
