package chat_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
	"github.com/armature-go/armature/store/sqlite"
)

// firstText replies with the session's first user message: what the
// turn's model was given as the conversation.
func firstText(ctx context.Context, s graph.State) (graph.Update, error) {
	msgs := chat.Messages.Get(s)
	return chat.Messages.Add(llm.AssistantText("first: " + msgs[0].Text())), nil
}

// TestDeletedAndWrittenAgain: two harnesses (two agents, or two
// replicas) on one store, each with its own session cache. B deletes a
// session A has cached and begins it again, to the version A's copy
// has. A's next turn must get B's conversation: before, the version
// alone validated A's copy, so the deleted conversation reached A's
// model, and A's write appended to B's history the turn built on it.
func TestDeletedAndWrittenAgain(t *testing.T) {
	stores := map[string]func(t *testing.T) session.Store{
		"memory": func(t *testing.T) session.Store { return session.NewMemoryStore(session.MemoryConfig{}) },
		"sqlite": func(t *testing.T) session.Store {
			s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			return s
		},
		"postgres": func(t *testing.T) session.Store {
			schema, _ := pgtest.Schema(t)
			s, err := postgres.Open(t.Context(), postgres.Config{URL: pgtest.URL(), Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			a := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: st}, firstText)})
			b := newChat(t, chat.Config{Graph: newGraph(t, graphOpts{store: st}, firstText)})
			want[*chat.Completed](t, mustSend(t, a, "s", "the deleted conversation"))
			if err := b.Delete(t.Context(), "s"); err != nil {
				t.Fatal(err)
			}
			want[*chat.Completed](t, mustSend(t, b, "s", "the new conversation"))
			c := want[*chat.Completed](t, mustSend(t, a, "s", "hello"))
			if got := c.Replies[len(c.Replies)-1].Text(); got != "first: the new conversation" {
				t.Fatalf("A's turn after B's delete was given a conversation beginning %q", got)
			}
			rec, err := st.Load(t.Context(), session.LoadRequest{SessionID: "s"})
			if err != nil {
				t.Fatal(err)
			}
			var hist []llm.Message
			if err := json.Unmarshal(rec.State[chat.MessagesField], &hist); err != nil {
				t.Fatal(err)
			}
			if len(hist) != 4 || hist[0].Text() != "the new conversation" {
				t.Fatalf("stored history: %+v", hist)
			}
		})
	}
}
