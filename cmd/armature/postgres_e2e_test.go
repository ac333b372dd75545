package main

import (
	"fmt"
	"net/http"
	"sync"
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

// Three replicas on one database, driven round-robin: concurrent sends to
// one session stay serialized, each stored once and none lost; a turn
// suspended on a and approved on b streams its resumed reply on c; the
// same OpenHarness request_id sent to a and b at once runs one turn.
func TestE2EThreeReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, url := pgtest.Schema(t)
	reps := []*e2eServer{
		startServer(t, t.TempDir(), "--database", url),
		startServer(t, t.TempDir(), "--database", url),
		startServer(t, t.TempDir(), "--database", url),
	}
	a, b, c := reps[0], reps[1], reps[2]

	const sends = 90
	var wg sync.WaitGroup
	codes := make(chan int, sends)
	for i := range sends {
		wg.Go(func() {
			var out e2eOutcome
			codes <- reps[i%3].do("POST", "/v1/sessions/busy/messages",
				map[string]string{"content": fmt.Sprintf("hello %d", i), "message_id": fmt.Sprint("m", i)}, &out)
		})
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Fatalf("a send answered %d", code)
		}
	}
	var sess struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	c.do("GET", "/v1/sessions/busy", nil, &sess)
	seen := map[string]int{}
	for i, m := range sess.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			t.Fatalf("message %d is %s, want %s: turns interleaved", i, m.Role, want)
		}
		if m.Role == "user" {
			seen[fmt.Sprint(m.Content)]++
		}
	}
	if len(sess.Messages) != 2*sends || len(seen) != sends {
		t.Fatalf("%d messages, %d distinct user messages; want %d and %d", len(sess.Messages), len(seen), 2*sends, sends)
	}

	framesC := sseFrames(t, c, "approve")
	var out e2eOutcome
	if code := a.do("POST", "/v1/sessions/approve/messages", map[string]string{"content": "refund order 9"}, &out); code != 200 || out.Outcome != "suspended" {
		t.Fatalf("refund on a: %d %+v", code, out)
	}
	if code := b.do("POST", "/v1/sessions/approve/signals", map[string]any{"signal_id": out.Signal.SignalID,
		"payload": map[string]any{"approval": map[string]any{"approved": true}}}, &out); code != 200 || out.Outcome != "completed" {
		t.Fatalf("approval on b: %d %+v", code, out)
	}
	waitFrame(t, framesC, "refunded $30.00 for order 9")

	req := map[string]any{"protocol_version": "1.0.0", "request_id": "same-on-two",
		"request": map[string]any{"context": map[string]any{"session_id": "oh3", "user_intent": "where is order 5?"}}}
	var wg2 sync.WaitGroup
	for _, s := range []*e2eServer{a, b} {
		wg2.Go(func() { s.do("POST", "/v1/openharness", req, nil) })
	}
	wg2.Wait()
	var oh e2eSession
	c.do("GET", "/v1/sessions/oh3", nil, &oh)
	if len(oh.Messages) != 4 { // user, tool call, tool result, reply: one turn
		t.Fatalf("the same request_id on two replicas stored %d messages", len(oh.Messages))
	}
}
