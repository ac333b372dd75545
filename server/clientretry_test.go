package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// slowModel answers "Done." once its gate opens, counting its calls.
type slowModel struct {
	gate  chan struct{}
	calls atomic.Int32
}

func (m *slowModel) Ready(context.Context) error { return nil }

func (m *slowModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	m.calls.Add(1)
	select {
	case <-m.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llm.Response{Message: llm.AssistantText("Done."), FinishReason: llm.FinishStop}, nil
}

// attempts is a client transport whose first attempt loses its
// connection once the server took the request (as behind a proxy that
// cuts an idle connection), and which opens the gate shortly after the
// retry went out (the server then holds it, behind or joined to the
// first attempt's turn). It counts the attempts.
type attempts struct {
	next    http.RoundTripper
	n       atomic.Int32
	release func()
	// running reports whether the first attempt's turn is running.
	running func() bool
}

func (a *attempts) RoundTrip(r *http.Request) (*http.Response, error) {
	switch a.n.Add(1) {
	case 1:
		ctx, cancel := context.WithCancel(r.Context())
		go func() {
			if resp, err := a.next.RoundTrip(r.WithContext(ctx)); err == nil {
				resp.Body.Close()
			}
		}()
		for deadline := time.Now().Add(10 * time.Second); !a.running() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		return nil, errors.New("read: connection reset by peer")
	case 2:
		go func() { time.Sleep(300 * time.Millisecond); a.release() }()
	}
	return a.next.RoundTrip(r)
}

// TestOfficialClientRetriesJoinTheTurn: the official OpenAI client
// retries a request that timed out, with the same body and no
// Idempotency-Key; the server takes the retry as a retransmission of the
// first attempt (X-Stainless-Retry-Count), which it joins, instead of
// running the turn, its model calls and its tools again. The same body
// sent again as a new request (attempt 0) is a turn of its own.
func TestOfficialClientRetriesJoinTheTurn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		session string
		call    func(ctx context.Context, c openai.Client, opts ...option.RequestOption) (string, error)
	}{
		{"chat completion in a session", "retry-s1", chatCall},
		{"chat completion without a session", "", chatCall},
		{"response", "", func(ctx context.Context, c openai.Client, opts ...option.RequestOption) (string, error) {
			r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("ship it")}}, opts...)
			if err != nil {
				return "", err
			}
			return r.OutputText(), nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &slowModel{gate: make(chan struct{})}
			release := sync.OnceFunc(func() { close(m.gate) })
			a, err := agent.New(agent.Config{Provider: m})
			if err != nil {
				t.Fatal(err)
			}
			ts := newOpenAIServerWith(t, a, func(c *server.Config) { c.Agents[0].Tools = nil })
			t.Cleanup(release) // before the server's shutdown waits for the turn
			tr := &attempts{next: ts.Client().Transport, release: release, running: func() bool { return m.calls.Load() > 0 }}
			opts := []option.RequestOption{option.WithBaseURL(ts.URL + "/v1/"), option.WithAPIKey(oaiToken),
				option.WithHTTPClient(&http.Client{Transport: tr}), option.WithMaxRetries(4)}
			var hdr *http.Response
			opts = append(opts, option.WithResponseInto(&hdr))
			if tc.session != "" {
				opts = append(opts, option.WithHeader(server.SessionHeader, tc.session))
			}
			client := openai.NewClient(opts...)
			out, err := tc.call(context.Background(), client)
			if err != nil {
				t.Fatalf("after %d attempts: %v", tr.n.Load(), err)
			}
			if tr.n.Load() < 2 {
				t.Fatalf("%d attempts: the client was meant to retry", tr.n.Load())
			}
			if out != "Done." || m.calls.Load() != 1 {
				t.Fatalf("answer %q after %d attempts with %d model calls, want the first attempt's turn's, one call", out, tr.n.Load(), m.calls.Load())
			}
			if got := storedMessages(t, ts, hdr.Header.Get(server.SessionHeader)); len(got) != 2 {
				t.Fatalf("history %q, want one turn", got)
			}

			// The same request again, as a new one: a new turn.
			again := openai.NewClient(append(opts[:4:4], option.WithMaxRetries(0), option.WithResponseInto(&hdr))...)
			if tc.session != "" {
				again = openai.NewClient(append(opts[:4:4], option.WithMaxRetries(0), option.WithResponseInto(&hdr), option.WithHeader(server.SessionHeader, tc.session))...)
			}
			if out, err := tc.call(context.Background(), again); err != nil || out != "Done." || m.calls.Load() != 2 {
				t.Fatalf("sent again: %q, %v, %d model calls in all, want a second turn", out, err, m.calls.Load())
			}
		})
	}
}

func chatCall(ctx context.Context, c openai.Client, opts ...option.RequestOption) (string, error) {
	r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("ship it")}}, opts...)
	if err != nil {
		return "", err
	}
	return r.Choices[0].Message.Content, nil
}

// replicaHop is a client transport whose first attempt goes to one
// server and loses its connection once that server's turn runs, and
// whose retries go to another server (a load balancer spreading them).
type replicaHop struct {
	attempts
	other *url.URL
}

