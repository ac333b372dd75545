package sqlite_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

func TestMarkRetention(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s, _ := openStore(t, sqlite.Config{Now: func() time.Time { return now }, MarkRetention: time.Hour})
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

// Deleting a session deletes its paused records in the same
// transaction: nothing is left for a signal to resume.
func TestDeleteRemovesPausedRecords(t *testing.T) {
	s, _ := openStore(t, sqlite.Config{})
	ctx := t.Context()
	cp := s.Checkpoints()
	rec := checkpoint.Record{InvocationID: "inv1", Kind: checkpoint.KindSuspended, SessionID: "s", SignalID: "sig", Data: json.RawMessage(`{}`)}
	if _, err := cp.WriteSuspended(ctx, checkpoint.SuspendWrite{Save: &session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{}}, Record: rec}); err != nil {
		t.Fatal(err)
	}
	other := rec
	other.InvocationID, other.SessionID = "inv2", "t"
	if err := cp.Save(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Load(ctx, checkpoint.Key{InvocationID: "inv1", Kind: checkpoint.KindSuspended}); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("the deleted session's paused record: error = %v, want ErrNotFound", err)
	}
	if _, err := cp.Load(ctx, checkpoint.Key{InvocationID: "inv2", Kind: checkpoint.KindSuspended}); err != nil {
		t.Fatalf("another session's paused record was deleted: %v", err)
	}
}
