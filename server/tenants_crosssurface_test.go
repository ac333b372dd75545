package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// Tenant isolation and request idempotency across surfaces.
// Two tenants, a and b, share one server and one store.

const (
	tntSecretA = "tnt-tenant-a-secret-0123456789"
	tntSecretB = "tnt-tenant-b-secret-0123456789"
)

var tntTokens = []server.Token{{Secret: tntSecretA, Tenant: "a"}, {Secret: tntSecretB, Tenant: "b"}}

// tntEnv is a two-tenant server over a trivial agent "count" that
// echoes the user's message and counts, per tenant, the turns it ran and
// the messages it answered.
type tntEnv struct {
	url string
	// gate, when set, holds every turn whose message starts with "slow"
	// until it is closed.
	gate chan struct{}
	open func()
	mu   sync.Mutex
	ran  map[string]int // tenant + "|" + message text -> turns run
	all  atomic.Int64
}

func newTntEnv(t *testing.T) *tntEnv {
	t.Helper()
	e := &tntEnv{ran: map[string]int{}, gate: make(chan struct{})}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(e.gate) }) })
	e.open = func() { once.Do(func() { close(e.gate) }) }
	store := servertest.SQLite(t)
	schema, _ := chat.NewSchema()
	g, err := graph.NewBuilder(schema).
		AddNode("echo", func(ctx context.Context, s graph.State) (graph.Update, error) {
			info, _ := adapter.RequestInfoFrom(ctx)
			msgs := chat.Messages.Get(s)
			last := ""
			if len(msgs) > 0 {
				last = msgs[len(msgs)-1].Text()
			}
			if strings.HasPrefix(last, "slow") && e.gate != nil {
				select {
				case <-e.gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			e.mu.Lock()
			e.ran[info.Tenant+"|"+last]++
			e.mu.Unlock()
			e.all.Add(1)
			return chat.Messages.Add(llm.AssistantText("echo[" + info.Tenant + "]: " + last)), nil
		}).
		AddEdge("echo", graph.End).SetEntry("echo").
		Compile(graph.WithSessions(graph.SessionConfig{Store: store}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Locker: store.SessionLocker(sqlite.LockerConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.Serve(t, server.Config{Agents: []*server.Agent{{ID: "count", Chat: h, Model: "count"}}, Sessions: store, Tokens: tntTokens})
	e.url = ts.URL
	return e
}

func (e *tntEnv) count(tenant, text string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ran[tenant+"|"+text]
}

type tntResp struct {
	status int
	header http.Header
	body   []byte
}

func (r tntResp) String() string {
	b := r.body
	if len(b) > 1600 {
		b = append(b[:1600:1600], "..."...)
	}
	return fmt.Sprintf("%d %s", r.status, b)
}

func (r tntResp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("not JSON: %s", r)
	}
	return m
}

// tntDo sends a request with the Authorization header auth ("" none)
// and extra header pairs. It may run on another goroutine than the
// test's: a request that gets no answer (within tntTimeout) fails t
// with Errorf, not Fatal (whose Goexit there would skip the caller's
// hand-off and hang the test), and answers status -1.
func tntDo(t *testing.T, url, auth, method, path, body string, header ...string) tntResp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tntTimeout)
	defer cancel()
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url+path, rd)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return tntResp{status: -1, body: []byte(err.Error())}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return tntResp{status: -1, body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return tntResp{resp.StatusCode, resp.Header, b}
}

// tntTimeout bounds a request of the suite: long enough for a request
// held while thousands of others go by under the race detector on a
// slow machine, short of the test binary's timeout.
const tntTimeout = 3 * time.Minute

func tntAs(secret string) string { return "Bearer " + secret }

func tntOH(requestID, session, intent string) string {
	ctx := map[string]any{"user_intent": intent}
	if session != "" {
		ctx["session_id"] = session
	}
	b, _ := json.Marshal(map[string]any{"protocol_version": "1.0.0", "request_id": requestID, "request": map[string]any{"context": ctx}})
	return string(b)
}

// tntOHExt returns response.extensions["dev.armature"] and
// response.error of an OpenHarness answer.
func tntOHExt(t *testing.T, r tntResp) (ext, errObj map[string]any) {
	t.Helper()
	m := r.json(t)
	resp, _ := m["response"].(map[string]any)
	if x, ok := resp["extensions"].(map[string]any); ok {
		ext, _ = x["dev.armature"].(map[string]any)
	}
	errObj, _ = resp["error"].(map[string]any)
	return ext, errObj
}

// OpenHarness request_id is per tenant: tenant b sending the very body
// tenant a sent (same request_id, same session id string, same intent)
// runs its own turn in its own session, and is not handed a's memoized
// answer; each tenant's own retransmission is replayed without running.
// Also without a session_id (the session derived from the request_id).
func TestTenantsOHRequestIDAcrossTenants(t *testing.T) {
	e := newTntEnv(t)
	for _, session := range []string{"shared-oh", ""} {
		intent := "oh-intent-" + session + "-x"
		body := tntOH("rid-shared-1", session, intent)
		a1 := tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/openharness", body)
		extA, errA := tntOHExt(t, a1)
		if a1.status != 200 || errA != nil || extA["outcome"] != "completed" {
			t.Fatalf("session %q: a's first request: %s", session, a1)
		}
		b1 := tntDo(t, e.url, tntAs(tntSecretB), "POST", "/v1/openharness", body)
		extB, errB := tntOHExt(t, b1)
		if b1.status != 200 || errB != nil || extB["outcome"] != "completed" {
			t.Fatalf("session %q: b's request with a's request_id: %s", session, b1)
		}
		if extB["replayed"] == true || b1.header.Get("Idempotent-Replayed") != "" {
			t.Errorf("session %q: b's request was answered as a replay of a's: %s", session, b1)
		}
		if extB["run_id"] == extA["run_id"] {
			t.Errorf("session %q: b got a's run id %v", session, extA["run_id"])
		}
		if strings.Contains(string(b1.body), "echo[a]") {
			t.Errorf("session %q: b's answer carries a's reply: %s", session, b1)
		}
		if n := e.count("b", intent); n != 1 {
			t.Errorf("session %q: b's turn ran %d times, want 1", session, n)
		}
		// Retransmissions: replayed, nothing runs.
		for _, who := range []struct{ tenant, secret string }{{"a", tntSecretA}, {"b", tntSecretB}} {
			r := tntDo(t, e.url, tntAs(who.secret), "POST", "/v1/openharness", body)
			ext, errObj := tntOHExt(t, r)
			if errObj != nil || ext["run_id"] == nil || r.header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("session %q: %s's retransmission not replayed: %s", session, who.tenant, r)
			}
			if !strings.Contains(string(r.body), "echo["+who.tenant+"]") {
				t.Errorf("session %q: %s's retransmission does not carry its own reply: %s", session, who.tenant, r)
			}
			if n := e.count(who.tenant, intent); n != 1 {
				t.Errorf("session %q: %s's turn ran %d times after its retransmission, want 1", session, who.tenant, n)
			}
		}
		// Each tenant's session holds its own history only.
		sid := extA["session_id"].(string)
		if sb := extB["session_id"]; sb != sid {
			t.Logf("session ids differ: a %v b %v", sid, sb)
		}
		for _, who := range []struct{ tenant, secret, other string }{{"a", tntSecretA, "b"}, {"b", tntSecretB, "a"}} {
			g := tntDo(t, e.url, tntAs(who.secret), "GET", "/v1/sessions/"+sid, "")
			if g.status != 200 || !strings.Contains(string(g.body), "echo["+who.tenant+"]") || strings.Contains(string(g.body), "echo["+who.other+"]") {
				t.Errorf("session %q: %s's history: %s", session, who.tenant, g)
			}
		}
	}
}

