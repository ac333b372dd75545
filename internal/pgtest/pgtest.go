// Package pgtest gives tests a PostgreSQL schema of their own: the local
// server (trust authentication) or $ARMATURE_POSTGRES_URL. Without a
// reachable database a test skips locally and fails in CI ($CI set),
// where it must run.
//
// # Example
//
//	schema, url := pgtest.Schema(t)
//	st, err := postgres.Open(ctx, postgres.Config{URL: pgtest.URL(), Schema: schema})
//	// or: armature serve --database url (its search_path is the schema)
package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// URL is the test database's URL.
func URL() string {
	if u := os.Getenv("ARMATURE_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var schemas atomic.Int64

// Schema creates an empty schema for the test, dropped (with everything
// in it) when the test ends, and returns its name and a URL whose
// search_path selects it.
func Schema(t testing.TB) (name, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name = fmt.Sprintf("t_%d_%d", time.Now().UnixNano(), schemas.Add(1))
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL at %s is required in CI: %v", URL(), err)
		}
		t.Skipf("no PostgreSQL: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, URL())
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`)
	})
	sep := "?"
	if strings.Contains(URL(), "?") {
		sep = "&"
	}
	return name, URL() + sep + "search_path=" + name
}
