package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/internal/uuid"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
	"github.com/armature-go/armature/store/sqlite"
)

// The tenant isolation sweep: tenant A creates everything that has an
// id (sessions with history, turns suspended on an approval and on a
// payload-free signal, a turn in flight, completed and failed runs,
// idempotent chat completions, stored and unstored responses and a
// previous_response_id chain, OpenHarness runs and continuation tokens,
// a direct tool run, events), then tenant B, no token and malformed
// tokens call every route the server registers (the test fails for a
// route it does not sweep) with A's ids and with ids that exist nowhere.
// Each pair must be answered alike (no existence oracle: status, error
// body, header names), no answer may carry anything of A's the request
// did not itself carry, no Location header points anywhere, and A's
// state must read the same afterwards: its approvals still pending, its
// turn in flight not cancelled, its events in no stream of B's.

const (
	sweepSecretA = "sweep-secret-tenant-a-0001"
	sweepSecretB = "sweep-secret-tenant-b-0001"
	// sweepMarker is in every text tenant A sends and in nothing else.
	sweepMarker = "ZQXA"
)

// sweepOrders are the order numbers of A's turns: they end up in tool
// arguments and results.
var sweepOrders = []string{"424242", "424243", "424244", "424245", "777001", "777002", "777003", "515151", "606060", "880088", "909090"}

// sweepEnv is a served server with two tenants.
type sweepEnv struct {
	srv *Server
	url string
	// release lets the slow agent's model answer.
	release func()
}

// sweepSlowModel is the demo model answering once released: its
// agent's turns stay in flight meanwhile.
type sweepSlowModel struct{ released <-chan struct{} }

func (sweepSlowModel) Ready(context.Context) error { return nil }

func (m sweepSlowModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	select {
	case <-m.released:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return demo.Model{}.Complete(ctx, req)
}

// sweepFailingModel fails every call: its agent's turns are failed runs.
type sweepFailingModel struct{}

func (sweepFailingModel) Ready(context.Context) error { return nil }

func (sweepFailingModel) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, errors.New("sweep: the upstream is down " + sweepMarker + "-upstream")
}

// sweepGate is a chat agent whose turn suspends on the signal
// "gate-go" with no payload schema, the engine's default suspension (the
// node is marked completed): any resume, with any payload, lets the turn
// go on to "gate passed".
func sweepGate(t *testing.T, sessions session.Store, records checkpoint.Store, locker chat.Locker) *Agent {
	t.Helper()
	schema, err := chat.NewSchema()
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.NewBuilder(schema).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "gate-go"})
		}).
		AddNode("passed", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return chat.Messages.Add(llm.AssistantText("gate passed")), nil
		}).
		AddEdge("gate", "passed").
		AddEdge("passed", graph.End).
		SetEntry("gate").
		Compile(graph.WithName("gate"), graph.WithSessions(graph.SessionConfig{Store: sessions}), graph.WithCheckpointStore(records))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(records), Locker: locker})
	if err != nil {
		t.Fatal(err)
	}
	return &Agent{ID: "gate", Chat: h, Model: "gate"}
}

// sweepListen listens on the first free port of 19700-19799.
func sweepListen(t *testing.T) net.Listener {
	t.Helper()
	for p := 19700; p < 19800; p++ {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			return ln
		}
	}
	t.Fatal("no free port in 19700-19799")
	return nil
}

// newSweepEnv serves, as armature serve does, the demo agent (with its
// approval-gated tool) and an agent whose model fails, over SQLite or
// PostgreSQL, with tokens for tenants "a" and "b".
func newSweepEnv(t *testing.T, backend string) *sweepEnv {
	t.Helper()
	ctx := context.Background()
	var (
		sessions session.Store
		records  checkpoint.Store
		runStore runtime.Store
		locker   chat.Locker
		notifier EventNotifier
		relay    CancelRelay
	)
	switch backend {
	case "sqlite":
		st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "armature.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close(context.Background()) })
		sessions, records, runStore = st, st.Checkpoints(), st.Runs()
	case "postgres":
		schema, _ := pgtest.Schema(t)
		st, err := postgres.Open(ctx, postgres.Config{URL: pgtest.URL(), Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		l := st.SessionLocker(postgres.LockerConfig{})
		t.Cleanup(l.Close)
		sessions, records, runStore, locker, notifier, relay = st, st.Checkpoints(), st.Runs(), l, st, st
	}
	runs, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runStore})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runs.Close(context.Background()) })
	demoAgent, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	failing, err := agent.New(agent.Config{Provider: sweepFailingModel{}, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(released) }) }
	t.Cleanup(release)
	slow, err := agent.New(agent.Config{Provider: sweepSlowModel{released}, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	var agents []*Agent
	for _, a := range []struct {
		id, model string
		ag        *agent.Agent
	}{{"demo", demo.ModelName, demoAgent}, {"failing", "failing-model", failing}, {"slow", "slow-model", slow}} {
		served, err := NewAdapterAgent(AdapterAgentConfig{Adapter: adapter.NewNative(a.ag),
			Agent:    &adapter.Agent{ID: a.id, Model: a.model, Tools: demo.Tools()},
			Sessions: sessions, Records: records, Locker: locker})
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, served)
	}
	agents = append(agents, sweepGate(t, sessions, records, locker))
	ln := sweepListen(t)
	srv, err := New(Config{Agents: agents, Sessions: sessions, Runs: runs, Addr: ln.Addr().String(),
		Tokens:      []Token{{Secret: sweepSecretA, Tenant: "a"}, {Secret: sweepSecretB, Tenant: "b"}},
		DirectTools: map[string][]string{"a": {"*"}, "b": {"*"}}, Narration: &Narration{},
		EventNotifier: notifier, CancelRelay: relay})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &sweepEnv{srv: srv, url: "http://" + ln.Addr().String(), release: release}
}

// sweepReq is one request of the sweep.
type sweepReq struct {
	method, path, body string
	header             map[string]string
}

