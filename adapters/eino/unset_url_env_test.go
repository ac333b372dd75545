package eino_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/internal/demo"
)

// TestUnsetURLEnvRefused: an eino: section with checkpoint: {driver:
// postgres, url_env: NAME} whose variable is not set (a typo, a variable
// the deployment forgot) is refused at startup with eino.ErrInvalidConfig
// naming the variable, and nothing is connected to, as an api_key_env
// naming an unset variable is. Taken as an empty connection string, it
// would make pgx fall back to libpq's defaults (PGHOST, PGUSER,
// PGDATABASE, or a local socket and the OS user), so the checkpoints
// would silently go to whatever database those name.
func TestUnsetURLEnvRefused(t *testing.T) {
	ctx := context.Background()
	const name = "ARMATURE_TEST_CHECKPOINT_URL_UNSET"
	t.Setenv(name, "")
	os.Unsetenv(name)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schemaName := "unset_url_env_" + hex.EncodeToString(b[:])
	if u := os.Getenv("ARMATURE_POSTGRES_URL"); u != "" {
		// libpq's defaults name the test database (as a deployment's
		// PG* variables would name its main one), in a schema of this
		// test's own.
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schemaName); err != nil {
			t.Fatal(err)
		}
		_ = conn.Close(ctx)
		t.Cleanup(func() {
			if conn, err := pgx.Connect(ctx, u); err == nil {
				_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schemaName+" CASCADE")
				_ = conn.Close(ctx)
			}
		})
		t.Setenv("PGHOST", pu.Hostname())
		t.Setenv("PGPORT", pu.Port())
		t.Setenv("PGUSER", pu.User.Username())
		t.Setenv("PGDATABASE", pu.Path[1:])
		t.Setenv("PGSSLMODE", "disable")
		t.Setenv("PGOPTIONS", "-c search_path="+schemaName)
	} else {
		t.Setenv("PGHOST", t.TempDir()) // a socket directory with no server
		t.Setenv("PGCONNECT_TIMEOUT", "1")
	}
	section := `{"provider":"scripted","checkpoint":{"driver":"postgres","url_env":"` + name + `","table":"unset_url_env_ckpt"}}`
	ag := &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools(), Config: json.RawMessage(section)}
	a, err := eino.Factory(ctx, adapter.FactoryRequest{Agent: ag})
	if err == nil {
		_ = a.(*eino.Adapter).Close()
		t.Fatalf("Factory built an agent whose checkpoint.url_env names an unset variable, want it refused (its checkpoints would go to libpq's default database)")
	}
	if !errors.Is(err, eino.ErrInvalidConfig) {
		t.Errorf("Factory with an unset url_env: %v, want ErrInvalidConfig", err)
	}
}
