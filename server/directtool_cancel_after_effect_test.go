package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
)

type shipArgs struct {
	Order string `json:"order"`
}

// TestDirectToolFinishedBeforeCancelIsCompleted: an operator calls a
// direct tool (one that finishes its work whatever its context says, as
// a payment or an HTTP POST already sent does) and cancels the run
// while it runs.
//
// The call's ending follows what the tool did: the tool returned its
// output, so the run is recorded completed with that output (the cancel
// came too late to stop it) and the answer has the output and no error.
// Before, the run was recorded cancelled (runtime.request.cancelled
// right after a successful runtime.tool.direct.completed) and the
// answer said both the output and "the call was cancelled": the record
// said the call did not complete when it did.
func TestDirectToolFinishedBeforeCancelIsCompleted(t *testing.T) {
	var effects atomic.Int64
	slow := agent.MustTool("ship_order", "Ship an order", func(ctx context.Context, a shipArgs) (string, error) {
		time.Sleep(600 * time.Millisecond) // the shipment is on its way; the context is not consulted
		effects.Add(1)
		return "order " + a.Order + " shipped", nil
	})
	srv := newRuntime(t, func(c *server.Config) {
		c.DirectTools = map[string][]string{server.DefaultTenant: {"*"}}
		c.Agents[0].Gateway = append(demo.Tools(), slow)
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	type answer struct {
		code int
		body []byte
	}
	done := make(chan answer, 1)
	go func() {
		r, err := http.Post(ts.URL+"/v1/agents/demo/tools/ship_order", "application/json",
			strings.NewReader(`{"arguments":{"order":"7"},"session_id":"dc1"}`))
		if err != nil {
			done <- answer{}
			return
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		done <- answer{r.StatusCode, b}
	}()
	ctx := context.Background()
	var runID string
	for deadline := time.Now().Add(5 * time.Second); runID == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		l, _ := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "dc1"})
		if len(l.Runs) > 0 {
			runID = l.Runs[0].ID
		}
	}
	if runID == "" {
		t.Fatal("no run")
	}
	r, err := http.Post(ts.URL+"/v1/runs/"+runID+"/cancel", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := io.ReadAll(r.Body)
	r.Body.Close()
	a := <-done
	run, _ := srv.Run(ctx, server.DefaultTenant, runID)
	evs, _ := srv.Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, RunID: runID})
	var types []string
	for _, e := range evs {
		types = append(types, e.Type+" "+string(e.Data))
	}
	t.Logf("cancel: %d %s\ndirect answer: %d %s\nrun status %s\nevents:\n  %s", r.StatusCode, cb, a.code, a.body, run.Status, strings.Join(types, "\n  "))
	var resp struct{ Output, Error string }
	_ = json.Unmarshal(a.body, &resp)
	if effects.Load() != 1 || resp.Output != "order 7 shipped" {
		t.Fatalf("the tool did not complete: %d effects, output %q", effects.Load(), resp.Output)
	}
	if run.Status != runtime.StatusCompleted || resp.Error != "" {
		t.Errorf("the tool completed (effect done, output %q) but the run is recorded %q and the answer says %q", resp.Output, run.Status, resp.Error)
	}
}

// TestDirectToolStoppedByCancelIsCancelled: a direct tool that honours
// its context gives up when the run is cancelled; the cancel stopped
// it, so its run is recorded cancelled and the answer has the tool's
// error.
func TestDirectToolStoppedByCancelIsCancelled(t *testing.T) {
	started := make(chan struct{})
	wait := agent.MustTool("wait_order", "Wait for an order", func(ctx context.Context, a shipArgs) (string, error) {
		close(started)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(10 * time.Second):
			return "order " + a.Order + " arrived", nil
		}
	})
	srv := newRuntime(t, func(c *server.Config) {
		c.DirectTools = map[string][]string{server.DefaultTenant: {"*"}}
		c.Agents[0].Gateway = append(demo.Tools(), wait)
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	done := make(chan []byte, 1)
	go func() {
		r, err := http.Post(ts.URL+"/v1/agents/demo/tools/wait_order", "application/json",
			strings.NewReader(`{"arguments":{"order":"8"},"session_id":"dc2"}`))
		if err != nil {
			done <- nil
			return
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		done <- b
	}()
	<-started
	ctx := context.Background()
	l, err := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "dc2"})
	if err != nil || len(l.Runs) == 0 {
		t.Fatalf("no run: %v", err)
	}
	runID := l.Runs[0].ID
	if ok, err := srv.Cancel(ctx, server.DefaultTenant, runID); !ok || err != nil {
		t.Fatalf("Cancel = %v, %v", ok, err)
	}
	var resp struct{ Output, Error string }
	if err := json.Unmarshal(<-done, &resp); err != nil {
		t.Fatal(err)
	}
	run, err := srv.Run(ctx, server.DefaultTenant, runID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != runtime.StatusCancelled || resp.Output != "" || resp.Error == "" {
		t.Errorf("a call the cancel stopped: run %q, answer output %q error %q", run.Status, resp.Output, resp.Error)
	}
}
