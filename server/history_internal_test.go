package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/jsonstr"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
	"github.com/armature-go/armature/store/sqlite"
)

// historyStores are the session stores readHistory is checked on: the
// in-memory one, an SQLite file and, with postgres set, a PostgreSQL
// schema (required in CI; the test skips without a server elsewhere).
func historyStores(t *testing.T, withPostgres bool) map[string]session.Store {
	t.Helper()
	ctx := context.Background()
	if withPostgres {
		schema, _ := pgtest.Schema(t)
		pg, err := postgres.Open(ctx, postgres.Config{URL: pgtest.URL(), Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pg.Close)
		return map[string]session.Store{"postgres": pg}
	}
	lite, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "h.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close(ctx) })
	mem := session.NewMemoryStore(session.MemoryConfig{})
	return map[string]session.Store{"memory": mem, "sqlite": lite,
		"sqlite-by-tail": tailOnly{lite, lite}, "memory-by-tail": tailOnly{mem, mem}}
}

// tailOnly is a store without session.Pager: its pages are read from
// tail loads, as from a store of another package.
type tailOnly struct {
	session.Store
	session.Appender
}

// writeHistory stores n messages under id, the first few with a whole
// save and the rest appended in chunks (as the chat harness appends a
// turn's), and returns them.
func writeHistory(t *testing.T, s session.Store, id string, n int, rng *rand.Rand) []json.RawMessage {
	t.Helper()
	ctx := context.Background()
	all := make([]json.RawMessage, n)
	for i := range all {
		role := [...]string{"user", "assistant", "tool"}[i%3]
		all[i] = json.RawMessage(fmt.Sprintf(`{"role":%q,"content":"message %d"}`, role, i))
	}
	first := min(n, rng.IntN(5))
	res, err := s.Save(ctx, session.SaveRequest{SessionID: id, State: map[string]json.RawMessage{chat.MessagesField: jsonstr.Array(all[:first])}})
	if err != nil {
		t.Fatal(err)
	}
	version := res.Version
	for i := first; i < n; {
		j := min(n, i+1+rng.IntN(6))
		res, err := s.(session.Appender).Append(ctx, session.AppendRequest{SessionID: id, ExpectedVersion: version,
			Append: map[string][]json.RawMessage{chat.MessagesField: all[i:j]}})
		if err != nil {
			t.Fatal(err)
		}
		version, i = res.Version, j
	}
	return all
}

// checkPage fails unless page holds want, from index offset of total.
func checkPage(t *testing.T, what string, page *historyPage, want []json.RawMessage, offset, total int) {
	t.Helper()
	if page.MessageOffset != offset || page.MessageCount != total {
		t.Fatalf("%s: message_offset %d, message_count %d; want %d, %d", what, page.MessageOffset, page.MessageCount, offset, total)
	}
	if got, w := string(page.Messages), string(jsonstr.Array(want)); got != w {
		t.Fatalf("%s: messages\n%.300s\nwant\n%.300s", what, got, w)
	}
}

// TestHistoryPagesRandom: on each store, for histories of random lengths,
// every page (?limit=, and ?before= with or without ?limit=) holds the
// messages of the whole history at the indices it names, and walking
// back from the newest page by message_offset reads the whole history
// once, in order.
func TestHistoryPagesRandom(t *testing.T) { historyPagesRandom(t, false) }

// TestHistoryPagesRandomPostgres is TestHistoryPagesRandom on PostgreSQL.
func TestHistoryPagesRandomPostgres(t *testing.T) { historyPagesRandom(t, true) }

func historyPagesRandom(t *testing.T, withPostgres bool) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	for name, s := range historyStores(t, withPostgres) {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			ctx := context.Background()
			for round := range 12 {
				id := fmt.Sprintf("h%d", round)
				n := rng.IntN(260)
				all := writeHistory(t, s, id, n, rng)
				whole, err := readHistory(ctx, s, id, historyQuery{before: -1})
				if err != nil {
					t.Fatal(err)
				}
				checkPage(t, "whole", whole, all, 0, n)
				for range 40 {
					q := historyQuery{limit: 1 + rng.IntN(40), before: -1}
					if rng.IntN(3) > 0 {
						q.before = rng.IntN(n + 5)
					}
					page, err := readHistory(ctx, s, id, q)
					if err != nil {
						t.Fatal(err)
					}
					hi := n
					if q.before >= 0 {
						hi = min(q.before, n)
					}
					lo := max(0, hi-q.limit)
					checkPage(t, fmt.Sprintf("%+v of %d", q, n), page, all[lo:hi], lo, n)
				}
				limit := 1 + rng.IntN(50)
				var back []json.RawMessage
				q := historyQuery{limit: limit, before: -1}
				for pages := 0; ; pages++ {
					page, err := readHistory(ctx, s, id, q)
					if err != nil {
						t.Fatal(err)
					}
					var items []json.RawMessage
					if err := json.Unmarshal(page.Messages, &items); err != nil {
						t.Fatal(err)
					}
					back = append(items, back...)
					if page.MessageOffset == 0 {
						break
					}
					if pages > n {
						t.Fatalf("walking back by %d never reached the first message", limit)
					}
					q.before = page.MessageOffset
				}
				checkPage(t, "walked back", &historyPage{Messages: jsonstr.Array(back), MessageCount: n}, all, 0, n)
			}
			if _, err := readHistory(ctx, s, "nope", historyQuery{limit: 3, before: 2}); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("a page of a session never written: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestHistoryPagesWhileAppending: pages read while turns append to the
// history are each a consistent slice of it: the messages at the indices
// they name, in a history as long as they say (the final one holds them
// all, at those indices).
func TestHistoryPagesWhileAppending(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	for name, s := range historyStores(t, false) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			all := writeHistory(t, s, "w", 40, rng)
			done := make(chan struct{})
			var pages []*historyPage
			go func() {
				defer close(done)
				rng := rand.New(rand.NewPCG(uint64(seed), 13))
				for range 300 {
					q := historyQuery{limit: 1 + rng.IntN(30), before: -1}
					if rng.IntN(2) == 0 {
						q.before = rng.IntN(400)
					}
					page, err := readHistory(ctx, s, "w", q)
					if err != nil {
						t.Error(err)
						return
					}
					pages = append(pages, page)
				}
			}()
			version := int64(0)
			if rec, err := s.Load(ctx, session.LoadRequest{SessionID: "w"}); err == nil {
				version = rec.Version
			}
			for i := 40; i < 400; i += 4 {
				more := make([]json.RawMessage, 4)
				for j := range more {
					more[j] = json.RawMessage(fmt.Sprintf(`{"role":"user","content":"appended %d"}`, i+j))
				}
				res, err := s.(session.Appender).Append(ctx, session.AppendRequest{SessionID: "w", ExpectedVersion: version,
					Append: map[string][]json.RawMessage{chat.MessagesField: more}})
				if err != nil {
					t.Fatal(err)
				}
				version, all = res.Version, append(all, more...)
			}
			<-done
			for _, p := range pages {
				var items []json.RawMessage
				if err := json.Unmarshal(p.Messages, &items); err != nil {
					t.Fatal(err)
				}
				if p.MessageCount > len(all) || p.MessageOffset+len(items) > p.MessageCount {
					t.Fatalf("a page of %d from %d says the history held %d (it holds %d)", len(items), p.MessageOffset, p.MessageCount, len(all))
				}
				checkPage(t, "a page read meanwhile", p, all[p.MessageOffset:p.MessageOffset+len(items)], p.MessageOffset, p.MessageCount)
			}
		})
	}
}

