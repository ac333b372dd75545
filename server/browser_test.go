package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/server"
)

// browserCase is one request of the browser-safety table.
type browserCase struct {
	name        string
	method      string
	path        string
	body        string
	header      map[string]string
	host        string // "" = the test server's 127.0.0.1:port
	wantStatus  int
	wantCode    string // of the error envelope, "" for a success
	wantACAO    string // Access-Control-Allow-Origin, when set
	wantPending bool   // after it, c1's history is unchanged (its refund approval pending)
}

func doBrowserCase(t *testing.T, base string, c browserCase) *http.Response {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	if c.host != "" {
		req.Host = c.host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// pendingRefund asks the demo agent at base for a refund in session c1,
// and returns the signal that approves it and a function counting c1's
// messages.
func pendingRefund(t *testing.T, base string) (string, func() int) {
	t.Helper()
	var out struct {
		Signal struct {
			SignalID string `json:"signal_id"`
		} `json:"signal"`
	}
	if code := post(t, base+"/v1/sessions/c1/messages", `{"content":"please refund order 1"}`, &out); code != 200 || out.Signal.SignalID == "" {
		t.Fatalf("setup: refund: %d %+v", code, out)
	}
	return out.Signal.SignalID, func() int {
		var sess struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if code := getJSON(t, base+"/v1/sessions/c1", &sess); code != 200 {
			t.Fatalf("reading the session: %d", code)
		}
		return len(sess.Messages)
	}
}

// The default server (loopback, no tokens) refuses what a page of
// another site, or a rebinding name, could make a browser send; every
// case below but the allowed ones succeeded before these checks.
func TestBrowserSafety(t *testing.T) {
	const evil = "http://evil.example"
	approve := `{"signal_id":"SIGNAL","payload":{"approval":{"approved":true}}}`
	ts := newDemoServer(t, func(c *server.Config) { c.AllowedOrigins = []string{"http://app.example:3000"} })
	self := "http://" + strings.TrimPrefix(ts.URL, "http://")
	cases := []browserCase{
		{name: "the issue's repro: a foreign origin approves with text/plain", method: "POST", path: "/v1/sessions/c1/signals", body: approve,
			header: map[string]string{"Origin": evil, "Content-Type": "text/plain"}, wantStatus: 403, wantCode: server.CodeForbiddenOrigin, wantPending: true},
		{name: "a foreign origin approves with JSON", method: "POST", path: "/v1/sessions/c1/signals", body: approve,
			header: map[string]string{"Origin": evil, "Content-Type": "application/json"}, wantStatus: 403, wantCode: server.CodeForbiddenOrigin, wantPending: true},
		{name: "a form post without Origin", method: "POST", path: "/v1/sessions/c1/signals", body: approve,
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, wantStatus: 415, wantCode: server.CodeUnsupportedMediaType, wantPending: true},
		{name: "text/plain without Origin", method: "POST", path: "/v1/sessions/c1/messages", body: `{"content":"hi"}`,
			header: map[string]string{"Content-Type": "text/plain"}, wantStatus: 415, wantCode: server.CodeUnsupportedMediaType, wantPending: true},
		{name: "a body without Content-Type", method: "POST", path: "/v1/sessions/c1/messages", body: `{"content":"hi"}`,
			wantStatus: 415, wantCode: server.CodeUnsupportedMediaType, wantPending: true},
		{name: "a foreign origin lists sessions", method: "GET", path: "/v1/sessions",
			header: map[string]string{"Origin": evil}, wantStatus: 403, wantCode: server.CodeForbiddenOrigin, wantPending: true},
		{name: "a foreign origin reads events", method: "GET", path: "/v1/sessions/c1/events",
			header: map[string]string{"Origin": evil}, wantStatus: 403, wantCode: server.CodeForbiddenOrigin, wantPending: true},
		{name: "an opaque origin (sandboxed frame, file: page)", method: "GET", path: "/v1/sessions",
			header: map[string]string{"Origin": "null"}, wantStatus: 403, wantCode: server.CodeForbiddenOrigin, wantPending: true},
		{name: "a cross-site fetch without Origin", method: "GET", path: "/v1/sessions",
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, wantStatus: 403, wantCode: server.CodeForbiddenOrigin, wantPending: true},
		{name: "a same-site (other port) fetch without Origin", method: "GET", path: "/v1/sessions/c1",
			header: map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}, wantStatus: 403, wantCode: server.CodeForbiddenOrigin, wantPending: true},
		{name: "a link from another site to the page", method: "GET", path: "/",
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, wantStatus: 200, wantPending: true},
		{name: "DNS rebinding: a forged Host lists sessions", method: "GET", path: "/v1/sessions", host: "evil.example:8080",
			wantStatus: 421, wantCode: server.CodeMisdirectedRequest, wantPending: true},
		{name: "DNS rebinding: a forged Host approves", method: "POST", path: "/v1/sessions/c1/signals", body: approve, host: "rebind.evil.example",
			header: map[string]string{"Content-Type": "application/json"}, wantStatus: 421, wantCode: server.CodeMisdirectedRequest, wantPending: true},
		{name: "a probe with any Host", method: "GET", path: "/healthz", host: "10.1.2.3:8080", wantStatus: 200, wantPending: true},
		{name: "localhost", method: "GET", path: "/v1/sessions", host: "localhost:8080", wantStatus: 200, wantPending: true},
		{name: "[::1]", method: "GET", path: "/v1/sessions", host: "[::1]:8080", wantStatus: 200, wantPending: true},
		{name: "the allowed origin's preflight", method: "OPTIONS", path: "/v1/sessions/c1/messages",
			header:     map[string]string{"Origin": "http://app.example:3000", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"},
			wantStatus: 204, wantACAO: "http://app.example:3000", wantPending: true},
		{name: "a foreign origin's preflight", method: "OPTIONS", path: "/v1/sessions/c1/messages",
			header: map[string]string{"Origin": evil, "Access-Control-Request-Method": "POST"}, wantStatus: 403, wantCode: server.CodeForbiddenOrigin, wantPending: true},
		{name: "the allowed origin reads", method: "GET", path: "/v1/sessions",
			header: map[string]string{"Origin": "http://app.example:3000"}, wantStatus: 200, wantACAO: "http://app.example:3000", wantPending: true},
		{name: "curl: JSON with a charset", method: "POST", path: "/v1/sessions/c2/messages", body: `{"content":"where is order 2?"}`,
			header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, wantStatus: 200, wantPending: true},
		{name: "the server's own page approves", method: "POST", path: "/v1/sessions/c1/signals", body: approve,
			header: map[string]string{"Origin": self, "Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}, wantStatus: 200, wantPending: false},
	}
	signalID, history := pendingRefund(t, ts.URL)
	before := history()
	for _, c := range cases {
		c.body = strings.ReplaceAll(c.body, "SIGNAL", signalID)
		t.Run(c.name, func(t *testing.T) {
			resp := doBrowserCase(t, ts.URL, c)
			defer resp.Body.Close()
			var env struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&env)
			if resp.StatusCode != c.wantStatus || env.Error.Code != c.wantCode {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, env.Error.Code, c.wantStatus, c.wantCode)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != c.wantACAO {
				t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, c.wantACAO)
			}
			if got := history() == before; got != c.wantPending {
				t.Fatalf("c1 unchanged = %v, want %v", got, c.wantPending)
			}
		})
	}
}

// Hosts: configured names pass; with tokens and no list, any Host does
// (a rebinding page has no token); a 401 says how to authenticate.
func TestBrowserSafetyHostsAndTokens(t *testing.T) {
	named := newDemoServer(t, func(c *server.Config) { c.AllowedHosts = []string{"armature.internal"} })
	for host, want := range map[string]int{"armature.internal:8080": 200, "ARMATURE.internal": 200, "other.internal": 421, "127.0.0.1": 200} {
		resp := doBrowserCase(t, named.URL, browserCase{method: "GET", path: "/v1/sessions", host: host})
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	const secret = "0123456789abcdef-secret"
	tok := newDemoServer(t, func(c *server.Config) { c.Tokens = []server.Token{{Secret: secret, Tenant: "t1"}} })
	resp := doBrowserCase(t, tok.URL, browserCase{method: "GET", path: "/v1/sessions", host: "api.example.com"})
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer realm="armature"` {
		t.Fatalf("no token: %d, WWW-Authenticate %q; want 401 with a Bearer challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	resp = doBrowserCase(t, tok.URL, browserCase{method: "GET", path: "/v1/sessions", host: "api.example.com",
		header: map[string]string{"Authorization": "Bearer " + secret}})
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a token and any Host: %d, want 200", resp.StatusCode)
	}
}

func TestBrowserSafetyConfig(t *testing.T) {
	for _, bad := range []server.Config{
		{AllowedOrigins: []string{"evil.example"}},
		{AllowedOrigins: []string{"http://a.example/path"}},
		{AllowedOrigins: []string{"ftp://a.example"}},
		{AllowedHosts: []string{"a/b"}},
		{AllowedHosts: []string{""}},
	} {
		err := bad.Validate()
		if !errors.Is(err, server.ErrInvalidConfig) || !strings.Contains(err.Error(), "allowed") {
			t.Errorf("%v %v: Validate = %v, want an invalid allowed origin or host", bad.AllowedOrigins, bad.AllowedHosts, err)
		}
	}
}
