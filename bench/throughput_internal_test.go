package bench

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/session"
)

// TestW5Block checks the W5 block's shape: the turns are spread evenly
// over at most W5Sessions sessions, each session gets exactly its share
// (two messages a turn), and nothing fails.
func TestW5Block(t *testing.T) {
	for _, tc := range []struct {
		name    string
		turns   int
		drivers int
		want    map[int]int // turns -> sessions that got that many
	}{
		{"fewer turns than sessions", 20, 4, map[int]int{1: 20}},
		{"uneven", 250, 4, map[int]int{3: 50, 2: 50}},
		{"one block", W5Sessions * W5Turns, 4, map[int]int{W5Turns: W5Sessions}},
		{"one driver", 150, 1, map[int]int{2: 50, 1: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			be := MemoryBackend()
			h, err := be.harness(ReplyGraph)
			if err != nil {
				t.Fatal(err)
			}
			var failed atomic.Bool
			if err := w5Block(ctx, h, "t-", tc.turns, tc.drivers, &failed); err != nil || failed.Load() {
				t.Fatalf("w5Block: %v (failed %v)", err, failed.Load())
			}
			got := map[int]int{}
			for i := range W5Sessions {
				r, err := be.Sessions.Load(ctx, session.LoadRequest{SessionID: "t-" + itoa(i)})
				if err != nil {
					continue // not used in this block
				}
				var msgs []json.RawMessage
				if err := json.Unmarshal(r.State[chat.MessagesField], &msgs); err != nil {
					t.Fatal(err)
				}
				got[len(msgs)/2]++
			}
			for turns, n := range tc.want {
				if got[turns] != n {
					t.Errorf("sessions with %d turns: %d, want %d (all: %v)", turns, got[turns], n, got)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("turn counts %v, want %v", got, tc.want)
			}
		})
	}
}