// TestHistoryNotAList: a session whose history field is not a list (an
// embedded caller's own state) reads as having none, whole or paged,
// instead of failing; a list of other values reads as its items.
func TestHistoryNotAList(t *testing.T) {
	for name, s := range historyStores(t, false) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			for i, v := range []string{`{"a":1}`, `"text"`, `[1,2]`, `null`} {
				id := fmt.Sprintf("x%d", i)
				if _, err := s.Save(ctx, session.SaveRequest{SessionID: id, State: map[string]json.RawMessage{chat.MessagesField: json.RawMessage(v)}}); err != nil {
					t.Fatal(err)
				}
				for _, q := range []historyQuery{{before: -1}, {limit: 1, before: -1}, {limit: 2, before: 1}} {
					page, err := readHistory(ctx, s, id, q)
					if err != nil {
						t.Fatalf("%s %+v: %v", v, q, err)
					}
					if v == `[1,2]` {
						if page.MessageCount != 2 || string(page.Messages) == "[]" {
							t.Fatalf("%s %+v: %s (%d), want its items", v, q, page.Messages, page.MessageCount)
						}
						continue // a list, of numbers: its items
					}
					if string(page.Messages) != "[]" || page.MessageCount != 0 {
						t.Fatalf("%s %+v: %s (%d)", v, q, page.Messages, page.MessageCount)
					}
				}
			}
		})
	}
}

