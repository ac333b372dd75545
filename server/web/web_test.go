package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/server/web"
)

// newDemoServer serves the demo agent as armature serve does.
func newDemoServer(t *testing.T, mutate ...func(*server.Config)) *httptest.Server {
	t.Helper()
	return servertest.NewDemo(t, mutate...)
}

func get(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestAssets checks what the server sends for the page and its assets,
// without a browser: content types, caching, the Content-Security-Policy,
// no inline code, and that every asset the page names is served — even
// on a server that requires tokens (the UI is public, the API is not).
func TestAssets(t *testing.T) {
	ts := newDemoServer(t, func(c *server.Config) {
		c.Tokens = []server.Token{{Secret: "0123456789abcdef-secret", Tenant: "acme"}}
	})
	resp, page := get(t, ts.URL+"/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d %s", resp.StatusCode, page)
	}
	for k, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Cache-Control":           "no-cache",
		"Content-Security-Policy": web.CSP,
		"X-Content-Type-Options":  "nosniff",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("GET / %s = %q, want %q", k, got, want)
		}
	}
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(web.CSP, d) {
			t.Errorf("the CSP lacks %q", d)
		}
	}
	if strings.Contains(web.CSP, "unsafe-") {
		t.Errorf("the CSP allows unsafe sources: %s", web.CSP)
	}

	// No inline code: every script has a src, no element has an event
	// handler attribute or a style attribute, no <style> element.
	if m := regexp.MustCompile(`<script(?:\s[^>]*)?>`).FindAllString(page, -1); len(m) == 0 {
		t.Error("the page loads no script")
	} else {
		for _, tag := range m {
			if !strings.Contains(tag, ` src="`) || !strings.Contains(tag, `type="module"`) {
				t.Errorf("inline or classic script: %s", tag)
			}
		}
	}
	if m := regexp.MustCompile(`(?i)\s(on[a-z]+|style)\s*=|<style`).FindString(page); m != "" {
		t.Errorf("inline handler or style in the page: %q", m)
	}
	if strings.Contains(page, "{{") || strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Error("the page has an unexpanded placeholder or an absolute URL")
	}

	// The assets the page names, and the modules those import.
	refs := regexp.MustCompile(`(?:src|href)="(assets/[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("the page names %d assets", len(refs))
	}
	seen := map[string]bool{}
	queue := []string{}
	for _, r := range refs {
		queue = append(queue, "/"+r[1])
	}
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
	importRE := regexp.MustCompile(`(?m)^import .* from '(\./[a-z]+\.js)';`)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		resp, body := get(t, ts.URL+p)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d", p, resp.StatusCode)
			continue
		}
		ext := p[strings.LastIndex(p, "."):]
		if got := resp.Header.Get("Content-Type"); got != types[ext] {
			t.Errorf("GET %s Content-Type = %q, want %q", p, got, types[ext])
		}
		if got := resp.Header.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("GET %s Cache-Control = %q", p, got)
		}
		if resp.Header.Get("Content-Security-Policy") != web.CSP || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s lacks the security headers", p)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" {
			t.Errorf("GET %s has no ETag", p)
		} else if r, _ := get(t, ts.URL+p, "If-None-Match", etag); r.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s If-None-Match = %d, want 304", p, r.StatusCode)
		}
		if ext == ".js" {
			if strings.Contains(body, "innerHTML") || strings.Contains(body, "eval(") || strings.Contains(body, "new Function") {
				t.Errorf("%s builds code or markup from strings", p)
			}
			for _, m := range importRE.FindAllStringSubmatch(body, -1) {
				queue = append(queue, p[:strings.LastIndex(p, "/")+1]+m[1][2:])
			}
		}
	}
	if len(seen) < 7 {
		t.Errorf("reached %d assets from the page, want the icon, the stylesheet and five modules", len(seen))
	}

	// Another version's asset is served but revalidated; unknown assets
	// are 404; the API still needs the token.
	if resp, _ := get(t, ts.URL+"/assets/0000/app.css"); resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("an old version's asset: %d %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	for _, p := range []string{"/assets/x/nope.js", "/assets/x/../web.go", "/assets/", "/index.html"} {
		if resp, _ := get(t, ts.URL+p); resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s = %d, want 404 (or 401 outside the UI)", p, resp.StatusCode)
		}
	}
	if resp, _ := get(t, ts.URL+"/v1/sessions"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/sessions without a token = %d", resp.StatusCode)
	}
	if resp, _ := get(t, ts.URL+"/v1/sessions", "Authorization", "Bearer 0123456789abcdef-secret"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/sessions with the token = %d", resp.StatusCode)
	}
}

// TestDisabled checks that Config.DisableWebUI leaves / to the API's 404.
func TestDisabled(t *testing.T) {
	ts := newDemoServer(t, func(c *server.Config) { c.DisableWebUI = true })
	if resp, _ := get(t, ts.URL+"/"); resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("GET / with the UI disabled = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
