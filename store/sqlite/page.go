package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/listpage"
	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/session"
)

// loadPageSQL reads a page of one list field in one statement (one
// snapshot): the header with the list's length and the page's end (k
// 0), the field's value when it is stored whole (k 1), and the page's
// items (k 2) by a range of the primary key. The list's length is its
// last seq plus one (seqs run from 0 without gaps), one probe of the
// key (a bare max(), which SQLite answers from the index's end), and the
// page's bounds are scalar subqueries, the index search's own conditions
// whatever the statistics: the page costs what it holds, wherever it
// stands in the list.
const loadPageSQL = `WITH m(m) AS (SELECT max(seq) FROM session_items WHERE session_id = ?1 AND field = ?2),
		n(n) AS (SELECT coalesce(m + 1, 0) FROM m),
		w(hi, n) AS (SELECT CASE WHEN ?3 < 0 OR ?3 > n THEN n ELSE ?3 END, n FROM n)
	SELECT 0, version, created_at, updated_at, w.n, w.hi, schema_version, NULL FROM sessions, w WHERE id = ?1
	UNION ALL SELECT 1, 0, 0, 0, 0, 0, '', value FROM session_fields WHERE session_id = ?1 AND field = ?2
	UNION ALL SELECT 2, seq, 0, 0, 0, 0, '', value FROM session_items
		WHERE session_id = ?1 AND field = ?2 AND seq >= (SELECT hi FROM w) - ?4 AND seq < (SELECT hi FROM w)
	ORDER BY 1, 2`

// LoadPage returns a window of a list field with the record's header
// (see session.Pager), read in one statement whose cost follows the
// page, not the list.
func (s *Store) LoadPage(ctx context.Context, req session.PageRequest) (*session.Page, error) {
	const op = "load page"
	id := req.SessionID
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, id, session.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, id, err)
	}
	rows, err := s.st.loadPage.QueryContext(ctx, id, req.Field, req.Before, req.Max)
	if err != nil {
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	defer rows.Close()
	res, err := listpage.Scan(rows.Next, func(k *int, a, c, u, n, hi *int64, schema *string, value *[]byte) error {
		return rows.Scan(k, a, c, u, n, hi, schema, value)
	}, req.Before, req.Max)
	if err == nil {
		err = rows.Err()
	}
	switch {
	case errors.Is(err, listpage.ErrMalformed):
		return nil, corrupt(op, id, errcat.SessionLoadFailed, "list field %q: %v", req.Field, err)
	case err != nil:
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	case !res.Found:
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, id, session.ErrNotFound)
	case res.Version < 1:
		return nil, corrupt(op, id, errcat.SessionLoadFailed, "version %d", res.Version)
	}
	return &session.Page{SessionID: id, SchemaVersion: res.Schema, Version: res.Version,
		CreatedAt: nanotime.Time(res.Created), UpdatedAt: nanotime.Time(res.Updated),
		Items: res.Items, Offset: res.Offset, Length: res.Length}, nil
}
