package chat_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/store/sqlite"
)

// embSlow is the demo model taking a little time per call.
type embSlow struct{ demo.Model }

func (m embSlow) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	select {
	case <-time.After(time.Duration(rand.IntN(3000)) * time.Microsecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.Model.Complete(ctx, req)
}

func (m embSlow) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return m.Model.Stream(ctx, req)
}

// TestEmbedderCancelAnywhere: sends and approvals under contexts
// cancelled at random moments (seed printed). The outcome must tell the
// truth: a Completed or Suspended send is in the history once, an
// Errored one is not (errored turns store nothing), and a retransmission
// under the same message id then runs or replays it so that it is in
// the history exactly once; no refund runs twice; the history stays
// valid.
func TestEmbedderCancelAnywhere(t *testing.T) {
	seed := embSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "c.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	refunds := &embRefunds{ran: map[string]int{}}
	a, err := agent.New(agent.Config{Provider: embSlow{}, Tools: refunds.tools()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: st}), graph.WithCheckpointStore(st.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.Checkpoints())})
	if err != nil {
		t.Fatal(err)
	}
	var fails, log []string
	for i := range 60 {
		text := fmt.Sprintf("where is order %d?", i)
		if i%3 == 0 {
			text = fmt.Sprintf("please refund order %d", i)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(6000))*time.Microsecond)
		mid := fmt.Sprint("m", i)
		out, err := h.Send(cctx, "s", llm.UserText(text), chat.WithMessageID(mid))
		cancel()
		n := func() int {
			k := 0
			for _, m := range history(t, st, "s") {
				if m.Text() == text {
					k++
				}
			}
			return k
		}
		log = append(log, fmt.Sprintf("send %q -> %T %v", text, out, err))
		_, errored := out.(*chat.Errored)
		if got := n(); errored && got != 0 || !errored && got != 1 {
			fails = append(fails, fmt.Sprintf("send %q: %T (%v), the message is %d times in the history", text, out, err, got))
		}
		// The retransmission, uncancelled.
		out2, err2 := h.Send(ctx, "s", llm.UserText(text), chat.WithMessageID(mid))
		if got := n(); err2 != nil || got != 1 {
			fails = append(fails, fmt.Sprintf("retransmission of %q: %T (%v), the message is %d times in the history", text, out2, err2, got))
		}
		if s, ok := out2.(*chat.Suspended); ok {
			cctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(6000))*time.Microsecond)
			r, err := h.Signal(cctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve(""), RequestID: "a" + mid})
			cancel()
			log = append(log, fmt.Sprintf("approve -> %T %v", r, err))
			r2, err2 := h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve(""), RequestID: "a" + mid})
			log = append(log, fmt.Sprintf("approve again -> %T %v", r2, err2))
			if err2 != nil && !errors.Is(err2, chat.ErrDecisionTookEffect) && errcat.Of(err2) != errcat.HarnessSignalCorrelationFailed {
				fails = append(fails, fmt.Sprintf("approval retransmitted: %v", err2))
			}
		}
	}
	refunds.mu.Lock()
	for o, n := range refunds.ran {
		if n != 1 {
			fails = append(fails, fmt.Sprintf("refund %s ran %d times", o, n))
		}
	}
	refunds.mu.Unlock()
	msgs := history(t, st, "s")
	if err := llm.CheckHistory(nil, msgs); err != nil {
		fails = append(fails, fmt.Sprintf("invalid history: %v", err))
	}
	if len(fails) > 0 {
		t.Fatalf("%s\nlog:\n%s", strings.Join(fails, "\n"), strings.Join(log, "\n"))
	}
}
