package eino

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/cloudwego/eino/adk"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultTable is the table of a [PostgresStore] whose config names none.
const DefaultTable = "eino_checkpoints"

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// PostgresStore is a durable Eino checkpoint store in a PostgreSQL table
// (id text primary key, data bytea), shared by every process on the
// database: an approval pending on one replica can be resumed by
// another. It is safe for concurrent use.
type PostgresStore struct {
	pool  *pgxpool.Pool
	table string
}

var (
	_ adk.CheckPointStore   = (*PostgresStore)(nil)
	_ adk.CheckPointDeleter = (*PostgresStore)(nil)
	_ GroupDeleter          = (*PostgresStore)(nil)
)

// NewPostgresStore connects to the database at url (a pgx connection
// string) and creates the table (DefaultTable when table is empty) if it
// is missing.
func NewPostgresStore(ctx context.Context, url, table string) (*PostgresStore, error) {
	if table == "" {
		table = DefaultTable
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("%w: checkpoint.table %q is not a lower-case SQL identifier", ErrInvalidConfig, table)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("eino: the checkpoint database: %w", err)
	}
	s := &PostgresStore{pool: pool, table: pgx.Identifier{table}.Sanitize()}
	if err := s.create(ctx, table); err != nil {
		pool.Close()
		return nil, fmt.Errorf("eino: create the checkpoint table: %w", err)
	}
	return s, nil
}

// create creates the table if it is missing. CREATE TABLE IF NOT EXISTS
// is not safe against itself (two replicas starting together: one fails
// on the catalog's unique index), so the creation holds a
// transaction-scoped advisory lock named by the table.
func (s *PostgresStore) create(ctx context.Context, table string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "armature eino checkpoints "+table); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+s.table+" (id text PRIMARY KEY, data bytea NOT NULL)")
		return err
	})
}

// Get implements adk.CheckPointStore.
func (s *PostgresStore) Get(ctx context.Context, id string) ([]byte, bool, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, "SELECT data FROM "+s.table+" WHERE id = $1", id).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("eino: read checkpoint %q: %w", id, err)
	}
	return b, true, nil
}

// Set implements adk.CheckPointStore.
func (s *PostgresStore) Set(ctx context.Context, id string, b []byte) error {
	_, err := s.pool.Exec(ctx, "INSERT INTO "+s.table+" (id, data) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data", id, b)
	if err != nil {
		return fmt.Errorf("eino: write checkpoint %q: %w", id, err)
	}
	return nil
}

// Delete implements adk.CheckPointDeleter.
func (s *PostgresStore) Delete(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, "DELETE FROM "+s.table+" WHERE id = $1", id); err != nil {
		return fmt.Errorf("eino: delete checkpoint %q: %w", id, err)
	}
	return nil
}

// DeleteGroup implements GroupDeleter.
func (s *PostgresStore) DeleteGroup(ctx context.Context, group string) error {
	prefix := group + "/"
	_, err := s.pool.Exec(ctx, "DELETE FROM "+s.table+" WHERE left(id, $1) = $2 AND strpos(substr(id, $1 + 1), '/') = 0",
		len([]rune(prefix)), prefix)
	if err != nil {
		return fmt.Errorf("eino: delete the checkpoints of %q: %w", group, err)
	}
	return nil
}

// Close closes the connection pool.
func (s *PostgresStore) Close() error {
	s.pool.Close()
	return nil
}
