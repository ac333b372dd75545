package sessiontest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/armature-go/armature/session"
)

func pager(t *testing.T, s session.Store) session.Pager {
	p, ok := s.(session.Pager)
	if !ok {
		t.Skip("store does not implement session.Pager")
	}
	return p
}

// wantPage is the page of list the request asks for (PageRequest's
// rule, written out again).
func wantPage(list []json.RawMessage, before, limit int) ([]json.RawMessage, int) {
	hi := len(list)
	if before >= 0 && before < hi {
		hi = before
	}
	lo := max(hi-limit, 0)
	return list[lo:hi], lo
}

// checkPage compares a page with the one list holds for req.
func checkPage(t *testing.T, p *session.Page, list []json.RawMessage, req session.PageRequest, version int64) {
	t.Helper()
	want, lo := wantPage(list, req.Before, req.Max)
	if p.SessionID != req.SessionID || p.Version != version || p.CreatedAt.IsZero() || p.UpdatedAt.Before(p.CreatedAt) {
		t.Errorf("page %+v: header (%q, version %d, %v, %v), want %q version %d", req, p.SessionID, p.Version, p.CreatedAt, p.UpdatedAt, req.SessionID, version)
	}
	if p.Length != len(list) || p.Offset != lo || string(joinJSON(p.Items)) != string(joinJSON(want)) {
		t.Errorf("page %+v: %s at %d of %d, want %s at %d of %d", req, joinJSON(p.Items), p.Offset, p.Length, joinJSON(want), lo, len(list))
	}
}

func loadPage(t *testing.T, pg session.Pager, req session.PageRequest) *session.Page {
	t.Helper()
	p, err := pg.LoadPage(t.Context(), req)
	if err != nil {
		t.Fatalf("LoadPage(%+v): %v", req, err)
	}
	return p
}

