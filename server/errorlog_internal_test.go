package server

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
)

// A transient failure the client is told to retry (503 with
// Retry-After: a busy session, an upstream down for now) is logged as a
// warning; other server-side failures as errors; a client's as nothing.
func TestAPIErrorLogLevel(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&Error{Status: 503, Code: "invocation_cancelled", RetryAfter: 1, Err: errors.New("busy")}, "level=WARN"},
		{&Error{Status: 503, Code: "unavailable", Err: errors.New("down")}, "level=ERROR"},
		{errors.New("a bug"), "level=ERROR"},
		{&Error{Status: 400, Code: "invalid_request"}, ""},
		// What the OpenAI endpoints make of a turn that found its session
		// busy: before, it had no RetryAfter (the header was added while
		// writing) and was logged as an error.
		{(&completion{}).turnError(&chat.Errored{Bucket: harness.RetryableTransient, Category: errcat.InvocationCancelled,
			Err: chat.ErrSessionBusy}), "level=WARN"},
	} {
		var buf bytes.Buffer
		s := &Server{log: slog.New(slog.NewTextHandler(&buf, nil))}
		s.apiError(httptest.NewRequest("POST", "/v1/chat/completions", nil), tc.err)
		got := buf.String()
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%v: logged %q, want %q", tc.err, got, tc.want)
		}
	}
}
