package chat_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/store/postgres"
)

// TestEmbedderFeedExactlyOnce: three replicas on one PostgreSQL schema,
// each with its ResumeFeed and Follow running and a listener on the
// session; turns suspend on one replica and are approved on another,
// several times. Every listener must get every resumed turn exactly
// once.
func TestEmbedderFeedExactlyOnce(t *testing.T) {
	_, url := pgtest.Schema(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type replica struct {
		h   *chat.Harness
		mu  sync.Mutex
		got map[string]int
	}
	var rs []*replica
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 3 {
		p, err := postgres.Open(ctx, postgres.Config{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: p}), graph.WithCheckpointStore(p.Checkpoints()))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(p.Checkpoints()),
			Locker: p.SessionLocker(postgres.LockerConfig{}), Feed: p.ResumeFeed()})
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{h: h, got: map[string]int{}}
		h.Subscribe("s", func(o chat.Outcome) {
			if c, ok := o.(*chat.Completed); ok {
				r.mu.Lock()
				r.got[c.Replies[len(c.Replies)-1].Text()]++
				r.mu.Unlock()
			}
		})
		wg.Go(func() { _ = h.Follow(ctx) })
		rs = append(rs, r)
	}
	time.Sleep(300 * time.Millisecond) // Listen connects
	const rounds = 6
	var want []string
	for i := range rounds {
		out, err := rs[i%3].h.Send(ctx, "s", llm.UserText(fmt.Sprintf("please refund order %d", 100+i)))
		s, ok := out.(*chat.Suspended)
		if !ok {
			t.Fatalf("send %d: %T %v", i, out, err)
		}
		res, err := rs[(i+1)%3].h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")})
		c, ok := res.(*chat.Completed)
		if !ok {
			t.Fatalf("signal %d: %T %v", i, res, err)
		}
		want = append(want, c.Replies[len(c.Replies)-1].Text())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		bad := ""
		for ri, r := range rs {
			r.mu.Lock()
			for _, w := range want {
				if r.got[w] != 1 {
					bad += fmt.Sprintf("replica %d got %q %d times\n", ri, w, r.got[w])
				}
			}
			r.mu.Unlock()
		}
		if bad == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEmbedderPanickingListenerKeepsTheFeed: replica A's listener of the
// session panics (A's server recovers it, as net/http does). The
// resumed turn committed: replica B's listener must still get it
// through the Feed.
func TestEmbedderPanickingListenerKeepsTheFeed(t *testing.T) {
	_, url := pgtest.Schema(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var hs []*chat.Harness
	for range 2 {
		p, err := postgres.Open(ctx, postgres.Config{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: p}), graph.WithCheckpointStore(p.Checkpoints()))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(p.Checkpoints()),
			Locker: p.SessionLocker(postgres.LockerConfig{}), Feed: p.ResumeFeed()})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = h.Follow(ctx) })
		hs = append(hs, h)
	}
	hs[0].Subscribe("s", func(chat.Outcome) { panic("listener failed") })
	got := make(chan chat.Outcome, 4)
	hs[1].Subscribe("s", func(o chat.Outcome) { got <- o })
	time.Sleep(300 * time.Millisecond) // Listen connects
	out, err := hs[0].Send(ctx, "s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("send: %T %v", out, err)
	}
	panicked := func() (p bool) {
		defer func() { p = recover() != nil }()
		_, _ = hs[0].Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s", Payload: agent.Approve("")})
		return false
	}()
	select {
	case o := <-got:
		t.Logf("replica B got %T (A's listener panicked: %v)", o, panicked)
	case <-time.After(3 * time.Second):
		t.Fatalf("A's listener panicked (%v) and replica B's listener never got the resumed turn, which committed: %q", panicked, texts(history(t, hsStore(t, url), "s")))
	}
}

func hsStore(t *testing.T, url string) *postgres.Store {
	p, err := postgres.Open(context.Background(), postgres.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
