package postgres

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
// last seq plus one (seqs run from 0 without gaps), one backward probe
// of the key; the page's bounds are scalar subqueries, so that they are
// the index scan's own conditions whatever the table's statistics (as a
// join, or a bare max(), a table never analyzed is read whole): the page
// costs what it holds, wherever it stands in the list.
const loadPageSQL = `WITH l(n) AS MATERIALIZED (SELECT coalesce((SELECT seq FROM session_items
			WHERE session_id = $1 AND field = $2 ORDER BY seq DESC LIMIT 1) + 1, 0)),
		w(hi, n) AS MATERIALIZED (SELECT CASE WHEN $3::bigint < 0 OR $3::bigint > n THEN n ELSE $3::bigint END, n FROM l)
	SELECT 0, version, created_at, updated_at, w.n, w.hi, schema_version, NULL::bytea FROM sessions, w WHERE id = $1
	UNION ALL SELECT 1, 0, 0, 0, 0, 0, '', value FROM session_fields WHERE session_id = $1 AND field = $2
	UNION ALL SELECT 2, seq, 0, 0, 0, 0, '', value FROM session_items
		WHERE session_id = $1 AND field = $2 AND seq >= (SELECT hi FROM w) - $4::bigint AND seq < (SELECT hi FROM w)
	ORDER BY 1, 2`

// LoadPage returns a window of a list field with the record's header
// (see session.Pager), read in one statement whose cost follows the
// page, not the list.
func (s *Store) LoadPage(ctx context.Context, req session.PageRequest) (*session.Page, error) {
	const op = "load page"
	id := req.SessionID
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	rows, err := s.pool.Query(ctx, loadPageSQL, id, req.Field, int64(req.Before), int64(req.Max))
	if err != nil {
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	}
	defer rows.Close()
	res, err := listpage.Scan(rows.Next, func(k *int, a, c, u, n, hi *int64, schema *string, value *[]byte) error {
		return rows.Scan(k, a, c, u, n, hi, schema, value)
	}, req.Before, req.Max)
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	switch {
	case errors.Is(err, listpage.ErrMalformed):
		return nil, errcat.Wrap(errcat.SessionLoadFailed, "postgres: "+op,
			fmt.Errorf("session %q: list field %q: %w", id, req.Field, err))
	case err != nil:
		return nil, s.fail(ctx, op, id, errcat.SessionLoadFailed, err)
	case !res.Found:
		return nil, fmt.Errorf("postgres: %s %q: %w", op, id, session.ErrNotFound)
	}
	return &session.Page{SessionID: id, SchemaVersion: res.Schema, Version: res.Version,
		CreatedAt: nanotime.Time(res.Created), UpdatedAt: nanotime.Time(res.Updated),
		Items: res.Items, Offset: res.Offset, Length: res.Length}, nil
}
