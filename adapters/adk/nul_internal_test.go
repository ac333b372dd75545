package adk

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	sess "github.com/armature-go/armature/session"
)

// TestNUL: a message holding U+0000 completes on every session store,
// as its first turn and in a history seeded into ADK-Go's session
// (PostgreSQL's JSONB cannot hold U+0000: the event is stored with
// U+FFFD in its place). Before, each such turn on PostgreSQL failed,
// told to retry, and a seeded history holding one failed every turn of
// its session.
func TestNUL(t *testing.T) {
	for name, cfg := range sessionConfigs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e, err := NewEngine(ctx, Config{Tools: demo.Tools(), Session: cfg(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			sessions := sess.NewMemoryStore(sess.MemoryConfig{})
			h := adaptertest.Harness(t, &Adapter{Engine: e}, &adapter.Agent{ID: "x", Backend: Name, Tools: demo.Tools()}, sessions)
			for i, msg := range []string{"a\x00b", "look up order 7\x00", "and again"} {
				if out, err := h.Send(ctx, "acme/s", llm.UserText(msg)); !isCompleted(out) {
					t.Fatalf("turn %d (%q): %#v, %v", i+1, msg, out, err)
				}
			}
			earlier, err := json.Marshal([]llm.Message{llm.UserText("x\x00y"), llm.AssistantText("z\x00")})
			if err != nil {
				t.Fatal(err)
			}
			zero := int64(0)
			if _, err := sessions.Save(ctx, sess.SaveRequest{SessionID: "acme/seeded", ExpectedVersion: &zero,
				State: map[string]json.RawMessage{chat.MessagesField: earlier}}); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if out, err := h.Send(ctx, "acme/seeded", llm.UserText("hello")); !isCompleted(out) {
					t.Fatalf("seeded session, turn %d: %#v, %v", i+1, out, err)
				}
			}
		})
	}
}

// TestScrub: every string an event holds loses its U+0000, wherever it
// is: text, nested call arguments and responses (map keys included),
// state changes, metadata; bytes are left alone.
func TestScrub(t *testing.T) {
	ev := &session.Event{Author: "a\x00", InvocationID: "i"}
	ev.Content = &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{
		{Text: "t\x00"},
		{FunctionCall: &genai.FunctionCall{ID: "c", Name: "f", Args: map[string]any{
			"k\x00": "v\x00", "n": 1.0, "list": []any{"x\x00", map[string]any{"deep": "y\x00"}}, "s": []string{"z\x00"},
		}}},
		{FunctionResponse: &genai.FunctionResponse{ID: "c", Name: "f", Response: map[string]any{"result": "r\x00"}}},
		{InlineData: &genai.Blob{MIMEType: "image/png", Data: []byte{0, 1, 0}}},
	}}
	ev.Actions.StateDelta = map[string]any{"key": "s\x00"}
	ev.CustomMetadata = map[string]any{"m": map[string]string{"a": "b\x00"}}
	scrubEvent(ev)
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `\u0000`) {
		t.Fatalf("U+0000 left in %s", raw)
	}
	if n := strings.Count(string(raw), "\uFFFD"); n != 10 {
		t.Fatalf("%d replacements in %s, want 10", n, raw)
	}
	if got := ev.Content.Parts[3].InlineData.Data; !reflect.DeepEqual(got, []byte{0, 1, 0}) {
		t.Fatalf("the image's bytes became %v", got)
	}
	if ev.Content.Parts[1].FunctionCall.Args["n"] != 1.0 {
		t.Fatalf("a number changed: %v", ev.Content.Parts[1].FunctionCall.Args)
	}
	clean := &session.Event{Author: "a", Actions: session.EventActions{StateDelta: map[string]any{"k": "v"}}}
	scrubEvent(clean)
	if clean.Author != "a" || clean.Actions.StateDelta["k"] != "v" {
		t.Fatalf("a clean event changed: %#v", clean)
	}
}

// FuzzScrub: whatever strings an event carries, none holds U+0000 once
// scrubbed, and a string without one is left as it was.
func FuzzScrub(f *testing.F) {
	f.Add("a\x00b", "k\x00", "clean")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, text, key, value string) {
		ev := &session.Event{Author: value}
		ev.Content = &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: text},
			{FunctionCall: &genai.FunctionCall{Name: "f", Args: map[string]any{key: []any{value, map[string]any{key: text}}}}}}}
		scrubEvent(ev)
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), `\u0000`) {
			t.Fatalf("U+0000 left in %s", raw)
		}
		if !strings.Contains(value, "\x00") && ev.Author != value {
			t.Fatalf("a clean string changed: %q → %q", value, ev.Author)
		}
	})
}
