package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	rtpkg "github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// settle waits until cond holds, polling (the test's deadline bounds
// the wait: no timing is asserted).
func settle(cond func() bool) {
	for !cond() {
		time.Sleep(5 * time.Millisecond)
	}
}

// Clients that disconnect in the middle of their turns (a REST send, an
// OpenAI completion streamed and not, a session event stream watching
// them) leave nothing behind once the turns end: every turn and stream
// slot is given back and the goroutine count returns to where it was.
// A disconnected client keeps its turn slot until its turn ends (the
// turn still completes and is stored), so a tenant cannot run more than
// its share by hanging up: its next turns wait or get 429.
func TestDisconnectMidTurnLeaksNothing(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 64)
	ts := gatedServer(t, gate, started, func(c *server.Config) {
		c.Tokens = []server.Token{{Secret: secretA, Tenant: "a"}, {Secret: secretB, Tenant: "b"}}
		c.MaxTurns, c.MaxTurnsPerTenant = 16, 6
		c.MaxQueuedTurns, c.MaxQueuedTurnsPerTenant = 16, 1
		c.MaxSSEStreams, c.MaxSSEStreamsPerTenant = 16, 8
		c.QueueWait = 30 * time.Second
	})
	// Warm up: one turn end to end, so that lazily started goroutines
	// (the recorder's flusher, the store's) are counted in the baseline.
	go func() { <-started; gate <- struct{}{} }()
	resp := tenantReq(context.Background(), t, ts.URL, secretB, "POST", "/v1/sessions/warm/messages", `{"content":"hi"}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	runtime.GC()
	before := runtime.NumGoroutine()

	ctx, hangUp := context.WithCancel(context.Background())
	requests := []struct{ method, path, body string }{
		{"POST", "/v1/sessions/s1/messages", `{"content":"hi"}`},
		{"POST", "/v1/sessions/s2/messages", `{"content":"hi","stream":true}`},
		{"POST", "/v1/chat/completions", `{"model":"gated","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/chat/completions", `{"model":"gated","messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/responses", `{"model":"gated","stream":true,"input":"hi"}`},
		{"POST", "/v1/sessions/s3/messages", `{"content":"hi"}`},
	}
	var wg sync.WaitGroup
	for _, s := range []string{"s1", "s2", "s3"} {
		resp := tenantReq(ctx, t, ts.URL, secretA, "GET", "/v1/sessions/"+s+"/events", "")
		if resp.StatusCode != 200 {
			t.Fatalf("stream of %s: %d", s, resp.StatusCode)
		}
		defer resp.Body.Close()
	}
	for _, r := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, r.method, ts.URL+r.path, strings.NewReader(r.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+secretA)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("%s %s: %d %s", r.method, r.path, resp.StatusCode, b)
					started <- struct{}{}
				}
			}
		}()
	}
	for range requests {
		<-started
	}
	if t.Failed() {
		close(gate)
		hangUp()
		return
	}
	if n := servertest.Gauge(t, ts.URL, "armature_turns_in_flight"); n != float64(len(requests)) {
		t.Fatalf("%v turns in flight, want %d", n, len(requests))
	}
	hangUp()
	wg.Wait()
	// Hung up, the turns still hold tenant a's share: one more queues
	// (its queue share is 1) and the next is refused.
	qctx, qcancel := context.WithCancel(context.Background())
	queued := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(qctx, "POST", ts.URL+"/v1/sessions/q/messages", strings.NewReader(`{"content":"hi"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+secretA)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		queued <- 0
	}()
	settle(func() bool { return servertest.Gauge(t, ts.URL, "armature_turns_queued") == 1 })
	resp = tenantReq(context.Background(), t, ts.URL, secretA, "POST", "/v1/sessions/r/messages", `{"content":"hi"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("tenant a over its share after hanging up: %d, want 429", resp.StatusCode)
	}
	qcancel() // a cancelled waiter leaves the queue
	<-queued
	settle(func() bool { return servertest.Gauge(t, ts.URL, "armature_turns_queued") == 0 })
	close(gate)
	settle(func() bool {
		return servertest.Gauge(t, ts.URL, "armature_turns_in_flight") == 0 && servertest.Gauge(t, ts.URL, "armature_sse_streams") == 0
	})
	http.DefaultClient.CloseIdleConnections()
	var after int
	for range 400 { // the handlers' and transports' goroutines exit asynchronously
		runtime.GC()
		if after = runtime.NumGoroutine(); after <= before+2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if after > before+2 {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after the hung-up turns ended\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
	t.Logf("goroutines: %d before, %d after %d hung-up turns and 3 streams", before, after, len(requests))
}

// A client that hangs up while its turn waits for capacity leaves the
// queue at once, and its turn never runs. Before, the server noticed
// nothing (net/http sees a client hang up only once the request body is
// read, and a queued request's was not): the request kept its place for
// all of QueueWait, and when capacity freed in time its turn ran, for
// nobody, on capacity other turns waited for; a client retrying on a
// short timeout queued one more turn with each try.
func TestQueuedClientHangingUpLeavesTheQueue(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 8)
	ts := gatedServer(t, gate, started, func(c *server.Config) {
		c.Tokens = []server.Token{{Secret: secretA, Tenant: "a"}, {Secret: secretB, Tenant: "b"}}
		c.MaxTurns, c.MaxTurnsPerTenant = 2, 1
		c.MaxQueuedTurns, c.MaxQueuedTurnsPerTenant = 4, 2
		c.QueueWait = time.Hour
	})
	running := make(chan int, 1)
	go func() {
		resp := tenantReq(context.Background(), t, ts.URL, secretA, "POST", "/v1/sessions/held/messages", `{"content":"hi"}`)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		running <- resp.StatusCode
	}()
	<-started
	for i, body := range []string{`{"content":"hi"}`, `{"content":"` + strings.Repeat("x", 64<<10) + `"}`} {
		ctx, hangUp := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequestWithContext(ctx, "POST", fmt.Sprintf("%s/v1/sessions/gone%d/messages", ts.URL, i), strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+secretA)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("the queued request was answered %d", resp.StatusCode)
			}
		}()
		settle(func() bool { return servertest.Gauge(t, ts.URL, "armature_turns_queued") == 1 })
		hangUp()
		<-done
		deadline := time.Now().Add(10 * time.Second) // a liveness bound, far above the time it takes
		for servertest.Gauge(t, ts.URL, "armature_turns_queued") != 0 {
			if time.Now().After(deadline) {
				close(gate)
				t.Fatalf("request %d: its client hung up, and the request still holds its place in the queue", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	close(gate)
	if code := <-running; code != 200 {
		t.Fatalf("the running turn answered %d", code)
	}
	settle(func() bool {
		return servertest.Gauge(t, ts.URL, "armature_turns_in_flight") == 0 && servertest.Gauge(t, ts.URL, "armature_turns_queued") == 0
	})
	for i := range 2 {
		resp := tenantReq(context.Background(), t, ts.URL, secretA, "GET", fmt.Sprintf("/v1/sessions/gone%d/runs", i), "")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"runs":[]`) {
			t.Fatalf("session gone%d, whose client hung up while queued: %d %s; want no run", i, resp.StatusCode, b)
		}
	}
}

