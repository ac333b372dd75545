package cli

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// Three replicas on one database, driven round-robin: 1 000 concurrent
// sends to one session stay serialized, each stored once and none lost; a turn
// suspended on a and approved on b streams its resumed reply on c; the
// same OpenHarness request_id sent to a and b at once runs one turn.
func TestE2EThreeReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, url := pgtest.Schema(t)
	// Every send is admitted at once (--max-turns): they all wait, in
	// flight, for the session.
	reps := []*e2eServer{
		startServer(t, t.TempDir(), "--database", url, "--max-turns", "1000"),
		startServer(t, t.TempDir(), "--database", url, "--max-turns", "1000"),
		startServer(t, t.TempDir(), "--database", url, "--max-turns", "1000"),
	}
	a, b, c := reps[0], reps[1], reps[2]

	const sends = 1000
	start := time.Now()
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
	t.Logf("%d concurrent sends to one session over 3 replicas: %v", sends, time.Since(start).Round(time.Millisecond))
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

// A replica killed (SIGKILL) while it holds a session mid-turn: the
// database releases the session's lock with the dead connection, so the
// next message on another replica runs at once; the unacknowledged turn
// left nothing in the session, and its run is ended run_interrupted by a
// survivor without a restart (--reconcile-interval).
func TestE2EKillReplicaMidTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, url := pgtest.Schema(t)
	env, entered := hangingWorkspace(t)
	a := startServerEnv(t, t.TempDir(), env, "--database", url, "--reconcile-interval", "200ms")
	b := startServerEnv(t, t.TempDir(), env, "--database", url, "--reconcile-interval", "200ms")

	go func() { // its answer never comes: the replica dies
		resp, err := http.Post(a.base+"/v1/sessions/k/messages", "application/json", strings.NewReader(`{"content":"hang here"}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatalf("the turn did not reach the model\n%s", a.logs)
	}
	_ = a.cmd.Process.Kill()
	_ = a.cmd.Wait()

	var out e2eOutcome
	start := time.Now()
	if code := b.do("POST", "/v1/sessions/k/messages", map[string]string{"content": "are you there?"}, &out); code != 200 || out.Outcome != "completed" {
		t.Fatalf("the next message on b: %d %+v %+v\n%s", code, out, out.Error, b.logs)
	}
	t.Logf("the next turn ran %v after the kill", time.Since(start).Round(time.Millisecond))
	var sess e2eSession
	b.do("GET", "/v1/sessions/k", nil, &sess)
	if len(sess.Messages) != 2 || text(sess.Messages[1]) != "still here" {
		t.Fatalf("session after the kill: %d messages %s", len(sess.Messages), sess.Messages)
	}
	var runs struct {
		Runs []struct {
			Status string `json:"status"`
			Error  *struct {
				Category string `json:"category"`
			} `json:"error"`
		} `json:"runs"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b.do("GET", "/v1/sessions/k/runs", nil, &runs)
		statuses := map[string]int{}
		for _, r := range runs.Runs {
			k := r.Status
			if r.Error != nil {
				k += "/" + r.Error.Category
			}
			statuses[k]++
		}
		if len(runs.Runs) == 2 && statuses["completed"] == 1 && statuses["failed/run_interrupted"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed replica's run was not reconciled: %v\n%s", statuses, b.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hangingWorkspace is the environment of a workspace whose agent's model
// (a fake OpenAI upstream) answers "still here", except to a message
// saying "hang here", which it never answers (until the test ends):
// entered receives each such call.
func hangingWorkspace(t *testing.T) (env []string, entered <-chan struct{}) {
	t.Helper()
	in := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	upstream := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "hang here") {
			in <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"still here\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"still here"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
	})
	ws := filepath.Join(t.TempDir(), "ws.yaml")
	if err := os.WriteFile(ws, []byte("agents:\n  - id: a\n    provider: openai\n    model: m\n    base_url: "+upstream+"/v1\n    api_key_env: E2E_KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"ARMATURE_WORKSPACE=" + ws, "E2E_KEY=k"}, in
}

// A run cancelled through the replica that is not running it (behind a
// load balancer, any replica answers): the request reaches the replica
// running the turn (LISTEN/NOTIFY), whose turn ends invocation_cancelled
// and whose run ends cancelled; the session keeps nothing of it.
func TestE2ECancelOnOtherReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, url := pgtest.Schema(t)
	env, entered := hangingWorkspace(t)
	a := startServerEnv(t, t.TempDir(), env, "--database", url)
	b := startServerEnv(t, t.TempDir(), env, "--database", url)
	answered := make(chan e2eOutcome, 1)
	go func() {
		var out e2eOutcome
		a.do("POST", "/v1/sessions/c/messages", map[string]string{"content": "hang here"}, &out)
		answered <- out
	}()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatalf("the turn did not reach the model\n%s", a.logs)
	}
	var runs struct {
		Runs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"runs"`
	}
	for deadline := time.Now().Add(10 * time.Second); len(runs.Runs) == 0; time.Sleep(50 * time.Millisecond) {
		if b.do("GET", "/v1/sessions/c/runs", nil, &runs); time.Now().After(deadline) {
			t.Fatalf("b does not list the run\n%s", b.logs)
		}
	}
	var res struct {
		Cancelled bool `json:"cancelled"`
	}
	if code := b.do("POST", "/v1/runs/"+runs.Runs[0].ID+"/cancel", nil, &res); code != 202 || !res.Cancelled {
		t.Fatalf("cancel on b: %d %+v\n%s", code, res, b.logs)
	}
	select {
	case out := <-answered:
		if out.Outcome != "errored" || out.Error == nil || out.Error.Category != "invocation_cancelled" {
			t.Fatalf("the cancelled turn answered %+v %+v", out, out.Error)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the turn on a was not cancelled\n%s", a.logs)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b.do("GET", "/v1/sessions/c/runs", nil, &runs)
		if len(runs.Runs) == 1 && runs.Runs[0].Status == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs after the cancel: %+v", runs.Runs)
		}
	}
}