// text is everything the request carries, for telling what an answer
// may echo: besides its bytes, what they name openly (the session and
// run a continuation token encodes, the session an Idempotency-Key
// derives).
func (r sweepReq) text() string {
	var b strings.Builder
	b.WriteString(r.method + " " + r.path + "\n" + r.body)
	for k, v := range r.header {
		b.WriteString("\n" + k + ": " + v)
		if k == IdempotencyHeader {
			b.WriteString("\n" + keyedSession(v).id)
		}
	}
	for _, tok := range sweepTokenPattern.FindAllString(r.body, -1) {
		if t, ok := parseOHToken(tok); ok {
			b.WriteString("\n" + strings.Join([]string{t.Agent, t.Session, t.Run, t.RunRecord, t.Signal, t.Nonce}, " "))
		}
	}
	return b.String()
}

// sweepTokenPattern finds continuation tokens in a request body.
var sweepTokenPattern = regexp.MustCompile(`oh1\.[A-Za-z0-9_-]+`)

// sweepResp is an answer.
type sweepResp struct {
	status int
	header http.Header
	body   []byte
}

// do sends r with the Authorization header auth ("" for none). An event
// stream is read for sseFor, then dropped (a stream that ends earlier is
// read whole).
func (e *sweepEnv) do(t *testing.T, auth string, r sweepReq, sseFor time.Duration) sweepResp {
	t.Helper()
	resp, err := e.send(auth, r, sseFor)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// send is do for any goroutine: it returns its failure.
func (e *sweepEnv) send(auth string, r sweepReq, sseFor time.Duration) (sweepResp, error) {
	// Generous: the turn kept in flight during the sweep waits for the
	// whole sweep, which on PostgreSQL under -race on a loaded machine
	// has taken over 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, e.url+r.path, body)
	if err != nil {
		return sweepResp{}, err
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return sweepResp{}, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	var raw []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var buf bytes.Buffer
		timer := time.AfterFunc(sseFor, func() { resp.Body.Close() })
		_, _ = io.Copy(&buf, resp.Body)
		timer.Stop()
		raw = buf.Bytes()
	} else if raw, err = io.ReadAll(resp.Body); err != nil {
		return sweepResp{}, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	return sweepResp{status: resp.StatusCode, header: resp.Header, body: raw}, nil
}

func sweepBearer(secret string) string { return "Bearer " + secret }

// sweepGet walks raw JSON along path (object keys, array indexes) to a
// string (or a number, formatted); "" when absent.
func sweepGet(raw []byte, path ...string) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return ""
			}
			v = x[i]
		default:
			return ""
		}
	}
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

// sweepIDs are one side's ids by name: tenant A's, or the ghost ids of
// the same shapes that exist nowhere.
type sweepIDs map[string]string

// sweepSeed is what tenant A created.
type sweepSeed struct {
	ids sweepIDs
	// needles are A's ids and content: no answer to another caller may
	// carry one its request did not carry.
	needles []string
	// sessions and runs name the ids (keys of ids) of A's sessions and
	// runs; responses those of its stored responses.
	sessions, runs, responses []string
	// lastEvent is the id of an event of A's sessHist stream.
	lastEvent string
	// slowDone answers A's turn in flight (runSlow) once released.
	slowDone <-chan sweepResp
}

// mustA sends r as tenant A and fails unless it is answered with want.
func (e *sweepEnv) mustA(t *testing.T, r sweepReq, want int) sweepResp {
	t.Helper()
	resp := e.do(t, sweepBearer(sweepSecretA), r, 10*time.Second)
	if resp.status != want {
		t.Fatalf("tenant A: %s %s: %d, want %d: %s", r.method, r.path, resp.status, want, resp.body)
	}
	return resp
}

func sweepPost(path, body string, header ...string) sweepReq {
	h := map[string]string{}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	return sweepReq{method: "POST", path: path, body: body, header: h}
}

func sweepGetReq(path string) sweepReq { return sweepReq{method: "GET", path: path} }

