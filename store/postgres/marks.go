package postgres

import (
	"context"
	"fmt"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/session"
)

var _ session.MarkLister = (*Store)(nil)

// MarkKeys returns the keys of the session's live marks beginning with
// prefix, the most recently written first (those written together in
// byte order), at most limit (session.MarkLister). The scan is
// bounded by the session's marks (the primary key's session_id prefix);
// keys are compared in byte order (COLLATE "C"), whatever the database's
// collation, so that the range [prefix, end) holds exactly the keys that
// begin with prefix.
func (s *Store) MarkKeys(ctx context.Context, sessionID, prefix string, limit int) ([]string, error) {
	const op = "list mark keys"
	if err := session.ValidateID(sessionID); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if err := session.ValidateMarkPrefix(prefix, limit); err != nil {
		return nil, fmt.Errorf("postgres: %s %q: %w", op, sessionID, err)
	}
	end, _ := session.MarkPrefixEnd(prefix) // "" when there is no upper bound
	cutoff := nanotime.Of(s.now()) - int64(s.retention)
	rows, err := s.pool.Query(ctx, `SELECT key FROM session_marks
		WHERE session_id = $1 AND created_at >= $2 AND key COLLATE "C" >= $3 AND ($4 = '' OR key COLLATE "C" < $4)
		ORDER BY created_at DESC, key COLLATE "C" LIMIT $5`, sessionID, cutoff, prefix, end, limit)
	if err != nil {
		return nil, s.fail(ctx, op, sessionID, errcat.SessionLoadFailed, err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, s.fail(ctx, op, sessionID, errcat.SessionLoadFailed, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, sessionID, errcat.SessionLoadFailed, err)
	}
	return keys, nil
}
