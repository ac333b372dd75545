package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/internal/syncbuf"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

// A turn whose client stays, waiting for a session another turn holds
// (a long turn, a replica that stalled holding the lock), waits at most
// SessionWait: then it fails with invocation_cancelled (retryable,
// cause chat.ErrSessionBusy), its run is recorded as cancelled saying
// why, and nothing of it reaches the session. Before, it waited for
// as long as the session was held.
func TestTurnWaitsForItsSessionAtMostSessionWait(t *testing.T) {
	ctx := context.Background()
	h := holdSession(t, server.Config{SessionWait: 100 * time.Millisecond})
	srv, rec, store := h.srv, h.rec, h.store

	second := make(chan *adapter.Response, 1)
	go func() {
		resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("second")})
		if err != nil {
			t.Error(err)
			resp = &adapter.Response{}
		}
		second <- resp
	}()
	var resp *adapter.Response
	select {
	case resp = <-second:
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("the waiting turn still waits, long past SessionWait")
	}
	e, ok := resp.Outcome.(*chat.Errored)
	if !ok || e.Category != errcat.InvocationCancelled || e.Bucket != harness.RetryableTransient || !errors.Is(e.Err, chat.ErrSessionBusy) {
		t.Fatalf("the waiting turn: %#v, want errored %s (retryable) caused by chat.ErrSessionBusy", resp.Outcome, errcat.InvocationCancelled)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := store.Runs().Run(ctx, server.DefaultTenant, resp.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != runtime.StatusCancelled {
		t.Fatalf("the waiting turn's run: %+v", run)
	}
	evs, err := store.Runs().Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: resp.RunID})
	if err != nil || len(evs) == 0 || evs[len(evs)-1].Type != runtime.EventRequestCancelled || !strings.Contains(string(evs[len(evs)-1].Data), "held the session") {
		t.Fatalf("the waiting turn's events: %+v, %v", evs, err)
	}
	var end struct{ Cause runtime.CancelCause }
	if err := json.Unmarshal(evs[len(evs)-1].Data, &end); err != nil || end.Cause != runtime.CauseSessionBusy {
		t.Fatalf("the waiting turn's end: %s, want cause %q", evs[len(evs)-1].Data, runtime.CauseSessionBusy)
	}
	h.releaseAndWait()
	var texts []string
	for _, msg := range historyOf(t, store, "s") {
		texts = append(texts, msg.Text())
	}
	if got := strings.Join(texts, " | "); got != "slow one | reply to slow one" {
		t.Fatalf("the session: %s", got)
	}
	// Retried once the session is free, the message goes through.
	resp, err = srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("second")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Outcome.(*chat.Completed); !ok {
		t.Fatalf("the retry: %#v", resp.Outcome)
	}
}

// Copies of one signal (one request id) sent while a stalled holder
// keeps the session each fail within SessionWait, together, not one
// bound after another: a copy's wait for the copy under way counts
// against the bound with its wait for the session. The decision is not
// taken while the session is held, and the same signal goes through
// once it is free.
func TestSignalCopiesWaitAtMostSessionWait(t *testing.T) {
	ctx := context.Background()
	store := servertest.SQLite(t)
	a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: servertest.Harness(t, store, a)}}, Sessions: store, Runs: rec,
		DisableWebUI: true, SessionWait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(ctx); _ = rec.Close(ctx) })
	resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("refund order 7")})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := resp.Outcome.(*chat.Suspended)
	if !ok {
		t.Fatalf("the refund did not ask for approval: %#v", resp.Outcome)
	}
	unlock, err := store.Lock(ctx, server.DefaultTenant+"/s") // a stalled holder
	if err != nil {
		t.Fatal(err)
	}
	approve := adapter.SubmitRequest{SessionID: "s", Signal: &adapter.Signal{SignalID: s.Descriptor.SignalID, Payload: agent.Approve(""), RequestID: "approve-1"}}
	const copies = 20 // one bound after another would take 10 s
	answers := make([]*adapter.Response, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() {
			r, err := srv.Submit(ctx, approve)
			if err != nil {
				t.Error(err)
				r = &adapter.Response{}
			}
			answers[i] = r
		})
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(8 * time.Second): // a hang guard, not a timing assertion
		unlock()
		t.Fatal("the copies still wait, long past SessionWait: they waited one after another")
	}
	for i, r := range answers {
		if e, ok := r.Outcome.(*chat.Errored); !ok || !errors.Is(e.Err, chat.ErrSessionBusy) {
			unlock()
			t.Fatalf("copy %d: %#v, want errored, caused by chat.ErrSessionBusy", i, r.Outcome)
		}
	}
	unlock()
	resp, err = srv.Submit(ctx, approve)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Outcome.(*chat.Completed); !ok {
		t.Fatalf("the decision once the session is free: %#v", resp.Outcome)
	}
}

