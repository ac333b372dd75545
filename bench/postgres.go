package bench

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
)

// PostgresBackend returns the PostgreSQL store.
func PostgresBackend(s *postgres.Store) Backend {
	return Backend{Sessions: s, Records: s.Checkpoints()}
}

// B0Postgres is the storage floor on PostgreSQL: the bare transaction a
// turn needs (insert the user message and the reply as item rows, bump
// the session version), over pgx, with no harness, on the schema of the
// store open on url in schema, with the server's default durability
// (synchronous commit).
func B0Postgres(b *testing.B, url, schema string) {
	b.Helper()
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{}}); err != nil {
		b.Fatal(err)
	}
	s.Close()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	user, assistant := b0Messages(b)
	version, seq := int64(1), int64(0)
	b.ReportAllocs()
	for b.Loop() {
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		batch := &pgx.Batch{}
		batch.Queue(`INSERT INTO session_items (session_id, field, seq, value) VALUES ($1, $2, $3, $4)`, "s", chat.MessagesField, seq, user)
		batch.Queue(`INSERT INTO session_items (session_id, field, seq, value) VALUES ($1, $2, $3, $4)`, "s", chat.MessagesField, seq+1, assistant)
		batch.Queue(`UPDATE sessions SET version = version + 1, updated_at = $1 WHERE id = $2 AND version = $3`, time.Now().UnixNano(), "s", version)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		version, seq = version+1, seq+2
	}
}
