package session

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// The memory store's marks expire as they age out, whatever the number
// of sessions: after the retention period only the marks written since
// remain, a mark written again lives from its last write, and the sweep
// queue stays bounded.
func TestMemoryMarksSweep(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMemoryStore(MemoryConfig{Now: func() time.Time { return now }, MarkRetention: time.Hour})
	save := func(session, key string) {
		t.Helper()
		if _, err := m.Save(ctx, SaveRequest{SessionID: session, SchemaVersion: "1", State: map[string]json.RawMessage{},
			Marks: []Mark{{Key: key, Value: json.RawMessage(`1`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	const sessions = 5000
	for i := range sessions {
		save(fmt.Sprintf("s%d", i), "k")
	}
	now = now.Add(30 * time.Minute)
	save("s0", "k") // written again: lives from now
	now = now.Add(45 * time.Minute)
	save("fresh", "k")
	if _, err := m.LoadMark(ctx, "s0", "k"); err != nil {
		t.Errorf("the mark written again expired with its first write: %v", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if len(m.marks) != 2 {
		t.Errorf("%d marks are held after the retention, want 2 (s0's, fresh's)", len(m.marks))
	}
	if live := len(m.markQ) - m.markHead; live != 2 || len(m.markQ) > sessions/2 {
		t.Errorf("sweep queue: %d live of %d, want 2 live and the swept part dropped", live, len(m.markQ))
	}
}
