package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/jsonstr"
	"github.com/armature-go/armature/session"
)

// A session's history, read whole or a page at a time:
//
//	GET /v1/sessions/{id}                      the whole history
//	GET /v1/sessions/{id}?limit=N              its newest N messages
//	GET /v1/sessions/{id}?before=I&limit=N     the N messages before index I
//
// Every answer names where its messages stand in the history:
// message_offset is the index of the first of them, message_count how
// many messages the history holds. A client shows a long conversation's
// newest page, then reads the page before it with ?before= the
// message_offset it has. A page is read as one (session.Pager): it
// costs what it holds, wherever it stands in the history. (From a store
// without pages, it is read from the store's tail, session.ListTail: the
// newest page costs what it holds, an earlier one what lies after it.)

const (
	// maxHistoryPage bounds ?limit= of GET /v1/sessions/{id}.
	maxHistoryPage = 10000
	// defaultHistoryPage is the page a ?before= without ?limit= answers.
	defaultHistoryPage = 100
)

// historyPage is the answer of GET /v1/sessions/{id}.
type historyPage struct {
	sessionSummary
	Messages      json.RawMessage `json:"messages"`
	MessageOffset int             `json:"message_offset"`
	MessageCount  int             `json:"message_count"`
}

// historyQuery is a read of a session's history: whole (limit 0), or
// the newest limit messages before index before (all of them when
// before is negative).
type historyQuery struct {
	limit, before int
}

// parseHistoryQuery reads ?limit= and ?before=.
func parseHistoryQuery(r *http.Request) (historyQuery, error) {
	limit, err := countParam(r, "limit", maxHistoryPage)
	if err != nil {
		return historyQuery{}, err
	}
	q := historyQuery{limit: limit, before: -1}
	if v := r.URL.Query().Get("before"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return historyQuery{}, badRequest("before must be a message index (a page's message_offset)")
		}
		q.before = n
		if q.limit == 0 {
			q.limit = defaultHistoryPage
		}
	}
	return q, nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	q, err := parseHistoryQuery(r)
	if err != nil {
		return err
	}
	page, err := readHistory(r.Context(), s.cfg.Sessions, storeKey(tenantOf(r), id), q)
	if errors.Is(err, session.ErrNotFound) {
		return notFound("session")
	}
	if err != nil {
		return err
	}
	page.SessionID = id
	writeJSON(w, http.StatusOK, page)
	return nil
}

// readHistory reads the page q of the history of the session stored
// under key.
func readHistory(ctx context.Context, store session.Store, key string, q historyQuery) (*historyPage, error) {
	if q.limit == 0 {
		return wholeHistory(ctx, store, key)
	}
	if pg, ok := store.(session.Pager); ok {
		p, err := pg.LoadPage(ctx, session.PageRequest{SessionID: key, Field: chat.MessagesField, Before: q.before, Max: q.limit})
		if err != nil {
			return nil, err
		}
		return &historyPage{
			sessionSummary: sessionSummary{Version: p.Version, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt},
			Messages:       jsonstr.Array(p.Items),
			MessageOffset:  p.Offset,
			MessageCount:   p.Length,
		}, nil
	}
	// A store without pages: the page from a tail load.
	tail := q.limit
	if q.before >= 0 {
		// The page ends before an index: how far from the end that is
		// takes the history's length, which a one-item tail reads.
		_, items, skipped, err := loadHistory(ctx, store, key, 1)
		if err != nil {
			return nil, err
		}
		total := skipped + len(items)
		tail = max(total-q.before, 0) + q.limit
	}
	rec, items, skipped, err := loadHistory(ctx, store, key, tail)
	if err != nil {
		return nil, err
	}
	total := skipped + len(items)
	hi := total
	if q.before >= 0 {
		hi = min(q.before, total)
	}
	lo := max(hi-q.limit, skipped)
	if hi < lo {
		hi = lo
	}
	return newHistoryPage(rec, items[lo-skipped:hi-skipped], lo, total), nil
}

// wholeHistory reads the whole history of the session stored under key:
// the stored list as it is, its items counted without being copied.
func wholeHistory(ctx context.Context, store session.Store, key string) (*historyPage, error) {
	rec, err := store.Load(ctx, session.LoadRequest{SessionID: key})
	if err == nil && rec == nil {
		err = session.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	page := newHistoryPage(rec, nil, 0, 0)
	raw, ok := rec.State[chat.MessagesField]
	if !ok {
		return page, nil
	}
	// Messages are objects, counted as empty structs; a list of
	// anything else (never written by the chat harness) as copies.
	var count []struct{}
	if json.Unmarshal(raw, &count) == nil && count != nil { // (null is none)
		page.Messages, page.MessageCount = raw, len(count)
	} else if items, _ := historyItems(raw); items != nil {
		page.Messages, page.MessageCount = raw, len(items)
	}
	return page, nil
}

// loadHistory loads the session stored under key with its history's
// newest tail items (at least; tail > 0), and returns them with how many
// earlier ones the load left out. A session with no history, or with one
// that is not a list of messages, has none.
func loadHistory(ctx context.Context, store session.Store, key string, tail int) (*session.Record, []json.RawMessage, int, error) {
	rec, err := store.Load(ctx, session.LoadRequest{SessionID: key, Tail: []session.ListTail{{Field: chat.MessagesField, Max: tail}}})
	if err == nil && rec == nil {
		err = session.ErrNotFound
	}
	if err != nil {
		return nil, nil, 0, err
	}
	items, ok := historyItems(rec.State[chat.MessagesField])
	if !ok {
		return rec, nil, 0, nil
	}
	return rec, items, rec.Skipped[chat.MessagesField], nil
}

// historyItems splits a stored history into its items; a history that
// is missing, null or not a list (never written by the chat harness)
// has none (and is not ok when it is not a list).
func historyItems(raw json.RawMessage) ([]json.RawMessage, bool) {
	if raw == nil {
		return nil, true
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, false
	}
	return items, true
}

// newHistoryPage is the page of rec's history holding items, the first
// of them at index offset of total.
func newHistoryPage(rec *session.Record, items []json.RawMessage, offset, total int) *historyPage {
	return &historyPage{
		sessionSummary: sessionSummary{Version: rec.Version, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt},
		Messages:       jsonstr.Array(items),
		MessageOffset:  offset,
		MessageCount:   total,
	}
}