// seedA creates tenant A's state through the API.
func (e *sweepEnv) seedA(t *testing.T) *sweepSeed {
	t.Helper()
	ids := sweepIDs{
		"sessHist": "sa-hist", "sessPend": "sa-pend", "sessFail": "sa-fail", "sessOAI": "sa-oai",
		"sessOH": "sa-oh", "sessOH2": "sa-oh2", "sessDirect": "sa-direct",
		"idemOAI": "a-idem-oai", "idemResp": "a-idem-resp", "ohReq": "a-oh-req-done",
	}
	m := func(what, order string) string {
		return fmt.Sprintf("%s order %s please, %s-%s", what, order, sweepMarker, strings.ReplaceAll(what, " ", "-"))
	}
	// A session with a history of two turns.
	e.mustA(t, sweepPost("/v1/sessions", `{"session_id":"sa-hist"}`), http.StatusCreated)
	r := e.mustA(t, sweepPost("/v1/sessions/sa-hist/messages", fmt.Sprintf(`{"content":%q}`, m("where is", "424242"))), 200)
	ids["runHist"] = sweepGet(r.body, "run_id")
	r = e.mustA(t, sweepPost("/v1/sessions/sa-hist/messages", fmt.Sprintf(`{"content":%q,"message_id":"a-msg-1"}`, "hello "+sweepMarker+"-hello")), 200)
	ids["runHist2"] = sweepGet(r.body, "run_id")
	r = e.mustA(t, sweepGetReq("/v1/sessions/sa-hist/runs?page_size=1"), 200)
	ids["pageTok"] = sweepGet(r.body, "next_page_token")
	// A suspended turn awaiting approval.
	r = e.mustA(t, sweepPost("/v1/sessions/sa-pend/messages", fmt.Sprintf(`{"content":%q}`, m("refund", "777001"))), 200)
	if sweepGet(r.body, "outcome") != "suspended" {
		t.Fatalf("not suspended: %s", r.body)
	}
	ids["runPend"], ids["sigPend"], ids["invPend"] = sweepGet(r.body, "run_id"), sweepGet(r.body, "signal", "signal_id"), sweepGet(r.body, "invocation_id")
	// A failed run.
	r = e.mustA(t, sweepPost("/v1/sessions/sa-fail/messages", fmt.Sprintf(`{"content":%q,"agent":"failing"}`, m("where is", "606060"))), 200)
	if sweepGet(r.body, "outcome") != "errored" {
		t.Fatalf("not errored: %s", r.body)
	}
	ids["runFail"] = sweepGet(r.body, "run_id")
	// A chat completion with an Idempotency-Key, in a named session.
	r = e.mustA(t, sweepPost("/v1/chat/completions", fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":%q}]}`, m("where is", "424243")),
		IdempotencyHeader, ids["idemOAI"], SessionHeader, "sa-oai"), 200)
	ids["runOAI"] = strings.TrimPrefix(sweepGet(r.body, "id"), "chatcmpl-")
	// Responses: a stored one, a continuation of it, an unstored one and
	// one awaiting approval.
	r = e.mustA(t, sweepPost("/v1/responses", fmt.Sprintf(`{"model":"demo","input":%q}`, m("where is", "424244")), IdempotencyHeader, ids["idemResp"]), 200)
	ids["resp1"], ids["sessResp"] = sweepGet(r.body, "id"), r.header.Get(SessionHeader)
	r = e.mustA(t, sweepPost("/v1/responses", fmt.Sprintf(`{"model":"demo","previous_response_id":%q,"input":%q}`, ids["resp1"], "thanks "+sweepMarker+"-thanks")), 200)
	ids["resp2"] = sweepGet(r.body, "id")
	r = e.mustA(t, sweepPost("/v1/responses", fmt.Sprintf(`{"model":"demo","store":false,"input":%q}`, "unstored "+sweepMarker+"-unstored")), 200)
	ids["resp3"], ids["sessResp3"] = sweepGet(r.body, "id"), r.header.Get(SessionHeader)
	r = e.mustA(t, sweepPost("/v1/responses", fmt.Sprintf(`{"model":"demo","input":%q}`, m("refund", "777002"))), 200)
	ids["resp4"], ids["sessResp4"], ids["apResp4"] = sweepGet(r.body, "id"), r.header.Get(SessionHeader), sweepGet(r.body, "output", "1", "id")
	if !strings.HasPrefix(ids["apResp4"], agent.SignalPrefix) {
		t.Fatalf("no approval request: %s", r.body)
	}
	// OpenHarness: a suspended run with its continuation token, a
	// completed one under a request_id.
	r = e.mustA(t, sweepPost("/v1/openharness", fmt.Sprintf(`{"protocol_version":"1.0.0","request_id":"a-oh-req-pend","request":{"context":{"session_id":"sa-oh","user_intent":%q}}}`,
		m("refund", "777003"))), 200)
	x := func(p ...string) string {
		return sweepGet(r.body, append([]string{"response", "extensions", ohNamespace}, p...)...)
	}
	ids["runOHPend"], ids["ohToken"] = x("run_id"), x("continuation", "continuation_token")
	if ids["ohToken"] == "" {
		t.Fatalf("no continuation: %s", r.body)
	}
	r = e.mustA(t, sweepPost("/v1/openharness", fmt.Sprintf(`{"protocol_version":"1.0.0","request_id":%q,"request":{"context":{"session_id":"sa-oh2","user_intent":%q}}}`,
		ids["ohReq"], m("where is", "424245"))), 200)
	ids["runOHDone"] = x("run_id")
	// A direct tool run.
	r = e.mustA(t, sweepPost("/v1/agents/demo/tools/lookup_order", `{"arguments":{"order":"515151"},"session_id":"sa-direct"}`), 200)
	ids["runDirect"] = sweepGet(r.body, "run_id")
	// A turn of the gate agent awaiting "gate-go" (any payload).
	r = e.mustA(t, sweepPost("/v1/sessions/sa-gate/messages", fmt.Sprintf(`{"content":%q,"agent":"gate"}`, m("gate for", "909090"))), 200)
	if sweepGet(r.body, "outcome") != "suspended" {
		t.Fatalf("the gate did not suspend: %s", r.body)
	}
	ids["sessGate"], ids["runGate"] = "sa-gate", sweepGet(r.body, "run_id")
	ids["gateToken"] = ohToken{Agent: "gate", Session: "sa-gate", Run: ids["runGate"], RunRecord: ids["runGate"], Signal: "gate-go", Nonce: "0123456789abcdef"}.String()
	// A turn in flight.
	slowDone := make(chan sweepResp, 1)
	go func() {
		r, err := e.send(sweepBearer(sweepSecretA), sweepPost("/v1/sessions/sa-slow/messages",
			fmt.Sprintf(`{"content":%q,"agent":"slow"}`, m("where is", "880088"))), 0)
		if err != nil {
			t.Error(err)
		}
		slowDone <- r
	}()
	for range 100 {
		r = e.mustA(t, sweepGetReq("/v1/sessions/sa-slow/runs"), 200)
		if ids["runSlow"] = sweepGet(r.body, "runs", "0", "id"); ids["runSlow"] != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	ids["sessSlow"] = "sa-slow"
	// The last event of sa-hist's stream.
	r = e.mustA(t, sweepGetReq("/v1/runs/"+ids["runHist2"]+"/events"), 200)
	var evs struct{ Events []struct{ ID int64 } }
	if err := json.Unmarshal(r.body, &evs); err != nil || len(evs.Events) == 0 {
		t.Fatalf("events %s: %v", r.body, err)
	}
	seed := &sweepSeed{ids: ids, slowDone: slowDone, lastEvent: strconv.FormatInt(evs.Events[len(evs.Events)-1].ID, 10),
		sessions:  []string{"sessHist", "sessPend", "sessFail", "sessOAI", "sessResp", "sessResp3", "sessResp4", "sessOH", "sessOH2", "sessDirect", "sessSlow", "sessGate"},
		runs:      []string{"runHist", "runHist2", "runPend", "runFail", "runOAI", "resp1", "resp2", "resp3", "resp4", "runOHPend", "runOHDone", "runDirect", "runSlow", "runGate"},
		responses: []string{"resp1", "resp2", "resp3", "resp4"}}
	for k, v := range ids {
		if v == "" {
			t.Fatalf("seed: no %s", k)
		}
		// Keys are chosen by the client, and signal ids are the demo
		// model's call numbers (every tenant's first refund asks under
		// the same one): neither tells anything of A's.
		if !strings.HasPrefix(k, "idem") && k != "ohReq" && k != "gateToken" && !strings.HasPrefix(v, agent.SignalPrefix) {
			seed.needles = append(seed.needles, v)
		}
	}
	seed.needles = append(seed.needles, sweepMarker, "a-msg-1", "a-oh-req-pend")
	seed.needles = append(seed.needles, sweepOrders...)
	return seed
}

// sweepGhostIDs are ids of the same shapes as seed's that name nothing.
func sweepGhostIDs(seed *sweepSeed) sweepIDs {
	g := sweepIDs{}
	for k, v := range seed.ids {
		switch {
		case strings.HasPrefix(v, "sa-"):
			g[k] = "sg-" + v[3:]
		case strings.HasPrefix(v, agent.SignalPrefix):
			g[k] = agent.SignalPrefix + "call_999"
		case strings.HasPrefix(v, "resp_"):
			g[k] = "resp_" + strings.ReplaceAll(uuid.New(), "-", "")
		default:
			g[k] = uuid.New()
		}
	}
	g["idemOAI"], g["idemResp"], g["ohReq"] = "g-idem-oai", "g-idem-resp", "g-oh-req-done"
	g["pageTok"] = seed.ids["pageTok"]
	// Ids A's objects share (a run's id is its invocation's) are shared
	// by the ghosts too.
	for k, v := range seed.ids {
		for k2, v2 := range seed.ids {
			if k < k2 && v == v2 {
				g[k2] = g[k]
			}
		}
	}
	g["gateToken"] = ohToken{Agent: "gate", Session: g["sessGate"], Run: g["runGate"], RunRecord: g["runGate"], Signal: "gate-go", Nonce: "0123456789abcdef"}.String()
	g["ohToken"] = ohToken{Agent: "demo", Session: g["sessOH"], Run: g["runOHPend"], RunRecord: g["runOHPend"],
		Signal: agent.SignalPrefix + "call_999", Nonce: "0123456789abcdef"}.String()
	return g
}

// sweepCase is one request of the sweep, built from either side's ids.
type sweepCase struct {
	// pattern is the registered route the case covers.
	pattern string
	name    string
	// creates: the request creates state of the caller's (tenant B's)
	// own; such cases run after the others.
	creates bool
	// public routes need no token.
	public bool
	// again: the case is swept again once A resolved its approvals.
	again bool
	// want is the status tenant B must get (0: any, alike for both).
	want int
	req  func(ids sweepIDs) sweepReq
}

// sweepCases are the requests of the sweep: every registered route,
// with each kind of A's id it takes.
func sweepCases(seed *sweepSeed) []sweepCase {
	var cs []sweepCase
	add := func(c sweepCase) { cs = append(cs, c) }
	get := func(f string) func(sweepIDs) sweepReq {
		return func(ids sweepIDs) sweepReq { return sweepGetReq(ids.fill(f)) }
	}
	for _, p := range []struct{ pattern, path string }{{"GET /healthz", "/healthz"}, {"GET /readyz", "/readyz"}, {"GET /metrics", "/metrics"},
		{"GET /{$}", "/"}, {"GET /assets/", "/assets/"}} {
		add(sweepCase{pattern: p.pattern, name: p.path, public: true, req: get(p.path)})
	}
	add(sweepCase{pattern: "GET /v1/sessions", name: "list", want: 200, req: get("/v1/sessions")})
	add(sweepCase{pattern: "GET /v1/models", name: "list", want: 200, req: get("/v1/models")})
	add(sweepCase{pattern: "GET /v1/models/{model}", name: "demo", want: 200, req: get("/v1/models/demo")})
	for _, k := range seed.sessions {
		add(sweepCase{pattern: "GET /v1/sessions/{id}", name: k, want: 404, req: get("/v1/sessions/{" + k + "}")})
		add(sweepCase{pattern: "GET /v1/sessions/{id}/runs", name: k, want: 200, req: get("/v1/sessions/{" + k + "}/runs")})
		add(sweepCase{pattern: "GET /v1/sessions/{id}/runs", name: k + " page token", req: get("/v1/sessions/{" + k + "}/runs?page_size=1&page_token={pageTok}")})
		add(sweepCase{pattern: "GET /v1/sessions/{id}/events", name: k, want: 200, req: get("/v1/sessions/{" + k + "}/events")})
		add(sweepCase{pattern: "GET /v1/sessions/{id}/events", name: k + " Last-Event-ID", want: 200, req: func(ids sweepIDs) sweepReq {
			r := sweepGetReq(ids.fill("/v1/sessions/{" + k + "}/events"))
			r.header = map[string]string{"Last-Event-ID": seed.lastEvent}
			return r
		}})
		add(sweepCase{pattern: "GET /v1/sessions/{id}/events", name: k + " after", want: 200,
			req: get("/v1/sessions/{" + k + "}/events?after=" + seed.lastEvent)})
		add(sweepCase{pattern: "DELETE /v1/sessions/{id}", name: k, req: func(ids sweepIDs) sweepReq {
			return sweepReq{method: "DELETE", path: ids.fill("/v1/sessions/{" + k + "}")}
		}})
	}
	for _, k := range seed.runs {
		add(sweepCase{pattern: "GET /v1/runs/{id}", name: k, want: 404, req: get("/v1/runs/{" + k + "}")})
		add(sweepCase{pattern: "GET /v1/runs/{id}/events", name: k, want: 404, req: get("/v1/runs/{" + k + "}/events?after=1")})
		add(sweepCase{pattern: "POST /v1/runs/{id}/cancel", name: k, want: 404, req: func(ids sweepIDs) sweepReq {
			return sweepPost(ids.fill("/v1/runs/{"+k+"}/cancel"), "")
		}})
	}
	for _, k := range seed.runs {
		// A run of any surface reads as a response of its tenant.
		add(sweepCase{pattern: "GET /v1/responses/{id}", name: k, want: 404, req: get("/v1/responses/{" + k + "}")})
		add(sweepCase{pattern: "/", name: k + " input_items", want: 404, req: get("/v1/responses/{" + k + "}/input_items")})
		add(sweepCase{pattern: "/", name: k + " DELETE", want: 405, req: func(ids sweepIDs) sweepReq {
			return sweepReq{method: "DELETE", path: ids.fill("/v1/responses/{" + k + "}")}
		}})
		add(sweepCase{pattern: "POST /v1/responses", name: k + " previous_response_id", want: 404, again: true, req: func(ids sweepIDs) sweepReq {
			return sweepPost("/v1/responses", ids.fill(`{"model":"demo","previous_response_id":"{`+k+`}","input":"go on"}`))
		}})
	}
	add(sweepCase{pattern: "POST /v1/responses", name: "approval", want: 404, again: true, req: func(ids sweepIDs) sweepReq {
		return sweepPost("/v1/responses", ids.fill(`{"model":"demo","previous_response_id":"{resp4}","input":[{"type":"mcp_approval_response","approval_request_id":"{apResp4}","approve":true}]}`))
	}})
	add(sweepCase{pattern: "POST /v1/responses", name: "approval with A's key", want: 404, again: true, req: func(ids sweepIDs) sweepReq {
		return sweepPost("/v1/responses", ids.fill(`{"model":"demo","previous_response_id":"{resp4}","input":[{"type":"mcp_approval_response","approval_request_id":"{apResp4}","approve":true}]}`),
			IdempotencyHeader, "a-idem-approve")
	}})
	for _, sig := range []struct{ name, session, body string }{
		{"signal id", "{sessPend}", `{"signal_id":"{sigPend}","payload":{"approval":{"approved":true}}}`},
		{"invocation id", "{sessPend}", `{"invocation_id":"{invPend}","payload":{"approval":{"approved":true}}}`},
		{"denial", "{sessPend}", `{"signal_id":"{sigPend}","payload":{"approval":{"approved":false}}}`},
		{"own session", "sb-own", `{"signal_id":"{sigPend}","invocation_id":"{invPend}","payload":{"approval":{"approved":true}}}`},
		{"request id", "{sessPend}", `{"signal_id":"{sigPend}","request_id":"a-sig-req","payload":{"approval":{"approved":true}}}`},
		{"request id alone", "{sessPend}", `{"invocation_id":"{invPend}","request_id":"a-sig-req"}`},
		// A request id makes a signal nothing awaits look for its
		// recorded outcome: that look-up must never resume A's turn.
		{"gate with a request id", "{sessGate}", `{"invocation_id":"{runGate}","request_id":"b-req-1","agent":"gate"}`},
		{"gate with a request id in B's own session", "sb-own", `{"invocation_id":"{runGate}","signal_id":"gate-go","request_id":"b-req-2","agent":"gate"}`},
		{"gate with a request id, default agent", "{sessGate}", `{"invocation_id":"{runGate}","request_id":"b-req-3"}`},
	} {
		add(sweepCase{pattern: "POST /v1/sessions/{id}/signals", name: sig.name, want: 404, again: true, req: func(ids sweepIDs) sweepReq {
			return sweepPost(ids.fill("/v1/sessions/"+sig.session+"/signals"), ids.fill(sig.body))
		}})
	}
	oh := func(ctx string) string {
		return `{"protocol_version":"1.0.0","request":{"context":` + ctx + `}}`
	}
	for _, c := range []struct{ name, ctx string }{
		{"token", `{"continuation":{"continuation_token":"{ohToken}"},"extensions":{"dev.armature":{"option":"approve"}}}`},
		{"token and session", `{"session_id":"{sessOH}","continuation":{"continuation_token":"{ohToken}"},"extensions":{"dev.armature":{"option":"approve"}}}`},
		{"run id", `{"continuation":{"run_id":"{runOHPend}"},"extensions":{"dev.armature":{"option":"approve"}}}`},
		{"run id and session", `{"session_id":"{sessOH}","continuation":{"run_id":"{runOHPend}"},"extensions":{"dev.armature":{"option":"deny"}}}`},
		// The request's own auth block names A: it is not who the
		// caller is (the bearer token is).
		{"auth naming A", `{"continuation":{"continuation_token":"{ohToken}"},"extensions":{"dev.armature":{"option":"approve"}}},"auth":{"tenant_id":"a","session_id":"{sessOH}"}`},
		// A token is not signed: B can build one naming A's suspended
		// invocation.
		{"forged token", `{"session_id":"{sessGate}","continuation":{"continuation_token":"{gateToken}"},"extensions":{"dev.armature":{"option":"approve"}}}`},
		{"completed run id", `{"session_id":"{sessOH2}","continuation":{"run_id":"{runOHDone}"},"extensions":{"dev.armature":{"option":"approve"}}}`},
	} {
		add(sweepCase{pattern: "POST /v1/openharness", name: c.name, again: true, req: func(ids sweepIDs) sweepReq {
			return sweepPost("/v1/openharness", ids.fill(oh(c.ctx)))
		}})
	}
	// Requests that run turns of B's own, in sessions named as A's are.
	add(sweepCase{pattern: "POST /v1/openharness", name: "request id", creates: true, want: 200, req: func(ids sweepIDs) sweepReq {
		return sweepPost("/v1/openharness", ids.fill(`{"protocol_version":"1.0.0","request_id":"{ohReq}","request":{"context":{"session_id":"{sessOH2}","user_intent":"hello from b"}}}`))
	}})
	add(sweepCase{pattern: "POST /v1/sessions", name: "A's session id", creates: true, want: 201, req: func(ids sweepIDs) sweepReq {
		return sweepPost("/v1/sessions", ids.fill(`{"session_id":"{sessHist}"}`))
	}})
	add(sweepCase{pattern: "POST /v1/sessions/{id}/messages", name: "A's session", creates: true, want: 200, req: func(ids sweepIDs) sweepReq {
		return sweepPost(ids.fill("/v1/sessions/{sessPend}/messages"), ids.fill(`{"content":"hello from b","message_id":"a-msg-1"}`))
	}})
	add(sweepCase{pattern: "POST /v1/chat/completions", name: "A's key and session", creates: true, want: 200, req: func(ids sweepIDs) sweepReq {
		return sweepPost("/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hello from b"}]}`,
			IdempotencyHeader, ids["idemOAI"], SessionHeader, ids["sessOAI"])
	}})
	add(sweepCase{pattern: "POST /v1/chat/completions", name: "A's session in metadata", creates: true, want: 200, req: func(ids sweepIDs) sweepReq {
		return sweepPost("/v1/chat/completions", ids.fill(`{"model":"demo","metadata":{"session_id":"{sessHist}"},"messages":[{"role":"user","content":"hello from b"}]}`))
	}})
	add(sweepCase{pattern: "POST /v1/chat/completions", name: "A's key streamed", creates: true, want: 200, req: func(ids sweepIDs) sweepReq {
		return sweepPost("/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"hello from b"}]}`,
			IdempotencyHeader, ids["idemOAI"]+"-s", SessionHeader, ids["sessOAI"]+"-s")
	}})
	add(sweepCase{pattern: "POST /v1/responses", name: "A's key", creates: true, want: 200, req: func(ids sweepIDs) sweepReq {
		return sweepPost("/v1/responses", `{"model":"demo","input":"hello from b"}`, IdempotencyHeader, ids["idemResp"])
	}})
	add(sweepCase{pattern: "POST /v1/agents/{agent}/tools/{tool}", name: "A's session", creates: true, want: 200, req: func(ids sweepIDs) sweepReq {
		return sweepPost("/v1/agents/demo/tools/lookup_order", ids.fill(`{"arguments":{"order":"1"},"session_id":"{sessDirect}"}`))
	}})
	return cs
}

