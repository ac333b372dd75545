package adk_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// TestGeminiTransportFailures: with ADK-Go's own Gemini client, an
// upstream that answers nothing, half a stream or garbage fails the
// turn with the category Armature's own Gemini client gives it
// (provider_unavailable, retryable, for no answer or a cut one;
// provider_invalid_response for garbage), not node_exception; and a
// stream that ends cleanly but without a finish reason (the connection
// closed between two chunks) is a cut answer, not a complete one. A
// whole stream still completes. A blocked prompt (no candidate), streamed
// or not, is an empty reply, as a native agent's. The API key is in no
// error, nor the reply.
func TestGeminiTransportFailures(t *testing.T) {
	const key = "secret-gemini-key-0123456789"
	chunk := func(text, finish string) string {
		c := map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}}
		if finish != "" {
			c["finishReason"] = finish
		}
		b, _ := json.Marshal(map[string]any{"candidates": []any{c}})
		return "data: " + string(b) + "\r\n\r\n"
	}
	cases := []struct {
		name      string
		streaming bool
		handler   http.HandlerFunc
		model     string          // more keys of the model: section
		empty     bool            // the failure is an empty reply (agent.ErrEmptyReply)
		want      errcat.Category // "" means the turn completes
		reply     string
	}{
		{name: "whole stream", streaming: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(chunk("Hello ", "") + chunk("there.", "STOP")))
		}, reply: "Hello there."},
		{name: "stream ends without a finish reason", streaming: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(chunk("Hello, I was about to", "")))
		}, want: errcat.ProviderUnavailable},
		{name: "stream cut mid-chunk", streaming: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(chunk("Hello, ", "")))
			w.(http.Flusher).Flush()
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			_ = buf.Flush()
			_, _ = conn.Write([]byte("3f\r\ndata: {\"candidates\": [{\"content"))
			_ = conn.Close()
		}, want: errcat.ProviderUnavailable},
		{name: "no answer", handler: func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}, want: errcat.ProviderUnavailable},
		{name: "garbage", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"candidates": [{"content": {"parts": [{"text": 12`))
		}, want: errcat.ProviderInvalidResponse},
		{name: "garbage in a stream", streaming: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(chunk("Hello, ", "") + "data: {\"candidates\": nope}\r\n\r\n" + chunk("there.", "STOP")))
		}, want: errcat.ProviderInvalidResponse},
		{name: "no answer in time", model: `"timeout":"200ms"`, handler: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // the server sees the client go once the body is read
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}, want: errcat.ProviderUnavailable},
		{name: "a stream that stalls", streaming: true, model: `"timeout":"300ms"`, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(chunk("Hello, ", "")))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}, want: errcat.ProviderUnavailable},
		{name: "a reply past the bound", model: `"max_response_bytes":"4KiB"`, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"candidates": [{"content": {"role": "model", "parts": [{"text": "` + strings.Repeat("BODYMARKER", 1000) + `"}]}, "finishReason": "STOP"}]}`))
		}, want: errcat.ProviderInvalidResponse},
		{name: "a stream past the bound", streaming: true, model: `"max_response_bytes":4096`, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for range 100 {
				if _, err := w.Write([]byte(chunk("BODYMARKER ", ""))); err != nil {
					return
				}
			}
			_, _ = w.Write([]byte(chunk("done", "STOP")))
		}, want: errcat.ProviderInvalidResponse},
		{name: "a reply within the bound", model: `"max_response_bytes":"1MiB"`, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"candidates": [{"content": {"role": "model", "parts": [{"text": "` + strings.Repeat("a", 100000) + `"}]}, "finishReason": "STOP"}]}`))
		}, reply: strings.Repeat("a", 100000)},
		{name: "a huge error page", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			for range 1 << 10 {
				if _, err := w.Write([]byte(strings.Repeat("<p>BODYMARKER</p>", 64))); err != nil {
					return
				}
			}
		}, want: errcat.ProviderUnavailable},
		{name: "garbage quoting the reply", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"candidates": [{"content": {"parts": [{"text": "BODYMARKER"}]}}], "x": nope}`))
		}, want: errcat.ProviderInvalidResponse},
		{name: "a blocked prompt", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 5}}`))
		}, want: errcat.ProviderInvalidResponse, empty: true},
		{name: "a blocked prompt, streamed", streaming: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(`data: {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 5}}` + "\r\n\r\n"))
		}, want: errcat.ProviderInvalidResponse, empty: true},
		{name: "a withheld answer", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"candidates": [{"finishReason": "SAFETY"}]}`))
		}, want: errcat.ProviderInvalidResponse, empty: true},
		{name: "a withheld answer, streamed", streaming: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(chunk("", "SAFETY")))
		}, want: errcat.ProviderInvalidResponse, empty: true},
		{name: "answer cut short", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "500")
			_, _ = w.Write([]byte(`{"candidates": [{"content": {"parts": [{"text": "Hel`))
		}, want: errcat.ProviderUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			var more []string
			if c.model != "" {
				more = append(more, c.model)
			}
			res, err := geminiTurn(t, srv.URL, key, `"streaming":`+strconv.FormatBool(c.streaming), more...)
			if c.want == "" {
				if err != nil {
					t.Fatalf("the turn failed: %v", err)
				}
				if res == nil || res.Output == nil || res.Output.Text != c.reply {
					t.Fatalf("result %+v, want the reply %q", res, c.reply)
				}
				return
			}
			if err == nil {
				t.Fatalf("the turn succeeded (%+v), want it to fail in %s", res, c.want)
			}
			if got := errcat.Of(err); got != c.want {
				t.Fatalf("the turn failed in %q (%v), want %q", got, err, c.want)
			}
			if errors.Is(err, agent.ErrEmptyReply) != c.empty {
				t.Fatalf("the failure %v: an empty reply is %v, want %v", err, !c.empty, c.empty)
			}
			if strings.Contains(err.Error(), key) {
				t.Fatalf("the error carries the API key: %v", err)
			}
			// The error quotes nothing of the reply past a line, and no
			// reply text the SDK could not decode.
			if strings.Contains(err.Error(), "BODYMARKER") && c.want != errcat.ProviderUnavailable || len(err.Error()) > 70<<10 {
				t.Fatalf("the error quotes the reply (%d bytes): %.300s", len(err.Error()), err)
			}
		})
	}
}

// geminiTurn runs one turn ("hello") of an ADK agent on ADK-Go's own
// Gemini client, whose API is at url and whose API key is key; section
// holds more keys of the adk: section ("" for none), model more keys of
// its model: section.
func geminiTurn(t *testing.T, url, key, section string, model ...string) (*adapter.Result, error) {
	t.Helper()
	t.Setenv("TEST_GEMINI_KEY", key)
	if section != "" {
		section += ","
	}
	ctx := context.Background()
	section = `{` + section + `"model":{"provider":"gemini","name":"gemini-test","base_url":` + quote(url) + `,"api_key_env":"TEST_GEMINI_KEY"` + strings.Join(append([]string{""}, model...), ",") + `}}`
	ag := &adapter.Agent{ID: "x", Backend: adk.Name, Config: json.RawMessage(section)}
	a, err := adk.Factory(ctx, adapter.FactoryRequest{Agent: ag})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.(interface{ Close() error }).Close() }()
	drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
	return a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello")}, drop)
}
