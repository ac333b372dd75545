// Package langfusetest is a fake Langfuse ingestion API for tests: an
// httptest server that checks the requests the way the real API does
// (basic authentication with the configured keys, the batch envelope,
// each event's id, type, timestamp and body) and rebuilds the traces and
// observation trees the accepted events describe, applying creates and
// updates by id as Langfuse does. No Langfuse account is needed.
//
//	srv := langfusetest.NewServer()
//	defer srv.Close()
//	client, _ := langfuse.NewClient(srv.ClientConfig())
//	... run, then client.Flush(ctx) ...
//	for _, tr := range srv.Traces() { ... }
package langfusetest

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/armature-go/armature/observe/langfuse"
)

// Test credentials of a Server.
const (
	PublicKey = "pk-lf-test"
	SecretKey = "sk-lf-test-secret"
)

// Server is a fake ingestion endpoint. Its zero value is not usable; see
// [NewServer].
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	requests int
	events   []Event
	seen     map[string]bool
	problems []string
	// failures are scripted answers for the next requests.
	failures []failure
}

type failure struct {
	status     int
	retryAfter string
}

// Event is one accepted ingestion event, decoded.
type Event struct {
	ID        string
	Type      string
	Timestamp time.Time
	Body      map[string]any
}

// NewServer starts a server accepting [PublicKey] / [SecretKey].
func NewServer() *Server {
	s := &Server{seen: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// ClientConfig returns a client configuration for this server, with
// short intervals and backoffs suited to tests.
func (s *Server) ClientConfig() langfuse.ClientConfig {
	return langfuse.ClientConfig{Host: s.URL, PublicKey: PublicKey, SecretKey: SecretKey,
		FlushInterval: 20 * time.Millisecond, RetryBackoff: time.Millisecond, MaxRetryBackoff: 10 * time.Millisecond}
}

// FailNext makes the next n requests answer status (with a Retry-After
// header when retryAfter is not empty), before they are read.
func (s *Server) FailNext(n, status int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, failure{status, retryAfter})
	}
}

// Requests returns how many requests reached the server.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Events returns the accepted events in arrival order.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Problems returns what the server found wrong with the requests and
// events it received (each refused): empty for a well-behaved client.
func (s *Server) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.problems)
}

