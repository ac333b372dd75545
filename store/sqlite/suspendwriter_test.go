package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

func TestWriteSuspendedIsAtomic(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	cp := s.Checkpoints()
	if cp.SessionStore() != session.Store(s) {
		t.Fatal("SessionStore must be the Store sharing the file")
	}
	rec := func(id string) checkpoint.Record {
		return checkpoint.Record{InvocationID: id, Kind: checkpoint.KindSuspended, SessionID: "u", Data: json.RawMessage(`{}`)}
	}
	// Create the session and a paused record together.
	w, err := cp.WriteSuspended(ctx, checkpoint.SuspendWrite{
		Save:   &session.SaveRequest{SessionID: "u", State: map[string]json.RawMessage{"messages": json.RawMessage(`["hi"]`)}},
		Record: rec("inv-1"),
	})
	if err != nil || w.Version != 1 {
		t.Fatalf("WriteSuspended = %v, %v", w, err)
	}
	if _, err := cp.Load(ctx, checkpoint.Key{InvocationID: "inv-1", Kind: checkpoint.KindSuspended}); err != nil {
		t.Fatalf("paused record: %v", err)
	}
	// A delta that conflicts writes neither the session nor the record.
	_, err = cp.WriteSuspended(ctx, checkpoint.SuspendWrite{
		Append: &session.AppendRequest{SessionID: "u", ExpectedVersion: 7,
			Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`"x"`)}}},
		Record: rec("inv-2"),
	})
	if !errors.Is(err, session.ErrWriteConflict) {
		t.Fatalf("conflicting WriteSuspended = %v", err)
	}
	if _, err := cp.Load(ctx, checkpoint.Key{InvocationID: "inv-2", Kind: checkpoint.KindSuspended}); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("a failed combined write must not leave a paused record: %v", err)
	}
	r, err := s.Load(ctx, session.LoadRequest{SessionID: "u"})
	if err != nil || string(r.State["messages"]) != `["hi"]` || r.Version != 1 {
		t.Fatalf("session after a failed combined write = %v, %v", r, err)
	}
	// Exactly one of Save and Append.
	if _, err := cp.WriteSuspended(ctx, checkpoint.SuspendWrite{Record: rec("inv-3")}); !errors.Is(err, checkpoint.ErrInvalidRequest) {
		t.Errorf("neither Save nor Append = %v", err)
	}
}

func TestWriteResumedIsAtomic(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "r.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	cp := s.Checkpoints()
	key := checkpoint.Key{InvocationID: "inv", Kind: checkpoint.KindSuspended}
	if _, err := cp.WriteSuspended(ctx, checkpoint.SuspendWrite{
		Save:   &session.SaveRequest{SessionID: "u", State: map[string]json.RawMessage{"messages": json.RawMessage(`["q"]`)}},
		Record: checkpoint.Record{InvocationID: "inv", Kind: checkpoint.KindSuspended, SessionID: "u", Data: json.RawMessage(`{}`)},
	}); err != nil {
		t.Fatal(err)
	}
	resumed := func() (session.WriteResult, error) {
		return cp.WriteResumed(ctx, checkpoint.ResumeWrite{
			Append: &session.AppendRequest{SessionID: "u", ExpectedVersion: 1,
				Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`"answer"`)}}},
			Key: key,
		})
	}
	if w, err := resumed(); err != nil || w.Version != 2 {
		t.Fatalf("WriteResumed = %v, %v", w, err)
	}
	if _, err := cp.Load(ctx, key); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("the paused record must be gone: %v", err)
	}
	// A second completion finds no record and writes nothing.
	if _, err := resumed(); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("second WriteResumed = %v, want ErrNotFound", err)
	}
	r, _ := s.Load(ctx, session.LoadRequest{SessionID: "u"})
	if string(r.State["messages"]) != `["q","answer"]` || r.Version != 2 {
		t.Fatalf("session = %s v%d", r.State["messages"], r.Version)
	}
}