// TestHistoryQueryBad: a page's parameters out of range are a 400
// naming the parameter.
func TestHistoryQueryBad(t *testing.T) {
	for _, raw := range []string{"limit=0", "limit=-1", "limit=10001", "limit=x", "limit=1.5", "before=-1", "before=x",
		"before=99999999999999999999999", "limit=2&before="} {
		r := httptest.NewRequest(http.MethodGet, "/v1/sessions/s?"+raw, nil)
		_, err := parseHistoryQuery(r)
		var ae *Error
		if raw == "limit=2&before=" {
			if err != nil {
				t.Errorf("%s: %v (an empty before is no before)", raw, err)
			}
			continue
		}
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("%s: %v, want a 400", raw, err)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/v1/sessions/s?before=5", nil)
	if q, err := parseHistoryQuery(r); err != nil || q.limit != defaultHistoryPage || q.before != 5 {
		t.Errorf("before alone: %+v, %v; want the default page before 5", q, err)
	}
}

// FuzzHistoryQuery: whatever the query, parseHistoryQuery answers a page
// within bounds or a 400, and readHistory of it answers the messages at
// the indices it names.
func FuzzHistoryQuery(f *testing.F) {
	for _, q := range []string{"", "limit=3", "before=2", "limit=5&before=9", "limit=10000&before=0", "before=%00"} {
		f.Add(q, uint8(17))
	}
	s := session.NewMemoryStore(session.MemoryConfig{})
	rng := rand.New(rand.NewPCG(1, 2))
	lengths := map[uint8][]json.RawMessage{}
	f.Fuzz(func(t *testing.T, raw string, n uint8) {
		r, err := http.NewRequest(http.MethodGet, "/v1/sessions/s?"+raw, nil)
		if err != nil {
			return
		}
		q, err := parseHistoryQuery(r)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
				t.Fatalf("%q: %v", raw, err)
			}
			return
		}
		if q.limit < 0 || q.limit > maxHistoryPage || (q.before >= 0 && q.limit == 0) {
			t.Fatalf("%q: %+v out of bounds", raw, q)
		}
		id := fmt.Sprintf("f%d", n)
		all, ok := lengths[n]
		if !ok {
			all = writeHistory(t, s, id, int(n), rng)
			lengths[n] = all
		}
		page, err := readHistory(context.Background(), s, id, q)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := 0, len(all)
		if q.limit > 0 {
			if q.before >= 0 {
				hi = min(q.before, hi)
			}
			lo = max(0, hi-q.limit)
		}
		checkPage(t, raw, page, all[lo:hi], lo, len(all))
	})
}

// BenchmarkHistoryRead: reading a session of 10 000 messages whole, its
// newest page of 50, the page of 50 before its middle and its oldest
// page, on SQLite and on PostgreSQL, by the store's pages and by tail
// loads (as from a store without session.Pager).
func BenchmarkHistoryRead(b *testing.B) {
	ctx := context.Background()
	b.Run("sqlite", func(b *testing.B) {
		s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "h.db")})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(ctx)
		benchHistoryRead(b, s)
	})
	b.Run("postgres", func(b *testing.B) {
		schema, _ := pgtest.Schema(b)
		s, err := postgres.Open(ctx, postgres.Config{URL: pgtest.URL(), Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchHistoryRead(b, s)
	})
}

func benchHistoryRead(b *testing.B, s interface {
	session.Store
	session.Appender
}) {
	ctx := context.Background()
	const n = 10000
	items := make([]json.RawMessage, n)
	for i := range items {
		items[i] = json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":"message %d of a long conversation, about as long as a short reply"}`, i))
	}
	// Written as the chat harness writes them: a turn's messages
	// appended to the history.
	res, err := s.Save(ctx, session.SaveRequest{SessionID: "b", State: map[string]json.RawMessage{chat.MessagesField: json.RawMessage("[]")}})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += 4 {
		if res, err = s.Append(ctx, session.AppendRequest{SessionID: "b", ExpectedVersion: res.Version,
			Append: map[string][]json.RawMessage{chat.MessagesField: items[i:min(n, i+4)]}}); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		q    historyQuery
	}{{"whole", historyQuery{before: -1}}, {"newest50", historyQuery{limit: 50, before: -1}},
		{"middle50", historyQuery{limit: 50, before: n / 2}}, {"oldest50", historyQuery{limit: 50, before: 50}}} {
		// pages: the store's own (session.Pager); by-tail: as from a
		// store without them, from tail loads.
		for _, store := range []struct {
			name  string
			store session.Store
		}{{"pages", s}, {"by-tail", tailOnly{s, s}}} {
			if bc.q.limit == 0 && store.name != "pages" {
				continue // a whole read is the same either way
			}
			b.Run(bc.name+"/"+store.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := readHistory(ctx, store.store, "b", bc.q); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
