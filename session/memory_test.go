package session_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/session/sessiontest"
)

func TestMemoryStore(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store {
		return session.NewMemoryStore(session.MemoryConfig{})
	})
}

// BenchmarkMemoryLoadPage: a page from the middle of a short and of a
// long list.
func BenchmarkMemoryLoadPage(b *testing.B) {
	sessiontest.BenchmarkPage(b, func(*testing.B) session.Store {
		return session.NewMemoryStore(session.MemoryConfig{})
	})
}

func TestMemoryMarkRetention(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := session.NewMemoryStore(session.MemoryConfig{Now: func() time.Time { return now }, MarkRetention: time.Hour})
	if _, err := s.Save(t.Context(), session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{},
		Marks: []session.Mark{{Key: "k", Value: json.RawMessage(`1`)}}}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(59 * time.Minute)
	if _, err := s.LoadMark(t.Context(), "s", "k"); err != nil {
		t.Fatalf("a mark within its retention: %v", err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := s.LoadMark(t.Context(), "s", "k"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("an expired mark: error = %v, want ErrNotFound", err)
	}
}

// TestMemoryNotFound: a missing session or mark matches ErrNotFound and
// names what is missing.
func TestMemoryNotFound(t *testing.T) {
	s := session.NewMemoryStore(session.MemoryConfig{})
	_, err := s.Load(t.Context(), session.LoadRequest{SessionID: "nope"})
	if !errors.Is(err, session.ErrNotFound) || err.Error() != `session: not found: "nope"` {
		t.Errorf("a missing session: %v", err)
	}
	_, err = s.LoadMark(t.Context(), "nope", "k1")
	if !errors.Is(err, session.ErrNotFound) || err.Error() != `session: not found: mark "k1" of session "nope"` {
		t.Errorf("a missing mark: %v", err)
	}
}
