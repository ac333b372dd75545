package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// TestDirectCallLongerThanFlushWaitDeletePurges: a direct call whose
// tool runs for longer than the server's flush wait (30s; the tool bound
// is 2m by default) while its session is deleted still has its run
// purged once it ends, its end written first: the flush and the purge
// get their own wait, which begins when the tool has ended, so a long
// call's arguments and output do not stay listed under the deleted
// session.
func TestDirectCallLongerThanFlushWaitDeletePurges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sessions := session.NewMemoryStore(session.MemoryConfig{})
		g, err := mustDemo(t).Compile(graph.WithSessions(graph.SessionConfig{Store: sessions}))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runtime.NewMemoryStore(runtime.MemoryConfig{})})
		if err != nil {
			t.Fatal(err)
		}
		slow := directToolGatewayTool("slow", func(ctx context.Context, _ json.RawMessage) (string, error) {
			time.Sleep(45 * time.Second) // within the 2m tool bound
			return "secret customer data", nil
		})
		srv, err := server.New(server.Config{Sessions: sessions, Runs: rec, Agents: []*server.Agent{
			{ID: "demo", Chat: h, Model: demo.ModelName, Gateway: append(demo.Tools(), slow)}},
			DirectTools: map[string][]string{server.DefaultTenant: {"*"}}})
		if err != nil {
			t.Fatal(err)
		}
		hd := srv.Handler()
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", "/v1/agents/demo/tools/slow", strings.NewReader(`{"arguments":{"card":"4111"},"session_id":"dt-long"}`))
			r.Header.Set("Content-Type", "application/json")
			r.Host = "127.0.0.1"
			hd.ServeHTTP(w, r)
			done <- w
		}()
		synctest.Wait() // the tool sleeps
		w := httptest.NewRecorder()
		dr := httptest.NewRequest("DELETE", "/v1/sessions/dt-long", nil)
		dr.Host = "127.0.0.1"
		hd.ServeHTTP(w, dr)
		if w.Code != http.StatusNoContent {
			t.Fatalf("delete: %d %s", w.Code, w.Body)
		}
		a := <-done
		if a.Code != http.StatusOK {
			t.Fatalf("direct call: %d %s", a.Code, a.Body)
		}
		time.Sleep(time.Second) // let the recorder write whatever is queued
		runs, err := srv.Runs(context.Background(), runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "dt-long"})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs.Runs) != 0 {
			t.Errorf("the deleted session after a 45s direct call: got %d run(s) (status %q); want none", len(runs.Runs), runs.Runs[0].Status)
		}
		_ = srv.Stop(context.Background())
		_ = rec.Close(context.Background())
	})
}
