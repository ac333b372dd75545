// Package httpurl checks and redacts the http(s) URLs Armature is
// configured with (a provider's base URL, the terminal client's
// server).
//
//	httpurl.Valid("https://api.example.com/v1") // true
//	httpurl.Valid("http://127.0.0.1:1/v1/%zz")  // false: does not parse
//	httpurl.Redact("http://user:pw@host/")      // "http://user:xxxxx@host/"
package httpurl

import (
	"net/url"
	"strings"
)

// Valid reports whether s is an absolute http or https URL with a host
// that url.Parse accepts, so that every request built on it can be: a
// URL that only begins with "http://" may still not parse (a bad
// escape, an unclosed IPv6 bracket), and a configuration holding one
// would then fail every request it serves rather than at startup.
func Valid(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Opaque == ""
}

// Redact returns s with any password it carries masked, for messages
// and logs: the URL's own Redacted form when it parses with its user
// info where a reader expects it, and otherwise
// s with everything between its scheme and its last "@" replaced by
// "…", since the part a parser could not split may be a secret.
func Redact(s string) string {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	if u, err := url.Parse(s); err == nil && u.User != nil && !strings.Contains(u.Host+u.Path+u.RawQuery+u.Fragment, "@") {
		return u.Redacted()
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 && i < at {
		start = i + 3
	}
	return s[:start] + "…" + s[at:]
}