// A request waiting for capacity whose body is over MaxBodyBytes is
// answered 413 at once, in its API's error shape, rather than after
// waiting for capacity only to be refused; it leaves the queue.
func TestQueuedOversizedBodyAnswersAtOnce(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 8)
	ts := gatedServer(t, gate, started, func(c *server.Config) {
		c.MaxTurns, c.MaxBodyBytes = 1, 4<<10
		c.MaxQueuedTurns = 4
		c.QueueWait = time.Hour
	})
	running := make(chan struct{})
	go func() {
		defer close(running)
		post(t, ts.URL+"/v1/sessions/held/messages", `{"content":"hi"}`, nil)
	}()
	<-started
	big := strings.Repeat("x", 8<<10)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/sessions/big/messages", `{"content":"` + big + `"}`, `"code":"body_too_large"`},
		{"/v1/chat/completions", `{"model":"gated","messages":[{"role":"user","content":"` + big + `"}]}`, `"error":`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a liveness bound
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			close(gate)
			t.Fatalf("%s: %v (the request waited for capacity)", tc.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %d %s, want 413 with %s", tc.path, resp.StatusCode, b, tc.want)
		}
		if q := servertest.Gauge(t, ts.URL, "armature_turns_queued"); q != 0 {
			t.Errorf("%s: %v turns still queued", tc.path, q)
		}
	}
	close(gate)
	<-running
}