// A request_id reused across tenants with a different body: b's request
// is b's first use of the id, not a message_id_reused refusal.
func TestTenantsOHRequestIDReuseOtherBody(t *testing.T) {
	e := newTntEnv(t)
	a := tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/openharness", tntOH("rid-2", "s2", "first a"))
	if _, errObj := tntOHExt(t, a); errObj != nil {
		t.Fatalf("setup: %s", a)
	}
	b := tntDo(t, e.url, tntAs(tntSecretB), "POST", "/v1/openharness", tntOH("rid-2", "s2", "other b"))
	ext, errObj := tntOHExt(t, b)
	if errObj != nil || ext["outcome"] != "completed" || e.count("b", "other b") != 1 {
		t.Fatalf("b's request under a's request_id with another intent: %s (b's turn ran %d times)", b, e.count("b", "other b"))
	}
	// Within one tenant the same reuse is refused, nothing runs.
	a2 := tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/openharness", tntOH("rid-2", "s2", "other a"))
	if _, errObj := tntOHExt(t, a2); errObj == nil || errObj["code"] == nil || e.count("a", "other a") != 0 {
		t.Fatalf("a's reuse of its request_id with another intent: %s (ran %d)", a2, e.count("a", "other a"))
	}
}

// Idempotency-Key (REST message_id, the header, chat completions,
// Responses) is per tenant: the same key and body from b runs b's own
// turn, and each tenant's retry answers its own first try.
func TestTenantsIdempotencyKeyAcrossTenants(t *testing.T) {
	e := newTntEnv(t)
	type surface struct {
		name, path, body string
		header           []string
		runID            func(map[string]any) string
	}
	restRun := func(m map[string]any) string { s, _ := m["run_id"].(string); return s }
	surfaces := []surface{
		{"rest message_id", "/v1/sessions/idem-s/messages", `{"content":"rest-mid","message_id":"key-1"}`, nil, restRun},
		{"rest Idempotency-Key", "/v1/sessions/idem-s/messages", `{"content":"rest-hdr"}`, []string{"Idempotency-Key", "key-2"}, restRun},
		{"chat completions", "/v1/chat/completions", `{"model":"count","messages":[{"role":"user","content":"cc-msg"}]}`,
			[]string{"Idempotency-Key", "key-3", "X-Armature-Session-Id", "idem-s"}, func(m map[string]any) string { s, _ := m["id"].(string); return s }},
		{"responses", "/v1/responses", `{"model":"count","input":"resp-msg"}`,
			[]string{"Idempotency-Key", "key-4", "X-Armature-Session-Id", "idem-s"}, func(m map[string]any) string { s, _ := m["id"].(string); return s }},
	}
	texts := map[string]string{"rest message_id": "rest-mid", "rest Idempotency-Key": "rest-hdr", "chat completions": "cc-msg", "responses": "resp-msg"}
	for _, s := range surfaces {
		a := tntDo(t, e.url, tntAs(tntSecretA), "POST", s.path, s.body, s.header...)
		if a.status != 200 {
			t.Fatalf("%s: a: %s", s.name, a)
		}
		b := tntDo(t, e.url, tntAs(tntSecretB), "POST", s.path, s.body, s.header...)
		if b.status != 200 {
			t.Errorf("%s: b with a's key: %s", s.name, b)
			continue
		}
		ra, rb := s.runID(a.json(t)), s.runID(b.json(t))
		if ra == "" || ra == rb || strings.Contains(string(b.body), "echo[a]") || !strings.Contains(string(b.body), "echo[b]") {
			t.Errorf("%s: b's answer is not its own turn (a's run %q, b's %q): %s", s.name, ra, rb, b)
		}
		if n := e.count("b", texts[s.name]); n != 1 {
			t.Errorf("%s: b's turn ran %d times", s.name, n)
		}
		for _, w := range []struct {
			tenant, secret, run string
		}{{"a", tntSecretA, ra}, {"b", tntSecretB, rb}} {
			r := tntDo(t, e.url, tntAs(w.secret), "POST", s.path, s.body, s.header...)
			if r.status != 200 || s.runID(r.json(t)) != w.run {
				t.Errorf("%s: %s's retry: %s, want its run %s", s.name, w.tenant, r, w.run)
			}
			if n := e.count(w.tenant, texts[s.name]); n != 1 {
				t.Errorf("%s: %s's turn ran %d times after its retry", s.name, w.tenant, n)
			}
		}
	}
}

