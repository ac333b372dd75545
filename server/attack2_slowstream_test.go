package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
)

// floodModel answers a message containing "flood" with chunks × size
// bytes of text, streamed chunk by chunk, and anything else with "ok".
type floodModel struct{ chunks, size int }

func (floodModel) Ready(context.Context) error { return nil }

func (m floodModel) text(req *llm.Request) []string {
	if last := req.Messages[len(req.Messages)-1]; !strings.Contains(last.Text(), "flood") {
		return []string{"ok"}
	}
	out := make([]string, m.chunks)
	for i := range out {
		out[i] = strings.Repeat(string(rune('a'+i%26)), m.size)
	}
	return out
}

func (m floodModel) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	return &llm.Response{Message: llm.AssistantText(strings.Join(m.text(req), "")), FinishReason: llm.FinishStop}, nil
}

func (m floodModel) Stream(_ context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		for _, t := range m.text(req) {
			if !yield(&llm.Chunk{Content: t}, nil) {
				return
			}
		}
		yield(&llm.Chunk{FinishReason: llm.FinishStop}, nil)
	}
}

// floodServer serves a demo agent on m over a SQLite store, for tenant
// acme (token oaiToken), its connections with small send buffers
// (smallSendBuffer); edit, when not nil, changes the configuration.
func floodServer(t *testing.T, m floodModel, edit func(*server.Config)) *httptest.Server {
	t.Helper()
	a, err := agent.New(agent.Config{Provider: m})
	if err != nil {
		t.Fatal(err)
	}
	store := servertest.SQLite(t)
	cfg := server.Config{Agents: []*server.Agent{{ID: "demo", Chat: servertest.Harness(t, store, a)}},
		Sessions: store, Tokens: []server.Token{{Secret: oaiToken, Tenant: "acme"}}}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener = smallSendBuffer{ts.Listener}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// smallSendBuffer gives every accepted connection a small kernel send
// buffer, so that what a stalled client leaves unread piles up in the
// server rather than in the kernel.
type smallSendBuffer struct{ net.Listener }

func (l smallSendBuffer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// dialStalled opens a connection with a 4 KiB receive window.
func dialStalled(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A streamed answer (chat completions, responses) whose client reads
// slowly or not at all does not hold its turn back (for more than the
// stream's stall bound, a second): the turn runs to its end and is
// recorded while the client has read at most part (the slow one) or
// nothing (the stalled one) of its stream, which falls behind (it ends
// without its final frames, with a stream_dropped error frame when the
// client reads it) rather than buffer without bound; the session's next
// turn gets through, and retrying with the Idempotency-Key answers the
// whole recorded answer.
func TestSlowStreamClientHoldsNoTurn(t *testing.T) {
	const chunks, size = 1024, 4 << 10 // 4 MiB of text: more than a stream's buffer and the socket buffers hold, and than a slow client reads in the stall bound
	want := strings.Join(floodModel{chunks, size}.text(&llm.Request{Messages: []llm.Message{llm.UserText("flood")}}), "")
	ts := floodServer(t, floodModel{chunks, size}, nil)

	type api struct {
		name, path, streamed, plain, done string
		text                              func(t *testing.T, raw []byte) string
	}
	apis := []api{
		{name: "chat", path: "/v1/chat/completions",
			streamed: `{"model":"demo","stream":true,"messages":[{"role":"user","content":"flood"}]}`,
			plain:    `{"model":"demo","messages":[{"role":"user","content":"flood"}]}`,
			done:     "data: [DONE]",
			text: func(t *testing.T, raw []byte) string {
				var c completion
				if err := json.Unmarshal(raw, &c); err != nil || len(c.Choices) != 1 {
					t.Fatalf("%v in %.200s", err, raw)
				}
				return c.Choices[0].Message.Content
			}},
		{name: "responses", path: "/v1/responses",
			streamed: `{"model":"demo","stream":true,"input":"flood"}`,
			plain:    `{"model":"demo","input":"flood"}`,
			done:     "response.completed",
			text: func(t *testing.T, raw []byte) string {
				var r struct {
					Output []struct {
						Content []struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"output"`
				}
				if err := json.Unmarshal(raw, &r); err != nil || len(r.Output) != 1 || len(r.Output[0].Content) != 1 {
					t.Fatalf("%v in %.200s", err, raw)
				}
				return r.Output[0].Content[0].Text
			}},
	}
	// readEach is how much the client reads each time it finds the turn
	// still running: nothing (stalled), or a little (slow: as much as
	// keeps every write within its deadline, and the drain making
	// progress).
	for _, readEach := range []int{0, 64} {
		for _, api := range apis {
			t.Run(fmt.Sprintf("%s/read%d", api.name, readEach), func(t *testing.T) {
				sid := fmt.Sprintf("slow-%s-%d", api.name, readEach)
				key := "key-" + sid
				conn := dialStalled(t, ts.Listener.Addr().String())
				fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
					"%s: %s\r\n%s: %s\r\nContent-Length: %d\r\n\r\n%s",
					api.path, oaiToken, server.SessionHeader, sid, server.IdempotencyHeader, key, len(api.streamed), api.streamed)

				// The turn completes while the client reads a little or
				// nothing at all.
				var got bytes.Buffer
				buf := make([]byte, readEach)
				ended := false // the stream ended (it failed, the turn ended, its record is on its way)
				for runStatus(t, ts, sid) != "completed" {
					if readEach > 0 && !ended {
						// A stream that ended leaves the connection open
						// (it ended with an error frame): a read waits a
						// moment at most.
						_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
						n, err := conn.Read(buf)
						got.Write(buf[:n])
						ended = err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
						time.Sleep(5 * time.Millisecond) // slow: under 13 KB/s
					}
				}
				if got.Len() >= len(want)/2 {
					t.Fatalf("the turn completed only once its client had read %d bytes of its stream: the client paced it", got.Len())
				}

				// The session's next turn gets through.
				headers := map[string]string{server.SessionHeader: sid}
				if resp := call(t, ts, "POST", api.path, strings.Replace(api.plain, "flood", "hello", 1), headers, nil); resp.StatusCode != 200 {
					t.Fatalf("the session's next turn answered %d", resp.StatusCode)
				}
				// The retry with the Idempotency-Key answers the turn.
				headers[server.IdempotencyHeader] = key
				var raw json.RawMessage
				if resp := call(t, ts, "POST", api.path, api.plain, headers, &raw); resp.StatusCode != 200 {
					t.Fatalf("the retry answered %d: %.200s", resp.StatusCode, raw)
				}
				if text := api.text(t, raw); text != want {
					t.Fatalf("the retry answered %d bytes of text, want the turn's %d", len(text), len(want))
				}

				// The stream failed: it ends without its final frames.
				_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second)) // the stream's end, or its drop, is over by then
				rest, _ := io.ReadAll(conn)                               // a reset connection ends it too
				got.Write(rest)
				if got.Len() == 0 {
					t.Fatal("the stream sent nothing")
				}
				resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(got.Bytes())), nil)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("stream response %v, %v", resp, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if bytes.Contains(body, []byte(api.done)) {
					t.Fatalf("the stream of a client too slow for it still ended normally (%d bytes)", len(body))
				}
				t.Logf("the client got %d bytes of its stream before it was dropped (error frame: %v)", len(body), bytes.Contains(body, []byte(server.CodeStreamDropped)))
			})
		}
	}
}

// runStatus is the status of the session's first run ("" before it is
// recorded).
func runStatus(t *testing.T, ts *httptest.Server, sid string) string {
	t.Helper()
	var runs struct {
		Runs []struct {
			Status string `json:"status"`
		} `json:"runs"`
	}
	call(t, ts, "GET", "/v1/sessions/"+sid+"/runs", "", nil, &runs)
	if len(runs.Runs) == 0 {
		return ""
	}
	return runs.Runs[len(runs.Runs)-1].Status
}

// A stream read by a normal client is whole and in order, even when the
// client reads nothing until the turn has ended: its final frames
// (which repeat the answer's text, four times for a response) wait for
// room in the stream's buffer rather than fail the stream.
func TestStreamFinalFramesWaitForRoom(t *testing.T) {
	const chunks, size = 128, 4 << 10 // 512 KiB: the streamed text fits the buffer, the final frames do not
	a, err := agent.New(agent.Config{Provider: floodModel{chunks, size}})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.New(t, a, func(c *server.Config) { c.Tokens = []server.Token{{Secret: oaiToken, Tenant: "acme"}} })
	req, _ := http.NewRequest("POST", ts.URL+"/v1/responses", strings.NewReader(`{"model":"demo","stream":true,"input":"flood"}`))
	req.Header.Set("Authorization", "Bearer "+oaiToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(server.SessionHeader, "final")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The client reads nothing more until the turn has ended and the
	// session has run another: its streamed text waits in the buffer,
	// and the final events for room.
	for runStatus(t, ts, "final") != "completed" {
	}
	if resp := call(t, ts, "POST", "/v1/responses", `{"model":"demo","input":"hello"}`, map[string]string{server.SessionHeader: "final"}, nil); resp.StatusCode != 200 {
		t.Fatalf("the session's next turn answered %d", resp.StatusCode)
	}
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20) // the final events hold the whole text
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "":
			events, cur = append(events, cur), sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	deltas := 0
	for i, e := range events {
		var head struct {
			Type string `json:"type"`
			Seq  int    `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(e.Data), &head); err != nil || head.Seq != i || head.Type != e.Event {
			t.Fatalf("event %d: %+v (%v) in %.100s", i, head, err, e.Data)
		}
		if head.Type == "response.output_text.delta" {
			deltas++
		}
	}
	if last := events[len(events)-1].Event; deltas != chunks || last != "response.completed" {
		t.Fatalf("%d deltas, want %d; the last event %s", deltas, chunks, last)
	}
}

// feedListener is a listener whose Accept returns the connections the
// test feeds it, counting its calls.
type feedListener struct {
	feed  chan net.Conn
	calls atomic.Int32
	done  chan struct{}
}

func (l *feedListener) Accept() (net.Conn, error) {
	l.calls.Add(1)
	select {
	case c := <-l.feed:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *feedListener) Close() error   { close(l.done); return nil }
func (l *feedListener) Addr() net.Addr { return &net.TCPAddr{} }

// acceptLoop accepts as an http.Server does, handing on what it gets.
func acceptLoop(ln net.Listener, out chan<- net.Conn, errc chan<- error) {
	for {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		out <- c
	}
}

// parkedIn waits until the goroutine running fn is blocked, and reports
// whether its stack then holds frame.
func parkedIn(t *testing.T, fn, frame string) bool {
	t.Helper()
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			head, _, _ := strings.Cut(g, "\n")
			if !strings.Contains(g, fn) || strings.Contains(head, "[running]") || strings.Contains(head, "[runnable]") {
				continue
			}
			return strings.Contains(g, frame)
		}
		time.Sleep(time.Millisecond) // polling: the test's deadline bounds it
	}
}

// At its cap, LimitListener accepts no further connection (it does not
// even ask the listener it wraps for one) until one it returned is
// closed; closing it twice frees one slot, and closing the listener ends
// an Accept waiting for a slot.
func TestLimitListenerCapsConnections(t *testing.T) {
	inner := &feedListener{feed: make(chan net.Conn), done: make(chan struct{})}
	ln := server.LimitListener(inner, 2)
	out, errc := make(chan net.Conn), make(chan error, 1)
	go acceptLoop(ln, out, errc)
	accept := func() net.Conn {
		a, b := net.Pipe()
		t.Cleanup(func() { b.Close() })
		inner.feed <- a
		return <-out
	}
	c1, c2 := accept(), accept()
	if parkedIn(t, "acceptLoop", "(*feedListener).Accept") || inner.calls.Load() != 2 {
		t.Fatalf("at the cap, the listener asked for a connection (%d calls)", inner.calls.Load())
	}
	c1.Close()
	c1.Close() // frees no second slot
	c3 := accept()
	if parkedIn(t, "acceptLoop", "(*feedListener).Accept") || inner.calls.Load() != 3 {
		t.Fatalf("at the cap again, the listener asked for a connection (%d calls)", inner.calls.Load())
	}
	ln.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	c2.Close()
	c3.Close()
	if n := server.LimitListener(inner, -1); n != net.Listener(inner) {
		t.Fatal("a negative cap wrapped the listener")
	}
}

// An HTTP server on a LimitListener at its cap serves a further client
// only once a connection closes: until then it does not accept it.
func TestLimitListenerHoldsExtraClient(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go hs.Serve(server.LimitListener(tcp, 1))
	t.Cleanup(func() { hs.Close() })
	get := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		return c, bufio.NewReader(c)
	}
	served := func(r *bufio.Reader) {
		t.Helper()
		resp, err := http.ReadResponse(r, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v, %v", resp, err)
		}
		resp.Body.Close()
	}
	a, ar := get()
	served(ar) // a stays open (keep-alive)
	_, br := get()
	if parkedIn(t, "(*limitListener).Accept", "(*TCPListener).Accept") {
		t.Fatal("at the cap, the server accepts another connection")
	}
	a.Close()
	served(br)
}

// A client that reads as fast as it can gets the whole stream, however
// many frames the turn produces at once and however little CPU the
// stream's writer gets (one P: the turn keeps it busy until it blocks):
// the response's status goes out as the stream opens, and a frame that
// finds the buffer full waits (a moment, at most sseMaxStall in all)
// for the writer rather than drop the stream. Before, 20,000 small
// deltas overflowed a 4096-frame queue before the writer first ran: the
// connection was reset without even a status line, and the official
// OpenAI client, retrying a request that got no response, ran the turn
// again, twice.
func TestFastStreamIsWhole(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const chunks, size = 20000, 8
	want := strings.Join(floodModel{chunks, size}.text(&llm.Request{Messages: []llm.Message{llm.UserText("flood")}}), "")
	ts := floodServer(t, floodModel{chunks, size}, nil)
	for _, api := range []struct{ path, body, done string }{
		{"/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"flood"}]}`, "data: [DONE]"},
		{"/v1/responses", `{"model":"demo","stream":true,"input":"flood"}`, "event: response.completed"},
	} {
		req, _ := http.NewRequest("POST", ts.URL+api.path, strings.NewReader(api.body))
		req.Header.Set("Authorization", "Bearer "+oaiToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatalf("%s: %v", api.path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: status %d, %v after %d bytes", api.path, resp.StatusCode, err, len(body))
		}
		if bytes.Contains(body, []byte(server.CodeStreamDropped)) || !bytes.Contains(body, []byte(api.done)) {
			t.Fatalf("%s: the stream was dropped or cut (%d bytes): ...%s", api.path, len(body), body[max(0, len(body)-300):])
		}
		var text strings.Builder
		for line := range strings.SplitSeq(string(body), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var f struct {
				Type    string `json:"type"`
				Delta   string `json:"delta"`
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal([]byte(data), &f) != nil {
				continue
			}
			if f.Type == "response.output_text.delta" {
				text.WriteString(f.Delta)
			}
			for _, c := range f.Choices {
				text.WriteString(c.Delta.Content)
			}
		}
		if text.String() != want {
			t.Fatalf("%s: the streamed text has %d bytes, want %d", api.path, text.Len(), len(want))
		}
	}
}

// A stream that fell behind its turn (its client stopped reading for
// longer than the stall allows) but whose client reads again ends with
// an error frame (stream_dropped, naming the run) after what it got,
// which a client library surfaces as an API error, rather than with the
// turn's final frames or a reset: the answer is the run's, or the
// retry's with the Idempotency-Key.
func TestStreamThatFellBehindEndsWithError(t *testing.T) {
	const chunks, size = 1024, 4 << 10
	ts := floodServer(t, floodModel{chunks, size}, nil)
	for _, api := range []struct{ path, body, done string }{
		{"/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"flood"}]}`, "data: [DONE]"},
		{"/v1/responses", `{"model":"demo","stream":true,"input":"flood"}`, "response.completed"},
	} {
		sid := "behind" + strings.ReplaceAll(api.path, "/", "-")
		conn := dialStalled(t, ts.Listener.Addr().String())
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
			"%s: %s\r\nContent-Length: %d\r\n\r\n%s", api.path, oaiToken, server.SessionHeader, sid, len(api.body), api.body)
		for runStatus(t, ts, sid) != "completed" {
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v, %v", api.path, resp, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: the stream was cut after %d bytes: %v", api.path, len(body), err)
		}
		tail := body[max(0, len(body)-600):]
		if bytes.Contains(body, []byte(api.done)) || !bytes.Contains(tail, []byte("event: error\ndata: ")) || !bytes.Contains(tail, []byte(server.CodeStreamDropped)) {
			t.Fatalf("%s: the stream that fell behind ended with ...%s", api.path, tail)
		}
	}
}
