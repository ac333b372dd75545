package spectest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// WireAttacks describes a mapping's wire for [CheckStreamAttacks] and
// [CheckCompleteAttacks]: what no recorded fixture does to a provider.
type WireAttacks struct {
	// New returns the provider for an upstream at baseURL, its calls
	// bounded by timeout.
	New func(baseURL string, timeout time.Duration) (llm.Provider, error)
	// Request is the call to make, streamed or not.
	Request func(stream bool) *llm.Request
	// Stream is a complete SSE stream (LF line ends) of a reply.
	Stream string
	// Complete is a complete non-streamed 2xx body of a reply.
	Complete string
	// FirstEvent is the first event of a stream (ending in a blank
	// line), after which a stalled upstream sends nothing.
	FirstEvent string
	// Invalid are more non-streamed 2xx bodies (JSON) that are no
	// reply: each must fail provider_invalid_response.
	Invalid []string
}

// attackServer answers every request with a 200 of contentType and body,
// written in pieces of chunk bytes (0: at once), each flushed, and stops
// after cut bytes of body (negative: the whole body); declared, when
// positive, is the Content-Length it claims; stall holds the answer open
// after the body until the client gives up.
func attackServer(t *testing.T, contentType, body string, chunk, cut, declared int, stall bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		if declared > 0 {
			w.Header().Set("Content-Length", strconv.Itoa(declared))
		}
		w.WriteHeader(http.StatusOK)
		b := body
		if cut >= 0 && cut < len(b) {
			b = b[:cut]
		}
		n := chunk
		if n <= 0 {
			n = len(b) + 1
		}
		for len(b) > 0 {
			k := min(n, len(b))
			_, _ = w.Write([]byte(b[:k]))
			w.(http.Flusher).Flush()
			b = b[k:]
		}
		w.(http.Flusher).Flush()
		if stall {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// reply runs a call against the upstream at url and returns its message
// as JSON, or its error.
func (a WireAttacks) reply(t *testing.T, url string, timeout time.Duration, stream bool) (string, error) {
	t.Helper()
	p, err := a.New(url, timeout)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := llm.Complete(context.Background(), p, a.Request(stream))
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(resp.Message)
	return string(b), err
}

// CheckStreamAttacks checks a streamed call against an upstream that
// does what no recorded fixture does. A stream cut at any byte either
// completes with the whole reply (the cut fell after its last needed
// event) or fails as provider_unavailable (retryable), never as another
// reply or as provider_invalid_response with half an event parsed as
// garbage; an event split across reads, CRLF or CR line ends, and a
// leading byte order mark read as the same stream; a 200 HTML page is
// provider_invalid_response, not a truncated stream retried in vain.
func CheckStreamAttacks(t *testing.T, a WireAttacks) {
	t.Helper()
	const sse = "text/event-stream"
	want, err := a.reply(t, attackServer(t, sse, a.Stream, 0, -1, 0, false), 5*time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		body  string
		chunk int
	}{
		{"byte by byte", a.Stream, 1},
		{"seven bytes a read", a.Stream, 7},
		{"CRLF", strings.ReplaceAll(a.Stream, "\n", "\r\n"), 3},
		{"CR", strings.ReplaceAll(a.Stream, "\n", "\r"), 5},
		{"byte order mark", "\uFEFF" + a.Stream, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.reply(t, attackServer(t, sse, tc.body, tc.chunk, -1, 0, false), 5*time.Second, true)
			if err != nil || got != want {
				t.Fatalf("got %s, %v; want %s", got, err, want)
			}
		})
	}
	t.Run("cut at every byte", func(t *testing.T) {
		for cut := range len(a.Stream) {
			got, err := a.reply(t, attackServer(t, sse, a.Stream, 0, cut, 0, false), 5*time.Second, true)
			switch {
			case err == nil && got != want:
				t.Errorf("cut at %d: completed with %s", cut, got)
			case err != nil && errcat.Of(err) != errcat.ProviderUnavailable:
				t.Errorf("cut at %d (%q): %v (%s), want provider_unavailable", cut, a.Stream[max(0, cut-20):cut], err, errcat.Of(err))
			}
		}
	})
	for _, ct := range []string{"text/html; charset=utf-8", "application/xhtml+xml"} {
		t.Run("200 "+ct, func(t *testing.T) {
			_, err := a.reply(t, attackServer(t, ct, "<!DOCTYPE html><html><body><h1>Sign in</h1></body></html>\n", 0, -1, 0, false), 5*time.Second, true)
			if errcat.Of(err) != errcat.ProviderInvalidResponse {
				t.Errorf("%v (%s), want provider_invalid_response", err, errcat.Of(err))
			}
		})
	}
	t.Run("stalled after its first event", func(t *testing.T) {
		_, err := a.reply(t, attackServer(t, sse, a.FirstEvent, 0, -1, 0, true), 300*time.Millisecond, true)
		if errcat.Of(err) != errcat.ProviderUnavailable {
			t.Errorf("%v (%s), want provider_unavailable", err, errcat.Of(err))
		}
	})
}

// CheckCompleteAttacks checks a non-streamed call whose 200 answer is not
// a reply (an HTML page, nothing, JSON of another shape, a.Invalid):
// provider_invalid_response; and one whose body is cut short (the
// connection closed before Content-Length bytes) or stalls mid-body (at
// the call's timeout): provider_unavailable, retryable.
func CheckCompleteAttacks(t *testing.T, a WireAttacks) {
	t.Helper()
	type attack struct {
		name, ct, body string
		declared       int // Content-Length declared, 0: none
		stall          bool
		want           errcat.Category
	}
	cases := []attack{
		{"HTML page", "text/html", "<html><body>Sign in</body></html>", 0, false, errcat.ProviderInvalidResponse},
		{"empty", "application/json", "", 0, false, errcat.ProviderInvalidResponse},
		{"null", "application/json", "null", 0, false, errcat.ProviderInvalidResponse},
		{"array", "application/json", "[]", 0, false, errcat.ProviderInvalidResponse},
		{"cut short", "application/json", a.Complete[:40], len(a.Complete), false, errcat.ProviderUnavailable},
		{"stalled", "application/json", a.Complete[:40], len(a.Complete), true, errcat.ProviderUnavailable},
	}
	for i, body := range a.Invalid {
		cases = append(cases, attack{"invalid " + strconv.Itoa(i), "application/json", body, 0, false, errcat.ProviderInvalidResponse})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.reply(t, attackServer(t, tc.ct, tc.body, 0, -1, tc.declared, tc.stall), 300*time.Millisecond, false)
			if errcat.Of(err) != tc.want {
				t.Errorf("%v (%s), want %s", err, errcat.Of(err), tc.want)
			}
		})
	}
}
