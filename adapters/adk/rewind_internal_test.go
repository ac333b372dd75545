package adk

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/llm"
)

// sessionConfigs are the session services the tests run on: in
// memory, SQLite in a temporary directory and PostgreSQL (in a schema of
// its own, dropped after; skipped when ARMATURE_POSTGRES_URL is unset).
func sessionConfigs() map[string]func(t *testing.T) SessionConfig {
	return map[string]func(t *testing.T) SessionConfig{
		"memory": func(*testing.T) SessionConfig { return SessionConfig{} },
		"sqlite": func(t *testing.T) SessionConfig {
			return SessionConfig{Driver: SessionSQLite, Path: filepath.Join(t.TempDir(), "adk.db")}
		},
		"postgres": func(t *testing.T) SessionConfig {
			url := os.Getenv("ARMATURE_POSTGRES_URL")
			if url == "" {
				t.Skip("ARMATURE_POSTGRES_URL is not set")
			}
			schema := fmt.Sprintf("adk_test_%d", time.Now().UnixNano())
			t.Cleanup(func() {
				ctx := context.Background()
				if conn, err := pgx.Connect(ctx, url); err == nil {
					_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
					_ = conn.Close(ctx)
				}
			})
			return SessionConfig{Driver: SessionPostgres, URL: url, Schema: schema}
		},
	}
}

// TestRewind: Rewind removes exactly the events after a position, and
// the session's own state becomes what the kept events made it (app:
// and temp: keys are not the session's), on each session service;
// rewinding to 0 removes the session, and a session that does not exist
// is at position 0 with nothing to rewind.
func TestRewind(t *testing.T) {
	for name, cfg := range sessionConfigs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e, err := NewEngine(ctx, Config{Session: cfg(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if pos, err := e.Position(ctx, "u", "s"); pos != 0 || err != nil {
				t.Fatalf("position of a missing session: %d, %v", pos, err)
			}
			if n, err := e.Rewind(ctx, "u", "s", 0); n != 0 || err != nil {
				t.Fatalf("rewinding a missing session: %d, %v", n, err)
			}
			created, err := e.sessions.Create(ctx, &session.CreateRequest{AppName: e.app, UserID: "u", SessionID: "s"})
			if err != nil {
				t.Fatal(err)
			}
			base := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
			var at []int64
			for i, delta := range []map[string]any{
				{"a": 1.0},
				{"b": 2.0, "app:x": 1.0, "temp:y": 1.0},
				{"a": 3.0, "c": "dropped"},
				{"d": 4.0},
			} {
				ev := session.NewEvent(ctx, "inv")
				ev.Timestamp = base.Add(time.Duration(i) * time.Millisecond)
				ev.Author = "user"
				ev.LLMResponse = model.LLMResponse{Content: genai.NewContentFromText("m", genai.RoleUser)}
				ev.Actions.StateDelta = delta
				if err := e.sessions.AppendEvent(ctx, created.Session, ev); err != nil {
					t.Fatal(err)
				}
				at = append(at, ev.Timestamp.UnixMicro())
			}
			if pos, err := e.Position(ctx, "u", "s"); pos != at[3] || err != nil {
				t.Fatalf("position: %d, %v, want %d", pos, err, at[3])
			}
			if n, err := e.Rewind(ctx, "u", "s", at[3]); n != 0 || err != nil {
				t.Fatalf("rewinding to the last event: %d, %v", n, err)
			}
			if n, err := e.Rewind(ctx, "u", "s", at[1]); n != 2 || err != nil {
				t.Fatalf("rewinding two events: %d, %v", n, err)
			}
			resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: "u", SessionID: "s"})
			if err != nil {
				t.Fatal(err)
			}
			if n := resp.Session.Events().Len(); n != 2 {
				t.Fatalf("%d events kept, want 2", n)
			}
			st := resp.Session.State()
			for k, want := range map[string]any{"a": 1.0, "b": 2.0} {
				if v, err := st.Get(k); err != nil || v != want {
					t.Errorf("state %s = %v (%v), want %v", k, v, err, want)
				}
			}
			for _, k := range []string{"c", "d", "temp:y"} {
				if v, err := st.Get(k); err == nil {
					t.Errorf("state %s = %v, want it gone", k, v)
				}
			}
			if pos, err := e.Position(ctx, "u", "s"); pos != at[1] || err != nil {
				t.Fatalf("position after the rewind: %d, %v, want %d", pos, err, at[1])
			}
			// The session goes on: the runner appends to it again.
			resp, err = e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: "u", SessionID: "s"})
			if err != nil {
				t.Fatal(err)
			}
			ev := session.NewEvent(ctx, "inv2")
			ev.Author = "user"
			if err := e.sessions.AppendEvent(ctx, resp.Session, ev); err != nil {
				t.Fatalf("appending after the rewind: %v", err)
			}
			if n, err := e.Rewind(ctx, "u", "s", 0); n != 3 || err != nil {
				t.Fatalf("rewinding to 0: %d, %v", n, err)
			}
			if _, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: "u", SessionID: "s"}); err == nil {
				t.Error("the session is still there after rewinding to 0")
			}
		})
	}
}

