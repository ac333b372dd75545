package adaptertest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Gemini3Upstream serves the Gemini API's generateContent (and its
// stream) as Gemini 3 models validate thought signatures, for t's
// duration: a request holding a functionCall part sent back without the
// thoughtSignature the model gave it is refused with 400
// INVALID_ARGUMENT ("Function call is missing a thought_signature"), as
// Gemini 3 refuses it. A request with no function response yet is
// answered with call (a functionCall object, such as
// {"name":"lookup_order","args":{"order":"7"}}) signed with signature
// (base64); one with a function response is answered with the text
// answer. It returns the server (its URL is a base_url) and a function
// returning the request bodies received so far.
func Gemini3Upstream(t testing.TB, call, signature, answer string) (*httptest.Server, func() []string) {
	t.Helper()
	callResp, _ := json.Marshal(map[string]any{"candidates": []any{map[string]any{"finishReason": "STOP",
		"content": map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": json.RawMessage(call), "thoughtSignature": signature}}}}}})
	answerResp, _ := json.Marshal(map[string]any{"candidates": []any{map[string]any{"finishReason": "STOP",
		"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": answer}}}}}})
	return RecordingServer(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		var req struct {
			Contents []struct {
				Parts []struct {
					FunctionCall     json.RawMessage `json:"functionCall"`
					FunctionResponse json.RawMessage `json:"functionResponse"`
					ThoughtSignature string          `json:"thoughtSignature"`
				} `json:"parts"`
			} `json:"contents"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answered := false
		for _, c := range req.Contents {
			for _, p := range c.Parts {
				if p.FunctionCall != nil && p.ThoughtSignature == "" {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, `{"error":{"code":400,"message":"Function call is missing a thought_signature in functionCall parts.","status":"INVALID_ARGUMENT"}}`)
					return
				}
				answered = answered || p.FunctionResponse != nil
			}
		}
		resp := callResp
		if answered {
			resp = answerResp
		}
		if strings.Contains(r.URL.Path, ":streamGenerateContent") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+string(resp)+"\r\n\r\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resp)
	})
}

// RecordingServer serves handle, given each request and its body, for
// t's duration, and keeps the bodies: it returns the server (its URL is
// a base URL) and a function returning the request bodies received so
// far, in order.
func RecordingServer(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte)) (*httptest.Server, func() []string) {
	t.Helper()
	var (
		mu     sync.Mutex
		bodies []string
	)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		handle(w, r, b)
	}))
	t.Cleanup(ts.Close)
	return ts, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), bodies...) }
}
