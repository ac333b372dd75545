package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/session"
)

// FuzzMarkBlob: any blob decodes or fails cleanly, and every encoded
// list of marks (values are JSON, never empty) decodes to itself, a
// value shared with the previous mark included.
func FuzzMarkBlob(f *testing.F) {
	f.Add([]byte{markBlobFormat, 1, 'k', 1, '1'}, "k", []byte(`{"a":1}`))
	f.Add([]byte{markBlobFormat1, 1, 'k', 1, '1', 1, 'j', 0}, "k", []byte(`1`))
	f.Add([]byte{markBlobFormat, 1, 'k', 0}, "k", []byte(`[1]`))
	f.Add([]byte{}, "", []byte(nil))
	f.Add([]byte{markBlobFormat, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "x", []byte(`null`))
	f.Fuzz(func(t *testing.T, blob []byte, key string, value []byte) {
		_ = eachMark(blob, func(string, []byte) bool { return true })
		if len(value) == 0 {
			value = []byte(`null`)
		}
		marks := []session.Mark{{Key: key, Value: json.RawMessage(value)}, {Key: key + "1", Value: json.RawMessage(value)},
			{Key: key + "2", Value: json.RawMessage(`1`)}}
		var got []session.Mark
		if err := eachMark(appendMarkBlob(nil, marks), func(k string, v []byte) bool {
			got = append(got, session.Mark{Key: k, Value: json.RawMessage(v)})
			return true
		}); err != nil {
			t.Fatalf("decoding an encoded blob: %v", err)
		}
		if len(got) != len(marks) {
			t.Fatalf("decoded %d marks, want %d", len(got), len(marks))
		}
		for i := range got {
			if got[i].Key != marks[i].Key || !bytes.Equal(got[i].Value, marks[i].Value) {
				t.Fatalf("mark %d: %q=%q, want %q=%q", i, got[i].Key, got[i].Value, marks[i].Key, marks[i].Value)
			}
		}
	})
}

// TestMarkIndexAdvancesOverScalarSet: a turn's write that sets a scalar
// field besides appending (as a chat turn's usage) keeps the session's
// mark index current, so the next LoadMark reads no marks; a write that
// replaces a list carrying marks drops it, and the marks still answer.
func TestMarkIndexAdvancesOverScalarSet(t *testing.T) {
	ctx := t.Context()
	s := markedStore(t)
	raw := func(v string) json.RawMessage { return json.RawMessage(v) }
	current := func() bool { return indexCurrent(t, s) }
	for v := int64(1); v <= 3; v++ {
		if _, err := s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: v,
			Set:    map[string]json.RawMessage{"n": raw(`1`)},
			Append: map[string][]json.RawMessage{"log": {raw(`"x"`)}},
			Marks:  []session.Mark{{Key: "m" + string(rune('0'+v)), Value: raw(`1`)}}}); err != nil {
			t.Fatal(err)
		}
		if !current() {
			t.Fatalf("after write %d setting a scalar: the mark index was dropped", v)
		}
	}
	// Replacing the marked list moves its marks: the index rebuilds, and
	// every mark still answers.
	if _, err := s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: 4,
		Set: map[string]json.RawMessage{"log": raw(`["y"]`)}}); err != nil {
		t.Fatal(err)
	}
	if current() {
		t.Fatal("replacing a marked list kept the index")
	}
	for _, k := range []string{"m0", "m1", "m2", "m3"} {
		if _, err := s.LoadMark(ctx, "s", k); err != nil {
			t.Errorf("mark %s after the list was replaced: %v", k, err)
		}
	}
}

