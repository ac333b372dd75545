package eino_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestFactoryKeepsCheckpointsWithTheRuntime: with no checkpoint store
// named, the factory keeps Eino's checkpoints where the runtime keeps its
// data (files under armature serve's --data, or its --database), so an
// approval pending across a restart of the adapter is given after it;
// an explicit driver: memory keeps them in memory, and the approval then
// fails as the lost checkpoint it is.
func TestFactoryKeepsCheckpointsWithTheRuntime(t *testing.T) {
	for _, c := range []struct {
		name    string
		section string
		req     func(t *testing.T) adapter.FactoryRequest
		durable bool
	}{
		{"data dir", "", func(t *testing.T) adapter.FactoryRequest { return adapter.FactoryRequest{DataDir: t.TempDir()} }, true},
		{"database", "", func(t *testing.T) adapter.FactoryRequest {
			return adapter.FactoryRequest{Database: postgresSchema(t)}
		}, true},
		{"memory named", `{"checkpoint":{"driver":"memory"}}`, func(t *testing.T) adapter.FactoryRequest { return adapter.FactoryRequest{DataDir: t.TempDir()} }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			req := c.req(t)
			req.Agent = &adapter.Agent{ID: "x", Backend: eino.Name, Tools: demo.Tools()}
			if c.section != "" {
				req.Agent.Config = json.RawMessage(c.section)
			}
			build := func() *eino.Adapter {
				a, err := eino.Factory(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = a.(*eino.Adapter).Close() })
				return a.(*eino.Adapter)
			}
			a := build()
			h := adaptertest.Harness(t, a, req.Agent, session.NewMemoryStore(session.MemoryConfig{}))
			out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("refund: %#v", out)
			}
			a.Engine = build().Engine // the restart
			out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
			done, completed := out.(*chat.Completed)
			switch e, errored := out.(*chat.Errored); {
			case c.durable && (!completed || len(done.Replies) == 0):
				t.Fatalf("the approval after the restart: %#v", out)
			case !c.durable && (!errored || !errors.Is(e.Err, eino.ErrNoCheckpoint)):
				t.Fatalf("with checkpoints in memory the approval after the restart: %#v", out)
			}
		})
	}
}

// postgresSchema returns the database at $ARMATURE_POSTGRES_URL with a
// fresh schema as its search path (dropped when t ends), skipping t
// when the variable is unset: the runtime's database as a replica sees
// it, where the default checkpoint table is created.
func postgresSchema(t *testing.T) string {
	t.Helper()
	url, name := postgresTable(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + name
}
