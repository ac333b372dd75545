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
	"github.com/armature-go/armature/store/postgres"
)

// postgresURL returns a connection string to a fresh schema of the
// database at $ARMATURE_POSTGRES_URL (dropped when t ends), skipping t
// when the variable is unset.
func postgresURL(t testing.TB) string {
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

// TestPostgresBesideArmature: ADK-Go's sessions on the database of
// Armature's own store (the natural deployment: one database), with a
// connection string that names no schema. ADK-Go's tables are named
// like Armature's (sessions, events); they go to their own schema
// (DefaultSessionSchema) instead of failing the start on Armature's.
func TestPostgresBesideArmature(t *testing.T) {
	base := os.Getenv("ARMATURE_POSTGRES_URL")
	if base == "" {
		t.Skip("ARMATURE_POSTGRES_URL is not set")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "adk_beside_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		_ = admin.Close(ctx)
	})
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(base, "/"+cfg.Database+"?", "/"+name+"?", 1)
	if url == base {
		t.Skipf("cannot derive a URL of a new database from %q", base)
	}
	st, err := postgres.Open(ctx, postgres.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := adk.NewEngine(ctx, adk.Config{Session: adk.SessionConfig{Driver: adk.SessionPostgres, URL: url}})
	if err != nil {
		t.Fatalf("ADK-Go's sessions beside Armature's store: %v", err)
	}
	defer e.Close()
	if _, err := e.Send(ctx, "acme", "s", "hello", func(adk.Event) {}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+adk.DefaultSessionSchema+".sessions WHERE id = 's'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("ADK-Go's session in schema %s: %d, %v", adk.DefaultSessionSchema, n, err)
	}
}