func (s *Server) problem(format string, args ...any) {
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

var eventTypes = map[string]bool{
	"trace-create": true, "span-create": true, "span-update": true, "generation-create": true,
	"generation-update": true, "event-create": true, "tool-create": true, "embedding-create": true,
	"retriever-create": true, "agent-create": true, "chain-create": true, "evaluator-create": true,
	"guardrail-create": true, "score-create": true, "sdk-log": true,
}

var levels = map[string]bool{"DEBUG": true, "DEFAULT": true, "WARNING": true, "ERROR": true}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if len(s.failures) > 0 {
		f := s.failures[0]
		s.failures = s.failures[1:]
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		http.Error(w, `{"message":"scripted failure"}`, f.status)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != langfuse.IngestionPath {
		s.problem("request %s %s: want POST %s", r.Method, r.URL.Path, langfuse.IngestionPath)
		http.NotFound(w, r)
		return
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(PublicKey+":"+SecretKey))
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
		s.problem("request without the expected basic authentication")
		http.Error(w, `{"message":"Invalid credentials"}`, http.StatusUnauthorized)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		s.problem("request content type %q", ct)
	}
	var req struct {
		Batch    []json.RawMessage `json:"batch"`
		Metadata map[string]any    `json:"metadata"`
	}
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil || req.Batch == nil {
		s.problem("request body is not a batch: %v", err)
		http.Error(w, `{"message":"Invalid request data"}`, http.StatusBadRequest)
		return
	}
	type result struct {
		ID      string `json:"id"`
		Status  int    `json:"status"`
		Message string `json:"message,omitempty"`
	}
	var ok, bad []result
	for _, raw := range req.Batch {
		ev, err := s.check(raw)
		if err != nil {
			s.problem("%v", err)
			bad = append(bad, result{ID: ev.ID, Status: 400, Message: err.Error()})
			continue
		}
		s.seen[ev.ID] = true
		s.events = append(s.events, ev)
		ok = append(ok, result{ID: ev.ID, Status: 201})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusMultiStatus)
	_ = json.NewEncoder(w).Encode(map[string]any{"successes": nonNil(ok), "errors": nonNil(bad)})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// check validates one event the way the API does.
func (s *Server) check(raw json.RawMessage) (Event, error) {
	var env struct {
		ID        string         `json:"id"`
		Type      string         `json:"type"`
		Timestamp string         `json:"timestamp"`
		Body      map[string]any `json:"body"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		return Event{}, fmt.Errorf("event is not an envelope: %v", err)
	}
	if env.Body != nil {
		env.Body = plain(env.Body).(map[string]any)
	}
	ev := Event{ID: env.ID, Type: env.Type, Body: env.Body}
	switch {
	case env.ID == "":
		return ev, fmt.Errorf("event without an id")
	case s.seen[env.ID]:
		return ev, fmt.Errorf("event id %s reused", env.ID)
	case !eventTypes[env.Type]:
		return ev, fmt.Errorf("event %s: unknown type %q", env.ID, env.Type)
	case env.Body == nil:
		return ev, fmt.Errorf("event %s: no body", env.ID)
	}
	ts, err := time.Parse(time.RFC3339Nano, env.Timestamp)
	if err != nil {
		return ev, fmt.Errorf("event %s: timestamp %q is not an ISO 8601 time with offset", env.ID, env.Timestamp)
	}
	ev.Timestamp = ts
	b := env.Body
	if id, _ := b["id"].(string); id == "" {
		return ev, fmt.Errorf("event %s (%s): body without an id", env.ID, env.Type)
	}
	if env.Type != "trace-create" {
		if tid, _ := b["traceId"].(string); tid == "" {
			return ev, fmt.Errorf("event %s (%s): observation without a traceId", env.ID, env.Type)
		}
	}
	for _, k := range []string{"timestamp", "startTime", "endTime", "completionStartTime"} {
		if v, ok := b[k]; ok && v != nil {
			str, _ := v.(string)
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				return ev, fmt.Errorf("event %s: body.%s %v is not an ISO 8601 time", env.ID, k, v)
			}
		}
	}
	if l, ok := b["level"]; ok && l != nil {
		if ls, _ := l.(string); !levels[ls] {
			return ev, fmt.Errorf("event %s: level %v", env.ID, l)
		}
	}
	if m, ok := b["metadata"]; ok && m != nil {
		if _, isMap := m.(map[string]any); !isMap {
			return ev, fmt.Errorf("event %s: metadata is not an object", env.ID)
		}
	}
	_, hasName := b["promptName"]
	_, hasVersion := b["promptVersion"]
	if hasName != hasVersion {
		return ev, fmt.Errorf("event %s: promptName and promptVersion must come together", env.ID)
	}
	return ev, nil
}

// Trace is a trace rebuilt from the accepted events.
type Trace struct {
	ID string
	// Fields are the trace's body fields (id, name, userId, sessionId,
	// input, output, metadata, ...), later events overriding earlier ones
	// field by field and metadata key by key.
	Fields map[string]any
	// Observations are the root observations, by start time.
	Observations []*Observation
}

// Observation is an observation rebuilt from the accepted events.
type Observation struct {
	// Type is the observation type: span, generation, event, tool,
	// embedding, retriever, ...
	Type string
	// Fields are the body fields, merged as for a trace.
	Fields   map[string]any
	Children []*Observation
	seq      int
}

// ID returns the observation id.
func (o *Observation) ID() string { s, _ := o.Fields["id"].(string); return s }

// Name returns the observation name.
func (o *Observation) Name() string { s, _ := o.Fields["name"].(string); return s }

// Metadata returns the observation metadata (nil when none).
func (o *Observation) Metadata() map[string]any {
	m, _ := o.Fields["metadata"].(map[string]any)
	return m
}

// Metadata returns the trace metadata (nil when none).
func (t *Trace) Metadata() map[string]any { m, _ := t.Fields["metadata"].(map[string]any); return m }

// Traces rebuilds the traces from the accepted events, in the order
// their first event arrived. An observation whose parent is unknown is a
// root of its trace.
func (s *Server) Traces() []*Trace {
	return Rebuild(s.Events())
}

// Rebuild applies events (in order) and returns the traces they
// describe.
func Rebuild(events []Event) []*Trace {
	var order []string
	traces := map[string]*Trace{}
	trace := func(id string) *Trace {
		t := traces[id]
		if t == nil {
			t = &Trace{ID: id, Fields: map[string]any{"id": id}}
			traces[id] = t
			order = append(order, id)
		}
		return t
	}
	obs := map[string]*Observation{}
	var obsOrder []string
	for _, ev := range events {
		id, _ := ev.Body["id"].(string)
		if ev.Type == "trace-create" {
			merge(trace(id).Fields, ev.Body)
			continue
		}
		typ, ok := langfuse.ObservationTypeOf(langfuse.EventType(ev.Type))
		if !ok {
			typ = langfuse.ObservationType(strings.TrimSuffix(strings.TrimSuffix(ev.Type, "-create"), "-update"))
		}
		o := obs[id]
		if o == nil {
			o = &Observation{Type: string(typ), Fields: map[string]any{}, seq: len(obsOrder)}
			obs[id] = o
			obsOrder = append(obsOrder, id)
		}
		merge(o.Fields, ev.Body)
		if tid, _ := ev.Body["traceId"].(string); tid != "" {
			trace(tid)
		}
	}
	for _, id := range obsOrder {
		o := obs[id]
		tid, _ := o.Fields["traceId"].(string)
		pid, _ := o.Fields["parentObservationId"].(string)
		if p := obs[pid]; pid != "" && p != nil {
			p.Children = append(p.Children, o)
			continue
		}
		t := trace(tid)
		t.Observations = append(t.Observations, o)
	}
	for _, o := range obs {
		sortObs(o.Children)
	}
	out := make([]*Trace, 0, len(order))
	for _, id := range order {
		sortObs(traces[id].Observations)
		out = append(out, traces[id])
	}
	return out
}

// merge applies an event body: non-null fields override, metadata merges
// key by key.
func merge(dst, body map[string]any) {
	for k, v := range body {
		if v == nil {
			continue
		}
		if k == "metadata" {
			if old, ok := dst[k].(map[string]any); ok {
				if add, ok := v.(map[string]any); ok {
					for mk, mv := range add {
						old[mk] = mv
					}
					continue
				}
			}
			if add, ok := v.(map[string]any); ok {
				m := make(map[string]any, len(add))
				for mk, mv := range add {
					m[mk] = mv
				}
				v = m
			}
		}
		dst[k] = v
	}
}

// sortObs orders sibling observations by start time, then by arrival.
func sortObs(os []*Observation) {
	sort.SliceStable(os, func(i, j int) bool {
		a, _ := os[i].Fields["startTime"].(string)
		b, _ := os[j].Fields["startTime"].(string)
		ta, ea := time.Parse(time.RFC3339Nano, a)
		tb, eb := time.Parse(time.RFC3339Nano, b)
		if ea == nil && eb == nil && !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return os[i].seq < os[j].seq
	})
}

// Walk calls f for every observation of the trees, parents first.
func Walk(os []*Observation, f func(*Observation)) {
	for _, o := range os {
		f(o)
		Walk(o.Children, f)
	}
}

// plain converts decoded JSON numbers to int64 (integers) or float64.
func plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = plain(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = plain(e)
		}
		return x
	}
	return v
}
