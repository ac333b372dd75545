package gemini_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
)

// attackProvider answers every request with a 200 of contentType and
// body, written in pieces of chunk bytes (0: at once), each flushed, and
// stops after cut bytes of body (negative: the whole body).
func attackProvider(t *testing.T, contentType, body string, chunk, cut int) *gemini.Provider {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		b := body
		if cut >= 0 && cut < len(b) {
			b = b[:cut]
		}
		if chunk <= 0 {
			chunk = len(b) + 1
		}
		for len(b) > 0 {
			n := min(chunk, len(b))
			_, _ = w.Write([]byte(b[:n]))
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	}))
	t.Cleanup(srv.Close)
	p, err := gemini.New(gemini.Config{BaseURL: srv.URL, Model: "gemini-test", CallNonce: func() string { return "n" }, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// attackReply runs a streamed call and returns its message as JSON, or
// its error.
func attackReply(p *gemini.Provider) (string, error) {
	resp, err := llm.Complete(context.Background(), p, geminiStreamRequest(nil))
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(resp.Message)
	return string(b), err
}

// TestStreamAttacks: what no recorded fixture does. A stream cut at any
// byte either completes with the whole reply or fails as
// provider_unavailable (retryable), never as a different reply or as
// provider_invalid_response with half an event parsed as garbage; an
// event split across reads, CRLF or CR line ends read as the same
// stream; a 200 HTML page is provider_invalid_response.
func TestStreamAttacks(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "stream", "thought_text_calls.sse"))
	if err != nil {
		t.Fatal(err)
	}
	stream := string(raw)
	want, err := attackReply(attackProvider(t, "text/event-stream", stream, 0, -1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		body  string
		chunk int
	}{
		{"byte by byte", stream, 1},
		{"seven bytes a read", stream, 7},
		{"CRLF", strings.ReplaceAll(stream, "\n", "\r\n"), 3},
		{"CR", strings.ReplaceAll(stream, "\n", "\r"), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := attackReply(attackProvider(t, "text/event-stream", tc.body, tc.chunk, -1))
			if err != nil || got != want {
				t.Fatalf("got %s, %v; want %s", got, err, want)
			}
		})
	}
	t.Run("cut at every byte", func(t *testing.T) {
		for cut := range len(stream) {
			got, err := attackReply(attackProvider(t, "text/event-stream", stream, 0, cut))
			switch {
			case err == nil && got != want:
				t.Errorf("cut at %d: completed with %s", cut, got)
			case err != nil && errcat.Of(err) != errcat.ProviderUnavailable:
				t.Errorf("cut at %d (%q): %v (%s), want provider_unavailable", cut, stream[max(0, cut-20):cut], err, errcat.Of(err))
			}
		}
	})
	t.Run("200 HTML", func(t *testing.T) {
		_, err := attackReply(attackProvider(t, "text/html; charset=utf-8", "<!DOCTYPE html><html><body>Sign in</body></html>\n", 0, -1))
		if errcat.Of(err) != errcat.ProviderInvalidResponse {
			t.Errorf("%v (%s), want provider_invalid_response", err, errcat.Of(err))
		}
	})
}

// TestCompleteAttacks: a non-streamed call whose 200 answer is not a
// reply (an HTML page, nothing, JSON of another shape) fails as
// provider_invalid_response; one whose body is cut short (the
// connection closed before Content-Length bytes) or stalls mid-body (at
// the call's timeout) as provider_unavailable, retryable; so does a
// stream that stalls after its first event.
func TestCompleteAttacks(t *testing.T) {
	complete := `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello there"}]},"finishReason":"STOP"}]}`
	for _, tc := range []struct {
		name, ct, body string
		declared       int // Content-Length declared, 0: none
		stall, stream  bool
		want           errcat.Category
	}{
		{"HTML page", "text/html", "<html><body>Sign in</body></html>", 0, false, false, errcat.ProviderInvalidResponse},
		{"empty", "application/json", "", 0, false, false, errcat.ProviderInvalidResponse},
		{"null", "application/json", "null", 0, false, false, errcat.ProviderInvalidResponse},
		{"array", "application/json", "[]", 0, false, false, errcat.ProviderInvalidResponse},
		{"cut short", "application/json", complete[:40], len(complete), false, false, errcat.ProviderUnavailable},
		{"stalled", "application/json", complete[:40], len(complete), true, false, errcat.ProviderUnavailable},
		{"stream stalled", "text/event-stream", `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]}}]}` + "\n\n", 0, true, true, errcat.ProviderUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ct)
				if tc.declared > 0 {
					w.Header().Set("Content-Length", strconv.Itoa(tc.declared))
				}
				w.WriteHeader(200)
				_, _ = w.Write([]byte(tc.body))
				w.(http.Flusher).Flush()
				if tc.stall {
					<-r.Context().Done()
				}
			}))
			defer srv.Close()
			p, err := gemini.New(gemini.Config{BaseURL: srv.URL, Model: "gemini-test", CallNonce: func() string { return "n" }, Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			req := geminiStreamRequest(nil)
			req.Stream = tc.stream
			_, err = llm.Complete(context.Background(), p, req)
			if errcat.Of(err) != tc.want {
				t.Errorf("%v (%s), want %s", err, errcat.Of(err), tc.want)
			}
		})
	}
}
