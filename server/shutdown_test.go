package server_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/server"
)

// While a server drains, /readyz answers 503 and its listener still
// serves (load balancers see it leave); a turn the shutdown cancels
// past its grace reaches its client as invocation_cancelled, retryable,
// not node_exception.
func TestShutdownDrainsThenCancels(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 4)
	base, stop, served := serveGated(t, gate, started, 800*time.Millisecond, func(c *server.Config) { c.DrainDelay = 300 * time.Millisecond })

	type answer struct {
		code int
		body map[string]any
	}
	answers := make(chan answer, 1)
	go func() {
		resp, err := http.Post(base+"/v1/sessions/s1/messages", "application/json", strings.NewReader(`{"content":"hi"}`))
		if err != nil {
			answers <- answer{code: -1}
			return
		}
		defer resp.Body.Close()
		var a answer
		a.code = resp.StatusCode
		_ = json.NewDecoder(resp.Body).Decode(&a.body)
		answers <- a
	}()
	<-started
	stop()
	time.Sleep(100 * time.Millisecond)
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatalf("/readyz while draining: %v (the listener closed at once)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while draining: %d, want 503", resp.StatusCode)
	}
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz while draining: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	a := <-answers
	errBody, _ := a.body["error"].(map[string]any)
	if a.code != 200 || a.body["outcome"] != "errored" || errBody["category"] != "invocation_cancelled" || errBody["retryable"] != true {
		t.Fatalf("the turn the shutdown cancelled answered %d %v, want an errored outcome invocation_cancelled, retryable", a.code, a.body)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// Past the drain delay a shutting-down server refuses new turns at once
// (503, Retry-After) while the turn in flight finishes within the grace:
// before, it kept taking new turns for as long as one was in flight, so
// under steady load every shutdown ran into its grace deadline and
// cancelled turns that another replica could have run. Within the delay
// it still takes them (a load balancer may still send some).
func TestShutdownRefusesNewTurnsAfterTheDelay(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 4)
	base, stop, served := serveGated(t, gate, started, 10*time.Second, func(c *server.Config) { c.DrainDelay = 300 * time.Millisecond })
	send := func(session string) (int, http.Header, map[string]any) {
		resp, err := http.Post(base+"/v1/sessions/"+session+"/messages", "application/json", strings.NewReader(`{"content":"hi"}`))
		if err != nil {
			return -1, nil, nil
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, resp.Header, body
	}
	type answer struct {
		code int
		body map[string]any
	}
	answers := make(chan answer, 2)
	go func() { code, _, body := send("s1"); answers <- answer{code, body} }()
	<-started
	stop()
	time.Sleep(100 * time.Millisecond)
	go func() { code, _, body := send("s2"); answers <- answer{code, body} }() // within the delay: taken
	<-started
	time.Sleep(400 * time.Millisecond)
	code, h, body := send("s3")
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("a new turn past the drain delay: %d %v %v, want 503 with Retry-After", code, h, body)
	}
	close(gate)
	for range 2 {
		if a := <-answers; a.code != 200 || a.body["outcome"] != "completed" {
			t.Fatalf("a turn taken before the refusals: %d %v, want completed", a.code, a.body)
		}
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return once the turns in flight ended")
	}
}

// Cancelling a suspended run closes it: the cancel answers true, a
// child run records it as cancelled, the approval's signal then answers
// 404, and the session's next message completes. Before, the cancel
// answered {"cancelled": false} and the approval stayed open.
func TestCancelSuspendedRun(t *testing.T) {
	ts := newDemoServer(t)
	var out struct {
		Outcome string `json:"outcome"`
		Signal  struct {
			SignalID string `json:"signal_id"`
		} `json:"signal"`
	}
	post(t, ts.URL+"/v1/sessions/c1/messages", `{"content":"please refund order 7"}`, &out)
	if out.Outcome != "suspended" {
		t.Fatalf("refund: %+v", out)
	}
	var runs struct {
		Runs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Parent string `json:"parentRequestId"`
		} `json:"runs"`
	}
	getJSON(t, ts.URL+"/v1/sessions/c1/runs", &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].Status != "suspended" {
		t.Fatalf("runs: %+v", runs)
	}
	var c struct {
		Cancelled bool `json:"cancelled"`
	}
	if code := post(t, ts.URL+"/v1/runs/"+runs.Runs[0].ID+"/cancel", ``, &c); code != 202 || !c.Cancelled {
		t.Fatalf("cancelling the suspended run: %d %+v, want cancelled", code, c)
	}
	if code := post(t, ts.URL+"/v1/runs/"+runs.Runs[0].ID+"/cancel", ``, &c); code != 202 || c.Cancelled {
		t.Fatalf("cancelling it again: %d %+v, want not cancelled", code, c)
	}
	if code := post(t, ts.URL+"/v1/sessions/c1/signals", `{"signal_id":"`+out.Signal.SignalID+`","payload":{"approval":{"approved":true}}}`, nil); code != 404 {
		t.Fatalf("the cancelled approval's signal: %d, want 404", code)
	}
	getJSON(t, ts.URL+"/v1/sessions/c1/runs", &runs)
	cancelled := false
	for _, r := range runs.Runs {
		if r.Status == "cancelled" && r.Parent != "" {
			cancelled = true
			if cause := cancelCause(t, ts.URL, r.ID); cause != "approval_cancelled" {
				t.Errorf("the child run's cause: %q, want approval_cancelled", cause)
			}
		}
	}
	if !cancelled {
		t.Fatalf("no child run ended cancelled: %+v", runs)
	}
	post(t, ts.URL+"/v1/sessions/c1/messages", `{"content":"where is order 8?"}`, &out)
	if out.Outcome != "completed" {
		t.Fatalf("the next message: %+v", out)
	}
}

