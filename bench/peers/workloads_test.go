package peers_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/bench/peers"
	"github.com/cloudwego/eino/schema"
	"github.com/google/go-cmp/cmp"
)

// TestADK checks that one op of each workload does the work the workload
// defines: W1/W2 store the user's message and one reply, W3 four events.
func TestADK(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		tool      bool
		history   int
		wantOut   int // events the turn yields
		wantAfter int // events stored after the turn
	}{
		{name: "W1", history: 10, wantOut: 1, wantAfter: 12},
		{name: "W2", wantOut: 1, wantAfter: 2},
		{name: "W3", tool: true, wantOut: 3, wantAfter: 4},
	}
	for _, store := range []string{"memory", "sqlite"} {
		for _, tt := range tests {
			t.Run(tt.name+"/"+store, func(t *testing.T) {
				cfg := peers.ADKConfig{Tool: tt.tool}
				if store == "sqlite" {
					cfg.Path = filepath.Join(t.TempDir(), "adk.db")
				}
				a := newADK(t, cfg)
				if tt.history > 0 {
					seed(t, a, "s", tt.history)
				}
				out, err := a.Send(ctx, "s")
				if err != nil {
					t.Fatal(err)
				}
				after, err := a.Len(ctx, "s")
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([2]int{tt.wantOut, tt.wantAfter}, [2]int{out, after}); diff != "" {
					t.Errorf("(yielded, stored) mismatch (-want +got):\n%s", diff)
				}
				if cfg.Path != "" {
					if _, err := os.Stat(cfg.Path + "-wal"); err != nil {
						t.Errorf("the SQLite file is not in WAL mode: %v", err)
					}
				}
			})
		}
	}
}

// TestSeededSQLite checks the W1 SQLite template copies.
func TestSeededSQLite(t *testing.T) {
	a := seededSQLite(t, 10, false)
	n, err := a.Len(context.Background(), templateSession)
	if err != nil || n != 10 {
		t.Fatalf("Len = %d, %v; want 10", n, err)
	}
}

type msg struct{ Role, Content, Call string }

func summarize(msgs []*schema.Message) []msg {
	var out []msg
	for _, m := range msgs {
		s := msg{Role: string(m.Role), Content: m.Content}
		for _, c := range m.ToolCalls {
			s.Call = c.Function.Name
		}
		out = append(out, s)
	}
	return out
}

// TestEino checks the messages each Eino op produces.
func TestEino(t *testing.T) {
	ctx := context.Background()
	user := []*schema.Message{schema.UserMessage(peers.UserText)}
	reply := msg{Role: "assistant", Content: peers.Reply}
	tests := []struct {
		name string
		run  func(t *testing.T) ([]*schema.Message, error)
		want []msg
	}{
		{name: "W2/runner", want: []msg{reply}, run: func(t *testing.T) ([]*schema.Message, error) {
			out, _, err := newEinoRunner(t, peers.EinoNoTool).Send(ctx, user)
			return out, err
		}},
		{name: "W3/runner", want: []msg{
			{Role: "assistant", Call: peers.ToolName},
			{Role: "tool", Content: `{"forecast":"` + peers.ToolResult + `"}`},
			reply,
		}, run: func(t *testing.T) ([]*schema.Message, error) {
			out, _, err := newEinoRunner(t, peers.EinoWeatherTool).Send(ctx, user)
			return out, err
		}},
		{name: "W4/runner", want: []msg{
			{Role: "assistant", Call: peers.ApprovalToolName},
			{Role: "tool", Content: "email sent"},
			reply,
		}, run: func(t *testing.T) ([]*schema.Message, error) {
			return newEinoRunner(t, peers.EinoApprovalTool).Cycle(ctx, "c")
		}},
		{name: "W3/graph", want: []msg{reply}, run: func(t *testing.T) ([]*schema.Message, error) {
			m, err := newEinoGraph(t, true).Generate(ctx, user)
			return []*schema.Message{m}, err
		}},
		{name: "W4/graph", want: []msg{reply}, run: func(t *testing.T) ([]*schema.Message, error) {
			g, err := peers.NewEinoApproval(ctx)
			if err != nil {
				return nil, err
			}
			m, err := g.Cycle(ctx, "c")
			return []*schema.Message{m}, err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.run(t)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("messages mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
