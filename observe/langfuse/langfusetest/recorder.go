package langfusetest

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/armature-go/armature/observe/langfuse"
)

// Recorder is an in-memory [langfuse.Exporter]: it keeps the events it is
// given, encoded and decoded as the ingestion API would receive them, for
// tests that do not need the HTTP path.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Export implements [langfuse.Exporter].
func (r *Recorder) Export(events []langfuse.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range events {
		r.events = append(r.events, Decode(ev))
	}
}

// Events returns the recorded events in order.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Traces rebuilds the traces of the recorded events.
func (r *Recorder) Traces() []*Trace { return Rebuild(r.Events()) }

// Decode returns ev as the ingestion API decodes it (numbers as int64 or
// float64).
func Decode(ev langfuse.Event) Event {
	b, err := json.Marshal(ev.Body)
	var body map[string]any
	if err == nil {
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if dec.Decode(&body) == nil {
			body = plain(body).(map[string]any)
		}
	}
	return Event{ID: ev.ID, Type: string(ev.Type), Timestamp: ev.Timestamp, Body: body}
}
