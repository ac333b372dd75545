package adk_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestDeleteSessionDeletesUpstream: deleting a session deletes ADK-Go's
// own session too, on its in-memory and its SQLite session service:
// before, a session created again under a deleted one's id sent the
// model the deleted conversation (ADK-Go kept its events).
func TestDeleteSessionDeletesUpstream(t *testing.T) {
	db := filepath.Join(t.TempDir(), "adk.db")
	for _, section := range []string{`{}`, `{"session":{"driver":"sqlite","path":` + quote(db) + `}}`} {
		t.Run(section, func(t *testing.T) {
			var sent []int // messages per model call
			p := adaptertest.ProviderFunc(func(req *llm.Request) { sent = append(sent, len(req.Messages)) })
			ctx := context.Background()
			ag := &adapter.Agent{ID: "x", Backend: adk.Name, Provider: p, Config: json.RawMessage(section)}
			a, err := adk.Factory(ctx, adapter.FactoryRequest{Agent: ag})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.(*adk.Adapter).Close() })
			h := adaptertest.Harness(t, a, ag, session.NewMemoryStore(session.MemoryConfig{}))
			send := func(text string) {
				t.Helper()
				if out, err := h.Send(ctx, "acme/s", llm.UserText(text)); err != nil {
					t.Fatal(err)
				} else if _, ok := out.(*chat.Completed); !ok {
					t.Fatalf("%q: %#v", text, out)
				}
			}
			send("my card number is 4242")
			send("and my pin is 1234")
			if err := h.Delete(ctx, "acme/s"); err != nil {
				t.Fatal(err)
			}
			send("hello again")
			if len(sent) != 3 || sent[1] != 3 || sent[2] != 1 {
				t.Fatalf("messages per model call: %v, want [1 3 1]: the deleted conversation reached the model", sent)
			}
			if section != `{}` {
				// Nothing of the deleted conversation is left in the file
				// (ADK-Go's events table cascades from its sessions only
				// with SQLite's foreign keys enforced).
				conn, err := sql.Open("sqlite", db)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				var n int
				if err := conn.QueryRow(`SELECT count(*) FROM events WHERE content LIKE '%4242%' OR content LIKE '%1234%'`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Fatalf("%d events of the deleted session are left in ADK-Go's database", n)
				}
			}
			// Another tenant's session of the same id is not touched.
			if out, err := h.Send(ctx, "globex/s", llm.UserText("hi")); err != nil || out == nil {
				t.Fatal(err)
			}
			if err := h.Delete(ctx, "globex/never-existed"); err != nil {
				t.Errorf("deleting a session ADK-Go never held: %v", err)
			}
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