// Growth with the sessions served, measured through the HTTP server on
// in-memory stores: ARMATURE_ATTACK_SESSIONS=100000 runs that many
// sessions of one turn each and logs the heap and goroutines (it skips
// without). The heap grows with the records kept (each session's
// messages, each run's events), by a bounded amount per session; the
// goroutines do not grow at all.
func TestGrowthManySessions(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ARMATURE_ATTACK_SESSIONS"))
	if n <= 0 {
		t.Skip("set ARMATURE_ATTACK_SESSIONS to measure")
	}
	sessions, h := demoChat(t)
	ts := servertest.Serve(t, server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h}}, Sessions: sessions})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	post(t, ts.URL+"/v1/sessions/warm/messages", `{"content":"where is order 3?"}`, nil)
	h0, g0 := heap(), runtime.NumGoroutine()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if code := post(t, fmt.Sprintf("%s/v1/sessions/s%d/messages", ts.URL, i), `{"content":"where is order 3?"}`, nil); code != 200 {
					t.Errorf("turn %d: %d", i, code)
					return
				}
				if i%(int64(n)/4) == 0 {
					t.Logf("%d sessions after %v: heap %d MiB", i, time.Since(start).Round(time.Second), heap()>>20)
				}
			}
		}()
	}
	wg.Wait()
	http.DefaultClient.CloseIdleConnections()
	h1, g1 := heap(), runtime.NumGoroutine()
	per := (int64(h1) - int64(h0)) / int64(n)
	t.Logf("%d sessions: heap %d → %d MiB (%d bytes a session), goroutines %d → %d", n, h0>>20, h1>>20, per, g0, g1)
	if p := os.Getenv("ARMATURE_ATTACK_HEAPPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}
	if per > 64<<10 {
		t.Errorf("%d bytes of heap a session of one turn", per)
	}
	if g1 > g0+8 {
		t.Errorf("goroutines grew from %d to %d", g0, g1)
	}
}

// tenantGatedServer serves an agent whose turns report their tenant on
// started, then wait for a value from gate (or gate's close).
func tenantGatedServer(t *testing.T, gate <-chan struct{}, started chan<- string, mutate func(*server.Config)) *httptest.Server {
	t.Helper()
	store := servertest.SQLite(t)
	schema, _ := chat.NewSchema()
	g, err := graph.NewBuilder(schema).
		AddNode("gated", func(ctx context.Context, s graph.State) (graph.Update, error) {
			info, _ := adapter.RequestInfoFrom(ctx)
			started <- info.Tenant
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return chat.Messages.Add(llm.AssistantText("done")), nil
		}).
		AddEdge("gated", graph.End).SetEntry("gated").
		Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Agents: []*server.Agent{{ID: "gated", Chat: h}}, Sessions: store}
	mutate(&cfg)
	return servertest.Serve(t, cfg)
}

// A tenant that queues many turns does not take the capacity another
// tenant waits for: tenant a runs its share (the whole capacity here)
// and queues six more, tenant b queues one; when one of a's turns ends,
// b's runs next. Before, every queued turn raced for the freed capacity
// and b's one turn lost to a's six most of the time, round after round,
// until its wait ran out (503): one tenant starved another.
func TestQueuedTenantGetsFreedCapacity(t *testing.T) {
	gate, started := make(chan struct{}), make(chan string, 16)
	ts := tenantGatedServer(t, gate, started, func(c *server.Config) {
		c.Tokens = []server.Token{{Secret: secretA, Tenant: "a"}, {Secret: secretB, Tenant: "b"}}
		c.MaxTurns, c.MaxTurnsPerTenant = 2, 2
		c.MaxQueuedTurns, c.MaxQueuedTurnsPerTenant = 16, 8
		c.QueueWait = time.Hour
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	defer open()
	send := func(secret, session string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", ts.URL+"/v1/sessions/"+session+"/messages", strings.NewReader(`{"content":"hi"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("session %s: %d", session, resp.StatusCode)
			}
		}()
	}
	send(secretA, "a0")
	send(secretA, "a1")
	<-started
	<-started
	for i := range 6 {
		send(secretA, fmt.Sprintf("a%d", i+2))
		settle(func() bool { return servertest.Gauge(t, ts.URL, "armature_turns_queued") == float64(i+1) })
	}
	send(secretB, "b0")
	settle(func() bool { return servertest.Gauge(t, ts.URL, "armature_turns_queued") == 7 })
	gate <- struct{}{} // one of a's turns ends
	if next := <-started; next != "b" {
		t.Fatalf("the capacity a's turn freed went to tenant %s's queued turn, want b's", next)
	}
	open()
}

