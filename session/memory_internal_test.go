package session

import (
	"context"
	"encoding/json"
	"errors"
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
	held := 0
	for _, r := range m.sessions {
		held += r.marks.len()
	}
	if held != 2 {
		t.Errorf("%d marks are held after the retention, want 2 (s0's, fresh's)", held)
	}
	if live := len(m.markQ) - m.markHead; live != 2 || len(m.markQ) > sessions/2 {
		t.Errorf("sweep queue: %d live of %d, want 2 live and the swept part dropped", live, len(m.markQ))
	}
}

// A session's marks go with its record: deleting the session, or
// deleting it and creating it again, leaves none of them readable,
// listed or held, and the sweep then passes over their entries without
// touching the new record's marks.
func TestMemoryMarksGoWithTheirSession(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMemoryStore(MemoryConfig{Now: func() time.Time { return now }, MarkRetention: time.Hour})
	save := func(key string) {
		t.Helper()
		if _, err := m.Save(ctx, SaveRequest{SessionID: "s", SchemaVersion: "1", State: map[string]json.RawMessage{},
			Marks: []Mark{{Key: key, Value: json.RawMessage(`1`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	save("run:a")
	save("run:b") // a Save replacing the record keeps run:a
	if keys, err := m.MarkKeys(ctx, "s", "run:", 10); err != nil || len(keys) != 2 {
		t.Fatalf("MarkKeys = %v, %v; want both marks", keys, err)
	}
	if err := m.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(30 * time.Minute)
	save("run:c") // the session created again
	if _, err := m.LoadMark(ctx, "s", "run:a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a deleted session's mark is readable in its new record: %v", err)
	}
	now = now.Add(45 * time.Minute) // run:a and run:b expire; their entries name the old generation
	save("run:d")
	if keys, err := m.MarkKeys(ctx, "s", "run:", 10); err != nil || len(keys) != 2 || keys[0] != "run:d" || keys[1] != "run:c" {
		t.Errorf("MarkKeys = %v, %v; want [run:d run:c]", keys, err)
	}
}

// A record keeps its first marks in a list and the rest by key: reading,
// rewriting, listing and sweeping them gives the same answers on either
// side of the switch.
func TestMemoryMarksManyInOneSession(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMemoryStore(MemoryConfig{Now: func() time.Time { return now }, MarkRetention: time.Hour})
	for _, n := range []int{fewMarks - 1, fewMarks, fewMarks + 1, 3 * fewMarks} {
		id := fmt.Sprintf("s%d", n)
		for i := range n {
			now = now.Add(time.Second)
			if _, err := m.Save(ctx, SaveRequest{SessionID: id, SchemaVersion: "1", State: map[string]json.RawMessage{},
				Marks: []Mark{{Key: fmt.Sprintf("k%d", i), Value: json.RawMessage(fmt.Sprint(i))}, {Key: "last", Value: json.RawMessage(fmt.Sprint(i))}}}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n {
			if v, err := m.LoadMark(ctx, id, fmt.Sprintf("k%d", i)); err != nil || string(v) != fmt.Sprint(i) {
				t.Fatalf("%s: mark k%d = %s, %v", id, i, v, err)
			}
		}
		if v, err := m.LoadMark(ctx, id, "last"); err != nil || string(v) != fmt.Sprint(n-1) {
			t.Fatalf("%s: the mark written %d times = %s, %v; want its last value", id, n, v, err)
		}
		if keys, err := m.MarkKeys(ctx, id, "k", 100); err != nil || len(keys) != n || keys[0] != fmt.Sprintf("k%d", n-1) {
			t.Fatalf("%s: MarkKeys = %v, %v", id, keys, err)
		}
	}
	now = now.Add(2 * time.Hour)
	if _, err := m.Save(ctx, SaveRequest{SessionID: "other", SchemaVersion: "1", State: map[string]json.RawMessage{},
		Marks: []Mark{{Key: "k", Value: json.RawMessage(`1`)}}}); err != nil {
		t.Fatal(err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	for id, r := range m.sessions {
		if want := map[bool]int{true: 1, false: 0}[id == "other"]; r.marks.len() != want {
			t.Errorf("%s holds %d marks after they expired, want %d", id, r.marks.len(), want)
		}
	}
}
