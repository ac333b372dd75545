package agent_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestWholeText: a streamed turn streams its model calls and emits the
// text as the model does; with chat.WithWholeText the calls are plain and
// each reply's text comes in one chunk, in the same place (before the
// tool chunks of its reply); a plain Send ignores the option.
func TestWholeText(t *testing.T) {
	for _, tc := range []struct {
		name            string
		whole, streamed bool // the option; SendFunc (else Send)
		wantStreamed    int32
		wantTextChunks  int // -1: several
	}{
		{"streamed", false, true, 2, -1},
		{"whole", true, true, 0, 1},
		{"plain send", true, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &demo.Counting{}
			a, err := agent.New(agent.Config{Provider: m, Tools: demo.Tools()})
			if err != nil {
				t.Fatal(err)
			}
			g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: session.NewMemoryStore(session.MemoryConfig{})}))
			if err != nil {
				t.Fatal(err)
			}
			h, err := chat.New(chat.Config{Graph: g})
			if err != nil {
				t.Fatal(err)
			}
			var opts []chat.SendOption
			if tc.whole {
				opts = append(opts, chat.WithWholeText())
			}
			var (
				texts []string
				kinds []chat.ChunkKind
			)
			var out chat.Outcome
			msg := llm.UserText("where is order 7?") // a tool call, then the answer
			if tc.streamed {
				out, err = h.SendFunc(t.Context(), "s", msg, func(c chat.Chunk) bool {
					kinds = append(kinds, c.Kind)
					if c.Kind == chat.ChunkText {
						texts = append(texts, c.Text)
					}
					return true
				}, opts...)
			} else {
				out, err = h.Send(t.Context(), "s", msg, opts...)
			}
			if err != nil {
				t.Fatal(err)
			}
			c, ok := out.(*chat.Completed)
			if !ok || len(c.Replies) != 3 {
				t.Fatalf("outcome %#v", out)
			}
			if got := m.Streamed.Load(); got != tc.wantStreamed {
				t.Errorf("streamed calls: %d, want %d", got, tc.wantStreamed)
			}
			if got := m.Streamed.Load() + m.Plain.Load(); got != 2 {
				t.Errorf("model calls: %d, want 2", got)
			}
			switch {
			case tc.wantTextChunks < 0 && len(texts) < 2, tc.wantTextChunks >= 0 && len(texts) != tc.wantTextChunks:
				t.Errorf("text chunks %q, want %d", texts, tc.wantTextChunks)
			}
			if tc.streamed {
				if got, want := strings.Join(texts, ""), c.Replies[2].Text(); got != want {
					t.Errorf("the text chunks make %q, want the reply %q", got, want)
				}
				// Apart from the cut of the text, the chunks are the same
				// as when streamed: the tool chunks of the first reply,
				// then the second reply's text before its usage.
				want := []chat.ChunkKind{chat.ChunkUsage, chat.ChunkTool, chat.ChunkText, chat.ChunkUsage}
				if got := slices.Compact(slices.Clone(kinds)); !slices.Equal(got, want) {
					t.Errorf("chunk kinds %v, want %v (runs of a kind merged)", kinds, want)
				}
			}
		})
	}
}
