package server

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Browser safety. A server on a developer's machine listens on loopback
// without tokens; any web page the developer opens can make the browser
// send requests to it. Every request passes these checks before routing
// (see Config.AllowedOrigins and Config.AllowedHosts):
//
//   - Host: the Host header must name the server, so that DNS rebinding
//     (a hostile name resolving to 127.0.0.1) reaches nothing: loopback
//     names by default, plus Config.AllowedHosts. A server with tokens
//     and no AllowedHosts accepts any Host (a rebinding page has no
//     token). /healthz and /readyz are exempt, for load balancers.
//     Otherwise: 421 misdirected_request.
//   - Origin: a browser request from another origin is refused unless
//     its origin is in Config.AllowedOrigins; the server's own origin
//     (the web UI) always passes. Without an Origin header, a
//     Sec-Fetch-Site of cross-site or same-site is refused the same way,
//     except top-level navigations (a link to the UI). Requests from
//     other clients (curl, SDKs) send neither header and pass.
//     Otherwise: 403 forbidden_origin.
//   - Content-Type: a request with a body that changes state (POST, PUT,
//     PATCH, DELETE) must send application/json, which no HTML form and
//     no "simple" cross-origin request can. Otherwise: 415
//     unsupported_media_type.
//
// An allowed cross-origin request gets CORS headers, and its preflight
// (OPTIONS) is answered here.

// Error codes of the browser checks.
const (
	CodeForbiddenOrigin      = "forbidden_origin"
	CodeMisdirectedRequest   = "misdirected_request"
	CodeUnsupportedMediaType = "unsupported_media_type"
)

// corsAllowHeaders are the request headers an allowed origin may send:
// the API's own, and the ones the official OpenAI SDKs send from a
// browser (their X-Stainless-* headers are added by corsAllowed).
const corsAllowHeaders = "Authorization, Content-Type, Last-Event-ID, Idempotency-Key, X-Correlation-ID, " +
	SessionHeader + ", OpenAI-Organization, OpenAI-Project, OpenAI-Beta"

// corsExposeHeaders are the response headers an allowed origin's page
// may read: the official OpenAI SDKs read X-Should-Retry and
// Retry-After to decide whether and when to retry.
const corsExposeHeaders = "X-Correlation-ID, Retry-After, " + SessionHeader + ", " + ShouldRetryHeader

// corsAllowed is the Access-Control-Allow-Headers of a preflight that
// asks for requested (its Access-Control-Request-Headers):
// corsAllowHeaders, and each X-Stainless-* header asked for (the
// official OpenAI SDKs describe themselves and number their retries in
// headers of that prefix, whose set grows with their versions).
func corsAllowed(requested string) string {
	out := corsAllowHeaders
	for h := range strings.SplitSeq(requested, ",") {
		h = strings.TrimSpace(h)
		if len(h) > len("x-stainless-") && len(h) <= 64 && strings.EqualFold(h[:len("x-stainless-")], "x-stainless-") &&
			!strings.ContainsFunc(h, func(r rune) bool {
				return !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
			}) {
			out += ", " + h
		}
	}
	return out
}

// browserGuard holds the normalized allow-lists.
type browserGuard struct {
	anyOrigin bool
	origins   map[string]bool // scheme://host[:port], lower case
	anyHost   bool
	hosts     map[string]bool // host names without port, lower case
}

func newBrowserGuard(c Config) (*browserGuard, error) {
	g := &browserGuard{origins: map[string]bool{}, hosts: map[string]bool{}}
	for _, o := range c.AllowedOrigins {
		if o == "*" {
			g.anyOrigin = true
			continue
		}
		n, ok := normalizeOrigin(o)
		if !ok {
			return nil, errInvalidConfigf("allowed origin %q is not scheme://host[:port]", o)
		}
		g.origins[n] = true
	}
	for _, h := range c.AllowedHosts {
		if h == "*" {
			g.anyHost = true
			continue
		}
		name := strings.ToLower(strings.TrimSuffix(h, "."))
		if name == "" || strings.ContainsAny(name, "/:@ ") && !strings.HasPrefix(name, "[") {
			return nil, errInvalidConfigf("allowed host %q is not a host name", h)
		}
		g.hosts[strings.Trim(name, "[]")] = true
	}
	// With tokens, DNS rebinding gains nothing: any Host unless the
	// operator listed the names.
	if len(c.Tokens) > 0 && len(c.AllowedHosts) == 0 {
		g.anyHost = true
	}
	return g, nil
}