// serveGated serves gatedServer's server (mutate applied to its config)
// with Server.Serve on a listener of its own, shutting down with grace:
// its base URL, the function starting the shutdown, and the channel
// Serve's return arrives on.
func serveGated(t *testing.T, gate chan struct{}, started chan<- struct{}, grace time.Duration, mutate func(*server.Config)) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	var srv *server.Server
	gatedServer(t, gate, started, func(c *server.Config) {
		mutate(c)
		var err error
		if srv, err = server.New(*c); err != nil {
			t.Fatal(err)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, grace) }()
	return "http://" + ln.Addr().String(), stop, served
}

// A suspended run a new message superseded ends as a cancelled one
// does: a child run, cancelled, saying why. Before, the suspended run
// read as awaiting approval forever.
func TestSupersededRunEnds(t *testing.T) {
	ts := newDemoServer(t)
	var out struct {
		Outcome    string   `json:"outcome"`
		Superseded []string `json:"superseded"`
	}
	post(t, ts.URL+"/v1/sessions/c1/messages", `{"content":"please refund order 7"}`, &out)
	if out.Outcome != "suspended" {
		t.Fatalf("refund: %+v", out)
	}
	type run struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Parent string `json:"parentRequestId"`
	}
	var runs struct {
		Runs []run `json:"runs"`
	}
	getJSON(t, ts.URL+"/v1/sessions/c1/runs", &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].Status != "suspended" {
		t.Fatalf("runs: %+v", runs)
	}
	suspended := runs.Runs[0].ID
	post(t, ts.URL+"/v1/sessions/c1/messages", `{"content":"where is order 8?"}`, &out)
	if out.Outcome != "completed" || len(out.Superseded) != 1 {
		t.Fatalf("the superseding message: %+v", out)
	}
	getJSON(t, ts.URL+"/v1/sessions/c1/runs", &runs)
	var child *run
	for i, r := range runs.Runs {
		if r.Parent == suspended {
			if child != nil {
				t.Fatalf("two runs resolve the suspended run: %+v", runs)
			}
			child = &runs.Runs[i]
		}
	}
	if len(runs.Runs) != 3 || child == nil || child.Status != "cancelled" {
		t.Fatalf("runs after the superseding message: %+v, want the suspended run's cancelled child", runs)
	}
	var evs struct {
		Events []struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"events"`
	}
	getJSON(t, ts.URL+"/v1/runs/"+child.ID+"/events", &evs)
	said := false
	for _, e := range evs.Events {
		said = said || (e.Type == "runtime.request.cancelled" && strings.Contains(string(e.Data), "superseded"))
	}
	if !said {
		t.Fatalf("the child's events do not say it was superseded: %+v", evs)
	}
	if cause := cancelCause(t, ts.URL, child.ID); cause != "superseded" {
		t.Fatalf("the child's cause: %q, want superseded", cause)
	}
	// A retransmission of the superseding message records nothing more.
	post(t, ts.URL+"/v1/sessions/c1/messages", `{"content":"where is order 8?","message_id":"m1"}`, &out)
	post(t, ts.URL+"/v1/sessions/c1/messages", `{"content":"where is order 8?","message_id":"m1"}`, &out)
	getJSON(t, ts.URL+"/v1/sessions/c1/runs", &runs)
	if len(runs.Runs) != 4 {
		t.Fatalf("runs after a retransmission: %+v", runs)
	}
}

// cancelCause returns the cause of run's runtime.request.cancelled, read
// over REST ("" when it has none).
func cancelCause(t *testing.T, base, run string) string {
	t.Helper()
	var evs struct {
		Events []struct {
			Type string `json:"type"`
			Data struct {
				Cause string `json:"cause"`
			} `json:"data"`
		} `json:"events"`
	}
	getJSON(t, base+"/v1/runs/"+run+"/events", &evs)
	for _, e := range evs.Events {
		if e.Type == "runtime.request.cancelled" {
			return e.Data.Cause
		}
	}
	t.Fatalf("run %s has no runtime.request.cancelled: %+v", run, evs)
	return ""
}
