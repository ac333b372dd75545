package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

func FuzzDecodeCompletion(f *testing.F) {
	for _, seed := range []string{
		`{"model":"demo","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"demo","stream":true,"stream_options":{"include_usage":true},"metadata":{"session_id":"s-1"},"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":"x"},{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"user","content":[{"type":"text","text":"t"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}]}`,
		`{"messages":[{"role":"developer","content":[{"type":"text","text":"d"}]},{"role":"user","content":"a"}],"n":1,"tools":[]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},{"role":"user","content":"a"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`,
		`{"messages":[{"role":"user","content":"a"}],"metadata":{"session_id":7}}`,
		`{"messages":[{"role":"tool","tool_call_id":"x","content":"r"},{"role":"user","content":"a"}]}`,
		`{"n":2}`, `{"messages":[{"role":"user","content":"a"}],"response_format":{"type":"text"}}`, `{"response_format":{"type":"json_object"}}`, `[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeCompletion(body)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Message == "" || ae.Code == "" {
				t.Fatalf("decodeCompletion error %#v is not a 400 *Error", err)
			}
			return
		}
		checkDecodedTurn(t, p.history, p.turn, p.sessionID)
	})
}

// checkDecodedTurn checks what a decoder accepted: a user turn after a
// valid, storable history without system messages, and a valid session
// id when one is named.
func checkDecodedTurn(t *testing.T, history []llm.Message, turn llm.Message, sessionID string) {
	t.Helper()
	if turn.Role != llm.RoleUser {
		t.Fatalf("the turn's role is %q", turn.Role)
	}
	msgs := append(history[:len(history):len(history)], turn)
	if err := llm.ValidateMessages(msgs, nil); err != nil {
		t.Fatalf("accepted messages do not validate: %v", err)
	}
	for _, m := range history {
		if m.Role == llm.RoleSystem {
			t.Fatal("a system message reached the history")
		}
	}
	if _, err := json.Marshal(history); err != nil {
		t.Fatalf("the history cannot be stored: %v", err)
	}
	if sessionID != "" && !validID(sessionID) {
		t.Fatalf("invalid session id %q accepted", sessionID)
	}
}

func TestTurnErrorStatus(t *testing.T) {
	for _, tc := range []struct {
		bucket     harness.Bucket
		status     int
		typ        string
		retryAfter string
	}{
		{harness.UserCorrectable, 400, "invalid_request_error", ""},
		{harness.RetryableTransient, 503, "server_error", "1"},
		{harness.SessionTerminating, 409, "conflict_error", ""},
	} {
		t.Run(string(tc.bucket), func(t *testing.T) {
			secret := errors.New("dial tcp 10.0.0.7:5432: secret internals")
			out := &chat.Errored{Bucket: tc.bucket, Category: errcat.Category("some_category"), Reply: llm.SystemText("Try again."), Err: secret}
			c := &completion{}
			if c.turnError(&chat.Completed{}) != nil {
				t.Fatal("a completed turn is an error")
			}
			e := c.turnError(out)
			s := &Server{log: slog.New(slog.DiscardHandler)}
			rec := httptest.NewRecorder()
			s.writeOpenAIError(rec, httptest.NewRequest("POST", "/v1/chat/completions", nil), e)
			var body openAIErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			want := openAIError{Message: "Try again.", Type: tc.typ, Code: "some_category"}
			if rec.Code != tc.status || body.Error != want || rec.Header().Get("Retry-After") != tc.retryAfter {
				t.Errorf("got %d %+v Retry-After %q, want %d %+v %q", rec.Code, body.Error, rec.Header().Get("Retry-After"), tc.status, want, tc.retryAfter)
			}
			if !errors.Is(e, secret) {
				t.Error("the cause is not kept for the log")
			}
		})
	}
}

// A resumed turn that failed after its decision took effect, or was
// cancelled, after it took its suspension up (errTookUpSuspension: it
// ran, turnEvents.tookUp), is
// the server's failure (5xx; an upstream's 429 a 503) but final:
// X-Should-Retry: false and no Retry-After, since resending it cannot
// help. One that resumed nothing, because it was cancelled before it
// started (its wait for a busy session ran out, chat.ErrSessionBusy, or
// a shutdown stopped it before it took the suspension up), keeps its
// retryable 503: the same decision can be sent again.
func TestTurnErrorResumed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cat    errcat.Category
		err    error
		status int
		final  bool
	}{
		{"upstream unavailable", errcat.ProviderUnavailable, errTookUpSuspension, 503, true},
		{"upstream reply unusable", errcat.ProviderInvalidResponse, errTookUpSuspension, 502, true},
		{"upstream rate limit", errcat.ProviderRateLimit, errTookUpSuspension, 503, true},
		{"the session store failing before it ran", errcat.SessionStoreUnavailable, errors.New("connection reset"), 503, false},
		{"cancelled after it took the suspension up", errcat.InvocationCancelled,
			fmt.Errorf("%w: %w", errTookUpSuspension, runtime.ErrShutdown), 503, true},
		{"cancelled before it started", errcat.InvocationCancelled, chat.ErrSessionBusy, 503, false},
		{"shutdown before it took the suspension up", errcat.InvocationCancelled, runtime.ErrShutdown, 503, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &chat.Errored{Turn: chat.Turn{Resumed: true}, Bucket: harness.BucketOf(tc.cat), Category: tc.cat, Reply: llm.SystemText("Try again."), Err: tc.err}
			c := &completion{runID: "RUN1"}
			e := c.turnError(out)
			s := &Server{log: slog.New(slog.DiscardHandler)}
			rec := httptest.NewRecorder()
			s.writeOpenAIError(rec, httptest.NewRequest("POST", "/v1/responses", nil), e)
			final := rec.Header().Get(ShouldRetryHeader) == "false"
			if rec.Code != tc.status || final != tc.final || final == (rec.Header().Get("Retry-After") != "") {
				t.Fatalf("%d %q, X-Should-Retry %q, Retry-After %q; want %d, final %v",
					rec.Code, e.Message, rec.Header().Get(ShouldRetryHeader), rec.Header().Get("Retry-After"), tc.status, tc.final)
			}
			if tc.final && !strings.Contains(e.Message, "response RUN1") {
				t.Fatalf("the message %q names not the response", e.Message)
			}
		})
	}
}

// An image_url part names an http(s) image, which the provider fetches,
// or carries a base64 image inline (data:image/...;base64); any other
// scheme or a data: URL of something else is refused, never forwarded
// to a provider that would fetch it.
func TestImageBlock(t *testing.T) {
	for _, tc := range []struct {
		url    string
		source llm.SourceType
		media  string
	}{
		{url: "https://example.com/cat.png", source: llm.SourceURL},
		{url: "HTTP://example.com/cat", source: llm.SourceURL},
		{url: "data:image/png;base64,iVBORw0KGgo=", source: llm.SourceInline, media: "image/png"},
		{url: "data:IMAGE/JPEG;BASE64,/9j/4AAQ", source: llm.SourceInline, media: "image/jpeg"},
		{url: "file:///etc/passwd"},
		{url: "javascript:alert(1)"},
		{url: "ftp://example.com/a.png"},
		{url: "http:example.com"},
		{url: "https://"},
		{url: "data:text/html;base64,PGh0bWw+"},
		{url: "data:image/png,rawbytes"},
		{url: "data:image/png;base64,%%%"},
		{url: "data:image/png;base64,"},
		{url: "/relative.png"},
		{url: ""},
	} {
		b, err := imageBlock(tc.url)
		if tc.source == "" {
			if err == nil {
				t.Errorf("%q: accepted as %+v", tc.url, b.Source)
			}
			continue
		}
		if err != nil || b.Source.Type != tc.source || b.MediaType != tc.media {
			t.Errorf("%q: %+v %q, %v", tc.url, b.Source, b.MediaType, err)
		}
	}
}