// fill replaces each {name} in s by the id of that name.
func (ids sweepIDs) fill(s string) string {
	for k, v := range ids {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

// normalize replaces the ids in an answer by their names, longest first.
func (ids sweepIDs) normalize(b []byte) string {
	keys := make([]string, 0, len(ids))
	for k := range ids {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if li, lj := len(ids[keys[i]]), len(ids[keys[j]]); li != lj {
			return li > lj
		}
		return keys[i] < keys[j]
	})
	s := sweepLatency.ReplaceAllString(string(b), `"engine_latency_ms":0`)
	for _, k := range keys {
		s = strings.ReplaceAll(s, ids[k], "{"+k+"}")
	}
	return s
}

// sweepLatency is an OpenHarness answer's timing, which differs by
// chance between two answers.
var sweepLatency = regexp.MustCompile(`"engine_latency_ms":\d+`)

// sweepEnums are the JSON keys whose values a skeleton keeps: they say
// what happened (the rest are ids, times and texts).
var sweepEnums = map[string]bool{"code": true, "category": true, "outcome": true, "status": true, "type": true, "object": true,
	"bucket": true, "retryable": true, "replayed": true, "resumed": true, "event": true}

// sweepSkeleton is an answer's shape: its JSON with values other than the
// enums blanked (an event stream: its frames' shapes, in order), so
// that two answers of the same kind compare equal.
func sweepSkeleton(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) == nil {
		return sweepSkeletonOf(v, "")
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			out = append(out, line)
		case strings.HasPrefix(line, "data:"):
			var d any
			if json.Unmarshal([]byte(strings.TrimSpace(line[5:])), &d) == nil {
				out = append(out, "data: "+sweepSkeletonOf(d, ""))
			} else {
				out = append(out, "data")
			}
		case strings.HasPrefix(line, "id:"):
			out = append(out, "id")
		}
	}
	if len(out) == 0 && len(b) > 0 {
		return "(not JSON)"
	}
	return strings.Join(out, "\n")
}