// tntFlood sends n distinct OpenHarness requests of tenant secret
// (request ids prefix-0..n-1), eight at a time; session "" lets each
// request's session derive from its request_id.
func tntFlood(t *testing.T, url, secret, prefix, session string, n int, intent func(i int) string) {
	t.Helper()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	var failed atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() > 0 {
					return
				}
				r := tntDo(t, url, tntAs(secret), "POST", "/v1/openharness", tntOH(fmt.Sprintf("%s-%d", prefix, i), session, intent(i)))
				if r.status != 200 || bytes.Contains(r.body, []byte(`"error"`)) {
					if failed.Add(1) == 1 {
						t.Errorf("flood request %d: %s", i, r)
					}
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
}

// Memo eviction: after more distinct request_ids than the in-memory
// cache holds (by count, then by bytes), an early request_id sent again
// is answered as a retransmission (replayed), and its turn never runs a
// second time.
func TestTenantsOHMemoEvictionByCount(t *testing.T) {
	e := newTntEnv(t)
	const n = 4096 + 300
	start := time.Now()
	tntFlood(t, e.url, tntSecretA, "ev", "", n, func(i int) string { return fmt.Sprintf("ev intent %d", i) })
	t.Logf("%d turns in %v", n, time.Since(start))
	for _, i := range []int{0, 1, 7, 100} {
		r := tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/openharness", tntOH(fmt.Sprintf("ev-%d", i), "", fmt.Sprintf("ev intent %d", i)))
		_, errObj := tntOHExt(t, r)
		ran := e.count("a", fmt.Sprintf("ev intent %d", i))
		if ran != 1 {
			t.Errorf("request ev-%d sent again after eviction: its turn ran %d times: %s", i, ran, r)
		} else if errObj == nil && r.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("request ev-%d sent again after eviction: answered without Idempotent-Replayed: %s", i, r)
		}
	}
	if e.all.Load() != n {
		t.Errorf("%d turns ran for %d requests", e.all.Load(), n)
	}
}

func TestTenantsOHMemoEvictionByBytesOneSession(t *testing.T) {
	e := newTntEnv(t)
	big := strings.Repeat("z", 300<<10)
	const n = 70 // ~70 * 600 KiB of responses: over the 32 MiB memo
	tntFlood(t, e.url, tntSecretA, "evb", "", n, func(i int) string { return fmt.Sprint(i, big) })
	// And a session of many small turns, whose first request_id is
	// sent again after them.
	for i := 0; i < 40; i++ {
		r := tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/openharness", tntOH(fmt.Sprintf("one-%d", i), "one-session", fmt.Sprint("one ", i)))
		if r.status != 200 {
			t.Fatalf("%s", r)
		}
	}
	for _, i := range []int{0, 1} {
		r := tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/openharness", tntOH(fmt.Sprintf("evb-%d", i), "", fmt.Sprint(i, big)))
		if ran := e.count("a", fmt.Sprint(i, big)); ran != 1 || r.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("request evb-%d sent again after eviction: ran %d times, replayed header %q: %.300s", i, ran, r.header.Get("Idempotent-Replayed"), r.body)
		}
	}
	r := tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/openharness", tntOH("one-0", "one-session", "one 0"))
	if ran := e.count("a", "one 0"); ran != 1 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("one-0 sent again after 39 later turns of its session: ran %d times: %s", ran, r)
	}
}

// tntSame reports whether two answers are alike but for the ids they
// were asked about: the same status and, with idA written as idN, the
// same body. Volatile fields (request ids, latencies) are not in these
// error bodies.
func tntSame(rA, rN tntResp, idA, idN string) (bool, string) {
	if rA.status != rN.status {
		return false, fmt.Sprintf("status %d for a's id, %d for a never-existing one", rA.status, rN.status)
	}
	a := strings.ReplaceAll(string(rA.body), idA, idN)
	if a != string(rN.body) {
		return false, fmt.Sprintf("bodies differ:\n a's id:   %s\n never id: %s", a, rN.body)
	}
	return true, ""
}

// tntSSE collects a session's event stream as tenant secret until
// stopped.
type tntSSE struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	data   bytes.Buffer
	status int
}

