package chatcli_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/chatcli"
	"github.com/armature-go/armature/runtime"
)

// endless repeats unit without end: a server's answer that never ends.
type endless struct {
	unit string
	off  int
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], e.unit[e.off:])
		n += c
		e.off = (e.off + c) % len(e.unit)
	}
	return n, nil
}

// hostileSlack is what a server can write beyond a bound before it
// notices that the client stopped reading: the sockets' buffers (a few
// MiB on loopback) and the client's own buffering.
const hostileSlack = 48 << 20

// flood writes head, then unit again and again until the client stops
// reading, and adds what it wrote to written. It gives up at
// limit+2*hostileSlack bytes, far past any bound, which only a client
// that reads without bound gets to (the code before the bounds: the
// safety net keeps it from eating the test machine's memory).
func flood(w http.ResponseWriter, head, unit string, limit int64, written *atomic.Int64) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	n, _ := io.CopyN(w, io.MultiReader(strings.NewReader(head), &endless{unit: unit}), limit+2*hostileSlack)
	written.Add(n)
}

// checkStopped fails t unless the client stopped reading the flood
// within the slack past limit.
func checkStopped(t *testing.T, written *atomic.Int64, limit int64) {
	t.Helper()
	if n := written.Load(); n <= limit || n >= limit+hostileSlack {
		t.Errorf("the server wrote %d bytes; want more than the bound %d (it offered far more), and less than %d (the client stops reading)",
			n, limit, limit+hostileSlack)
	}
}

// big is a string of n bytes, the payload of the hostile answers.
func big(n int) string { return strings.Repeat("x", n) }

func jsonHeader(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
}

