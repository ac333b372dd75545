package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/armature-go/armature/internal/nanotime"
)

// noticeLog is a NOTIFY channel whose notices are also rows of a table,
// kept for AnnouncementWindow: the notification is the fast path, the
// row the truth a listener whose connection dropped reads once it is
// back. Each row holds an id (BIGSERIAL), its time (at, unix
// nanoseconds) and the notice's text columns; a notification's payload
// is the row id and the columns, separated by notifySep.
type noticeLog struct {
	s       *Store
	what    string // for logs and errors: "announce", "request cancel"
	table   string
	channel string
	columns []string
}

// post stores a notice with values (one per column) and notifies the
// channel, in one statement. Every 64th post of sent prunes the rows
// older than the window.
func (l noticeLog) post(ctx context.Context, sent *atomic.Uint64, values ...string) error {
	rest := strings.Join(values, notifySep)
	if len(rest) > 7800 { // NOTIFY's payload limit is 8000 bytes
		return fmt.Errorf("postgres: %s: %s too long (%d bytes)", l.what, strings.Join(l.columns, " and "), len(rest))
	}
	now := l.s.now()
	args := make([]any, 0, len(values)+3)
	marks := make([]string, len(values))
	for i, v := range values {
		args = append(args, v)
		marks[i] = "$" + strconv.Itoa(i+1)
	}
	n := len(values)
	args = append(args, nanotime.Of(now), l.channel, notifySep+rest)
	q := `WITH a AS (INSERT INTO ` + l.table + ` (` + strings.Join(l.columns, ", ") + `, at) VALUES (` + strings.Join(marks, ", ") +
		`, $` + strconv.Itoa(n+1) + `) RETURNING id)
		SELECT pg_notify($` + strconv.Itoa(n+2) + `, (SELECT id FROM a)::text || $` + strconv.Itoa(n+3) + `)`
	if _, err := l.s.pool.Exec(ctx, q, args...); err != nil {
		return fmt.Errorf("postgres: %s: %w", l.what, redact(err))
	}
	if sent.Add(1)%64 == 1 {
		if _, err := l.s.pool.Exec(ctx, `DELETE FROM `+l.table+` WHERE at < $1`,
			nanotime.Of(now.Add(-AnnouncementWindow))); err != nil {
			l.s.log.WarnContext(ctx, "postgres: pruning "+l.table+" failed", "error", redact(err).Error())
		}
	}
	return nil
}

// listen calls fn with each notice's values until ctx ends, reconnecting
// with backoff when the connection drops. After a reconnection it reads
// the notices stored while it was down (within AnnouncementWindow) and
// delivers those it has not; each notice is delivered once, whichever
// way it arrives. Those posted before listen first connected are not
// delivered.
func (l noticeLog) listen(ctx context.Context, fn func(values []string)) error {
	seen := map[int64]int64{} // notice id -> at, within the window
	// Until the first catch-up, notices posted before start (before the
	// first LISTEN) are not this listener's to deliver.
	first, start := true, int64(0)
	deliver := func(id, at int64, values []string) {
		if _, ok := seen[id]; ok {
			return
		}
		seen[id] = at
		fn(values)
	}
	query := `SELECT id, at, ` + strings.Join(l.columns, ", ") + ` FROM ` + l.table + ` WHERE at >= $1 ORDER BY id`
	catchUp := func() error {
		since := nanotime.Of(l.s.now().Add(-AnnouncementWindow))
		for id, at := range seen {
			if at < since {
				delete(seen, id)
			}
		}
		rows, err := l.s.pool.Query(ctx, query, since)
		if err != nil {
			return err
		}
		defer rows.Close()
		var id, at int64
		values := make([]string, len(l.columns))
		dest := []any{&id, &at}
		for i := range values {
			dest = append(dest, &values[i])
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			if first && at < start {
				seen[id] = at // posted before this listener listened
				continue
			}
			deliver(id, at, slices.Clone(values)) // fn may keep them
		}
		first = false
		return rows.Err()
	}
	return l.s.listenLoop(ctx, l.table, func(connected func()) error {
		if first {
			start = nanotime.Of(l.s.now())
		}
		return l.s.listenChannel(ctx, l.channel, func() error {
			if err := catchUp(); err != nil {
				return err
			}
			connected()
			return nil
		}, func(payload string) {
			idText, rest, ok := strings.Cut(payload, notifySep)
			id, err := strconv.ParseInt(idText, 10, 64)
			if !ok || err != nil {
				return
			}
			values := strings.SplitN(rest, notifySep, len(l.columns))
			if len(values) != len(l.columns) {
				return
			}
			deliver(id, nanotime.Of(l.s.now()), values)
		})
	})
}
