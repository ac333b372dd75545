package chat_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/llm"
)

// TestEmbedderConcurrentRetransmitsTwoWorkers: the same message (same
// session, same message id) arrives eight times at once, split over two
// workers: exactly one turn runs, every other copy answers its outcome
// replayed, and the history holds the message once.
func TestEmbedderConcurrentRetransmitsTwoWorkers(t *testing.T) {
	run := func(t *testing.T, path string) {
		refunds := &embRefunds{ran: map[string]int{}}
		ws := []*embWorker{embOpen(t, path, refunds.tools()), embOpen(t, path, refunds.tools())}
		ctx := context.Background()
		for round := range 5 {
			sid := fmt.Sprintf("r%d", round)
			// A first turn so that the session exists and caches are warm.
			if _, err := ws[0].h.Send(ctx, sid, llm.UserText("hello")); err != nil {
				t.Fatal(err)
			}
			if _, err := ws[1].h.Send(ctx, sid, llm.UserText("hello again")); err != nil {
				t.Fatal(err)
			}
			text := "where is order 77?"
			outs := make([]chat.Outcome, 8)
			errs := make([]error, 8)
			var wg sync.WaitGroup
			for i := range outs {
				wg.Go(func() { outs[i], errs[i] = ws[i%2].h.Send(ctx, sid, llm.UserText(text), chat.WithMessageID("same")) })
			}
			wg.Wait()
			ran := 0
			for i, o := range outs {
				if errs[i] != nil {
					t.Fatalf("round %d copy %d: %v", round, i, errs[i])
				}
				if !o.Info().Replayed {
					ran++
				}
			}
			n := 0
			for _, m := range history(t, ws[0].store, sid) {
				if m.Text() == text {
					n++
				}
			}
			if ran != 1 || n != 1 {
				t.Fatalf("round %d: %d copies ran a turn, the message is %d times in the history", round, ran, n)
			}
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, filepath.Join(t.TempDir(), "r.db")) })
	t.Run("postgres", func(t *testing.T) {
		_, url := pgtest.Schema(t)
		run(t, "pg:"+url)
	})
}
