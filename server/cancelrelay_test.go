package server_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// memRelay is a server.CancelRelay between servers of one process.
type memRelay struct {
	mu   sync.Mutex
	subs []func(tenant, runID string)
}

func (m *memRelay) RequestCancel(_ context.Context, tenant, runID string) error {
	m.mu.Lock()
	subs := append([]func(string, string){}, m.subs...)
	m.mu.Unlock()
	for _, fn := range subs {
		fn(tenant, runID)
	}
	return nil
}

func (m *memRelay) listening() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.subs) > 0
}

func (m *memRelay) ListenCancels(ctx context.Context, fn func(tenant, runID string)) error {
	m.mu.Lock()
	m.subs = append(m.subs, fn)
	m.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

// TestCancelAcrossServers: a live run is cancelled through a server
// other than the one running its turn (two replicas behind a load
// balancer): with a CancelRelay the request reaches the running server,
// whose turn ends cancelled; without one, cancel reports false, as
// before, and the turn runs on.
func TestCancelAcrossServers(t *testing.T) {
	for _, relayed := range []bool{true, false} {
		t.Run(map[bool]string{true: "relay", false: "no relay"}[relayed], func(t *testing.T) {
			store := servertest.SQLite(t)
			started := make(chan struct{}, 1)
			release := make(chan struct{})
			h := gatedChat(t, store, release, started)
			relay := &memRelay{}
			newServer := func() *server.Server {
				rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
				if err != nil {
					t.Fatal(err)
				}
				cfg := server.Config{Agents: []*server.Agent{{ID: "gated", Chat: h}}, Sessions: store, Runs: rec}
				if relayed {
					cfg.CancelRelay = relay
				}
				srv, err := server.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				return srv
			}
			a, b := newServer(), newServer()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- a.Serve(ctx, ln, time.Second) }()
			t.Cleanup(func() { stop(); <-served })

			answered := make(chan *adapter.Response, 1)
			go func() {
				resp, _ := a.Submit(context.Background(), adapter.SubmitRequest{SessionID: "s1", Message: llm.UserText("hi")})
				answered <- resp
			}()
			<-started
			var runs runtime.ListRunsResponse
			for deadline := time.Now().Add(5 * time.Second); len(runs.Runs) == 0; {
				// The run record is written behind the turn (the recorder
				// batches): wait until b, sharing the store, sees it.
				if runs, err = b.Runs(context.Background(), runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "s1"}); err != nil || time.Now().After(deadline) {
					t.Fatalf("runs: %+v, %v", runs, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			for relayed && !relay.listening() {
				time.Sleep(time.Millisecond) // a's Serve is listening once it subscribed
			}
			cancelled, err := b.Cancel(context.Background(), server.DefaultTenant, runs.Runs[0].ID)
			if err != nil || cancelled != relayed {
				t.Fatalf("cancel through the other server: %v, %v", cancelled, err)
			}
			if !relayed {
				close(release)
			}
			resp := <-answered
			e, isErr := resp.Outcome.(*chat.Errored)
			switch {
			case relayed && (!isErr || !errors.Is(e.Err, errcat.InvocationCancelled) && e.Category != errcat.InvocationCancelled):
				t.Fatalf("the cancelled turn: %#v", resp.Outcome)
			case !relayed && isErr:
				t.Fatalf("without a relay the turn should run on: %#v", resp.Outcome)
			}
		})
	}
}