// TestClientBounds: each answer of a server is read up to its bound and
// no further: past it the call fails with a *TooLargeError (errors.Is
// ErrTooLarge) saying what exceeded which bound, promptly, while the
// hostile server offers far more (endless answers; a list longer than
// the bound). Before, the client read all a server sent: an endless
// answer until it ran out of memory.
func TestClientBounds(t *testing.T) {
	msg := `{"role":"assistant","content":"` + big(64<<10) + `"},`
	for _, tc := range []struct {
		name string
		// serve answers the requests; it may flood.
		serve func(w http.ResponseWriter, r *http.Request, written *atomic.Int64)
		call  func(ctx context.Context, c *chatcli.Client) error
		// flooded is the bound of a flooding server, 0 when it does
		// not flood.
		flooded int64
		// want is the error's text; "" for an *APIError.
		want string
	}{{
		name: "a turn's endless answer",
		serve: func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
			jsonHeader(w, 200)
			flood(w, `{"outcome":"completed","session_id":"s","replies":[`, msg, chatcli.MaxAnswerBytes, written)
		},
		call: func(ctx context.Context, c *chatcli.Client) error {
			_, err := c.Send(ctx, "s", "hi")
			return err
		},
		flooded: chatcli.MaxAnswerBytes,
		want:    "chatcli: POST /v1/sessions/s/messages: the answer exceeds 8 MiB, the most the client reads",
	}, {
		name: "an endless answer of whitespace",
		serve: func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
			jsonHeader(w, 200)
			flood(w, "", "    \n", chatcli.MaxAnswerBytes, written)
		},
		call: func(ctx context.Context, c *chatcli.Client) error {
			_, err := c.CreateSession(ctx, "")
			return err
		},
		flooded: chatcli.MaxAnswerBytes,
		want:    "chatcli: POST /v1/sessions: the answer exceeds 8 MiB, the most the client reads",
	}, {
		name: "an endless history",
		serve: func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
			jsonHeader(w, 200)
			flood(w, `{"session_id":"s","messages":[`, msg, chatcli.MaxHistoryBytes, written)
		},
		call: func(ctx context.Context, c *chatcli.Client) error {
			_, err := c.GetSession(ctx, "s")
			return err
		},
		flooded: chatcli.MaxHistoryBytes,
		want:    "chatcli: GET /v1/sessions/s: the session's history exceeds 16 MiB, the most the client reads",
	}, {
		name: "a history of too many messages",
		serve: func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
			jsonHeader(w, 200)
			io.WriteString(w, `{"session_id":"s","messages":[`+strings.Repeat(`{"role":"user"},`, chatcli.MaxHistoryMessages)+`{"role":"user"}]}`)
		},
		call: func(ctx context.Context, c *chatcli.Client) error {
			_, err := c.GetSession(ctx, "s")
			return err
		},
		want: "chatcli: GET /v1/sessions/s: the session's history exceeds 100000 messages, the most the client reads",
	}, {
		name: "session pages without end",
		serve: func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
			jsonHeader(w, 200)
			fmt.Fprintf(w, `{"sessions":[],"next_page_token":"p%s"}`, r.URL.Query().Get("page_token"))
		},
		call: func(ctx context.Context, c *chatcli.Client) error {
			_, err := c.ListSessions(ctx)
			return err
		},
		want: "chatcli: GET /v1/sessions: the session list exceeds 1000 pages, the most the client reads",
	}, {
		name: "too many sessions",
		serve: func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
			jsonHeader(w, 200)
			next := `,"next_page_token":"more"`
			if r.URL.Query().Get("page_token") != "" {
				next = ""
			}
			fmt.Fprintf(w, `{"sessions":[%s{}]%s}`, strings.Repeat(`{},`, chatcli.MaxSessions/2), next)
		},
		call: func(ctx context.Context, c *chatcli.Client) error {
			_, err := c.ListSessions(ctx)
			return err
		},
		want: "chatcli: GET /v1/sessions: the session list exceeds 10000 sessions, the most the client reads",
	}, {
		name: "a page of too many runs",
		serve: func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
			jsonHeader(w, 200)
			fmt.Fprintf(w, `{"runs":[%s{}]}`, strings.Repeat(`{"id":"r","status":"started"},`, chatcli.MaxRuns))
		},
		call: func(ctx context.Context, c *chatcli.Client) error {
			_, err := c.StartedRuns(ctx, "s")
			return err
		},
		want: "chatcli: GET /v1/sessions/s/runs: the page of runs exceeds 1000 runs, the most the client reads",
	}, {
		name: "an endless error answer",
		serve: func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadGateway)
			flood(w, "upstream says: ", "no ", chatcli.MaxErrorBytes, written)
		},
		call: func(ctx context.Context, c *chatcli.Client) error {
			_, err := c.Send(ctx, "s", "hi")
			var ae *chatcli.APIError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || len(ae.Message) > chatcli.MaxErrorBytes+100 ||
				!strings.HasPrefix(ae.Message, "upstream says: no no") || !strings.HasSuffix(ae.Message, "… (cut: the answer exceeds 64 KiB)") {
				return fmt.Errorf("not the error answer cut at its bound: %.200v", err)
			}
			return nil
		},
		flooded: chatcli.MaxErrorBytes,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var written atomic.Int64
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tc.serve(w, r, &written) }))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			err := tc.call(ctx, newClient(t, ts.URL, ""))
			took := time.Since(start)
			ts.Close() // waits for the handler: written is final
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				var tl *chatcli.TooLargeError
				if !errors.Is(err, chatcli.ErrTooLarge) || !errors.As(err, &tl) || err.Error() != tc.want {
					t.Fatalf("got %.300v\nwant %s (errors.Is ErrTooLarge)", err, tc.want)
				}
			}
			if took > 45*time.Second {
				t.Errorf("the call took %v", took)
			}
			if tc.flooded > 0 {
				checkStopped(t, &written, tc.flooded)
			}
		})
	}
}

// TestStreamBounds: the event stream holds at most MaxEventBytes of an
// event, however the server makes it longer (an endless data line, a
// comment line that never ends, data lines without the blank line that
// ends an event): past it, Events ends with a *TooLargeError. An event
// whose id came before is skipped: LastID moves to it, so that the
// stream reopened from LastID starts after it. Before, Events read a
// line and an event whole, until the client ran out of memory.
func TestStreamBounds(t *testing.T) {
	for _, tc := range []struct {
		name, head, unit string
		wantLastID       int64
	}{
		{"an endless data line", "id: 3\ndata: {\"id\":3,\"type\":\"x\"}\n\ndata: ", "x", 3},
		{"an endless comment line", ": ", "keep-alive ", 0},
		{"an event that never ends", "data: {\n", "data: \"pad\": 1,\n", 0},
		{"an event that never ends, its id first", "id: 9\nevent: runtime.adapter.event\n", "data: xxxxxxxxxxxxxxxxxxxx\n", 9},
		{"endless lines of one event's id", "data: {}\n", "id: 12345678901234567890\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var written atomic.Int64
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				flood(w, tc.head, tc.unit, chatcli.MaxEventBytes, &written)
			}))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := newClient(t, ts.URL, "").Subscribe(ctx, "s", 0)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var got error
			for _, err := range s.Events() {
				if err != nil {
					got = err
					break
				}
			}
			took := time.Since(start)
			s.Close()
			ts.Close()
			want := "chatcli: event stream: an event exceeds 4 MiB, the most the client reads"
			if !errors.Is(got, chatcli.ErrTooLarge) || got.Error() != want {
				t.Fatalf("got %.300v, want %s", got, want)
			}
			if s.LastID != tc.wantLastID {
				t.Errorf("LastID = %d, want %d", s.LastID, tc.wantLastID)
			}
			if took > 45*time.Second {
				t.Errorf("reading the stream took %v", took)
			}
			checkStopped(t, &written, chatcli.MaxEventBytes)
		})
	}
}

