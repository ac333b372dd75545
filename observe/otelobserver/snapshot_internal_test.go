package otelobserver

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type snapPanicStringer struct{}

func (snapPanicStringer) String() string { panic("boom") }

type snapLevel int

func (snapLevel) String() string { return "level" }

type snapErr struct{ msg string }

func (e *snapErr) Error() string { return e.msg }

// snapshotAny keeps scalars, copies byte slices with their type, renders
// errors, Stringers and TextMarshalers as text (a panic as !PANIC) and
// everything else as JSON, never referring to the caller's memory.
func TestSnapshotAnyForms(t *testing.T) {
	raw := json.RawMessage(`{"a":1}`)
	got := snapshotAny(raw)
	if r, ok := got.Any().(json.RawMessage); !ok || string(r) != `{"a":1}` {
		t.Fatalf("json.RawMessage: %#v", got.Any())
	}
	raw[2] = 'b'
	if string(got.Any().(json.RawMessage)) != `{"a":1}` {
		t.Fatal("the byte slice copy aliases the caller's")
	}
	if v := snapshotAny(snapLevel(3)).Any(); v != snapLevel(3) {
		t.Fatalf("a scalar Stringer: %#v", v)
	}
	if s := snapshotAny(snapPanicStringer{}).String(); !strings.HasPrefix(s, "!PANIC: boom") {
		t.Fatalf("a panicking Stringer: %q", s)
	}
	if s := snapshotAny(errors.New("e1")).String(); s != "e1" {
		t.Fatalf("an error: %q", s)
	}
	var nilErr *snapErr
	if v := snapshotAny(nilErr).Any(); v != nil {
		t.Fatalf("a nil error pointer: %#v", v)
	}
	tm := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if s := snapshotAny(&tm).String(); s != "2026-01-02T03:04:05Z" {
		t.Fatalf("a *time.Time: %q", s)
	}
	m := map[string]any{"k": []int{1, 2}}
	v := snapshotAny(m)
	m["k"] = 3
	if r, ok := v.Any().(jsonText); !ok || string(r) != `{"k":[1,2]}` || v.String() != `{"k":[1,2]}` {
		t.Fatalf("a map: %#v", v.Any())
	}
	cyc := []any{nil}
	cyc[0] = cyc
	if s := snapshotAny(cyc).String(); !strings.HasPrefix(s, "!ERROR: ") {
		t.Fatalf("a cyclic slice: %q", s)
	}
	if s := snapshotAny(make(chan int)).String(); !strings.HasPrefix(s, "!ERROR: ") {
		t.Fatalf("a channel: %q", s)
	}
	if k := snapshotAny(nil).Kind(); k != slog.KindAny {
		t.Fatalf("nil: %v", k)
	}
}
