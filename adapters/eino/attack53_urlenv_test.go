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

// TestAttack53UnsetURLEnv: a workspace's eino: section with
// checkpoint: {driver: postgres, url_env: NAME} whose variable is not
// set (a typo, a variable the deployment forgot) is taken: the empty
// connection string makes pgx fall back to libpq's defaults (PGHOST,
// PGUSER, PGDATABASE, or a local socket and the OS user), so the
// checkpoints silently go to whatever database those name, and the
// agent starts. A workspace's api_key_env that names an unset variable
// is refused at startup; so should this be.
//
// Expected: Factory (and NewEngine) fail with eino.ErrInvalidConfig
// naming the variable, and connect nowhere.
func TestAttack53UnsetURLEnv(t *testing.T) {
	ctx := context.Background()
	const name = "ATTACK53_CHECKPOINT_URL_UNSET"
	t.Setenv(name, "")
	os.Unsetenv(name)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schemaName := "attack53_" + hex.EncodeToString(b[:])
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
	section := `{"provider":"scripted","checkpoint":{"driver":"postgres","url_env":"` + name + `","table":"attack53_ckpt"}}`
	ag := &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools(), Config: json.RawMessage(section)}
	a, err := eino.Factory(ctx, adapter.FactoryRequest{Agent: ag})
	if err == nil {
		_ = a.(*eino.Adapter).Close()
		t.Fatalf("an agent whose checkpoint.url_env names an unset variable was built: its checkpoints go to libpq's default database")
	}
	if !errors.Is(err, eino.ErrInvalidConfig) {
		t.Errorf("the unset url_env is not refused as invalid config (it was used as an empty connection string): %v", err)
	}
}