func sweepSkeletonOf(v any, key string) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ":" + sweepSkeletonOf(x[k], k)
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = sweepSkeletonOf(e, key)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case string:
		if sweepEnums[key] {
			return strconv.Quote(x)
		}
		return "s"
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	return "n"
}

// sweepHeaderNames are an answer's header names, sorted.
func sweepHeaderNames(h http.Header) string {
	var names []string
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// sweepLeaks returns the needles resp carries (body or headers) that req
// did not carry.
func sweepLeaks(needles []string, req sweepReq, resp sweepResp) []string {
	sent := req.text()
	var b strings.Builder
	b.Write(resp.body)
	for k, vs := range resp.header {
		b.WriteString("\n" + k + ": " + strings.Join(vs, ", "))
	}
	got := b.String()
	var out []string
	for _, n := range needles {
		if !strings.Contains(sent, n) && strings.Contains(got, n) {
			out = append(out, n)
		}
	}
	return out
}

// snapshotA reads tenant A's state: its sessions, their runs and
// events, its stored responses and its session list.
func (e *sweepEnv) snapshotA(t *testing.T, seed *sweepSeed) map[string]string {
	t.Helper()
	snap := map[string]string{}
	read := func(path string) {
		r := e.do(t, sweepBearer(sweepSecretA), sweepGetReq(path), 300*time.Millisecond)
		snap[path] = fmt.Sprintf("%d %s", r.status, r.body)
	}
	read("/v1/sessions")
	for _, k := range seed.sessions {
		read("/v1/sessions/" + seed.ids[k])
		read("/v1/sessions/" + seed.ids[k] + "/runs")
	}
	for _, k := range seed.runs {
		read("/v1/runs/" + seed.ids[k])
		read("/v1/runs/" + seed.ids[k] + "/events")
	}
	for _, k := range seed.responses {
		read("/v1/responses/" + seed.ids[k])
	}
	read("/v1/sessions/" + seed.ids["sessHist"] + "/events")
	return snap
}

// stableSnapshotA waits for A's run records (written behind the turns)
// to settle and returns the snapshot.
func (e *sweepEnv) stableSnapshotA(t *testing.T, seed *sweepSeed) map[string]string {
	t.Helper()
	prev := e.snapshotA(t, seed)
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		cur := e.snapshotA(t, seed)
		if maps.Equal(prev, cur) {
			return cur
		}
		prev = cur
	}
	t.Fatal("tenant A's state does not settle")
	return nil
}

