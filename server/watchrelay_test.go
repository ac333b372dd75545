package server_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// memWatches is a server.WatchRelay between servers of one process.
type memWatches struct {
	mu        sync.Mutex
	subs      []func(tenant, sessionID string)
	announced int
}

func (m *memWatches) AnnounceWatch(_ context.Context, refs []runtime.SessionRef) error {
	m.mu.Lock()
	subs := append([]func(string, string){}, m.subs...)
	m.announced += len(refs)
	m.mu.Unlock()
	for _, fn := range subs {
		for _, r := range refs {
			fn(r.Tenant, r.SessionID)
		}
	}
	return nil
}

func (m *memWatches) ListenWatches(ctx context.Context, fn func(tenant, sessionID string)) error {
	m.mu.Lock()
	m.subs = append(m.subs, fn)
	m.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

// TestWatchOnAnotherServerGetsTextAsItStreams: a client watches a
// session on one server while another server, sharing the run store,
// runs its turn (two replicas behind a load balancer). With a
// WatchRelay the running server writes the turn's text as it streams,
// so the watcher's stream (which reads the store) has it before the
// turn ends; without one, the text is written with the turn's end, as
// for a session nobody watches.
func TestWatchOnAnotherServerGetsTextAsItStreams(t *testing.T) {
	for _, relayed := range []bool{true, false} {
		t.Run(map[bool]string{true: "relay", false: "no relay"}[relayed], func(t *testing.T) {
			store := servertest.SQLite(t)
			started := make(chan struct{}, 1)
			gate := make(chan struct{})
			schema, _ := chat.NewSchema()
			g, err := graph.NewBuilder(schema).
				AddNode("talk", func(ctx context.Context, s graph.State) (graph.Update, error) {
					started <- struct{}{}
					tick := time.NewTicker(10 * time.Millisecond)
					defer tick.Stop()
					for {
						chat.EmitText(ctx, "x")
						select {
						case <-gate:
							return chat.Messages.Add(llm.AssistantText("done")), nil
						case <-ctx.Done():
							return nil, ctx.Err()
						case <-tick.C:
						}
					}
				}).
				AddEdge("talk", graph.End).SetEntry("talk").
				Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
			if err != nil {
				t.Fatal(err)
			}
			h, err := chat.New(chat.Config{Graph: g})
			if err != nil {
				t.Fatal(err)
			}
			relay := &memWatches{}
			newServer := func() *server.Server {
				// The recorder's default batching, with a linger long
				// enough that only going live writes the turn's events.
				rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs(), Linger: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = rec.Close(context.Background()) })
				cfg := server.Config{Agents: []*server.Agent{{ID: "talk", Chat: h}}, Sessions: store, Runs: rec}
				if relayed {
					cfg.WatchRelay = relay
				}
				srv, err := server.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				return srv
			}
			a, b := newServer(), newServer()
			ctx, stop := context.WithCancel(context.Background())
			var served sync.WaitGroup
			for _, srv := range []*server.Server{a, b} {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				served.Go(func() { _ = srv.Serve(ctx, ln, time.Second) })
			}
			t.Cleanup(func() { stop(); served.Wait() })
			for relayed && !func() bool { relay.mu.Lock(); defer relay.mu.Unlock(); return len(relay.subs) == 2 }() {
				time.Sleep(time.Millisecond) // both Serves listen
			}

			answered := make(chan *adapter.Response, 1)
			go func() {
				resp, _ := a.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s1", Message: llm.UserText("hi")})
				answered <- resp
			}()
			<-started
			_, unsubscribe := b.Subscribe(context.Background(), server.DefaultTenant, "s1")
			defer unsubscribe()
			streamed := func() string {
				evs, err := b.Events(context.Background(), runtime.EventsRequest{Tenant: server.DefaultTenant, SessionID: "s1"})
				if err != nil {
					t.Fatal(err)
				}
				var text strings.Builder
				for _, e := range evs {
					if strings.Contains(string(e.Data), runtime.PhaseOutputDelta) {
						text.WriteString(string(e.Data))
					}
				}
				return text.String()
			}
			wait := 5 * time.Second
			if !relayed {
				wait = 300 * time.Millisecond
			}
			var text string
			for deadline := time.Now().Add(wait); text == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				text = streamed()
			}
			switch {
			case relayed && !strings.Contains(text, `"text":"x`):
				t.Fatalf("watched on the other server, the turn's text was not written while it streamed: %q", text)
			case !relayed && text != "":
				t.Fatalf("without a relay, the text was written before the turn ended: %q", text)
			}
			close(gate)
			if resp := <-answered; resp == nil {
				t.Fatal("no answer")
			} else if _, ok := resp.Outcome.(*chat.Completed); !ok {
				t.Fatalf("the turn: %#v", resp.Outcome)
			}
			if relayed {
				unsubscribe()
				relay.mu.Lock()
				n := relay.announced
				relay.mu.Unlock()
				if n != 1 {
					t.Errorf("announcements: %d, want 1 (the subscription's)", n)
				}
			}
		})
	}
}
