package server_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// TestStopClosesSubscriptions: an embedded program ranges over a
// RuntimeEventSource subscription and stops the runtime with
// RuntimeLifecycle.Stop. As the interface says, the channel delivers
// events "until cancel is called or the channel closes (the subscriber
// fell behind or the runtime stops)": Stop closes it, and a Subscribe
// made after Stop is a closed channel; cancelling either afterwards is
// harmless. Before, the channel stayed open for good after Stop
// returned (a `for e := range events` loop never ended), and a
// Subscribe made after Stop returned an open channel that would never
// deliver.
func TestStopClosesSubscriptions(t *testing.T) {
	ctx := context.Background()
	var rt adapter.Runtime = newRuntime(t)
	events, cancel := rt.Subscribe(ctx, server.DefaultTenant, "st1")
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-events:
		if ok {
			t.Error("an event after Stop")
		}
	case <-time.After(2 * time.Second):
		t.Error("the subscription's channel is still open 2s after Stop returned")
	}
	late, lcancel := rt.Subscribe(ctx, server.DefaultTenant, "st2")
	defer lcancel()
	select {
	case _, ok := <-late:
		if ok {
			t.Error("an event on a subscription made after Stop")
		}
	case <-time.After(time.Second):
		t.Error("a subscription made after Stop is an open channel that will never deliver")
	}
	cancel() // after Stop closed it: no double close
	lcancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStopDeliversLastEventsBeforeClosing: Stop waits for the direct
// tool call in flight, and the subscription of its session receives the
// call's last events (its run's end) before Stop closes the channel.
func TestStopDeliversLastEventsBeforeClosing(t *testing.T) {
	started := make(chan struct{})
	slow := agent.MustTool("pack_order", "Pack an order", func(ctx context.Context, a struct{}) (string, error) {
		close(started)
		time.Sleep(300 * time.Millisecond)
		return "packed", nil
	})
	srv := newRuntime(t, func(c *server.Config) {
		c.DirectTools = map[string][]string{server.DefaultTenant: {"*"}}
		c.Agents[0].Gateway = append(demo.Tools(), slow)
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx := context.Background()
	events, cancel := srv.Subscribe(ctx, "", "st3")
	defer cancel()
	go func() {
		r, err := http.Post(ts.URL+"/v1/agents/demo/tools/pack_order", "application/json", strings.NewReader(`{"session_id":"st3"}`))
		if err == nil {
			r.Body.Close()
		}
	}()
	<-started
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var types []string
	timeout := time.After(5 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if ok {
				types = append(types, e.Type)
				continue
			}
		case <-timeout:
			t.Fatalf("the subscription is still open 5s after Stop; events so far %v", types)
		}
		break
	}
	if len(types) == 0 || types[len(types)-1] != runtime.EventRequestCompleted {
		t.Errorf("events before the subscription closed: %v, want them to end with %s", types, runtime.EventRequestCompleted)
	}
}

// TestServeShutdownClosesSubscriptions: a server run by Serve closes the
// channels Subscribe gave out when Serve's context ends, as Stop does.
func TestServeShutdownClosesSubscriptions(t *testing.T) {
	srv := newRuntime(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, time.Second) }()
	events, cancel := srv.Subscribe(context.Background(), "", "serve-1")
	defer cancel()
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-events:
		if ok {
			t.Error("an event after the shutdown")
		}
	case <-time.After(2 * time.Second):
		t.Error("the subscription's channel is still open after Serve returned")
	}
}