// A DELETE of a session and a cancel of its suspended run wait for the
// session at most SessionWait while a stalled holder keeps it: then
// each answers 503 invocation_cancelled with Retry-After, having done
// nothing (the session and its approval are still there), and each goes
// through once the session is free. Before, both waited for as long as
// the session was held.
func TestDeleteAndCancelWaitAtMostSessionWait(t *testing.T) {
	ctx := context.Background()
	store := servertest.SQLite(t)
	a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.On(t, store, a, func(c *server.Config) { c.SessionWait = 200 * time.Millisecond; c.DisableWebUI = true })
	cl := &http.Client{Timeout: 30 * time.Second} // a hang guard, not a timing assertion
	do := func(method, path, body string) (int, http.Header, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, resp.Header, v
	}
	code, _, out := do("POST", "/v1/sessions/s/messages", `{"content":"refund order 7"}`)
	if code != http.StatusOK || out["outcome"] != "suspended" {
		t.Fatalf("the refund: %d %v", code, out)
	}
	run, _ := out["run_id"].(string)
	unlock, err := store.Lock(ctx, server.DefaultTenant+"/s") // a stalled holder
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path string }{{"DELETE", "/v1/sessions/s"}, {"POST", "/v1/runs/" + run + "/cancel"}} {
		code, h, out := do(c.method, c.path, "")
		errObj, _ := out["error"].(map[string]any)
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || errObj["code"] != string(errcat.InvocationCancelled) {
			unlock()
			t.Fatalf("%s %s while the session is held: %d Retry-After %q %v", c.method, c.path, code, h.Get("Retry-After"), out)
		}
	}
	unlock()
	if code, _, _ := do("GET", "/v1/sessions/s", ""); code != http.StatusOK {
		t.Fatalf("the session after a refused delete: %d", code)
	}
	if code, _, out := do("POST", "/v1/runs/"+run+"/cancel", ""); code != http.StatusAccepted || out["cancelled"] != true {
		t.Fatalf("the cancel once the session is free: %d %v (the refused cancel took the approval)", code, out)
	}
	if code, _, _ := do("DELETE", "/v1/sessions/s", ""); code != http.StatusNoContent {
		t.Fatalf("the delete once the session is free: %d", code)
	}
	if code, _, _ := do("GET", "/v1/sessions/s", ""); code != http.StatusNotFound {
		t.Fatalf("the session after its delete: %d", code)
	}
}

// A DELETE or a cancel of a suspended run whose client leaves while it
// waits for a held session does nothing, also when it was sent with a
// body, and is not logged as a server failure. Before, a cancel with a
// body took effect once the session was free (net/http noticed the
// client leave only after a body was read, and the handler read none),
// and a DELETE whose client left was logged at ERROR and counted as a
// 500.
func TestDeleteAndCancelWhoseClientLeft(t *testing.T) {
	ctx := context.Background()
	store := servertest.SQLite(t)
	a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	ts := servertest.On(t, store, a, func(c *server.Config) {
		c.SessionWait, c.DisableWebUI = time.Minute, true
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	resp, err := http.Post(ts.URL+"/v1/sessions/s/messages", "application/json", strings.NewReader(`{"content":"refund order 7"}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Outcome string `json:"outcome"`
		RunID   string `json:"run_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if out.Outcome != "suspended" {
		t.Fatalf("the refund: %+v", out)
	}
	unlock, err := store.Lock(ctx, server.DefaultTenant+"/s") // a stalled holder
	if err != nil {
		t.Fatal(err)
	}
	impatient := &http.Client{Timeout: 300 * time.Millisecond}
	for _, c := range []struct{ method, path string }{{"DELETE", "/v1/sessions/s"}, {"POST", "/v1/runs/" + out.RunID + "/cancel"}} {
		req, err := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if resp, err := impatient.Do(req); err == nil {
			resp.Body.Close()
			unlock()
			t.Fatalf("%s %s answered %d while the session was held", c.method, c.path, resp.StatusCode)
		}
	}
	time.Sleep(200 * time.Millisecond) // the server notices the clients left
	unlock()
	time.Sleep(200 * time.Millisecond) // a request that still waited would take the session now
	var sess struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if code := getJSON(t, ts.URL+"/v1/sessions/s", &sess); code != http.StatusOK || len(sess.Messages) == 0 {
		t.Fatalf("the session after the deleting client left: %d", code)
	}
	var run struct {
		Status string `json:"status"`
	}
	getJSON(t, ts.URL+"/v1/runs/"+out.RunID, &run)
	var kids struct {
		Runs []struct {
			Status string `json:"status"`
		} `json:"runs"`
	}
	getJSON(t, ts.URL+"/v1/sessions/s/runs", &kids)
	if run.Status != "suspended" || len(kids.Runs) != 1 {
		t.Fatalf("the suspended run after the cancelling client left: %q, the session's runs %+v", run.Status, kids.Runs)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("a client leaving was logged as an error:\n%s", logs.String())
	}
	if code := post(t, ts.URL+"/v1/sessions/s/signals", `{"signal_id":"approval:call_1","payload":{"approval":{"approved":true}}}`, nil); code != http.StatusOK {
		t.Fatalf("the approval afterwards: %d", code)
	}
}

// A request whose client is gone (its context cancelled: closed, or
// half-closed while it still reads) while it waits for a held session
// is answered 499 with an error body, never an implicit 200, and does
// nothing. Before the 499 change it was a 500; with its first version,
// an empty 200, which a half-closed client still reading took for
// success.
func TestRequestWhoseClientIsGoneIs499(t *testing.T) {
	ctx := context.Background()
	store := servertest.SQLite(t)
	a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: servertest.Harness(t, store, a)}}, Sessions: store,
		DisableWebUI: true, SessionWait: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(ctx) })
	resp, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("refund order 7")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Outcome.(*chat.Suspended); !ok {
		t.Fatalf("the refund: %#v", resp.Outcome)
	}
	unlock, err := store.Lock(ctx, server.DefaultTenant+"/s") // a stalled holder
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	for _, c := range []struct{ method, path string }{{"DELETE", "/v1/sessions/s"}, {"POST", "/v1/runs/" + resp.RunID + "/cancel"}} {
		rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond) // the client leaves while it waits
		req := httptest.NewRequestWithContext(rctx, c.method, "http://localhost"+c.path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		cancel()
		if w.Code != 499 || !strings.Contains(w.Body.String(), string(errcat.InvocationCancelled)) {
			t.Fatalf("%s %s whose client left: %d %s, want 499 with an error body", c.method, c.path, w.Code, w.Body)
		}
	}
}