func tntListen(t *testing.T, url, secret, session string) *tntSSE {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &tntSSE{cancel: cancel, done: make(chan struct{})}
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/sessions/"+session+"/events", nil)
	req.Header.Set("Authorization", tntAs(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c.status = resp.StatusCode
	go func() {
		defer close(c.done)
		defer resp.Body.Close()
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			c.mu.Lock()
			c.data.Write(buf[:n])
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-c.done })
	return c
}

func (c *tntSSE) stop() string {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data.String()
}

// The same session id string in two tenants is two sessions, on every
// surface: a's turn suspended on an approval in session "shared"; b,
// knowing the session id, a's run id and a's signal id, reads, lists,
// streams, signals, cancels, deletes, inspects, continues (OpenHarness,
// Responses) and runs a direct tool against them, and each answer is
// the one a never-existing id gets; b's own turns in its "shared" run in
// a history of their own; a's suspension is still pending at the end and
// a's approval completes it; b's stream of "shared" carried nothing of
// a's.
func TestTenantsSameSessionIDEverySurface(t *testing.T) {
	ts := servertest.NewDemo(t, func(c *server.Config) {
		c.Tokens = tntTokens
		c.DirectTools = map[string][]string{"a": {"*"}, "b": {"*"}}
		c.Agents[0].Gateway = demo.Tools()
	})
	url := ts.URL
	A, B := tntAs(tntSecretA), tntAs(tntSecretB)
	const marker = "QQMARK59"
	sseB := tntListen(t, url, tntSecretB, "shared")
	if sseB.status != 200 {
		t.Fatalf("b's stream of shared: %d", sseB.status)
	}
	sus := tntDo(t, url, A, "POST", "/v1/sessions/shared/messages", `{"content":"please refund order 7 `+marker+`"}`)
	m := sus.json(t)
	if m["outcome"] != "suspended" {
		t.Fatalf("setup: %s", sus)
	}
	runA := m["run_id"].(string)
	sigA := m["signal"].(map[string]any)["signal_id"].(string)
	runN := runA[:len(runA)-4] + "ZZZZ"
	if runN == runA {
		runN = runA[:len(runA)-4] + "YYYY"
	}
	// Also a completed run and a Responses response of a's in "shared".
	done := tntDo(t, url, A, "POST", "/v1/responses", `{"model":"demo","input":"where is order 3? `+marker+`"}`, "X-Armature-Session-Id", "shared-r")
	respA, _ := done.json(t)["id"].(string)
	if done.status != 200 || respA == "" {
		t.Fatalf("setup response: %s", done)
	}
	respN := respA[:len(respA)-4] + "ZZZZ"
	// And a direct tool run of a's in "shared".
	dta := tntDo(t, url, A, "POST", "/v1/agents/demo/tools/lookup_order", `{"session_id":"shared","arguments":{"order":"7"}}`)
	dtRunA, _ := dta.json(t)["run_id"].(string)
	if dta.status != 200 || dtRunA == "" {
		t.Fatalf("setup direct tool: %s", dta)
	}
	dtRunN := dtRunA[:len(dtRunA)-4] + "ZZZZ"

	type probe struct {
		name              string
		method, pathA, pN string
		bodyA, bodyN      string
		idA, idN          string
		header            []string
	}
	sig := func(id string) string {
		return `{"signal_id":"` + id + `","payload":{"approval":{"approved":true}}}`
	}
	probes := []probe{
		{"get session", "GET", "/v1/sessions/shared", "/v1/sessions/nvr-sess", "", "", "shared", "nvr-sess", nil},
		{"list runs", "GET", "/v1/sessions/shared/runs", "/v1/sessions/nvr-sess/runs", "", "", "shared", "nvr-sess", nil},
		{"signal", "POST", "/v1/sessions/shared/signals", "/v1/sessions/nvr-sess/signals", sig(sigA), sig(sigA), "shared", "nvr-sess", nil},
		{"get run", "GET", "/v1/runs/" + runA, "/v1/runs/" + runN, "", "", runA, runN, nil},
		{"run events", "GET", "/v1/runs/" + runA + "/events", "/v1/runs/" + runN + "/events", "", "", runA, runN, nil},
		{"cancel run", "POST", "/v1/runs/" + runA + "/cancel", "/v1/runs/" + runN + "/cancel", "", "", runA, runN, nil},
		{"get direct tool run", "GET", "/v1/runs/" + dtRunA, "/v1/runs/" + dtRunN, "", "", dtRunA, dtRunN, nil},
		{"direct tool run events", "GET", "/v1/runs/" + dtRunA + "/events", "/v1/runs/" + dtRunN + "/events", "", "", dtRunA, dtRunN, nil},
		{"cancel direct tool run", "POST", "/v1/runs/" + dtRunA + "/cancel", "/v1/runs/" + dtRunN + "/cancel", "", "", dtRunA, dtRunN, nil},
		{"get response", "GET", "/v1/responses/" + respA, "/v1/responses/" + respN, "", "", respA, respN, nil},
		{"get response of suspended run", "GET", "/v1/responses/" + runA, "/v1/responses/" + runN, "", "", runA, runN, nil},
		{"previous_response_id", "POST", "/v1/responses", "/v1/responses",
			`{"model":"demo","previous_response_id":"` + respA + `","input":"hello"}`,
			`{"model":"demo","previous_response_id":"` + respN + `","input":"hello"}`, respA, respN, nil},
		{"previous_response_id approval", "POST", "/v1/responses", "/v1/responses",
			`{"model":"demo","previous_response_id":"` + runA + `","input":[{"type":"mcp_approval_response","approval_request_id":"` + sigA + `","approve":true}]}`,
			`{"model":"demo","previous_response_id":"` + runN + `","input":[{"type":"mcp_approval_response","approval_request_id":"` + sigA + `","approve":true}]}`, runA, runN, nil},
		{"openharness continuation by run_id", "POST", "/v1/openharness", "/v1/openharness",
			`{"protocol_version":"1.0.0","request":{"context":{"session_id":"shared","user_intent":"yes","continuation":{"run_id":"` + runA + `"},"extensions":{"dev.armature":{"signal_payload":{"approval":{"approved":true}}}}}}}`,
			`{"protocol_version":"1.0.0","request":{"context":{"session_id":"shared","user_intent":"yes","continuation":{"run_id":"` + runN + `"},"extensions":{"dev.armature":{"signal_payload":{"approval":{"approved":true}}}}}}}`,
			runA, runN, nil},
		{"openharness continuation by run_id, no session", "POST", "/v1/openharness", "/v1/openharness",
			`{"protocol_version":"1.0.0","request":{"context":{"user_intent":"yes","continuation":{"run_id":"` + runA + `"},"extensions":{"dev.armature":{"signal_payload":{"approval":{"approved":true}}}}}}}`,
			`{"protocol_version":"1.0.0","request":{"context":{"user_intent":"yes","continuation":{"run_id":"` + runN + `"},"extensions":{"dev.armature":{"signal_payload":{"approval":{"approved":true}}}}}}}`,
			runA, runN, nil},
	}
	for _, p := range probes {
		rA := tntDo(t, url, B, p.method, p.pathA, p.bodyA, p.header...)
		rN := tntDo(t, url, B, p.method, p.pN, p.bodyN, p.header...)
		if rA.status < 400 && !strings.HasPrefix(p.name, "openharness") && p.name != "list runs" {
			t.Errorf("%s: b's request with a's ids answered %s", p.name, rA)
		}
		if strings.Contains(string(rA.body), marker) {
			t.Errorf("%s: b's answer carries a's text: %s", p.name, rA)
		}
		// OpenHarness latencies vary: compare without them.
		if strings.HasPrefix(p.name, "openharness") {
			rA.body = tntStripLatency(rA.body)
			rN.body = tntStripLatency(rN.body)
		}
		if ok, why := tntSame(rA, rN, p.idA, p.idN); !ok {
			t.Errorf("%s: existence oracle: %s", p.name, why)
		}
	}
	// b's own turns in its "shared": a direct tool run, then a message.
	dt := tntDo(t, url, B, "POST", "/v1/agents/demo/tools/lookup_order", `{"session_id":"shared","arguments":{"order":"5"}}`)
	if dt.status != 200 {
		t.Errorf("b's direct tool in its shared: %s", dt)
	}
	bm := tntDo(t, url, B, "POST", "/v1/sessions/shared/messages", `{"content":"where is order 5?"}`)
	if bm.json(t)["outcome"] != "completed" || strings.Contains(string(bm.body), marker) {
		t.Fatalf("b's message in its shared: %s", bm)
	}
	hb := tntDo(t, url, B, "GET", "/v1/sessions/shared", "")
	if hb.status != 200 || strings.Contains(string(hb.body), marker) || strings.Contains(string(hb.body), sigA) && strings.Contains(string(hb.body), "pending") {
		t.Errorf("b's history of shared: %s", hb)
	}
	lb := tntDo(t, url, B, "GET", "/v1/sessions/shared/runs", "")
	if strings.Contains(string(lb.body), runA) || strings.Contains(string(lb.body), dtRunA) {
		t.Errorf("b's runs of shared list a's run: %s", lb)
	}
	// b deletes its "shared": a's stays, suspended.
	if d := tntDo(t, url, B, "DELETE", "/v1/sessions/shared", ""); d.status >= 300 {
		t.Errorf("b's delete of its shared: %s", d)
	}
	la := tntDo(t, url, A, "GET", "/v1/sessions/shared/runs", "")
	if !strings.Contains(string(la.body), runA) || !strings.Contains(string(la.body), dtRunA) {
		t.Errorf("a's runs of shared after b's probes and delete: %s", la)
	}
	ha := tntDo(t, url, A, "GET", "/v1/sessions/shared", "")
	if !strings.Contains(string(ha.body), marker) {
		t.Errorf("a's history after b's delete: %s", ha)
	}
	ok := tntDo(t, url, A, "POST", "/v1/sessions/shared/signals", sig(sigA))
	if om := ok.json(t); om["outcome"] != "completed" || om["resumed"] != true || !strings.Contains(string(ok.body), "refunded") {
		t.Errorf("a's approval after b's probes: %s", ok)
	}
	time.Sleep(100 * time.Millisecond)
	got := sseB.stop()
	if !strings.Contains(got, "runtime.request.completed") {
		t.Errorf("b's event stream of its shared did not carry b's own turn: %.2000s", got)
	}
	if strings.Contains(got, marker) || strings.Contains(got, runA) || strings.Contains(got, "refunded") {
		t.Errorf("b's event stream of its shared carried a's events: %.2000s", got)
	}
}

func tntStripLatency(b []byte) []byte {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	if r, ok := m["response"].(map[string]any); ok {
		delete(r, "engine_latency_ms")
	}
	out, _ := json.Marshal(m)
	return out
}

// tntErrorShaped reports whether r is a categorized refusal: a 4xx
// with a JSON error object naming a code (or, for OpenHarness, a 200
// errored envelope with an error code).
func tntErrorShaped(r tntResp) bool {
	if r.status >= 500 || r.status < 400 && r.status != 200 {
		return false
	}
	var m map[string]any
	if json.Unmarshal(r.body, &m) != nil {
		return false
	}
	if e, ok := m["error"].(map[string]any); ok {
		return e["code"] != nil && e["code"] != ""
	}
	if resp, ok := m["response"].(map[string]any); ok {
		e, _ := resp["error"].(map[string]any)
		return e != nil && e["code"] != nil
	}
	return false
}

// Malformed, huge and empty bearer tokens on every route: 401 with
// WWW-Authenticate and an error code, never a 5xx, never an answer.
func TestTenantsMalformedTokens(t *testing.T) {
	e := newTntEnv(t)
	// a has a session and a run: none of the bad tokens may reach them.
	r := tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/sessions/tok-s/messages", `{"content":"tok-a"}`)
	runA, _ := r.json(t)["run_id"].(string)
	auths := map[string]string{
		"empty bearer":  "Bearer ",
		"scheme only":   "Bearer",
		"basic":         "Basic " + tntSecretA,
		"prefix of a":   "Bearer " + tntSecretA[:len(tntSecretA)-1],
		"a plus suffix": "Bearer " + tntSecretA + "x",
		"a, b":          "Bearer " + tntSecretA + "," + tntSecretB,
		"a b":           "Bearer " + tntSecretA + " " + tntSecretB,
		"unicode":       "Bearer " + "tökén-ünïcödé-0123456789",
		"huge":          "Bearer " + strings.Repeat("A", 60<<10),
		"tenant name":   "Bearer a",
		"percent":       "Bearer " + strings.ReplaceAll(tntSecretA, "-", "%2D"),
		"lower A":       "Bearer " + strings.ToUpper(tntSecretA),
	}
	routes := []struct{ method, path, body string }{
		{"GET", "/v1/sessions", ""},
		{"GET", "/v1/sessions/tok-s", ""},
		{"DELETE", "/v1/sessions/tok-s", ""},
		{"POST", "/v1/sessions/tok-s/messages", `{"content":"bad-token turn"}`},
		{"POST", "/v1/sessions/tok-s/signals", `{"signal_id":"approval:x","payload":{}}`},
		{"GET", "/v1/sessions/tok-s/runs", ""},
		{"GET", "/v1/sessions/tok-s/events", ""},
		{"GET", "/v1/runs/" + runA, ""},
		{"GET", "/v1/runs/" + runA + "/events", ""},
		{"POST", "/v1/runs/" + runA + "/cancel", ""},
		{"POST", "/v1/openharness", tntOH("tok-r", "tok-s", "bad-token turn")},
		{"POST", "/v1/chat/completions", `{"model":"count","messages":[{"role":"user","content":"bad-token turn"}]}`},
		{"GET", "/v1/models", ""},
		{"POST", "/v1/responses", `{"model":"count","input":"bad-token turn"}`},
		{"GET", "/v1/responses/" + runA, ""},
		{"POST", "/v1/agents/count/tools/x", `{}`},
		{"POST", "/v1/sessions", `{}`},
	}
	for name, auth := range auths {
		for _, rt := range routes {
			r := tntDo(t, e.url, auth, rt.method, rt.path, rt.body)
			if r.status != 401 && !(name == "huge" && r.status == 431) {
				t.Errorf("token %s: %s %s: %s, want 401", name, rt.method, rt.path, r)
				continue
			}
			if r.status == 401 && (r.header.Get("WWW-Authenticate") == "" || !tntErrorShaped(r)) {
				t.Errorf("token %s: %s %s: 401 without WWW-Authenticate or error code: %v %s", name, rt.method, rt.path, r.header, r)
			}
			if strings.Contains(string(r.body), "tok-a") || strings.Contains(string(r.body), tntSecretA) {
				t.Errorf("token %s: %s %s leaks: %s", name, rt.method, rt.path, r)
			}
		}
	}
	if n := e.count("a", "bad-token turn") + e.count("b", "bad-token turn") + e.count("default", "bad-token turn") + e.count("", "bad-token turn"); n != 0 {
		t.Errorf("a bad token ran %d turns", n)
	}
}

// Odd ids (unicode, slashes, dots, percent-encoding, very long) on every
// route that takes one, for tenant b while tenant a holds sessions whose
// ids the odd ones decode or clean to: a categorized 4xx (or an answer
// about b's own, empty, state), never a 5xx, never a's data.
func TestTenantsOddIDs(t *testing.T) {
	e := newTntEnv(t)
	const mark = "ODDMARK59"
	for _, s := range []string{"a.b", "x", "a-b", "ab", "a_b", "a:b", "v1"} {
		r := tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/sessions/"+s+"/messages", `{"content":"`+mark+s+`"}`)
		if r.status != 200 {
			t.Fatalf("setup %s: %s", s, r)
		}
	}
	B := tntAs(tntSecretB)
	pathIDs := []string{
		"%C3%A9t%C3%A9", "é", "a%2Fb", "a%2fb", "..", "%2E%2E", ".", "%2e", "a%2Eb", "a%252Eb", "x%00", "x%20y", "%7E",
		"a..b", "...", strings.Repeat("x", 129), strings.Repeat("x", 4000), "a%3Ab", "a;b", "a%5Cb", "%FF", "%", "x%",
		"a/../x", "a%2F..%2Fx", "💥", "\u202ex",
	}
	for _, id := range pathIDs {
		for _, rt := range []struct{ method, path, body string }{
			{"GET", "/v1/sessions/" + id, ""},
			{"DELETE", "/v1/sessions/" + id, ""},
			{"POST", "/v1/sessions/" + id + "/messages", `{"content":"odd b turn"}`},
			{"POST", "/v1/sessions/" + id + "/signals", `{"signal_id":"approval:x","payload":{}}`},
			{"GET", "/v1/sessions/" + id + "/runs", ""},
			{"GET", "/v1/runs/" + id, ""},
			{"GET", "/v1/runs/" + id + "/events", ""},
			{"POST", "/v1/runs/" + id + "/cancel", ""},
			{"GET", "/v1/responses/" + id, ""},
			{"POST", "/v1/agents/" + id + "/tools/" + id, `{}`},
		} {
			req, err := http.NewRequest(rt.method, e.url+rt.path, strings.NewReader(rt.body))
			if err != nil {
				continue // not a URL the client can send
			}
			_ = req
			r := tntDo(t, e.url, B, rt.method, rt.path, rt.body)
			tntCheckOdd(t, fmt.Sprintf("%s %s", rt.method, rt.path), r, mark)
		}
	}
	fieldIDs := []string{"été", "a/b", "..", ".", "a b", "x\u0000y", strings.Repeat("x", 129), strings.Repeat("x", 100000), "a%2Fb", "💥", "\u202ex", "a\nb", ""}
	for _, id := range fieldIDs {
		js, _ := json.Marshal(id)
		q := string(js)
		for _, rt := range []struct {
			name, method, path, body string
			header                   []string
		}{
			{"message_id", "POST", "/v1/sessions/ok-b/messages", `{"content":"odd b turn","message_id":` + q + `}`, nil},
			{"signal_id", "POST", "/v1/sessions/ok-b/signals", `{"signal_id":` + q + `,"payload":{}}`, nil},
			{"oh session_id", "POST", "/v1/openharness", `{"protocol_version":"1.0.0","request_id":"r-odd","request":{"context":{"session_id":` + q + `,"user_intent":"odd b turn"}}}`, nil},
			{"oh request_id", "POST", "/v1/openharness", `{"protocol_version":"1.0.0","request_id":` + q + `,"request":{"context":{"session_id":"ok-b","user_intent":"odd b turn"}}}`, nil},
			{"oh run_id", "POST", "/v1/openharness", `{"protocol_version":"1.0.0","request":{"context":{"session_id":"x","user_intent":"y","continuation":{"run_id":` + q + `}}}}`, nil},
			{"oh token", "POST", "/v1/openharness", `{"protocol_version":"1.0.0","request":{"context":{"session_id":"x","user_intent":"y","continuation":{"continuation_token":` + q + `}}}}`, nil},
			{"previous_response_id", "POST", "/v1/responses", `{"model":"count","previous_response_id":` + q + `,"input":"odd b turn"}`, nil},
			{"responses metadata.session_id", "POST", "/v1/responses", `{"model":"count","metadata":{"session_id":` + q + `},"input":"odd b turn"}`, nil},
			{"direct tool session_id", "POST", "/v1/agents/count/tools/x", `{"session_id":` + q + `}`, nil},
			{"create session", "POST", "/v1/sessions", `{"session_id":` + q + `}`, nil},
		} {
			r := tntDo(t, e.url, B, rt.method, rt.path, rt.body, rt.header...)
			tntCheckOdd(t, fmt.Sprintf("%s %.40q", rt.name, id), r, mark)
		}
		if id == "" || strings.ContainsAny(id, "\x00\n") {
			continue // not a header value a client can send
		}
		for _, h := range []struct{ name, method, path, body, key string }{
			{"session header cc", "POST", "/v1/chat/completions", `{"model":"count","messages":[{"role":"user","content":"odd b turn"}]}`, "X-Armature-Session-Id"},
			{"session header responses", "POST", "/v1/responses", `{"model":"count","input":"odd b turn"}`, "X-Armature-Session-Id"},
			{"idempotency key cc", "POST", "/v1/chat/completions", `{"model":"count","messages":[{"role":"user","content":"odd b turn"}]}`, "Idempotency-Key"},
			{"idempotency key rest", "POST", "/v1/sessions/ok-b/messages", `{"content":"odd b turn"}`, "Idempotency-Key"},
			{"X-Request-ID oh", "POST", "/v1/openharness", `{"protocol_version":"1.0.0","request":{"context":{"session_id":"ok-b","user_intent":"odd b turn"}}}`, "X-Request-ID"},
			{"Last-Event-ID", "GET", "/v1/sessions/ok-b/events", "", "Last-Event-ID"},
		} {
			if h.name == "Last-Event-ID" {
				continue // a stream: checked below
			}
			r := tntDo(t, e.url, B, h.method, h.path, h.body, h.key, id)
			tntCheckOdd(t, fmt.Sprintf("%s %.40q", h.name, id), r, mark)
		}
	}
	if n := e.count("a", "odd b turn"); n != 0 {
		t.Errorf("b's requests ran %d turns as a", n)
	}
	// Nothing of a's was touched: its sessions are all there.
	l := tntDo(t, e.url, tntAs(tntSecretA), "GET", "/v1/sessions", "")
	for _, s := range []string{"a.b", "x", "a-b", "ab", "a_b", "a:b", "v1"} {
		if !strings.Contains(string(l.body), `"`+s+`"`) {
			t.Errorf("a's session %s is gone after b's odd requests: %s", s, l)
		}
	}
}

func tntCheckOdd(t *testing.T, what string, r tntResp, mark string) {
	t.Helper()
	if testing.Verbose() {
		t.Logf("%s -> %.200s", what, r)
	}
	if r.status >= 500 {
		t.Errorf("%s: %s", what, r)
		return
	}
	if strings.Contains(string(r.body), mark) {
		t.Errorf("%s: b's answer carries a's data: %s", what, r)
	}
	if r.status >= 400 && !tntErrorShaped(r) && r.status != 404 && r.status != 405 {
		t.Errorf("%s: uncategorized refusal: %s", what, r)
	}
}

// The OpenAI SDKs' automatic retries (X-Stainless-Retry-Count, no
// Idempotency-Key) are recognized per tenant: b's "retry" of the very
// request a sent first (same path, session header and body) runs b's
// own turn and is not handed a's answer or session; a's real retry
// joins a's first attempt. With and without a session header, on chat
// completions and Responses.
func TestTenantsSDKRetryAcrossTenants(t *testing.T) {
	e := newTntEnv(t)
	for _, c := range []struct {
		name, path, body string
		header           []string
		id               func(map[string]any) string
		text             string
	}{
		{"cc sessioned", "/v1/chat/completions", `{"model":"count","messages":[{"role":"user","content":"sdk-1"}]}`, []string{"X-Armature-Session-Id", "sdk-s"}, nil, "sdk-1"},
		{"cc unsessioned", "/v1/chat/completions", `{"model":"count","messages":[{"role":"user","content":"sdk-2"}]}`, nil, nil, "sdk-2"},
		{"responses sessioned", "/v1/responses", `{"model":"count","input":"sdk-3"}`, []string{"X-Armature-Session-Id", "sdk-s"}, nil, "sdk-3"},
		{"responses unsessioned", "/v1/responses", `{"model":"count","input":"sdk-4"}`, nil, nil, "sdk-4"},
	} {
		id := func(m map[string]any) string { s, _ := m["id"].(string); return s }
		sess := func(m map[string]any) string {
			x, _ := m["x_armature"].(map[string]any)
			s, _ := x["session_id"].(string)
			return s
		}
		first := tntDo(t, e.url, tntAs(tntSecretA), "POST", c.path, c.body, append([]string{"X-Stainless-Retry-Count", "0"}, c.header...)...)
		if first.status != 200 {
			t.Fatalf("%s: a's first attempt: %s", c.name, first)
		}
		fa := first.json(t)
		b := tntDo(t, e.url, tntAs(tntSecretB), "POST", c.path, c.body, append([]string{"X-Stainless-Retry-Count", "1"}, c.header...)...)
		if b.status != 200 {
			t.Errorf("%s: b's retry-marked request: %s", c.name, b)
			continue
		}
		fb := b.json(t)
		if id(fb) == id(fa) || strings.Contains(string(b.body), "echo[a]") || e.count("b", c.text) != 1 {
			t.Errorf("%s: b's retry-marked request got a's turn (a %s, b %s, b ran %d): %s", c.name, id(fa), id(fb), e.count("b", c.text), b)
		}
		if c.header == nil && sess(fb) == sess(fa) {
			t.Errorf("%s: b's request was put in a's minted session %s", c.name, sess(fa))
		}
		retry := tntDo(t, e.url, tntAs(tntSecretA), "POST", c.path, c.body, append([]string{"X-Stainless-Retry-Count", "1"}, c.header...)...)
		if retry.status != 200 || id(retry.json(t)) != id(fa) || e.count("a", c.text) != 1 {
			t.Errorf("%s: a's retry: %s (a's turn ran %d times), want a's first attempt %s", c.name, retry, e.count("a", c.text), id(fa))
		}
	}
}

// One tenant's same request_id / message_id / Idempotency-Key sent many
// times at once runs one turn, every answer that turn's.
func TestTenantsConcurrentDuplicates(t *testing.T) {
	e := newTntEnv(t)
	const n = 16
	for _, c := range []struct {
		name, path, body, text string
		header                 []string
		id                     func(tntResp) string
	}{
		{"openharness", "/v1/openharness", tntOH("dup-1", "dup-s", "dup oh"), "dup oh", nil, func(r tntResp) string {
			var m struct {
				Response struct {
					Extensions map[string]struct {
						RunID string `json:"run_id"`
					} `json:"extensions"`
				} `json:"response"`
			}
			json.Unmarshal(r.body, &m)
			return m.Response.Extensions["dev.armature"].RunID
		}},
		{"openharness no session", "/v1/openharness", tntOH("dup-2", "", "dup oh2"), "dup oh2", nil, func(r tntResp) string {
			var m struct {
				Response struct {
					Extensions map[string]struct {
						RunID string `json:"run_id"`
					} `json:"extensions"`
				} `json:"response"`
			}
			json.Unmarshal(r.body, &m)
			return m.Response.Extensions["dev.armature"].RunID
		}},
		{"rest", "/v1/sessions/dup-s/messages", `{"content":"dup rest","message_id":"dup-3"}`, "dup rest", nil, func(r tntResp) string {
			var m struct {
				RunID string `json:"run_id"`
			}
			json.Unmarshal(r.body, &m)
			return m.RunID
		}},
		{"cc no session", "/v1/chat/completions", `{"model":"count","messages":[{"role":"user","content":"dup cc"}]}`, "dup cc", []string{"Idempotency-Key", "dup-4"}, func(r tntResp) string {
			var m struct{ ID string }
			json.Unmarshal(r.body, &m)
			return m.ID
		}},
		{"responses no session", "/v1/responses", `{"model":"count","input":"dup resp"}`, "dup resp", []string{"Idempotency-Key", "dup-5"}, func(r tntResp) string {
			var m struct{ ID string }
			json.Unmarshal(r.body, &m)
			return m.ID
		}},
	} {
		var wg sync.WaitGroup
		out := make([]tntResp, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = tntDo(t, e.url, tntAs(tntSecretA), "POST", c.path, c.body, c.header...)
			}()
		}
		wg.Wait()
		ids := map[string]int{}
		for _, r := range out {
			if r.status != 200 {
				t.Errorf("%s: %s", c.name, r)
				continue
			}
			ids[c.id(r)]++
		}
		if ran := e.count("a", c.text); ran != 1 || len(ids) != 1 {
			t.Errorf("%s: %d concurrent copies ran %d turns, answered with runs %v", c.name, n, ran, ids)
		}
	}
}

