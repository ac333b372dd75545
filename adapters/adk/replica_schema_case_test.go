package adk_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/internal/demo"
)

// TestRuntimeSchemaWithCapitals: armature serve --database with
// search_path=Prod (an unquoted name, which PostgreSQL folds to prod:
// the runtime serves from schema prod) starts an ADK-Go agent with no
// session: section: the schema of ADK-Go's tables derived from the URL
// is in lower case (prod_adk), as PostgreSQL folds the name and as
// SessionConfig.Schema must be.
func TestRuntimeSchemaWithCapitals(t *testing.T) {
	url := os.Getenv("ARMATURE_POSTGRES_URL")
	if url == "" {
		t.Skip("ARMATURE_POSTGRES_URL is not set")
	}
	ctx := context.Background()
	name := fmt.Sprintf("SchemaCase_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+strings.ToLower(name)+"_adk CASCADE")
			_ = conn.Close(ctx)
		}
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	req := adapter.FactoryRequest{Agent: &adapter.Agent{ID: "x", Backend: adk.Name, Tools: demo.Tools()}, Database: url + sep + "search_path=" + name}
	a, err := adk.Factory(ctx, req)
	if err != nil {
		t.Fatalf("the agent on a runtime database whose search_path is %s: %v", name, err)
	}
	_ = a.(*adk.Adapter).Close()
}
