package agent

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// redactURLs leaves no key of an endpoint in an error's text, wherever
// the URL holds it and however it is quoted, and keeps the rest.
func TestRedactURLs(t *testing.T) {
	const secret = "SECRET"
	tests := []struct{ in, want string }{
		{`Post "https://h.example/mcp?key=SECRET": dial tcp: refused`, `Post "https://h.example/…": dial tcp: refused`},
		{`Post "https://h.example/mcp?key=a'SECRET": refused`, `Post "https://h.example/…": refused`},
		{`Post "https://h.example/mcp?key=a\"SECRET": refused`, `Post "https://h.example/…": refused`},
		{`Post "https://h.example/mcp?key=a<SECRET": refused`, `Post "https://h.example/…": refused`},
		{`Post "https://user:SECRET@h.example/mcp": x`, `Post "https://h.example/…": x`},
		{`Post "https://[::1]:80/mcp/SECRET": x`, `Post "https://[::1]:80/…": x`},
		{`redirect to https%3A%2F%2Fh.example%2Fmcp%3Fkey%3DSECRET`, `redirect to (a URL)`},
		{`Post "https://h.example:bad/mcp?key=SECRET": x`, `Post "(a URL)": x`},
		{`Post "HTTPS://h.example/SECRET": x`, `Post "https://h.example/…": x`},
		{`GET https://h.example/: 500`, `GET https://h.example: 500`},
		{`no URL here`, `no URL here`},
	}
	for _, tc := range tests {
		got := redactURLs(errors.New(tc.in)).Error()
		if got != tc.want || strings.Contains(got, secret) {
			t.Errorf("%s\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
	// A transport's *url.Error is cut in place: errors.As finds no key.
	base := &url.Error{Op: "Post", URL: `https://h.example/mcp?key=a"SECRET`, Err: errors.New("refused")}
	err := redactURLs(base)
	var ue *url.Error
	if !errors.As(err, &ue) || strings.Contains(ue.URL, secret) || strings.Contains(err.Error(), secret) {
		t.Fatalf("url.Error: %v (URL %q)", err, ue.URL)
	}
}
