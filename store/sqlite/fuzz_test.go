package sqlite_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// acceptable reports whether err is nil or an error a caller can act on:
// a session sentinel or a categorized failure.
func acceptable(err error) bool {
	return err == nil || errcat.Of(err) != "" ||
		errors.Is(err, session.ErrNotFound) || errors.Is(err, session.ErrInvalidRequest) ||
		errors.Is(err, session.ErrWriteConflict)
}

// FuzzLoadRecord writes arbitrary bytes straight into the tables (as a
// damaged or foreign-written file would hold them) and checks that Load,
// List and Append never panic and fail only with categorized errors.
func FuzzLoadRecord(f *testing.F) {
	f.Add([]byte(`1`), []byte(`"item"`), []byte("v1"), int64(1), "messages")
	f.Add([]byte(`{bad`), []byte(`]`), []byte("\xff\xfe"), int64(0), "")
	f.Add([]byte(``), []byte(`1,2`), []byte(""), int64(-1), "x")
	f.Add([]byte(`[1,2]`), []byte(`null`), []byte("v"), int64(1<<62), "messages")
	f.Add([]byte("\x00\x01"), []byte(`[`), []byte("\x00"), int64(-1<<63), "\xff")

	s, path := openStore(f, sqlite.Config{})
	db := rawDB(f, path)
	n := 0
	f.Fuzz(func(t *testing.T, fieldValue, itemValue, schemaVersion []byte, version int64, field string) {
		n++
		id := fmt.Sprintf("fuzz-%d", n)
		ctx := t.Context()
		// STRICT tables refuse values of the wrong type; CASTs make every
		// byte string storable in its column.
		if _, err := db.Exec(`INSERT INTO sessions (id, schema_version, version, created_at, updated_at)
			VALUES (?, CAST(? AS TEXT), ?, ?, ?)`, id, schemaVersion, version, version, -version); err != nil {
			t.Skip(err)
		}
		if _, err := db.Exec(`INSERT INTO session_fields (session_id, field, value) VALUES (?, ?, CAST(? AS BLOB))`,
			id, field, fieldValue); err != nil {
			t.Skip(err)
		}
		if _, err := db.Exec(`INSERT INTO session_items (session_id, field, seq, value) VALUES (?, ?, 0, CAST(? AS BLOB)), (?, 'items', 0, CAST(? AS BLOB))`,
			id, field+"/l", itemValue, id, itemValue); err != nil {
			t.Skip(err)
		}

		rec, err := s.Load(ctx, session.LoadRequest{SessionID: id})
		if !acceptable(err) {
			t.Fatalf("Load = %v: not categorized", err)
		}
		if err == nil {
			for k, v := range rec.State {
				if !json.Valid(v) {
					t.Fatalf("Load returned invalid JSON for %q: %q", k, v)
				}
			}
		}
		if _, err := s.Load(ctx, session.LoadRequest{SessionID: id, IfVersionNot: version}); !acceptable(err) && !errors.Is(err, session.ErrNotModified) {
			t.Fatalf("conditional Load = %v: not categorized", err)
		}
		if _, err := s.List(ctx, session.ListRequest{IDPrefix: id}); !acceptable(err) {
			t.Fatalf("List = %v: not categorized", err)
		}
		if _, err := s.Append(ctx, session.AppendRequest{SessionID: id, ExpectedVersion: max(version, 1),
			Append: map[string][]json.RawMessage{field: {json.RawMessage(`1`)}, "items": {json.RawMessage(`2`)}}}); !acceptable(err) {
			t.Fatalf("Append = %v: not categorized", err)
		}
		if err := s.Delete(ctx, id); err != nil {
			t.Fatalf("Delete = %v", err)
		}
	})
}
