package main

import (
	"net/http"
	"testing"

	"github.com/armature-go/armature/internal/pgtest"
)

// Two replicas of armature serve on one PostgreSQL database: a turn
// suspended on one is approved on the other, both see one history, a
// retransmitted message id is answered from the database on either, and
// both are ready.
func TestE2EPostgresReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, url := pgtest.Schema(t)
	a := startServerEnv(t, t.TempDir(), []string{"ARMATURE_DATABASE_URL=" + url})
	b := startServer(t, t.TempDir(), "--database", url)
	for _, s := range []*e2eServer{a, b} {
		if code := s.do("GET", "/readyz", nil, nil); code != http.StatusOK {
			t.Fatalf("readyz %d\n%s", code, s.logs)
		}
	}
	var out e2eOutcome
	if code := a.do("POST", "/v1/sessions/s1/messages", map[string]string{"content": "refund order 7", "message_id": "m-1"}, &out); code != 200 || out.Outcome != "suspended" {
		t.Fatalf("refund on a: %d %+v", code, out)
	}
	if code := b.do("POST", "/v1/sessions/s1/signals", map[string]any{"signal_id": out.Signal.SignalID,
		"payload": map[string]any{"approval": map[string]any{"approved": true}}}, &out); code != 200 || out.Outcome != "completed" {
		t.Fatalf("approval on b: %d %+v\n%s", code, out, b.logs)
	}
	if got := text(out.Replies[0]); got != "refunded $30.00 for order 7" {
		t.Fatalf("resumed tool result %q", got)
	}
	var sa, sb e2eSession
	a.do("GET", "/v1/sessions/s1", nil, &sa)
	b.do("GET", "/v1/sessions/s1", nil, &sb)
	if len(sa.Messages) != 5 || len(sb.Messages) != 5 {
		t.Fatalf("histories: %d on a, %d on b", len(sa.Messages), len(sb.Messages))
	}
	// The retransmission of m-1 on b answers the recorded suspension.
	if code := b.do("POST", "/v1/sessions/s1/messages", map[string]string{"content": "refund order 7", "message_id": "m-1"}, &out); code != 200 || !out.Replayed {
		t.Fatalf("retransmission on b: %d %+v", code, out)
	}
	b.do("GET", "/v1/sessions/s1", nil, &sb)
	if len(sb.Messages) != 5 {
		t.Fatalf("the retransmission ran a turn: %d messages", len(sb.Messages))
	}
	// A stream on a carries the turns b runs, live, in order; resuming
	// it on b after the last id seen on a misses nothing.
	framesA := sseFrames(t, a, "s2")
	b.do("POST", "/v1/sessions/s2/messages", map[string]string{"content": "where is order 3?"}, &out)
	first := waitFrame(t, framesA, "runtime.request.completed")
	b.do("POST", "/v1/sessions/s2/messages", map[string]string{"content": "where is order 4?"}, &out)
	second := waitFrame(t, framesA, "runtime.request.completed", `"sessionId":"s2"`)
	if first == second {
		t.Fatalf("the second turn's completion did not arrive: %s", second)
	}
	// Each replica lists the runs of both.
	var runs struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	if code := a.do("GET", "/v1/sessions/s1/runs", nil, &runs); code != 200 || len(runs.Runs) != 2 {
		t.Fatalf("runs on a: %d %+v", code, runs)
	}
}