// A watcher of a session's event stream that stops reading (its TCP
// window full) blocks nothing: the turn runs to its end, another watcher
// gets every event, and the stalled one, past its broker buffer, is
// disconnected (its stream ends once its writes drain) rather than
// buffered without bound; reconnecting with Last-Event-ID, it gets the
// rest with no gap and none twice.
func TestStalledWatcherBlocksNothing(t *testing.T) {
	const events, pad = 800, 16 << 10 // 13 MB: more than socket buffers and a broker buffer hold
	rec, err := rtpkg.NewRecorder(rtpkg.RecorderConfig{Store: rtpkg.NewMemoryStore(rtpkg.MemoryConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.NewMemoryStore(session.MemoryConfig{})
	// The turn keeps at most 64 events ahead of the reading watcher (far
	// within its broker buffer of 256), so that only the stalled one can
	// fall behind.
	var seen atomic.Int64
	progress := make(chan struct{}, 1)
	// readerDone is closed when the reading watcher's stream ends: the
	// turn stops waiting for it then (and the test fails on what it
	// got), rather than hanging until the package's timeout.
	readerDone := make(chan struct{})
	schema, _ := chat.NewSchema()
	g, err := graph.NewBuilder(schema).
		AddNode("big", func(ctx context.Context, s graph.State) (graph.Update, error) {
			for i := range events {
				for int64(i)-seen.Load() > 64 {
					select {
					case <-progress:
					case <-readerDone:
						return nil, errors.New("the reading watcher's stream ended")
					}
				}
				chat.EmitEvent(ctx, chat.Event{Type: "test.big", Data: map[string]any{"i": i, "pad": strings.Repeat("x", pad)}})
			}
			return chat.Messages.Add(llm.AssistantText("done")), nil
		}).
		AddEdge("big", graph.End).SetEntry("big").
		Compile(graph.WithSessions(graph.SessionConfig{Store: sessions}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.Serve(t, server.Config{Agents: []*server.Agent{{ID: "big", Chat: h}}, Sessions: sessions, Runs: rec})

	// The stalled watcher: a 4 KiB receive window, never read.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	stalled, err := d.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, "GET /v1/sessions/s/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	// The stream lasts the test: 800 events of 16 KB take a while on a
	// loaded machine under the race detector.
	fast := openStreamCtx(t, t.Context(), ts.URL+"/v1/sessions/s/events", "")
	settle(func() bool { return servertest.Gauge(t, ts.URL, "armature_sse_streams") == 2 })

	isEnd := func(f frame) bool { return f.event == "runtime.request.completed" }
	fastGot := make(chan []frame, 1)
	go func() {
		defer close(readerDone)
		fastGot <- readFrames(t, fast.Body, func(f frame) bool {
			seen.Add(1)
			select {
			case progress <- struct{}{}:
			default:
			}
			return isEnd(f)
		})
	}()
	if code := post(t, ts.URL+"/v1/sessions/s/messages", `{"content":"hi"}`, nil); code != 200 {
		t.Fatalf("the turn answered %d", code)
	}
	got := <-fastGot
	if n := countType(got, "test.big"); n != events || len(got) == 0 || !isEnd(got[len(got)-1]) {
		t.Fatalf("the reading watcher got %d of %d events (%d frames)", n, events, len(got))
	}
	if rec.Broker().Disconnected() < 1 {
		t.Fatal("the stalled watcher was never disconnected")
	}
	// The stalled watcher reads again: its stream ends (it was dropped),
	// and it resumes from the last event it got.
	resp, err := http.ReadResponse(bufio.NewReader(stalled), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := readFrames(t, resp.Body, func(frame) bool { return false })
	resp.Body.Close()
	if len(before) == 0 || len(before) >= len(got) {
		t.Fatalf("the stalled watcher got %d frames before its stream ended, want some and not all %d", len(before), len(got))
	}
	t.Logf("the stalled watcher got %d of %d frames before it was dropped", len(before), len(got))
	after := readFrames(t, openStream(t, ts.URL+"/v1/sessions/s/events", before[len(before)-1].id).Body, isEnd)
	all := append(before, after...)
	if len(all) != len(got) {
		t.Fatalf("resumed: %d + %d frames, want %d", len(before), len(after), len(got))
	}
	for i := range all {
		if all[i].id != got[i].id {
			t.Fatalf("resumed frame %d has id %s, want %s", i, all[i].id, got[i].id)
		}
	}
}

func countType(fs []frame, typ string) int {
	n := 0
	for _, f := range fs {
		if f.event == typ {
			n++
		}
	}
	return n
}

// A client that sends its headers and then its body slowly (one byte,
// then nothing) holds no turn while it does: with one turn and no
// queue, another client's turn runs at once on every surface that runs
// turns. Before, the turn was taken before the body was read, and two
// such connections kept a server with two turns from running any for
// all of ReadTimeout (503 overloaded).
func TestSlowBodySenderHoldsNoTurn(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 8)
	close(gate) // turns answer at once
	ts := gatedServer(t, gate, started, func(c *server.Config) {
		c.MaxTurns, c.MaxQueuedTurns, c.QueueWait = 1, 0, 10*time.Millisecond
	})
	for _, path := range []string{"/v1/sessions/slow/messages", "/v1/chat/completions", "/v1/responses", "/v1/openharness"} {
		c, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", path)
	}
	time.Sleep(50 * time.Millisecond) // the slow requests are routed, their bodies awaited
	for i, tc := range []struct{ path, body string }{
		{"/v1/sessions/fast/messages", `{"content":"hi"}`},
		{"/v1/chat/completions", `{"model":"gated","messages":[{"role":"user","content":"hi"}]}`},
	} {
		if code := post(t, ts.URL+tc.path, tc.body, nil); code != http.StatusOK {
			t.Errorf("turn %d (%s) answered %d while slow senders were connected", i, tc.path, code)
		}
	}
}