// TestMarkIndexAdvancesOverSuspensions: a suspension's atomic write
// (CheckpointStore.WriteSuspended) and its resume's
// (CheckpointStore.WriteResumed) keep the session's mark index current,
// as an Append does: the next LoadMark reads no marks. (Before, each
// left the index behind the session's version, and every resume read
// all of the session's marks again.)
func TestMarkIndexAdvancesOverSuspensions(t *testing.T) {
	ctx := t.Context()
	s := markedStore(t)
	raw := func(v string) json.RawMessage { return json.RawMessage(v) }
	current := func() bool { return indexCurrent(t, s) }
	if _, err := s.LoadMark(ctx, "s", "m0"); err != nil { // indexes the session
		t.Fatal(err)
	}
	cs := s.Checkpoints()
	for v := int64(1); v <= 4; v += 2 {
		inv := fmt.Sprintf("inv-%d", v)
		if _, err := cs.WriteSuspended(ctx, checkpoint.SuspendWrite{
			Append: &session.AppendRequest{SessionID: "s", ExpectedVersion: v, Append: map[string][]json.RawMessage{"log": {raw(`"q"`)}},
				Marks: []session.Mark{{Key: "s" + inv, Value: raw(`1`)}}},
			Record: checkpoint.Record{InvocationID: inv, Kind: checkpoint.KindSuspended, SessionID: "s", SignalID: "sig", Data: raw(`{}`)},
		}); err != nil {
			t.Fatal(err)
		}
		if !current() {
			t.Fatalf("after the suspension of %s: the mark index is behind", inv)
		}
		if _, err := cs.WriteResumed(ctx, checkpoint.ResumeWrite{
			Append: &session.AppendRequest{SessionID: "s", ExpectedVersion: v + 1, Append: map[string][]json.RawMessage{"log": {raw(`"a"`)}},
				Marks: []session.Mark{{Key: "r" + inv, Value: raw(`2`)}}},
			Key: checkpoint.Key{InvocationID: inv, Kind: checkpoint.KindSuspended},
		}); err != nil {
			t.Fatal(err)
		}
		if !current() {
			t.Fatalf("after the resume of %s: the mark index is behind", inv)
		}
	}
	for _, k := range []string{"m0", "sinv-1", "rinv-1", "sinv-3", "rinv-3"} {
		if _, err := s.LoadMark(ctx, "s", k); err != nil {
			t.Errorf("mark %s: %v", k, err)
		}
	}
}

// indexCurrent reports whether the mark index holds session "s" at its
// stored version.
func indexCurrent(t *testing.T, s *Store) bool {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	el, ok := s.marks.byID["s"]
	return ok && el.Value.(*markEntry).version == mustVersion(t, s)
}

func mustVersion(t *testing.T, s *Store) int64 {
	t.Helper()
	v, err := s.readVersion(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return v.version
}

// TestLoadMarkRacesAWrite: a LoadMark that builds a session's mark index
// entry reads its key before the entry is shared, so a write of the
// session committing meanwhile (which updates the entry's keys) does not
// race it (run with -race). Before, LoadMark read the installed entry's
// keys without the index's lock (found by internal/interleave in CI).
func TestLoadMarkRacesAWrite(t *testing.T) {
	ctx := t.Context()
	s := markedStore(t)
	raw := func(v string) json.RawMessage { return json.RawMessage(v) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := int64(1); v <= 200; v++ {
			if _, err := s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: v,
				Append: map[string][]json.RawMessage{"log": {raw(`"x"`)}},
				Marks:  []session.Mark{{Key: fmt.Sprintf("m%d", v), Value: raw(`1`)}}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		s.marks.drop("s") // the next LoadMark builds the entry
		if _, err := s.LoadMark(ctx, "s", "m0"); err != nil {
			t.Fatal(err)
		}
	}
}

// markedStore opens a store on a new file, closed at cleanup, holding
// session "s" (version 1) with field n and mark m0.
func markedStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), Config{Path: t.TempDir() + "/a.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	if _, err := s.Save(t.Context(), session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{"n": json.RawMessage(`0`)},
		Marks: []session.Mark{{Key: "m0", Value: json.RawMessage(`"first"`)}}}); err != nil {
		t.Fatal(err)
	}
	return s
}
