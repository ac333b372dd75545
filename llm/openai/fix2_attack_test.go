package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

// attackServer answers every request with status, contentType and body,
// written in pieces of chunk bytes (0: at once), each flushed, and stops
// after cut bytes of body (negative: the whole body) by ending the
// response (an EOF at the client).
func attackServer(t *testing.T, status int, contentType, body string, chunk, cut int) *openai.Provider {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
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
	p, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "k", Model: "gpt-test", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// streamText runs a streamed call and returns its text, or its error.
func streamText(p *openai.Provider) (string, error) {
	resp, err := llm.Complete(context.Background(), p, &llm.Request{Messages: []llm.Message{llm.UserText("Hi")}, Stream: true})
	if err != nil {
		return "", err
	}
	return resp.Message.Text(), nil
}

// TestStreamAttacks: what no recorded fixture does. A stream cut at any
// byte either completes with the whole reply (the cut fell after its
// last needed event) or fails as provider_unavailable (retryable), never
// as provider_invalid_response with half an event parsed as garbage; an
// event split across reads, CRLF or CR line ends read as the same
// stream; a 200 HTML page is provider_invalid_response.
func TestStreamAttacks(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "stream.sse"))
	if err != nil {
		t.Fatal(err)
	}
	stream := string(raw)
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
			text, err := streamText(attackServer(t, 200, "text/event-stream", tc.body, tc.chunk, -1))
			if err != nil || text != "Hello" {
				t.Fatalf("got %q, %v; want Hello", text, err)
			}
		})
	}
	t.Run("cut at every byte", func(t *testing.T) {
		for cut := range len(stream) {
			text, err := streamText(attackServer(t, 200, "text/event-stream", stream, 0, cut))
			switch {
			case err == nil && text != "Hello":
				t.Errorf("cut at %d (%q): completed with %q", cut, stream[:cut], text)
			case err != nil && errcat.Of(err) != errcat.ProviderUnavailable:
				t.Errorf("cut at %d (%q): %v (%s), want provider_unavailable", cut, stream[max(0, cut-20):cut], err, errcat.Of(err))
			}
		}
	})
	for _, ct := range []string{"text/html; charset=utf-8", "application/xhtml+xml"} {
		t.Run("200 "+ct, func(t *testing.T) {
			_, err := streamText(attackServer(t, 200, ct, "<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>\n", 0, -1))
			if errcat.Of(err) != errcat.ProviderInvalidResponse {
				t.Errorf("%v (%s), want provider_invalid_response", err, errcat.Of(err))
			}
		})
	}
	t.Run("429 with garbage Retry-After", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "soon; 1e9, -4")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(429)
			_, _ = w.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit_error"}}`))
		}))
		defer srv.Close()
		p, _ := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "k", Model: "m"})
		_, err := streamText(p)
		var pe *llm.ProviderError
		if errcat.Of(err) != errcat.ProviderRateLimit || !errors.As(err, &pe) || pe.RetryAfter != 0 {
			t.Errorf("%v, want provider_rate_limit without a wait", err)
		}
	})
}

// TestCompleteAttacks: a non-streamed call whose 200 answer is not a
// completion (an HTML page, nothing, JSON of another shape) fails as
// provider_invalid_response; one whose body is cut short (the
// connection closed before Content-Length bytes) as provider_unavailable
// (retryable); a stall mid-body at the call's timeout as
// provider_unavailable.
func TestCompleteAttacks(t *testing.T) {
	complete := `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}]}`
	for _, tc := range []struct {
		name, ct, body string
		declared       int // Content-Length declared, 0: none
		stall          bool
		want           errcat.Category
	}{
		{"HTML page", "text/html", "<html><body>Sign in</body></html>", 0, false, errcat.ProviderInvalidResponse},
		{"empty", "application/json", "", 0, false, errcat.ProviderInvalidResponse},
		{"null", "application/json", "null", 0, false, errcat.ProviderInvalidResponse},
		{"array", "application/json", "[]", 0, false, errcat.ProviderInvalidResponse},
		{"no choices", "application/json", `{"id":"c","choices":[]}`, 0, false, errcat.ProviderInvalidResponse},
		{"cut short", "application/json", complete[:40], len(complete), false, errcat.ProviderUnavailable},
		{"stalled", "application/json", complete[:40], len(complete), true, errcat.ProviderUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ct)
				if tc.declared > 0 {
					w.Header().Set("Content-Length", fmt.Sprint(tc.declared))
				}
				w.WriteHeader(200)
				_, _ = w.Write([]byte(tc.body))
				w.(http.Flusher).Flush()
				if tc.stall {
					<-r.Context().Done()
				}
			}))
			defer srv.Close()
			p, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "k", Model: "m", Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Complete(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("Hi")}})
			if errcat.Of(err) != tc.want {
				t.Errorf("%v (%s), want %s", err, errcat.Of(err), tc.want)
			}
		})
	}
}
