package spectest

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// ReplyBoundLimit is the Config.MaxResponseBytes [CheckReplyBound] gives
// the provider.
const ReplyBoundLimit = 64 << 10

// ReplyBoundKey is the API key [CheckReplyBound] gives the provider; no
// error may carry it.
const ReplyBoundKey = "sk-reply-bound-secret-0123456789"

// ReplyBound describes a mapping's wire for [CheckReplyBound].
type ReplyBound struct {
	// New returns the provider (an llm.Streamer) for an upstream at
	// baseURL, with APIKey [ReplyBoundKey] and the given
	// MaxResponseBytes.
	New func(baseURL string, maxResponseBytes int64) (llm.Provider, error)
	// Request is the call to make (Stream is set by the check).
	Request func() *llm.Request
	// Body is a complete non-streamed 2xx body whose reply is text.
	Body func(text string) []byte
	// Stream is a complete SSE stream (each event ending in a blank
	// line) whose reply text arrives in these deltas, one event each.
	Stream func(deltas []string) []byte
	// ToolStream is a complete SSE stream whose reply is one call of the
	// request's first tool with a JSON object of about n bytes as its
	// arguments, in deltas where the wire has them.
	ToolStream func(n int) []byte
}

// marker fills every reply text, so a leak into an error is visible.
const marker = "H"

// CheckReplyBound checks that a mapping bounds what one call reads of an
// upstream's reply (Config.MaxResponseBytes): a body, a stream's
// accumulated text and tool-call arguments, one SSE line, and a stream's
// total bytes. Within the bound the call succeeds; past it the call fails
// with provider_invalid_response wrapping llm.ErrResponseTooLarge, with
// neither the reply nor the key in the error, and stops reading (an
// endless upstream is cut off).
func CheckReplyBound(t *testing.T, rb ReplyBound) {
	t.Helper()
	const limit = ReplyBoundLimit
	type payload struct {
		body        []byte
		contentType string
		chunked     bool // no Content-Length: written in flushed pieces
		endless     []byte
		endlessPre  []byte
	}
	var (
		mu      sync.Mutex
		current payload
		written atomic.Int64
		handled = make(chan struct{}, 16)
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { handled <- struct{}{} }()
		mu.Lock()
		pl := current
		mu.Unlock()
		w.Header().Set("Content-Type", pl.contentType)
		if pl.endless != nil {
			// Up to 256 MiB, as fast as the client reads: a hostile or
			// runaway upstream.
			n, _ := w.Write(pl.endlessPre)
			written.Store(int64(n))
			for written.Load() < 256<<20 {
				n, err := w.Write(pl.endless)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
			return
		}
		if !pl.chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(pl.body)))
			_, _ = w.Write(pl.body)
			return
		}
		for b := pl.body; len(b) > 0; {
			n := min(len(b), 4096)
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	}))
	t.Cleanup(srv.Close)

	text := func(n int) string { return strings.Repeat(marker, n) }
	deltas := func(total, each int) []string {
		var d []string
		for total > 0 {
			n := min(total, each)
			d = append(d, text(n))
			total -= n
		}
		return d
	}
	bodyOf := func(n int) []byte { // a body of exactly n bytes
		over := len(rb.Body(""))
		return rb.Body(text(n - over))
	}
	const sse, js = "text/event-stream", "application/json"
	tests := []struct {
		name     string
		stream   bool
		pl       payload
		ok       bool
		wantText int // reply text length on success
		wantTool bool
		endless  bool
	}{
		{name: "body at the bound", pl: payload{body: bodyOf(limit), contentType: js}, ok: true, wantText: limit - len(rb.Body(""))},
		{name: "body one over the bound", pl: payload{body: bodyOf(limit + 1), contentType: js}},
		{name: "body one over the bound, chunked", pl: payload{body: bodyOf(limit + 1), contentType: js, chunked: true}},
		{name: "endless body", pl: payload{endless: bytes.Repeat([]byte(marker), 64<<10), endlessPre: rb.Body("")[:len(rb.Body(""))/2], contentType: js}, endless: true},
		{name: "stream text at the bound", stream: true, pl: payload{body: rb.Stream(deltas(limit, 1024)), contentType: sse, chunked: true}, ok: true, wantText: limit},
		{name: "stream text one over the bound", stream: true, pl: payload{body: rb.Stream(deltas(limit+1, 1024)), contentType: sse, chunked: true}},
		{name: "stream text far over the bound in small events", stream: true, pl: payload{body: rb.Stream(deltas(8*limit, 100)), contentType: sse, chunked: true}},
		{name: "stream of one enormous line", stream: true, pl: payload{body: rb.Stream([]string{text(50 * limit)}), contentType: sse, chunked: true}},
		{name: "stream of one endless line", stream: true, pl: payload{endless: bytes.Repeat([]byte(marker), 64<<10), endlessPre: []byte("data: "), contentType: sse}, endless: true},
		{name: "stream of many empty events", stream: true, pl: payload{body: rb.Stream(make([]string, 40*limit/len(rb.Stream([]string{""})))), contentType: sse, chunked: true}},
		{name: "stream tool call under the bound", stream: true, pl: payload{body: rb.ToolStream(limit / 2), contentType: sse, chunked: true}, ok: true, wantTool: true},
		{name: "stream tool call over the bound", stream: true, pl: payload{body: rb.ToolStream(2 * limit), contentType: sse, chunked: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			current = tt.pl
			mu.Unlock()
			written.Store(0)
			p, err := rb.New(srv.URL, limit)
			if err != nil {
				t.Fatal(err)
			}
			req := rb.Request()
			req.Stream = tt.stream
			resp, err := llm.Complete(t.Context(), p, req)
			select {
			case <-handled:
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream's handler did not return: the body was not closed")
			}
			if tt.ok {
				if err != nil {
					t.Fatalf("within the bound: %v", err)
				}
				if got := len(resp.Message.Text()); got != tt.wantText {
					t.Errorf("reply text of %d bytes, want %d", got, tt.wantText)
				}
				if tt.wantTool && len(resp.Message.ToolCalls) != 1 {
					t.Errorf("%d tool calls, want 1", len(resp.Message.ToolCalls))
				}
				return
			}
			if errcat.Of(err) != errcat.ProviderInvalidResponse || !errors.Is(err, llm.ErrResponseTooLarge) {
				t.Fatalf("over the bound: %v (category %q), want provider_invalid_response wrapping llm.ErrResponseTooLarge", err, errcat.Of(err))
			}
			if msg := err.Error(); strings.Contains(msg, marker+marker) || strings.Contains(msg, ReplyBoundKey) {
				t.Errorf("the error carries the reply or the key: %.200q", msg)
			}
			if tt.endless {
				// The client stopped reading: what the upstream managed to
				// write is the bound plus the connection's buffers, far
				// from the 256 MiB it would send.
				if n := written.Load(); n >= 64<<20 {
					t.Errorf("the upstream wrote %d bytes before the call failed", n)
				}
			}
		})
	}
}
