package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/server"
)

// A web page at an origin
// the operator allowed (--allow-origin) calls the OpenAI-compatible
// endpoint with the official openai npm package (dangerouslyAllowBrowser),
// which sends, on every request, the X-Stainless-* headers (captured
// from openai 7.57.0: x-stainless-retry-count, -lang, -package-version,
// -os, -arch, -runtime, -runtime-version), and, to continue a session,
// the server's own X-Armature-Session-Id. None is CORS-safelisted, so
// the browser sends a preflight and refuses the request unless every
// requested header is listed in Access-Control-Allow-Headers (Fetch
// standard, "CORS-preflight fetch", step 7.8). The preflight allows
// them, and no other header; the answers expose X-Should-Retry, which
// the SDK reads to decide whether to retry.
func TestCORSAllowsTheOfficialSDKHeaders(t *testing.T) {
	const origin = "http://app.example:3000"
	ts := servertest.NewDemo(t, func(c *server.Config) { c.AllowedOrigins = []string{origin} })
	requested := []string{"authorization", "content-type", "x-stainless-retry-count", "x-stainless-lang",
		"x-stainless-package-version", "x-stainless-os", "x-stainless-arch", "x-stainless-runtime",
		"x-stainless-runtime-version", strings.ToLower(server.SessionHeader)}
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/models"} {
		req, err := http.NewRequest(http.MethodOptions, ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", strings.Join(append(requested, "x-not-ours"), ","))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		allowed := map[string]bool{}
		for _, h := range strings.Split(resp.Header.Get("Access-Control-Allow-Headers"), ",") {
			allowed[strings.ToLower(strings.TrimSpace(h))] = true
		}
		var missing []string
		for _, h := range requested {
			if !allowed[h] && !allowed["*"] {
				missing = append(missing, h)
			}
		}
		if allowed["x-not-ours"] {
			t.Errorf("%s: the preflight allowed a header nobody listed: %q", path, resp.Header.Get("Access-Control-Allow-Headers"))
		}
		if resp.StatusCode/100 != 2 || len(missing) > 0 {
			t.Errorf("%s: preflight %d, Access-Control-Allow-Headers %q: the browser refuses the official SDK's request: not allowed: %v",
				path, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Headers"), missing)
		}
	}
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), server.ShouldRetryHeader) {
		t.Errorf("Access-Control-Expose-Headers %q: a page's SDK cannot read %s", resp.Header.Get("Access-Control-Expose-Headers"), server.ShouldRetryHeader)
	}
}