func (h *replicaHop) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.n.Load() >= 1 {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host, r.Host = h.other.Scheme, h.other.Host, h.other.Host
	}
	return h.attempts.RoundTrip(r)
}

// newSlow is an agent on a slowModel (its gate opened by release, once).
func newSlow(t *testing.T) (a *agent.Agent, m *slowModel, release func()) {
	t.Helper()
	m = &slowModel{gate: make(chan struct{})}
	a, err := agent.New(agent.Config{Provider: m})
	if err != nil {
		t.Fatal(err)
	}
	return a, m, sync.OnceFunc(func() { close(m.gate) })
}

// serveOn is a server of agent a under id over store, with a run
// recorder of its own (another replica of any other on store), both
// stopped at the test's end.
func serveOn(t *testing.T, store *sqlite.Store, a *agent.Agent, id string) (*server.Server, *runtime.Recorder) {
	t.Helper()
	ctx := context.Background()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: id, Chat: servertest.Harness(t, store, a)}}, Sessions: store, Runs: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(ctx); _ = rec.Close(ctx) })
	return srv, rec
}

// TestOfficialClientRetryOnAnotherReplica: a retry the official client
// sends to another replica (two servers on one store) finds its first
// attempt in the run records (the implicit key its start names) and
// joins that turn, rather than running it again; the client's later
// retries on that replica join it too.
func TestOfficialClientRetryOnAnotherReplica(t *testing.T) {
	ctx := context.Background()
	a, m, release := newSlow(t)
	store := servertest.SQLite(t)
	var urls []*url.URL
	for range 2 {
		srv, _ := serveOn(t, store, a, "demo")
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		u, _ := url.Parse(ts.URL)
		urls = append(urls, u)
	}
	t.Cleanup(release) // before the servers' shutdowns wait for the turn
	for _, session := range []string{"hop-1", ""} {
		m.calls.Store(0)
		tr := &replicaHop{attempts: attempts{next: http.DefaultTransport, release: release, running: func() bool { return m.calls.Load() > 0 }}, other: urls[1]}
		opts := []option.RequestOption{option.WithBaseURL(urls[0].String() + "/v1/"), option.WithHTTPClient(&http.Client{Transport: tr}),
			option.WithMaxRetries(4)}
		if session != "" {
			opts = append(opts, option.WithHeader(server.SessionHeader, session))
		}
		out, err := chatCall(ctx, openai.NewClient(opts...))
		if err != nil || out != "Done." || m.calls.Load() != 1 || tr.n.Load() < 2 {
			t.Fatalf("session %q: %q, %v after %d attempts with %d model calls, want the first attempt's answer, one call",
				session, out, err, tr.n.Load(), m.calls.Load())
		}
	}
}

// TestOfficialClientRetryOnAnotherReplicaBusyTenant: the retry another
// replica takes finds its first attempt however many runs the tenant
// started since (more than a page of the tenant's newest runs: other
// clients' turns), by the implicit key's prefix, and joins that turn
// rather than running it, and its tools, a second time.
func TestOfficialClientRetryOnAnotherReplicaBusyTenant(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		after int // runs of the tenant started after the first attempt
	}{
		{"a few runs since", 3},
		{"more runs since than a scan of the newest reads", 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, m, release := newSlow(t)
			store := servertest.SQLite(t)
			var (
				urls []*url.URL
				recs []*runtime.Recorder
			)
			for range 2 {
				srv, rec := serveOn(t, store, a, "demo")
				ts := httptest.NewServer(srv.Handler())
				t.Cleanup(ts.Close)
				u, _ := url.Parse(ts.URL)
				urls, recs = append(urls, u), append(recs, rec)
			}
			t.Cleanup(release) // before the servers' shutdowns wait for the turn
			busy := sync.OnceFunc(func() {
				// The first attempt's run is recorded; other turns of
				// the tenant follow it.
				if err := recs[0].Flush(ctx); err != nil {
					t.Error(err)
				}
				for i := range tc.after {
					if err := store.Runs().StartRun(ctx, runtime.Run{ID: fmt.Sprintf("other-%d", i), Tenant: server.DefaultTenant,
						SessionID: fmt.Sprintf("other-%d", i), AgentID: "demo", MessageID: fmt.Sprintf("retry-%024x-%d", i, i)}); err != nil {
						t.Error(err)
					}
				}
			})
			running := func() bool {
				if m.calls.Load() == 0 {
					return false
				}
				busy()
				return true
			}
			tr := &replicaHop{attempts: attempts{next: http.DefaultTransport, release: release, running: running}, other: urls[1]}
			opts := []option.RequestOption{option.WithBaseURL(urls[0].String() + "/v1/"), option.WithHTTPClient(&http.Client{Transport: tr}),
				option.WithMaxRetries(4), option.WithHeader(server.SessionHeader, "busy-1")}
			out, err := chatCall(ctx, openai.NewClient(opts...))
			if err != nil || out != "Done." || m.calls.Load() != 1 || tr.n.Load() < 2 {
				t.Fatalf("%q, %v after %d attempts with %d model calls, want the first attempt's answer, one call",
					out, err, tr.n.Load(), m.calls.Load())
			}
		})
	}
}