// Page tokens are not capabilities: b sending a's next_page_token (of
// the session list, of a session's runs) lists b's own entries only,
// or is refused as a 400, never a's.
func TestTenantsPageTokensAcrossTenants(t *testing.T) {
	e := newTntEnv(t)
	A, B := tntAs(tntSecretA), tntAs(tntSecretB)
	for i := range 105 {
		if r := tntDo(t, e.url, A, "POST", "/v1/sessions", fmt.Sprintf(`{"session_id":"pg-a-%03d"}`, i)); r.status != 201 {
			t.Fatalf("setup: %s", r)
		}
	}
	for i := range 3 {
		tntDo(t, e.url, B, "POST", "/v1/sessions", fmt.Sprintf(`{"session_id":"pg-b-%03d"}`, i))
	}
	for i := range 5 {
		tntDo(t, e.url, A, "POST", "/v1/sessions/pg-shared/messages", fmt.Sprintf(`{"content":"PGMARK a %d"}`, i))
	}
	tntDo(t, e.url, B, "POST", "/v1/sessions/pg-shared/messages", `{"content":"b one"}`)
	l := tntDo(t, e.url, A, "GET", "/v1/sessions", "")
	tok, _ := l.json(t)["next_page_token"].(string)
	if tok == "" {
		t.Fatalf("a's first page has no next_page_token: %.300s", l)
	}
	t.Logf("a's session page token: %q", tok)
	lb := tntDo(t, e.url, B, "GET", "/v1/sessions?page_token="+tok, "")
	if lb.status >= 500 || strings.Contains(string(lb.body), "pg-a-") {
		t.Errorf("b with a's session page token: %s", lb)
	}
	rl := tntDo(t, e.url, A, "GET", "/v1/sessions/pg-shared/runs?page_size=2", "")
	rtok, _ := rl.json(t)["next_page_token"].(string)
	if rtok == "" {
		t.Fatalf("a's runs page has no next_page_token: %s", rl)
	}
	t.Logf("a's runs page token: %q", rtok)
	rb := tntDo(t, e.url, B, "GET", "/v1/sessions/pg-shared/runs?page_size=2&page_token="+rtok, "")
	if rb.status >= 500 || strings.Contains(string(rb.body), "PGMARK") {
		t.Errorf("b with a's runs page token: %s", rb)
	}
	// And for another session name of b's.
	rb2 := tntDo(t, e.url, B, "GET", "/v1/sessions/pg-b-000/runs?page_size=2&page_token="+rtok, "")
	if rb2.status >= 500 || strings.Contains(string(rb2.body), "PGMARK") {
		t.Errorf("b with a's runs page token on another session: %s", rb2)
	}
}