// normalizeOrigin returns an origin as scheme://host[:port] in lower
// case, without a default port.
func normalizeOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	host := strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		host = strings.ToLower(u.Hostname())
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	return u.Scheme + "://" + host, true
}

// loopbackHost reports whether a host name (no port) names this machine.
func loopbackHost(h string) bool {
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// hostAllowed checks a request's Host header.
func (g *browserGuard) hostAllowed(hostHeader string) bool {
	if g.anyHost {
		return true
	}
	h := strings.ToLower(hostHeader)
	if name, _, err := net.SplitHostPort(h); err == nil {
		h = name
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	return h != "" && (loopbackHost(h) || g.hosts[h])
}

// originAllowed reports whether a browser origin may call the API; own
// is true for the server's own origin.
func (g *browserGuard) originAllowed(r *http.Request, origin string) (ok, own bool) {
	n, valid := normalizeOrigin(origin)
	if !valid {
		return false, false // includes "null": sandboxed frames, file: pages
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if self, _ := normalizeOrigin(scheme + "://" + r.Host); self == n {
		return true, true
	}
	return g.anyOrigin || g.origins[n], false
}

// guard wraps the router with the browser checks.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 || (!r.ProtoAtLeast(1, 1) && r.ContentLength != 0) {
			// A body in chunks. Had the request a Content-Length as well
			// (which Go drops, framing the body by its chunks), a proxy in
			// front may have framed it by that length, and the bytes after
			// the chunks may be a request smuggled past the proxy. Go's
			// server would go on reading them; RFC 9112 §6.3 says to close
			// the connection after the response, and this header makes it.
			// An HTTP/1.0 request's Transfer-Encoding Go drops unseen: any
			// of its bodies closes the connection too (§6.1).
			w.Header().Set("Connection", "close")
		}
		if err := s.checkBrowser(w, r); err != nil {
			s.metrics.request("guard", err.Status)
			s.log.Info("http request refused", "method", r.Method, "path", r.URL.Path, "status", err.Status, "code", err.Code)
			s.writeErrorFor(w, r, err)
			return
		}
		if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			// An allowed origin's preflight (checkBrowser set the CORS
			// headers).
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
			h.Set("Access-Control-Allow-Headers", corsAllowed(r.Header.Get("Access-Control-Request-Headers")))
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkBrowser applies the Host, Origin and Content-Type rules; for an
// allowed cross-origin request it sets the CORS response headers.
func (s *Server) checkBrowser(w http.ResponseWriter, r *http.Request) *Error {
	g := s.browser
	probe := r.URL.Path == "/healthz" || r.URL.Path == "/readyz"
	if !probe && !g.hostAllowed(r.Host) {
		return &Error{Status: http.StatusMisdirectedRequest, Code: CodeMisdirectedRequest,
			Message: "the Host header does not name this server (allow it with --allow-host)"}
	}
	w.Header().Add("Vary", "Origin")
	if origin := r.Header.Get("Origin"); origin != "" {
		ok, own := g.originAllowed(r, origin)
		if !ok {
			return &Error{Status: http.StatusForbidden, Code: CodeForbiddenOrigin,
				Message: "requests from this origin are not allowed (allow it with --allow-origin)"}
		}
		if !own {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
	} else if site := r.Header.Get("Sec-Fetch-Site"); (site == "cross-site" || site == "same-site") &&
		!(r.Method == http.MethodGet && r.Header.Get("Sec-Fetch-Mode") == "navigate") {
		return &Error{Status: http.StatusForbidden, Code: CodeForbiddenOrigin,
			Message: "cross-site requests are not allowed"}
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
			return nil // no body: nothing to decode
		}
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return &Error{Status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedMediaType,
				Message: "the request body must be application/json"}
		}
	}
	return nil
}