// waitLong is waitFor for the tests that push megabytes through the
// client: it waits up to a minute (a loaded machine under -race is slow
// at it), and a failure shows only the end of the output.
func (s *session) waitLong(want string) {
	s.t.Helper()
	deadline := time.After(time.Minute)
	for {
		all := s.out.String()
		if i := strings.Index(all[s.mark:], want); i >= 0 {
			s.mark += i + len(want)
			return
		}
		select {
		case <-s.out.changed:
		case <-time.After(50 * time.Millisecond):
		case err := <-s.done:
			s.done <- err
			if all := s.out.String(); !strings.Contains(all[s.mark:], want) {
				s.t.Fatalf("Run returned (%v); output lacks %q; it ends:\n%s", err, want, all[max(s.mark, len(all)-1000):])
			}
		case <-deadline:
			s.t.Fatalf("output lacks %q; it ends:\n%s", want, all[max(s.mark, len(all)-1000):])
		}
	}
}

// frameJSON is one SSE frame of a runtime event, without an id line:
// its id (the client passes on events of id 1 and above) is 1, so that
// a flood repeats the frame as it is.
func frameJSON(typ, run string, data string) string {
	if data == "" {
		data = "null"
	}
	return fmt.Sprintf("data: {\"id\":1,\"type\":%q,\"requestId\":%q,\"data\":%s}\n\n", typ, run, data)
}

// TestChatEndlessReply: a turn whose stream delivers reply text without
// end (and whose answer never comes) is given up at MaxTurnBytes of
// text: the client says so and goes back to the prompt, and stays
// usable. Before, it printed and kept the text without bound, waiting
// for the answer.
func TestChatEndlessReply(t *testing.T) {
	var written atomic.Int64
	turn := make(chan struct{}, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/s":
			jsonHeader(w, 200)
			io.WriteString(w, `{"session_id":"s","messages":[]}`)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/s/events":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-turn:
			case <-r.Context().Done():
				return
			}
			delta := frameJSON(runtime.EventAdapterEvent, "r1", fmt.Sprintf(`{"event":{"phase":%q,"text":"%s"}}`, runtime.PhaseOutputDelta, big(1<<20)))
			flood(w, frameJSON(runtime.EventRequestStarted, "r1", ""), delta, chatcli.MaxTurnBytes, &written)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions/s/messages":
			io.Copy(io.Discard, r.Body) // so that the server sees the client go
			turn <- struct{}{}
			<-r.Context().Done() // no answer
		default:
			jsonHeader(w, 404)
		}
	}))
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, ""), Session: "s"})
	s.waitFor("you> ")
	s.send("hello")
	s.waitLong("agent> xxx")
	s.waitLong("  ! error [too_large]: the turn's streamed reply exceeds 8 MiB, the most the client reads\n" +
		"  (stopped waiting for the turn's answer: the turn may still run on the server)\nyou> ")
	s.send("/help")
	s.waitFor("Commands:")
	s.quit()
	ts.Close()
	// The stream went on (events of a size the client reads, which it
	// reads and drops): the client printed and held no more of them.
	if n := len(s.out.String()); n > chatcli.MaxTurnBytes+1<<20 {
		t.Errorf("the client printed %d bytes", n)
	}
	if n := written.Load(); n <= chatcli.MaxTurnBytes {
		t.Errorf("the server wrote %d bytes: the test wants it to write more than the bound", n)
	}
}

