package adk

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
)

// TestSkewedClocks: a replica whose clock is an hour ahead of this one
// answers a turn of a session the two share on a session database; the
// turns this replica runs next still follow it, and the model is sent
// the conversation in order. Before, ADK-Go timed this replica's events
// by its own clock and, ordering the session by time, put its turns
// before the other replica's.
func TestSkewedClocks(t *testing.T) {
	ctx := context.Background()
	m := adaptertest.NewModel()
	for _, driver := range []string{SessionSQLite, ""} {
		t.Run("driver="+driver, func(t *testing.T) {
			cfg := SessionConfig{Driver: driver}
			if driver == SessionSQLite {
				cfg.Path = filepath.Join(t.TempDir(), "adk.db")
			}
			e, err := NewEngine(ctx, Config{Tools: demo.Tools(), LLM: NewProviderModel("m", m), Session: cfg})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			send := func(text string) {
				t.Helper()
				if _, err := e.SendMessage(ctx, "u", "s", llm.UserText(text), func(Event) {}); err != nil {
					t.Fatalf("%q: %v", text, err)
				}
			}
			send("message 0")
			// The other replica's turn, timed by its clock.
			resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: "u", SessionID: "s"})
			if err != nil {
				t.Fatal(err)
			}
			ahead := time.Now().Add(time.Hour)
			for i, c := range []*genai.Content{genai.NewContentFromText("message 1", genai.RoleUser), genai.NewContentFromText("answer 1", genai.RoleModel)} {
				ev := session.NewEvent(ctx, "other-replica")
				ev.Author, ev.Timestamp, ev.LLMResponse = e.agent, ahead.Add(time.Duration(i)*time.Microsecond), model.LLMResponse{Content: c}
				if c.Role == genai.RoleUser {
					ev.Author = "user"
				}
				if err := e.sessions.AppendEvent(ctx, resp.Session, ev); err != nil {
					t.Fatal(err)
				}
			}
			send("message 2")
			send("message 3")
			var users []string
			for _, msg := range m.LastTranscript() {
				if msg.Role == llm.RoleUser {
					users = append(users, msg.Text())
				}
			}
			if want := []string{"message 0", "message 1", "message 2", "message 3"}; !slices.Equal(users, want) {
				t.Fatalf("the model was sent %q, want %q", users, want)
			}
			if pos, err := e.Position(ctx, "u", "s"); err != nil || pos <= ahead.UnixMicro() {
				t.Fatalf("the session's position %d (%v), want after the other replica's turn (%d)", pos, err, ahead.UnixMicro())
			}
		})
	}
}
