package sqlite

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/armature-go/armature/session"
)

// When the one-statement tail load's rows come out of the order it reads
// them in, the load is read the long way and returns the same record.
func TestLoadByTailUnordered(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx) }()
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "x", State: map[string]json.RawMessage{
		"a": json.RawMessage(`[]`), "m": json.RawMessage(`[]`), "z": json.RawMessage(`[]`), "v": json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	version := int64(1)
	for i := range 20 {
		w, err := s.Append(ctx, session.AppendRequest{SessionID: "x", ExpectedVersion: version, Append: map[string][]json.RawMessage{
			"a": {json.RawMessage(fmt.Sprint(i))}, "m": {json.RawMessage(fmt.Sprint(100 + i))}, "z": {json.RawMessage(fmt.Sprint(200 + i))}}})
		if err != nil {
			t.Fatal(err)
		}
		version = w.Version
	}
	req := session.LoadRequest{SessionID: "x", Tail: []session.ListTail{{Field: "m", Max: 5}}}
	want, err := s.Load(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if want.Skipped["m"] != 15 || len(want.State) != 4 {
		t.Fatalf("ordered load: skipped %v, fields %d", want.Skipped, len(want.State))
	}
	// The same rows, in reverse.
	reversed, err := s.reader.PrepareContext(ctx, `SELECT * FROM (`+loadTailSQL+`) ORDER BY 1 DESC, 3 DESC`)
	if err != nil {
		t.Fatal(err)
	}
	defer reversed.Close()
	s.st.loadTail = reversed
	if _, err := s.readByTail(ctx, req); err != errUnordered {
		t.Fatalf("reversed rows read as %v, want errUnordered", err)
	}
	got, err := s.Load(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("load over unordered rows = %+v\nwant %+v", got, want)
	}
}