// TestSeed: a session without events gets the history, in order, as the
// model's context (an image, a tool call and its result included; system
// messages left out); a session with events gets nothing.
func TestSeed(t *testing.T) {
	for name, cfg := range sessionConfigs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var sent []llm.Message
			p := adaptertest.ProviderFunc(func(req *llm.Request) { sent = slices.Clone(req.Messages) })
			e, err := NewEngine(ctx, Config{LLM: NewProviderModel("m", p), Session: cfg(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			tc := llm.ToolCall{ID: "c1", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"3"}`)}
			asked := llm.UserBlocks(llm.TextBlock("where is order 3?"), llm.ImageURL("https://example.com/receipt.png"))
			history := []llm.Message{llm.SystemText("left out"), asked, llm.AssistantToolCalls(tc),
				llm.ToolResult("c1", "shipped"), llm.AssistantText("It shipped.")}
			if n, err := e.Seed(ctx, "u", "s", history); n != 4 || err != nil {
				t.Fatalf("seed: %d, %v", n, err)
			}
			if n, err := e.Seed(ctx, "u", "s", history); n != 0 || err != nil {
				t.Fatalf("seeding a session with events: %d, %v", n, err)
			}
			if _, err := e.Send(ctx, "u", "s", "thanks", func(Event) {}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range sent {
				switch {
				case m.Role == llm.RoleSystem:
				case len(m.ToolCalls) > 0:
					got = append(got, "call "+m.ToolCalls[0].ID+" "+string(m.ToolCalls[0].Arguments))
				case m.Role == llm.RoleTool:
					got = append(got, "result "+m.ToolCallID+" "+m.Text())
				default:
					got = append(got, string(m.Role)+" "+m.Text())
				}
			}
			want := []string{"user where is order 3?", `call c1 {"order":"3"}`, "result c1 shipped", "assistant It shipped.", "user thanks"}
			if i := slices.IndexFunc(sent, func(m llm.Message) bool { return m.Role == llm.RoleUser }); i < 0 || !sent[i].Content.Equal(asked.Content) {
				t.Errorf("the seeded message with its image: %#v", sent)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("the model was sent %q, want %q", got, want)
			}
		})
	}
}

// TestCommitted: the committed position comes from this adapter's own
// cursor only; a session without history starts at 0, and one an
// earlier build wrote (history, no cursor) is unknown.
func TestCommitted(t *testing.T) {
	hist := []llm.Message{llm.UserText("hi"), llm.AssistantText("hello")}
	for _, c := range []struct {
		name  string
		req   adapter.Request
		at    int64
		known bool
	}{
		{"first turn", adapter.Request{}, 0, true},
		{"an earlier build's session", adapter.Request{History: hist}, 0, false},
		{"a cursor", adapter.Request{History: hist, Cursor: cursor{Position: 42}.json()}, 42, true},
		{"another adapter's cursor", adapter.Request{History: hist, Cursor: json.RawMessage(`{"offset":3}`)}, 0, false},
		{"a cursor that is not an object", adapter.Request{History: hist, Cursor: json.RawMessage(`7`)}, 0, false},
	} {
		at, known, _ := committed(&c.req)
		if at != c.at || known != c.known {
			t.Errorf("%s: %d, %v, want %d, %v", c.name, at, known, c.at, c.known)
		}
	}
}

// TestSeedAllOrNothing: a seed that fails part way (here its context
// ends mid-way on a session database) leaves no session behind: a
// session holding part of the history would never be seeded again.
func TestSeedAllOrNothing(t *testing.T) {
	for name, cfg := range sessionConfigs() {
		if name == "memory" {
			continue // the in-memory service appends without failing
		}
		t.Run(name, func(t *testing.T) {
			e, err := NewEngine(context.Background(), Config{Session: cfg(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var history []llm.Message
			for i := range 50000 {
				history = append(history, llm.UserText(fmt.Sprint("q", i)), llm.AssistantText(fmt.Sprint("a", i)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if n, err := e.Seed(ctx, "u", "s", history); err == nil {
				t.Skipf("the seed of %d events finished within its deadline", n)
			}
			if pos, err := e.Position(context.Background(), "u", "s"); pos != 0 || err != nil {
				t.Fatalf("after a failed seed the session is at %d (%v), want no session", pos, err)
			}
			// The session seeds whole afterwards.
			if n, err := e.Seed(context.Background(), "u", "s", history[:6]); n != 6 || err != nil {
				t.Fatalf("seed after the failed one: %d, %v", n, err)
			}
		})
	}
}
