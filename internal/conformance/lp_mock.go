package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// The llm-provider suite (lp_*.go) drives a real wire-format mapping
// against an in-process HTTP server (lpMock) that replays the fixture's
// mock_provider.responses in order and records every request it gets.

var (
	lpMockKeys     = []string{"responses", "health_endpoint", "capabilities"}
	lpResponseKeys = []string{"status", "body", "headers", "stream_body", "connection_failure"}
	lpHealthKeys   = []string{"path", "status", "body", "connection_failure"}
)

// lpScripted is one scripted mock response.
type lpScripted struct {
	status     int
	body       []byte
	headers    map[string]string
	stream     [][]byte // SSE data payloads
	connFail   bool
	streamBody bool
}

// lpWire is one recorded request.
type lpWire struct {
	Method, Path string
	Body         []byte
}

// lpMock is the mock provider server of one case.
type lpMock struct {
	srv          *httptest.Server
	capabilities map[string]any

	mu        sync.Mutex
	responses []lpScripted
	next      int
	consumed  []lpScripted
	health    *lpScripted
	healthAt  string
	requests  []lpWire
	overrun   int
}

func newLPMock(v *Value) (*lpMock, error) {
	m := &lpMock{capabilities: map[string]any{}}
	if v != nil && !v.IsNull() {
		if err := hcStrictKeys(v, "mock_provider", lpMockKeys...); err != nil {
			return nil, err
		}
		if caps, ok := v.Get("capabilities"); ok {
			if c, ok := caps.Native().(map[string]any); ok {
				m.capabilities = c
			}
		}
		if rs, ok := v.Get("responses"); ok && !rs.IsNull() {
			if rs.Kind != KindList {
				return nil, schemaErrorf(rs.Pos, "mock_provider.responses: must be a list")
			}
			for _, it := range rs.Items {
				s, err := lpParseScripted(it, lpResponseKeys, "mock_provider.responses[]")
				if err != nil {
					return nil, err
				}
				m.responses = append(m.responses, s)
			}
		}
		if h, ok := v.Get("health_endpoint"); ok {
			s, err := lpParseScripted(h, lpHealthKeys, "mock_provider.health_endpoint")
			if err != nil {
				return nil, err
			}
			m.health = &s
			if p, ok := h.Get("path"); ok {
				m.healthAt = p.Str
			}
		}
	}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	return m, nil
}

func lpParseScripted(v *Value, keys []string, what string) (lpScripted, error) {
	s := lpScripted{status: 200}
	if err := hcStrictKeys(v, what, keys...); err != nil {
		return s, err
	}
	if st, ok := v.Get("status"); ok {
		s.status = int(st.Int)
	}
	if b, ok := v.Get("body"); ok {
		data, err := json.Marshal(b.Native())
		if err != nil {
			return s, schemaErrorf(b.Pos, "%s.body: %v", what, err)
		}
		s.body = data
	}
	if h, ok := v.Get("headers"); ok {
		s.headers = map[string]string{}
		for _, f := range h.Fields {
			s.headers[f.Key] = fmt.Sprint(f.Value.Native())
		}
	}
	if cf, ok := v.Get("connection_failure"); ok {
		s.connFail = cf.Bool
	}
	if sb, ok := v.Get("stream_body"); ok {
		s.streamBody = true
		for _, ev := range sb.Items {
			if ev.Kind == KindString {
				s.stream = append(s.stream, []byte(ev.Str))
				continue
			}
			data, err := json.Marshal(ev.Native())
			if err != nil {
				return s, schemaErrorf(ev.Pos, "%s.stream_body: %v", what, err)
			}
			s.stream = append(s.stream, data)
		}
	}
	return s, nil
}

func (m *lpMock) close() { m.srv.Close() }

// url returns the server's root URL.
func (m *lpMock) url() string { return m.srv.URL }

func (m *lpMock) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	var s lpScripted
	if m.health != nil && r.Method == http.MethodGet && (m.healthAt == "" || strings.HasSuffix(r.URL.Path, strings.TrimPrefix(m.healthAt, "/v1"))) {
		s = *m.health
	} else {
		m.requests = append(m.requests, lpWire{Method: r.Method, Path: r.URL.Path, Body: body})
		if m.next >= len(m.responses) {
			m.overrun++
			m.mu.Unlock()
			http.Error(w, `{"error":{"message":"mock: no scripted response left"}}`, http.StatusTeapot)
			return
		}
		s = m.responses[m.next]
		m.next++
		m.consumed = append(m.consumed, s)
	}
	m.mu.Unlock()
	if s.connFail {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	for k, v := range s.headers {
		w.Header().Set(k, v)
	}
	if s.streamBody {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(s.status)
		rc := http.NewResponseController(w)
		for _, ev := range s.stream {
			_, _ = fmt.Fprintf(w, "data: %s\n\n", ev)
			_ = rc.Flush()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(s.status)
	_, _ = w.Write(s.body)
}

// wire returns the recorded (non-health) requests.
func (m *lpMock) wire() []lpWire {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]lpWire(nil), m.requests...)
}

// lastConsumed returns the last scripted response served.
func (m *lpMock) lastConsumed() (lpScripted, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.consumed) == 0 {
		return lpScripted{}, false
	}
	return m.consumed[len(m.consumed)-1], true
}