// sweepSourcePatterns are the route patterns the package's source registers
// (string literals passed to handle, handlePublic, handleOpenAI,
// wrapWith, wrap or a mux's Handle): a route registered some other way
// is caught by Server.patterns.
func sweepSourcePatterns(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "handle", "handlePublic", "handleOpenAI", "wrapWith", "wrap", "Handle", "HandleFunc":
			default:
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if p, err := strconv.Unquote(lit.Value); err == nil {
					out = append(out, p)
				}
			}
			return true
		})
	}
	return out
}

// TestTenantSweep: tenants cannot see, probe or change each other's
// sessions on any route (see the top of this file), on SQLite and on
// PostgreSQL (a schema of its own on $ARMATURE_POSTGRES_URL or the local
// server; skipped without one, except in CI).
func TestTenantSweep(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "postgres" && testing.Short() {
				t.Skip("short")
			}
			testTenantSweep(t, backend)
		})
	}
}

func testTenantSweep(t *testing.T, backend string) {
	e := newSweepEnv(t, backend)
	seed := e.seedA(t)
	ghost := sweepGhostIDs(seed)
	cases := sweepCases(seed)

	// Every registered route is swept, and the sweep names no route
	// that is not registered.
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.pattern] = true
	}
	registered := map[string]bool{}
	for _, p := range append(slices.Clone(e.srv.patterns), sweepSourcePatterns(t)...) {
		if !registered[p] && !covered[p] {
			t.Errorf("route %q is registered but not in the tenant sweep: add cases for it to sweepCases", p)
		}
		registered[p] = true
	}
	for p := range covered {
		if !registered[p] {
			t.Errorf("the sweep covers %q, which is not registered", p)
		}
	}

	before := e.stableSnapshotA(t, seed)
	auths := []struct{ name, header string }{
		{"tenant B", sweepBearer(sweepSecretB)},
		{"no token", ""},
		{"wrong token", sweepBearer("sweep-secret-tenant-x-0001")},
		{"empty bearer", "Bearer "},
		{"basic", "Basic YTpzd2VlcC1zZWNyZXQtdGVuYW50LWEtMDAwMQ=="},
		{"token of A with a suffix", sweepBearer(sweepSecretA + "x")},
		{"token of A as another scheme", "Token " + sweepSecretA},
	}
	sweep := func(which func(sweepCase) bool) {
		for _, c := range cases {
			if !which(c) {
				continue
			}
			for _, au := range auths {
				t.Run(c.pattern+"/"+c.name+"/"+au.name, func(t *testing.T) {
					treq, greq := c.req(seed.ids), c.req(ghost)
					tr := e.do(t, au.header, treq, 400*time.Millisecond)
					gr := e.do(t, au.header, greq, 400*time.Millisecond)
					if tr.status != gr.status {
						t.Errorf("status %d for A's id, %d for an id that does not exist: %s | %s", tr.status, gr.status, tr.body, gr.body)
					}
					switch {
					case au.name == "tenant B" && c.want != 0 && tr.status != c.want:
						t.Errorf("status %d, want %d: %s", tr.status, c.want, tr.body)
					case au.name != "tenant B" && !c.public && tr.status != http.StatusUnauthorized:
						t.Errorf("status %d without a valid token, want 401: %s", tr.status, tr.body)
					}
					if l := sweepLeaks(seed.needles, treq, tr); len(l) > 0 {
						t.Errorf("the answer to %s %s carries tenant A's %q:\n%s\n%v", treq.method, treq.path, l, string(tr.body), tr.header)
					}
					if ht, hg := sweepHeaderNames(tr.header), sweepHeaderNames(gr.header); ht != hg {
						t.Errorf("header names differ: %s | %s", ht, hg)
					}
					if loc := tr.header.Get("Location"); loc != "" {
						t.Errorf("Location: %s", loc)
					}
					if c.public {
						return // a page or a scrape: not about ids
					}
					if tr.status >= 400 || !c.creates && tr.status < 300 && !strings.HasPrefix(tr.header.Get("Content-Type"), "text/event-stream") {
						if nt, ng := seed.ids.normalize(tr.body), ghost.normalize(gr.body); nt != ng {
							t.Errorf("answers differ:\nA's id: %s\nghost:  %s", nt, ng)
						}
					} else if st, sg := sweepSkeleton(tr.body), sweepSkeleton(gr.body); st != sg {
						t.Errorf("answers differ in shape:\nA's id: %s\nghost:  %s\n(%s | %s)", st, sg, tr.body, gr.body)
					}
				})
			}
		}
	}
	sweep(func(c sweepCase) bool { return !c.creates })
	// A's state is as it was.
	after := e.snapshotA(t, seed)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("tenant A's %s changed:\nbefore: %s\nafter:  %s", k, v, after[k])
		}
	}
	sweep(func(c sweepCase) bool { return c.creates })
	after = e.snapshotA(t, seed)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("after B's own turns, tenant A's %s changed:\nbefore: %s\nafter:  %s", k, v, after[k])
		}
	}

	// B watches the session ids of A's sessions (its own sessions of
	// those names) while A's turns run in them: B sees none of A's
	// events, replayed or live.
	type watched struct {
		session string
		resp    chan sweepResp
	}
	var ws []watched
	for _, k := range []string{"sessHist", "sessPend", "sessOH"} {
		w := watched{seed.ids[k], make(chan sweepResp, 1)}
		ws = append(ws, w)
		go func() {
			r, err := e.send(sweepBearer(sweepSecretB), sweepGetReq("/v1/sessions/"+w.session+"/events"), 3*time.Second)
			if err != nil {
				t.Error(err)
			}
			w.resp <- r
		}()
	}
	// Resuming B's own session from A's event id resumes nothing.
	lastReq := sweepReq{method: "GET", path: "/v1/sessions/" + seed.ids["sessPend"] + "/events", header: map[string]string{"Last-Event-ID": seed.lastEvent}}
	if r := e.do(t, sweepBearer(sweepSecretB), lastReq, time.Second); !strings.Contains(string(r.body), CodeLastEventIDUnknown) || len(sweepLeaks(seed.needles, lastReq, r)) > 0 {
		t.Errorf("B's own session resumed from A's event id: %s", r.body)
	}
	time.Sleep(300 * time.Millisecond)
	// A's turn in flight was not cancelled: it completes.
	e.release()
	if r := <-seed.slowDone; r.status != 200 || sweepGet(r.body, "outcome") != "completed" || sweepGet(r.body, "run_id") != seed.ids["runSlow"] {
		t.Errorf("A's turn in flight: %d %s", r.status, r.body)
	}
	// A's approvals are still pending: A resolves each.
	r0 := e.mustA(t, sweepPost("/v1/sessions/sa-gate/signals", `{"signal_id":"gate-go","agent":"gate","payload":{}}`), 200)
	if sweepGet(r0.body, "outcome") != "completed" {
		t.Errorf("A's gate: %s", r0.body)
	}
	r := e.mustA(t, sweepPost("/v1/sessions/"+seed.ids["sessPend"]+"/signals", fmt.Sprintf(`{"signal_id":%q,"request_id":"a-sig-req","payload":{"approval":{"approved":true}}}`, seed.ids["sigPend"])), 200)
	if sweepGet(r.body, "outcome") != "completed" || !strings.Contains(string(r.body), "777001") {
		t.Errorf("A's approval: %s", r.body)
	}
	r = e.mustA(t, sweepPost("/v1/openharness", fmt.Sprintf(`{"protocol_version":"1.0.0","request":{"context":{"session_id":"sa-oh","continuation":{"continuation_token":%q},"extensions":{"dev.armature":{"option":"approve"}}}}}`,
		seed.ids["ohToken"])), 200)
	if got := sweepGet(r.body, "response", "extensions", ohNamespace, "outcome"); got != "completed" {
		t.Errorf("A's OpenHarness continuation: %s", r.body)
	}
	r = e.mustA(t, sweepPost("/v1/responses", fmt.Sprintf(`{"model":"demo","previous_response_id":%q,"input":[{"type":"mcp_approval_response","approval_request_id":%q,"approve":true}]}`,
		seed.ids["resp4"], seed.ids["apResp4"]), IdempotencyHeader, "a-idem-approve"), 200)
	if got := sweepGet(r.body, "x_armature", "outcome"); got != "completed" {
		t.Errorf("A's Responses approval: %s", r.body)
	}
	e.mustA(t, sweepPost("/v1/sessions/"+seed.ids["sessHist"]+"/messages", fmt.Sprintf(`{"content":"where is order 424242 now, %s-again"}`, sweepMarker)), 200)
	// Once A resolved them, B's attempts still get what an id that
	// does not exist gets: never A's recorded outcomes (replays of a
	// spent continuation, a signal's request id, an idempotent
	// decision).
	sweep(func(c sweepCase) bool { return c.again })
	for _, w := range ws {
		resp := <-w.resp
		// B's stream replays B's own turns in its session of that name,
		// one of which reused the message_id A used.
		req := sweepReq{method: "GET", path: "/v1/sessions/" + w.session + "/events", body: "a-msg-1"}
		if l := sweepLeaks(seed.needles, req, resp); len(l) > 0 {
			t.Errorf("B's stream of %s carries tenant A's %q:\n%s", w.session, l, resp.body)
		}
	}
}

