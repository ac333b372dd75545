package eino_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
)

// postgresTable returns the database at $ARMATURE_POSTGRES_URL and a
// fresh table name (the table is dropped when t ends), skipping t when
// the variable is unset.
func postgresTable(t *testing.T) (url, table string) {
	t.Helper()
	url = os.Getenv("ARMATURE_POSTGRES_URL")
	if url == "" {
		t.Skip("ARMATURE_POSTGRES_URL is not set")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	table = "eino_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := context.Background()
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+table)
			_ = conn.Close(ctx)
		}
	})
	return url, table
}

func TestPostgresStore(t *testing.T) {
	url, table := postgresTable(t)
	ctx := context.Background()
	s, err := eino.NewPostgresStore(ctx, url, table)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok, err := s.Get(ctx, "a/b"); ok || err != nil {
		t.Fatalf("Get of a missing id: %v %v", ok, err)
	}
	for _, v := range []string{"one", "two"} {
		if err := s.Set(ctx, "a/b", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if b, ok, err := s.Get(ctx, "a/b"); !ok || err != nil || string(b) != v {
			t.Fatalf("Get = %q %v %v, want %q", b, ok, err, v)
		}
	}
	if err := s.Delete(ctx, "a/b"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(ctx, "a/b"); ok {
		t.Fatal("the checkpoint survived Delete")
	}
	if _, err := eino.NewPostgresStore(ctx, url, "Bad-Name"); !errors.Is(err, eino.ErrInvalidConfig) {
		t.Fatalf("a bad table name: %v", err)
	}
}

// TestEndToEndPostgres runs the end-to-end script with Eino's
// checkpoints in PostgreSQL.
func TestEndToEndPostgres(t *testing.T) {
	url, table := postgresTable(t)
	t.Setenv("EINO_TEST_DATABASE_URL", url)
	section, err := json.Marshal(map[string]any{"checkpoint": map[string]any{"driver": eino.CheckpointPostgres,
		"url_env": "EINO_TEST_DATABASE_URL", "table": table}})
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.Run(t, adaptertest.Config{Backend: eino.Name, Factory: eino.Factory, Section: section})
}

// TestPostgresStoreConcurrentCreate: replicas starting together create
// the table once; none fails (CREATE TABLE IF NOT EXISTS alone races on
// the catalog).
func TestPostgresStoreConcurrentCreate(t *testing.T) {
	url, table := postgresTable(t)
	ctx := context.Background()
	const replicas = 8
	errs := make(chan error, replicas)
	for range replicas {
		go func() {
			s, err := eino.NewPostgresStore(ctx, url, table)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for range replicas {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