// b deleting its session of the same name as a's deletes nothing of
// a's: a's finished runs, their events, a's stored responses and
// previous_response_id chain, a's OpenHarness memo (a's retransmission
// stays replayed, not run again).
func TestTenantsDeleteSameNameKeepsOther(t *testing.T) {
	e := newTntEnv(t)
	A, B := tntAs(tntSecretA), tntAs(tntSecretB)
	ra := tntDo(t, e.url, A, "POST", "/v1/sessions/del-s/messages", `{"content":"DELMARK rest"}`)
	runA, _ := ra.json(t)["run_id"].(string)
	resp := tntDo(t, e.url, A, "POST", "/v1/responses", `{"model":"count","input":"DELMARK resp"}`, "X-Armature-Session-Id", "del-s")
	respA, _ := resp.json(t)["id"].(string)
	oh := tntDo(t, e.url, A, "POST", "/v1/openharness", tntOH("del-rid", "del-s", "DELMARK oh"))
	if runA == "" || respA == "" || oh.status != 200 {
		t.Fatalf("setup: %s %s %s", ra, resp, oh)
	}
	// b's own turns in its del-s, with the same ids, then its delete.
	tntDo(t, e.url, B, "POST", "/v1/sessions/del-s/messages", `{"content":"b rest"}`)
	tntDo(t, e.url, B, "POST", "/v1/openharness", tntOH("del-rid", "del-s", "DELMARK oh"))
	if d := tntDo(t, e.url, B, "DELETE", "/v1/sessions/del-s", ""); d.status >= 300 {
		t.Fatalf("b's delete: %s", d)
	}
	if r := tntDo(t, e.url, A, "GET", "/v1/runs/"+runA, ""); r.status != 200 {
		t.Errorf("a's run after b's delete of its del-s: %s", r)
	}
	if r := tntDo(t, e.url, A, "GET", "/v1/runs/"+runA+"/events", ""); r.status != 200 || !strings.Contains(string(r.body), "runtime.request.completed") {
		t.Errorf("a's run events after b's delete: %s", r)
	}
	if r := tntDo(t, e.url, A, "GET", "/v1/responses/"+respA, ""); r.status != 200 {
		t.Errorf("a's stored response after b's delete: %s", r)
	}
	if r := tntDo(t, e.url, A, "POST", "/v1/responses", `{"model":"count","previous_response_id":"`+respA+`","input":"DELMARK next"}`); r.status != 200 {
		t.Errorf("a's previous_response_id after b's delete: %s", r)
	}
	before := e.count("a", "DELMARK oh")
	r := tntDo(t, e.url, A, "POST", "/v1/openharness", tntOH("del-rid", "del-s", "DELMARK oh"))
	if e.count("a", "DELMARK oh") != before || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("a's OpenHarness retransmission after b's delete of its del-s ran again (%d -> %d): %s", before, e.count("a", "DELMARK oh"), r)
	}
	// b's delete did take b's: b's retransmission runs anew.
	bBefore := e.count("b", "DELMARK oh")
	tntDo(t, e.url, B, "POST", "/v1/openharness", tntOH("del-rid", "del-s", "DELMARK oh"))
	if e.count("b", "DELMARK oh") != bBefore+1 {
		t.Errorf("b's retransmission after b's own delete did not run anew (%d -> %d)", bBefore, e.count("b", "DELMARK oh"))
	}
}

