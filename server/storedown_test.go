package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// downStore is a session store that cannot be reached while down is set.
type downStore struct {
	session.Store
	down *atomic.Bool
}

func (s downStore) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	if s.down.Load() {
		return nil, fmt.Errorf("load: dial tcp 127.0.0.1:5432: %w", session.ErrUnavailable)
	}
	return s.Store.Load(ctx, req)
}

func (s downStore) List(ctx context.Context, req session.ListRequest) (session.ListResponse, error) {
	if s.down.Load() {
		return session.ListResponse{}, fmt.Errorf("list: dial tcp 127.0.0.1:5432: %w", session.ErrUnavailable)
	}
	return s.Store.List(ctx, req)
}

// While the session store cannot be reached, reading a session or the
// list is 503 unavailable with Retry-After (transient, as readiness
// says), not a 500 internal_error that reads as a bug and that clients
// and proxies do not retry.
func TestReadsWhileTheStoreIsDown(t *testing.T) {
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	store := servertest.SQLite(t)
	ts := servertest.On(t, store, a, func(c *server.Config) { c.Sessions = downStore{Store: store, down: &down} })
	if resp := call(t, ts, "POST", "/v1/sessions/s1/messages", `{"content":"hi"}`, nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a turn: %d", resp.StatusCode)
	}
	down.Store(true)
	for _, path := range []string{"/v1/sessions/s1", "/v1/sessions"} {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		resp := call(t, ts, "GET", path, "", nil, &e)
		if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != server.CodeUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s while the store is down: %d %q, Retry-After %q", path, resp.StatusCode, e.Error.Code, resp.Header.Get("Retry-After"))
		}
	}
	down.Store(false)
	if resp := call(t, ts, "GET", "/v1/sessions/s1", "", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET once the store is back: %d", resp.StatusCode)
	}
}

// A signal that nothing awaits is 404 and says it resumed nothing (it
// said "resumed": true).
func TestSignalNothingAwaitsResumedNothing(t *testing.T) {
	ts := newOpenAIServer(t)
	if resp := call(t, ts, "POST", "/v1/sessions/s1/messages", `{"content":"hi"}`, nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a turn: %d", resp.StatusCode)
	}
	var out map[string]any
	resp := call(t, ts, "POST", "/v1/sessions/s1/signals", `{"signal_id":"approval:nope","payload":{"approval":{"approved":true}}}`, nil, &out)
	if resp.StatusCode != http.StatusNotFound || out["resumed"] != nil || out["outcome"] != "errored" {
		t.Fatalf("%d %v", resp.StatusCode, out)
	}
}

// A resumed run names the run that suspended (parentRequestId) however
// many runs of the session came after it: other agents' turns and
// cancelled ones do not supersede a suspension (it was looked for among
// the session's 50 newest runs only).
func TestResumedRunParentPastManyRuns(t *testing.T) {
	ctx := context.Background()
	g := newGated(t)
	g.release()
	resp, err := g.srv.Submit(ctx, adapter.SubmitRequest{SessionID: "p", Message: llm.UserText("refund order 12")})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := resp.Outcome.(*chat.Suspended)
	if !ok {
		t.Fatalf("refund: %+v", resp)
	}
	if err := g.rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	runs := g.store.Runs()
	for i := range 120 {
		id := fmt.Sprintf("other-%03d", i)
		if err := runs.StartRun(ctx, runtime.Run{ID: id, Tenant: server.DefaultTenant, SessionID: "p", AgentID: "y"}); err != nil {
			t.Fatal(err)
		}
		if err := runs.Finish(ctx, runtime.FinishRequest{Tenant: server.DefaultTenant, RunID: id, Status: runtime.StatusCancelled}); err != nil {
			t.Fatal(err)
		}
	}
	resumed, err := g.srv.Submit(ctx, adapter.SubmitRequest{SessionID: "p", Signal: &adapter.Signal{SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if run, _ := runs.Run(ctx, server.DefaultTenant, resumed.RunID); run == nil || run.ParentID != resp.RunID {
		t.Fatalf("resumed run %+v, want parent %s", run, resp.RunID)
	}
}

// A turn that waited behind another of its session and was cancelled
// before it held the session records no agent.handoff: its agent never
// took over (it recorded one as it began waiting).
func TestQueuedTurnCancelledRecordsNoHandoff(t *testing.T) {
	ctx := context.Background()
	a, m, release := newSlow(t)
	srv, rec := serveOn(t, servertest.SQLite(t), a, "x")
	t.Cleanup(release) // before the server's shutdown waits for the turn
	var wg sync.WaitGroup
	var first, second *adapter.Response
	wg.Go(func() {
		first, _ = srv.Submit(ctx, adapter.SubmitRequest{SessionID: "q", Message: llm.UserText("one")})
	})
	for m.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() {
		second, _ = srv.Submit(ctx, adapter.SubmitRequest{SessionID: "q", Message: llm.UserText("two")})
	})
	var queued string
	for queued == "" {
		time.Sleep(5 * time.Millisecond)
		_ = rec.Flush(ctx)
		list, _ := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "q"})
		if len(list.Runs) == 2 {
			queued = list.Runs[0].ID // the newest
		}
	}
	if ok, err := srv.Cancel(ctx, server.DefaultTenant, queued); !ok || err != nil {
		t.Fatalf("cancel: %v, %v", ok, err)
	}
	release()
	wg.Wait()
	if second != nil && second.RunID != queued && second.RunID != "" {
		t.Fatalf("the queued turn's run %q, cancelled %q", second.RunID, queued)
	}
	_ = rec.Flush(ctx)
	for _, run := range []string{first.RunID, queued} {
		evs, err := srv.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: run})
		if err != nil {
			t.Fatal(err)
		}
		handoffs := 0
		for _, e := range evs {
			if e.Type == runtime.EventAdapterEvent && strings.Contains(string(e.Data), `"agent.handoff"`) {
				handoffs++
			}
		}
		if want := map[bool]int{true: 1, false: 0}[run == first.RunID]; handoffs != want {
			t.Errorf("run %s: %d handoffs, want %d", run, handoffs, want)
		}
	}
}
