package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
	"github.com/armature-go/armature/store/sqlite"
)

// embNorm renders a result comparably: the error's kind, or the state
// with each value re-encoded compactly.
func embNorm(rec *session.Record, err error) string {
	if err != nil {
		for _, k := range []error{session.ErrNotFound, session.ErrInvalidRequest, session.ErrWriteConflict, session.ErrNotModified} {
			if errors.Is(err, k) {
				return "error: " + k.Error()
			}
		}
		return "error: other: " + err.Error()
	}
	var b strings.Builder
	for _, k := range sortedKeys(rec.State) {
		var c bytes.Buffer
		if err := json.Compact(&c, rec.State[k]); err != nil {
			c.WriteString("INVALID:" + string(rec.State[k]))
		}
		fmt.Fprintf(&b, "%s=%s;", k, c.String())
	}
	fmt.Fprintf(&b, " v%d skipped=%v", rec.Version, rec.Skipped)
	return b.String()
}

func sortedKeys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func embErrKind(err error) string {
	if err == nil {
		return "ok"
	}
	return embNorm(nil, err)
}

// TestEmbedderStoresAgree runs the same edge-case writes and reads on
// the memory, SQLite and PostgreSQL stores; they must answer alike.
func TestEmbedderStoresAgree(t *testing.T) {
	ctx := context.Background()
	_, url := pgtest.Schema(t)
	pg, err := postgres.Open(ctx, postgres.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	lite, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "d.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close(ctx)
	stores := map[string]session.Store{"memory": session.NewMemoryStore(session.MemoryConfig{}), "sqlite": lite, "postgres": pg}
	names := []string{"memory", "sqlite", "postgres"}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	type step struct {
		name string
		do   func(s session.Store, id string) string
	}
	saveThen := func(init map[string]json.RawMessage, app map[string][]json.RawMessage, set map[string]json.RawMessage, tails []session.ListTail) func(s session.Store, id string) string {
		return func(s session.Store, id string) string {
			w, err := s.Save(ctx, session.SaveRequest{SessionID: id, SchemaVersion: "v", State: init})
			out := "save:" + embErrKind(err)
			if app != nil || set != nil {
				_, err = s.(session.Appender).Append(ctx, session.AppendRequest{SessionID: id, SchemaVersion: "v", ExpectedVersion: w.Version, Append: app, Set: set})
				out += " append:" + embErrKind(err)
			}
			rec, err := s.Load(ctx, session.LoadRequest{SessionID: id, Tail: tails})
			return out + " load:" + embNorm(rec, err)
		}
	}
	m := func(kv ...string) map[string]json.RawMessage {
		o := map[string]json.RawMessage{}
		for i := 0; i < len(kv); i += 2 {
			o[kv[i]] = raw(kv[i+1])
		}
		return o
	}
	steps := []step{
		{"ws-list-append", saveThen(m("l", " [ 1 , 2 ] "), map[string][]json.RawMessage{"l": {raw(" 3 ")}}, nil, nil)},
		{"empty-list-append", saveThen(m("l", "[]"), map[string][]json.RawMessage{"l": {raw("[]"), raw("{}")}}, nil, nil)},
		{"append-null-field", saveThen(m("l", "null"), map[string][]json.RawMessage{"l": {raw("1")}}, nil, nil)},
		{"append-zero-items", saveThen(m("l", "[1]"), map[string][]json.RawMessage{"l": {}}, nil, nil)},
		{"append-object-field", saveThen(m("l", `{"a":1}`), map[string][]json.RawMessage{"l": {raw("1")}}, nil, nil)},
		{"append-string-field", saveThen(m("l", `"[1]"`), map[string][]json.RawMessage{"l": {raw("2")}}, nil, nil)},
		{"bignum", saveThen(m("n", "1e400", "i", "123456789012345678901234567890"), nil, nil, nil)},
		{"escapes", saveThen(m("s", `"\u0000\ud800é\u00e9"`), nil, nil, nil)},
		{"empty-field-name", saveThen(m("", "1"), nil, nil, nil)},
		{"unicode-field", saveThen(m("ñ\u4e2d", "[1]"), map[string][]json.RawMessage{"ñ\u4e2d": {raw("2")}}, nil, nil)},
		{"set-and-append", saveThen(m("l", "[1]", "x", "1"), map[string][]json.RawMessage{"l": {raw("2")}}, m("x", "2", "y", "3"), nil)},
		{"set-same-as-append", saveThen(m("l", "[1]"), map[string][]json.RawMessage{"l": {raw("2")}}, m("l", "[5]"), nil)},
		{"tail-0", saveThen(m("l", "[1,2,3]"), nil, nil, []session.ListTail{{Field: "l", Max: 0}})},
		{"tail-neg", saveThen(m("l", "[1,2,3]"), nil, nil, []session.ListTail{{Field: "l", Max: -1}})},
		{"tail-big", saveThen(m("l", "[1,2,3]"), nil, nil, []session.ListTail{{Field: "l", Max: 1 << 40}})},
		{"tail-nonlist", saveThen(m("l", `{"a":[1,2]}`), nil, nil, []session.ListTail{{Field: "l", Max: 1}})},
		{"tail-missing", saveThen(m("l", "[1,2]"), nil, nil, []session.ListTail{{Field: "zz", Max: 1}})},
		{"tail-after-append", saveThen(m("l", " [ 1 , 2 ] "), map[string][]json.RawMessage{"l": {raw("3"), raw("4")}}, nil, []session.ListTail{{Field: "l", Max: 3}})},
		{"tail-nested", saveThen(m("l", `[[1,[2]],{"a":[3]},"x,y",4]`), nil, nil, []session.ListTail{{Field: "l", Max: 2}})},
		{"tail-dup", saveThen(m("l", "[1,2,3]"), nil, nil, []session.ListTail{{Field: "l", Max: 1}, {Field: "l", Max: 2}})},
		{"nil-state", saveThen(nil, nil, nil, nil)},
		{"huge-item", saveThen(m("l", "[]"), map[string][]json.RawMessage{"l": {raw(`"` + strings.Repeat("a", 1<<20) + `"`)}}, nil, []session.ListTail{{Field: "l", Max: 1}})},
	}
	for i, st := range steps {
		got := map[string]string{}
		for _, n := range names {
			got[n] = st.do(stores[n], fmt.Sprintf("s%d", i))
		}
		if got["memory"] != got["sqlite"] || got["memory"] != got["postgres"] {
			var b strings.Builder
			for _, n := range names {
				v := got[n]
				if len(v) > 300 {
					v = v[:300] + "…"
				}
				fmt.Fprintf(&b, "\n  %-8s %s", n, v)
			}
			t.Errorf("%s: the stores disagree:%s", st.name, b.String())
		}
	}
}