// testPages: a page of an appended list, of one saved whole, of a field
// that is missing or not a list; a missing session; bad requests; pages
// that never alias the store.
func testPages(t *testing.T, s session.Store) {
	pg := pager(t, s)
	a := appender(t, s)
	ctx := t.Context()
	list := items(0, 10)
	w := save(t, s, "p", "v1", map[string]json.RawMessage{"msgs": joinJSON(list[:4]), "other": json.RawMessage(`{"x":1}`),
		"whole": joinJSON(list[:7]), "null": json.RawMessage(`null`)})
	w, err := a.Append(ctx, session.AppendRequest{SessionID: "p", ExpectedVersion: w.Version,
		Append: map[string][]json.RawMessage{"msgs": list[4:], "fresh": list[:3]}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field string
		list  []json.RawMessage
	}{{"msgs", list}, {"fresh", list[:3]}, {"whole", list[:7]}, {"other", nil}, {"null", nil}, {"missing", nil}} {
		for _, before := range []int{-1, 0, 1, 3, 5, 7, 10, 11, 1 << 40} {
			for _, limit := range []int{1, 2, 4, 10, 100} {
				req := session.PageRequest{SessionID: "p", Field: c.field, Before: before, Max: limit}
				checkPage(t, loadPage(t, pg, req), c.list, req, w.Version)
			}
		}
	}
	// A page is a copy.
	p := loadPage(t, pg, session.PageRequest{SessionID: "p", Field: "msgs", Before: -1, Max: 2})
	p.Items[0][0] = 'X'
	checkPage(t, loadPage(t, pg, session.PageRequest{SessionID: "p", Field: "msgs", Before: -1, Max: 2}), list,
		session.PageRequest{SessionID: "p", Field: "msgs", Before: -1, Max: 2}, w.Version)

	if _, err := pg.LoadPage(ctx, session.PageRequest{SessionID: "none", Field: "msgs", Before: -1, Max: 1}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("LoadPage(missing session) = %v, want ErrNotFound", err)
	}
	for _, bad := range []session.PageRequest{
		{SessionID: "", Field: "msgs", Max: 1},
		{SessionID: "p\x00", Field: "msgs", Max: 1},
		{SessionID: "p", Field: "", Max: 1},
		{SessionID: "p", Field: "a\x00b", Max: 1},
		{SessionID: "p", Field: "bad\xff", Max: 1},
		{SessionID: "p", Field: "msgs", Max: 0},
		{SessionID: "p", Field: "msgs", Max: -3},
	} {
		if _, err := pg.LoadPage(ctx, bad); !errors.Is(err, session.ErrInvalidRequest) {
			t.Errorf("LoadPage(%+v) = %v, want ErrInvalidRequest", bad, err)
		}
	}
	// After a delete, the session is gone for pages too.
	if err := s.Delete(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.LoadPage(ctx, session.PageRequest{SessionID: "p", Field: "msgs", Before: -1, Max: 1}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("LoadPage(deleted session) = %v, want ErrNotFound", err)
	}
}

// testPagesRandomized: random appends, replaced lists and whole saves,
// and after each a random page of each list, compared with a model.
func testPagesRandomized(t *testing.T, s session.Store) {
	pg := pager(t, s)
	a := appender(t, s)
	ctx := t.Context()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	model := map[string][]json.RawMessage{"a": items(0, 2), "b": nil}
	whole := func() map[string]json.RawMessage {
		st := map[string]json.RawMessage{}
		for f, l := range model {
			st[f] = joinJSON(l)
		}
		return st
	}
	version := save(t, s, "r", "v1", whole()).Version
	next := 1000
	for step := range 150 {
		var err error
		var w session.WriteResult
		switch op := rng.IntN(10); {
		case op < 7:
			f := []string{"a", "b"}[rng.IntN(2)]
			k := rng.IntN(9)
			add := items(next, next+k)
			next += k
			model[f] = append(model[f], add...)
			w, err = a.Append(ctx, session.AppendRequest{SessionID: "r", ExpectedVersion: version, Append: map[string][]json.RawMessage{f: add}})
		case op < 8:
			model["b"] = items(next, next+rng.IntN(5))
			next += len(model["b"])
			w, err = a.Append(ctx, session.AppendRequest{SessionID: "r", ExpectedVersion: version,
				Set: map[string]json.RawMessage{"b": joinJSON(model["b"])}})
		default:
			if rng.IntN(2) == 0 {
				model["a"] = model["a"][:rng.IntN(len(model["a"])+1)]
			}
			w = save(t, s, "r", "v1", whole())
		}
		if err != nil {
			t.Fatalf("seed %d step %d: %v", seed, step, err)
		}
		version = w.Version
		for _, f := range []string{"a", "b"} {
			n := len(model[f])
			req := session.PageRequest{SessionID: "r", Field: f, Before: rng.IntN(n+3) - 1, Max: 1 + rng.IntN(n+2)}
			checkPage(t, loadPage(t, pg, req), model[f], req, version)
			if t.Failed() {
				t.Fatalf("seed %d step %d", seed, step)
			}
		}
	}
	// Walk the longest list back a page at a time, as a client does.
	var got []json.RawMessage
	for before := -1; ; {
		p := loadPage(t, pg, session.PageRequest{SessionID: "r", Field: "a", Before: before, Max: 1 + rng.IntN(7)})
		got = append(append([]json.RawMessage(nil), p.Items...), got...)
		if p.Offset == 0 {
			break
		}
		before = p.Offset
	}
	if string(joinJSON(got)) != string(joinJSON(model["a"])) {
		t.Fatalf("seed %d: walked back %s, want %s", seed, joinJSON(got), joinJSON(model["a"]))
	}
}

// BenchmarkPage measures a Pager's page of 50 from the middle of a list
// of 1 000 and of 100 000 items (appended, as a chat history is): a
// store whose pages cost what they hold answers both alike. newStore
// returns a fresh, empty store.
func BenchmarkPage(b *testing.B, newStore func(b *testing.B) session.Store) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("H=%d", n), func(b *testing.B) {
			s := newStore(b)
			pg, ok := s.(session.Pager)
			a, ok2 := s.(session.Appender)
			if !ok || !ok2 {
				b.Skip("store does not implement session.Pager and session.Appender")
			}
			ctx := b.Context()
			w, err := s.Save(ctx, session.SaveRequest{SessionID: "x", State: map[string]json.RawMessage{"m": json.RawMessage(`[]`)}})
			if err != nil {
				b.Fatal(err)
			}
			add := make([]json.RawMessage, n)
			for i := range add {
				add[i] = json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":"message %d"}`, i))
			}
			if _, err := a.Append(ctx, session.AppendRequest{SessionID: "x", ExpectedVersion: w.Version, Append: map[string][]json.RawMessage{"m": add}}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if p, err := pg.LoadPage(ctx, session.PageRequest{SessionID: "x", Field: "m", Before: n / 2, Max: 50}); err != nil || len(p.Items) != 50 {
					b.Fatal(p, err)
				}
			}
		})
	}
}
