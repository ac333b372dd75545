package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// DropSchema drops a test's schema with everything in it.
func (s *Store) DropSchema(ctx context.Context, schema string) error {
	_, err := s.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}