// Memo eviction while the original is still running: a's request with
// a request_id is in flight (its turn held), more distinct request_ids
// than the memo holds go by, then the same request is retransmitted
// (twice: in its session and without one). Its turn runs once, and the
// retransmissions answer that turn's run.
func TestTenantsOHMemoEvictionInFlight(t *testing.T) {
	for _, session := range []string{"inflight-s", ""} {
		t.Run(fmt.Sprintf("session=%q", session), func(t *testing.T) {
			e := newTntEnv(t)
			body := tntOH("if-1", session, "slow turn")
			first := make(chan tntResp, 1)
			go func() { first <- tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/openharness", body) }()
			time.Sleep(200 * time.Millisecond) // the turn holds its session
			tntFlood(t, e.url, tntSecretA, "if-other", "", 4096+200, func(i int) string { return fmt.Sprint("other ", i) })
			again := make(chan tntResp, 1)
			go func() { again <- tntDo(t, e.url, tntAs(tntSecretA), "POST", "/v1/openharness", body) }()
			time.Sleep(300 * time.Millisecond)
			e.open()
			f, g := <-first, <-again
			extF, _ := tntOHExt(t, f)
			extG, errG := tntOHExt(t, g)
			if ran := e.count("a", "slow turn"); ran != 1 {
				t.Errorf("the request's turn ran %d times: first %s\nretransmission %s", ran, f, g)
			}
			if errG == nil && extG["run_id"] != extF["run_id"] {
				t.Errorf("the retransmission answered run %v, the original %v: %s", extG["run_id"], extF["run_id"], g)
			}
			if errG != nil {
				t.Logf("the retransmission was refused: %s", g)
			}
		})
	}
}
