package server_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// A turn waiting for its session, held by a long turn (or a stalled
// replica), stops waiting when its caller goes away: it fails with
// invocation_cancelled having run nothing, and the session never gets
// its message. Before, it waited for as long as the session was held,
// holding a turn slot, its client long gone.
func TestWaitingTurnStopsWhenItsCallerLeaves(t *testing.T) {
	ctx := context.Background()
	h := holdSession(t, server.Config{})
	srv, rec, store := h.srv, h.rec, h.store

	wctx, leave := context.WithCancel(ctx)
	second := make(chan *adapter.Response, 1)
	go func() {
		resp, err := srv.Submit(wctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("second")})
		if err != nil {
			t.Error(err)
			resp = &adapter.Response{}
		}
		second <- resp
	}()
	// The second turn has begun its run, and waits for the session.
	for {
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		runs, err := store.Runs().ListRuns(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs.Runs) == 2 {
			break
		}
		time.Sleep(time.Millisecond) // polling; the test's deadline bounds it
	}
	leave()
	var resp *adapter.Response
	select {
	case resp = <-second:
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("the turn whose caller left still waits for the session")
	}
	if e, ok := resp.Outcome.(*chat.Errored); !ok || e.Category != errcat.InvocationCancelled {
		t.Fatalf("the turn whose caller left: %#v, want errored %s", resp.Outcome, errcat.InvocationCancelled)
	}
	h.releaseAndWait()
	var texts []string
	for _, msg := range historyOf(t, store, "s") {
		texts = append(texts, msg.Text())
	}
	if got := strings.Join(texts, " | "); got != "slow one | reply to slow one" {
		t.Fatalf("the session: %s", got)
	}
}

// heldSession is a server whose demo agent's first turn on session "s"
// ("slow one") is under way and holds the session until releaseAndWait.
type heldSession struct {
	srv   *server.Server
	rec   *runtime.Recorder
	store *sqlite.Store
	// releaseAndWait lets the first turn end and waits for it
	// (idempotent; the test's cleanup calls it too).
	releaseAndWait func()
}

// holdSession starts a server on cfg (its agents, sessions and runs
// filled in) and the turn that holds session "s".
func holdSession(t *testing.T, cfg server.Config) heldSession {
	t.Helper()
	ctx := context.Background()
	store := servertest.SQLite(t)
	m := &heldModel{entered: make(chan struct{}), release: make(chan struct{})}
	a, err := agent.New(agent.Config{Provider: m})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Agents, cfg.Sessions, cfg.Runs, cfg.DisableWebUI = []*server.Agent{{ID: "demo", Chat: servertest.Harness(t, store, a)}}, store, rec, true
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	go func() {
		defer close(first)
		_, _ = srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("slow one")})
	}()
	var once sync.Once
	release := func() {
		once.Do(func() { close(m.release) })
		<-first
	}
	t.Cleanup(func() {
		release()
		_ = srv.Stop(ctx)
		_ = rec.Close(ctx)
	})
	<-m.entered
	return heldSession{srv: srv, rec: rec, store: store, releaseAndWait: release}
}
