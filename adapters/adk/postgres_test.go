package adk_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
)

// postgresURL returns a connection string to a fresh schema of the
// database at $ARMATURE_POSTGRES_URL (dropped when t ends), skipping t
// when the variable is unset.
func postgresURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("ARMATURE_POSTGRES_URL")
	if url == "" {
		t.Skip("ARMATURE_POSTGRES_URL is not set")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "adk_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		_ = conn.Close(ctx)
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema
}

// TestEndToEndPostgres runs the end-to-end script with ADK-Go's sessions
// in PostgreSQL (ADK-Go's database session service).
func TestEndToEndPostgres(t *testing.T) {
	t.Setenv("ADK_TEST_DATABASE_URL", postgresURL(t))
	section, err := json.Marshal(map[string]any{"session": map[string]any{"driver": adk.SessionPostgres, "url_env": "ADK_TEST_DATABASE_URL"}})
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.Run(t, adaptertest.Config{Backend: adk.Name, Factory: adk.Factory, Section: section})
}

// TestPostgresConcurrentStart: replicas starting together on a fresh
// database each migrate ADK-Go's session schema; none fails.
func TestPostgresConcurrentStart(t *testing.T) {
	url := postgresURL(t)
	ctx := context.Background()
	const replicas = 6
	errs := make(chan error, replicas)
	for range replicas {
		go func() {
			e, err := adk.NewEngine(ctx, adk.Config{Session: adk.SessionConfig{Driver: adk.SessionPostgres, URL: url}})
			if err == nil {
				err = e.Close()
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
