package eino_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cloudwego/eino/adk"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestAttackFileStoreLongIDs: the REST API takes tenant and session ids
// of up to 128 bytes each, and a turn's checkpoint id joins them with
// the run id; an approval in such a session suspends, survives a
// restart on the same directory, resumes, and the session's delete
// removes its checkpoint, with a FileStore (armature serve's default
// under --data) as with the others.
func TestAttackFileStoreLongIDs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, tenant, session string }{
		{"short", "acme", "s"},
		{"80-byte session", "default", strings.Repeat("s", 80)},
		{"100-byte session", "default", strings.Repeat("s", 100)},
		{"128-byte ids", strings.Repeat("t", 128), strings.Repeat("s", 128)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sessions := session.NewMemoryStore(session.MemoryConfig{})
			cps := checkpoint.NewMemoryStore(nil) // the runtime's paused turns, kept across the restart
			newHarness := func() *chat.Harness {
				fs, err := eino.NewFileStore(dir)
				if err != nil {
					t.Fatal(err)
				}
				e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Store: fs})
				if err != nil {
					t.Fatal(err)
				}
				a := &eino.Adapter{Engine: e}
				g, err := adapter.Compile(a, nil, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
					graph.WithSessions(graph.SessionConfig{Store: sessions}), graph.WithCheckpointStore(cps))
				if err != nil {
					t.Fatal(err)
				}
				h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(cps), OnDelete: adapter.OnDelete(a)})
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			key := tc.tenant + "/" + tc.session
			files := func() int {
				t.Helper()
				entries, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				return len(entries)
			}
			h := newHarness()
			for _, approve := range []bool{true, false} {
				out, err := h.Send(ctx, key, llm.UserText("please refund order 7"))
				s, ok := out.(*chat.Suspended)
				if !ok || files() != 1 {
					t.Fatalf("refund: %#v %v, %d checkpoint files", out, err, files())
				}
				if !approve {
					break
				}
				h = newHarness() // a restart
				out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: key, Payload: agent.Approve("")})
				if !isCompleted(out) || !strings.Contains(lastText(t, out), "refunded $30.00") || files() != 0 {
					t.Fatalf("approval after a restart: %#v %v, %d checkpoint files", out, err, files())
				}
			}
			if err := h.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			if n := files(); n != 0 {
				t.Errorf("%d checkpoint files after the session's delete", n)
			}
		})
	}
}

// TestAttackDeleteGroupLongIDs is TestDeleteGroup with ids too long for
// a file name made of their hex: a group's checkpoints go, short and
// long alike, and no other group's.
func TestAttackDeleteGroupLongIDs(t *testing.T) {
	long := strings.Repeat("t", 128)
	run := strings.Repeat("r", 200)
	check := func(t *testing.T, s eino.GroupDeleter) {
		ctx := context.Background()
		ids := []string{long + "/s/R1", long + "/s/R2", long + "/s/x/R3", long + "/ss/R4", "t/s/" + run, "t/s/R5", "t/sx/" + run, long + long, long + "/s"}
		for _, id := range ids {
			if err := s.Set(ctx, id, []byte(id)); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range ids {
			if b, ok, err := s.Get(ctx, id); err != nil || !ok || string(b) != id {
				t.Fatalf("get %q: %q %v %v", id, b, ok, err)
			}
		}
		for _, g := range []string{long + "/s", "t/s", long + long} {
			if err := s.DeleteGroup(ctx, g); err != nil {
				t.Fatal(err)
			}
		}
		var left []string
		for _, id := range ids {
			if _, ok, err := s.Get(ctx, id); err != nil {
				t.Fatal(err)
			} else if ok {
				left = append(left, id)
			}
		}
		if want := []string{long + "/s/x/R3", long + "/ss/R4", "t/sx/" + run, long + long, long + "/s"}; !slices.Equal(left, want) {
			t.Fatalf("left after deleting the groups: %q, want %q", left, want)
		}
		if err := s.(adk.CheckPointDeleter).Delete(ctx, long+long); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.Get(ctx, long+long); ok || err != nil {
			t.Fatalf("a deleted long id: %v %v", ok, err)
		}
	}
	t.Run("memory", func(t *testing.T) { check(t, eino.NewMemoryStore()) })
	t.Run("file", func(t *testing.T) {
		fs, err := eino.NewFileStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		check(t, fs)
	})
	t.Run("postgres", func(t *testing.T) {
		url, table := postgresTable(t)
		s, err := eino.NewPostgresStore(context.Background(), url, table)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		check(t, s)
	})
}