// TestSignalReplayLookupStaysInTenant: a signal that names another
// tenant's suspended invocation with a request id, on any surface, is
// refused as one naming nothing, and the other tenant's turn stays
// suspended. Before, the look-up of the request id's recorded outcome
// resolved the signal by its invocation id in any session and resumed
// that turn: tenant B could let tenant A's turn past a suspension that
// takes any payload (the engine's default), and A's own signal then
// found nothing to resume.
func TestSignalReplayLookupStaysInTenant(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  func(runID string) sweepReq
	}{
		{"REST signal in A's session id", func(run string) sweepReq {
			return sweepPost("/v1/sessions/sa-gate/signals", fmt.Sprintf(`{"invocation_id":%q,"request_id":"b-1","agent":"gate"}`, run))
		}},
		{"REST signal in B's own session", func(run string) sweepReq {
			return sweepPost("/v1/sessions/sb-own/signals", fmt.Sprintf(`{"invocation_id":%q,"signal_id":"gate-go","request_id":"b-2","agent":"gate","payload":{}}`, run))
		}},
		{"OpenHarness continuation token B built", func(run string) sweepReq {
			tok := ohToken{Agent: "gate", Session: "sa-gate", Run: run, Signal: "gate-go", Nonce: "0123456789abcdef"}.String()
			return sweepPost("/v1/openharness", fmt.Sprintf(`{"protocol_version":"1.0.0","request":{"context":{"session_id":"sa-gate","continuation":{"continuation_token":%q}}}}`, tok))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSweepEnv(t, "sqlite")
			r := e.mustA(t, sweepPost("/v1/sessions/sa-gate/messages", `{"content":"let me through","agent":"gate"}`), 200)
			run := sweepGet(r.body, "run_id")
			if sweepGet(r.body, "outcome") != "suspended" || run == "" {
				t.Fatalf("the gate did not suspend: %s", r.body)
			}
			b := e.do(t, sweepBearer(sweepSecretB), tc.req(run), time.Second)
			if strings.Contains(string(b.body), "gate passed") {
				t.Errorf("tenant B's signal answered A's resumed turn: %s", b.body)
			}
			r = e.mustA(t, sweepGetReq("/v1/sessions/sa-gate"), 200)
			var sess struct{ Messages []llm.Message }
			if err := json.Unmarshal(r.body, &sess); err != nil || len(sess.Messages) != 1 {
				t.Errorf("tenant B's signal changed A's session: %s", r.body)
			}
			r = e.mustA(t, sweepPost("/v1/sessions/sa-gate/signals", `{"signal_id":"gate-go","agent":"gate","payload":{}}`), 200)
			if sweepGet(r.body, "outcome") != "completed" {
				t.Errorf("A's own signal: %s", r.body)
			}
		})
	}
}