// TestChatEventTooLarge: an event larger than MaxEventBytes is skipped
// when its id is known (the stream reopens after it, and the user is
// told); when it is not, the client tries again and, getting no
// further, stops following the stream, says so, and turns still print
// (from their answers, without waiting for the stream). Before, the
// client read the event whole, without bound.
func TestChatEventTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		// after is the Last-Event-ID of the reconnection that gets past
		// the event; "" when none does.
		after, want string
	}{
		{"its id known", "id: 7\nevent: runtime.adapter.event\ndata: {\"pad\":\"", "7",
			"  ! event stream: an event exceeds 4 MiB, the most the client reads; skipped it\n"},
		{"its id not known", "data: {\"pad\":\"", "",
			"  ! event stream: an event exceeds 4 MiB, the most the client reads, again and again: stopped following the stream (turns still print when they end; /switch s follows it again)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var written atomic.Int64
			var conns atomic.Int32
			past := make(chan string, 10)
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/s":
					jsonHeader(w, 200)
					io.WriteString(w, `{"session_id":"s","messages":[]}`)
				case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/s/events":
					conns.Add(1)
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(200)
					if id := r.Header.Get("Last-Event-ID"); tc.after != "" && id == tc.after {
						past <- id
						w.(http.Flusher).Flush()
						<-r.Context().Done()
						return
					}
					flood(w, tc.head, "x", chatcli.MaxEventBytes, &written)
				case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions/s/messages":
					jsonHeader(w, 200)
					io.WriteString(w, `{"outcome":"completed","session_id":"s","run_id":"r1","replies":[{"role":"assistant","content":"hi there"}]}`)
				default:
					jsonHeader(w, 404)
				}
			}))
			s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, ""), Session: "s", CatchUp: time.Minute})
			s.waitLong(tc.want)
			if tc.after != "" {
				if got := <-past; got != tc.after {
					t.Errorf("reconnected after %q, want %q", got, tc.after)
				}
			} else if n := conns.Load(); n != 3 {
				t.Errorf("%d connections, want 3", n)
			}
			if tc.after == "" {
				start := time.Now()
				s.send("hello")
				s.waitLong("agent> hi there\n")
				if took := time.Since(start); took > 30*time.Second { // CatchUp is a minute
					t.Errorf("the turn took %v: it waited for a stream no longer followed", took)
				}
			}
			s.quit()
			ts.Close()
			floods := int64(conns.Load())
			if tc.after != "" {
				floods-- // the reconnection after the event
			}
			checkStopped(t, &written, floods*chatcli.MaxEventBytes)
		})
	}
}

// TestChatHistoryAndListTooLarge: a session whose history is more than
// the client reads is still continued (the client says so), /history
// and /sessions report their bound, and the client goes on. Before, the
// client read an endless history (or list) without bound.
func TestChatHistoryAndListTooLarge(t *testing.T) {
	var written atomic.Int64
	msg := `{"role":"user","content":"` + big(64<<10) + `"},`
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/s":
			jsonHeader(w, 200)
			flood(w, `{"session_id":"s","messages":[`, msg, chatcli.MaxHistoryBytes, &written)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions":
			jsonHeader(w, 200)
			fmt.Fprintf(w, `{"sessions":[{"session_id":"s"}],"next_page_token":"p%s"}`, r.URL.Query().Get("page_token"))
		case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/s/events":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			jsonHeader(w, 404)
		}
	}))
	s := startChat(t, chatcli.Config{Client: newClient(t, ts.URL, ""), Session: "s"})
	s.waitLong("armature chat: continuing session s on " + ts.URL + " (its history is more than the client reads: /history cannot show it)\n")
	s.waitLong("you> ")
	s.send("/history")
	s.waitLong("  ! error [too_large]: GET /v1/sessions/s?limit=50: the session's history exceeds 16 MiB, the most the client reads\nyou> ")
	s.send("/sessions")
	s.waitLong("  ! error [too_large]: GET /v1/sessions: the session list exceeds 1000 pages, the most the client reads\nyou> ")
	s.send("/switch s")
	s.waitLong("switched to session s (its history is more than the client reads: /history cannot show it)\nyou> ")
	s.quit()
	ts.Close()
	checkStopped(t, &written, 3*chatcli.MaxHistoryBytes)
}
