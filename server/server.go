package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server/web"
	"github.com/armature-go/armature/session"
)

// Agent is one agent the server serves: a chat harness and what the
// inspector shows about it.
type Agent struct {
	// ID names the agent in routes, run records and task hints.
	ID string
	// Chat is the agent's chat harness. Its graph's session store must be
	// Config.Sessions (the server reads and deletes sessions there).
	Chat *chat.Harness
	// Model and Tools describe the agent (agent.handoff events).
	Model string
	Tools []string
	// Backend names the backend adapter that runs the agent's turns
	// (package adapter): the adapter field of its agent.* events. ""
	// is the native backend, "armature". Whatever the backend, Chat runs
	// the turns (adapter.Compile builds an adapter's chat graph), so the
	// server owns ids, run records, events, approvals, cancellation and
	// sessions alike.
	Backend string
	// Workflow, when set, names the graph workflow the agent's turns
	// execute: each turn records runtime.workflow.started after its
	// handoff and, when it completes, runtime.workflow.completed
	// ({"workflowId", "adapter"}).
	Workflow string
	// Gateway are the agent's declared tools as the runtime's tool
	// gateway holds them: POST /v1/agents/{agent}/tools/{tool} calls one
	// directly, for a tenant Config.DirectTools authorizes, unless it
	// needs approval (Tool.NeedsApproval, which must therefore be set
	// here as on the tools the agent's turns run).
	Gateway []agent.Tool
	// ToolTimeout and MaxToolResultBytes bound each direct call of a
	// Gateway tool as agent.Config's bound the agent's own calls (zero
	// for agent.DefaultToolTimeout and agent.DefaultMaxToolResultBytes,
	// negative for no bound; see agent.Tool.Bounded): a call past the
	// timeout fails saying so, a longer result is cut with a note.
	ToolTimeout        time.Duration
	MaxToolResultBytes int
}

// agentFacts is what an agent's turns record the same way every time.
type agentFacts struct {
	// handoff is the payload of its agent.handoff event (nil if it
	// could not be encoded), and workflow the data of its
	// runtime.workflow.* events (nil without a workflow), encoded.
	handoff, workflow json.RawMessage
	// wrapped: the agent's graph is an adapter's scaffolding
	// (adapter.Wraps), whose nodes its turns do not report.
	wrapped bool
}

func factsOf(a *Agent) *agentFacts {
	f := &agentFacts{wrapped: a.Chat != nil && adapter.Wraps(a.Chat.Harness().Graph())}
	if tools, err := json.Marshal(a.Tools); err == nil {
		f.handoff, _ = runtime.AdapterJSON(a.backend(), runtime.PhaseHandoff, runtime.TextField("adapter", a.backend()),
			runtime.TextField("modelRef", a.Model), runtime.JSONField("tools", tools))
	}
	if a.Workflow != "" {
		f.workflow, _ = json.Marshal(map[string]any{"workflowId": a.Workflow, "adapter": a.backend()})
	}
	return f
}

// facts returns a's facts: New's, or worked out now for an agent New
// was not given.
func (s *Server) factsOf(a *Agent) *agentFacts {
	if f, ok := s.facts[a]; ok {
		return f
	}
	return factsOf(a)
}

// backend is the agent's adapter name.
func (a *Agent) backend() string {
	if a.Backend == "" {
		return runtime.NativeAdapter
	}
	return a.Backend
}

// Token is a bearer token and the tenant it authenticates.
type Token struct {
	Secret string
	Tenant string
}

// Config configures a Server. Sessions and at least one agent are
// required.
type Config struct {
	// Agents are the served agents; DefaultAgent (default: the first)
	// serves requests that name none. TaskHints maps a task hint (an
	// OpenHarness task_hint.sop_id, the OpenAI model name) to an agent id.
	Agents       []*Agent
	DefaultAgent string
	TaskHints    map[string]string
	// Sessions is the session store every agent's graph uses.
	Sessions session.Store
	// Runs records every turn as a run with its runtime events (the
	// inspector endpoints and the SSE stream read them). Default: a
	// recorder over an in-memory store.
	Runs *runtime.Recorder
	// KeepRunsOnDelete keeps a deleted session's run records (its runs
	// and their events, which hold the conversation's messages, tool
	// calls and replies) until retention prunes them, for an audit
	// trail. By default DELETE /v1/sessions/{id} deletes them with the
	// history (runtime.Recorder.PurgeSession), when the run store can
	// (runtime.SessionPurger: the memory, SQLite and PostgreSQL stores
	// can).
	KeepRunsOnDelete bool
	// Tokens are the accepted bearer tokens. Without tokens the server
	// needs no authentication and serves the tenant "default"; New
	// refuses that unless Addr is a loopback address.
	Tokens []Token
	// Addr is the listen address; default 127.0.0.1:8080.
	Addr string
	// MaxBodyBytes bounds request bodies; default 1 MiB.
	MaxBodyBytes int64
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound
	// connections (defaults 5s, 30s, 5m, 2m). A JSON response gets 30 s
	// from when it is written, and an SSE stream 30 s per write (an
	// OpenAI stream whose client reads too slowly for the turn, over a
	// 1 MiB buffer and a bounded wait, falls behind and ends with a
	// stream_dropped error frame; the turn completes), however long the
	// turn before it ran: WriteTimeout bounds the other
	// responses (the web page's), and a turn's length is bounded by its
	// model calls' timeouts.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxConns caps the connections served at once, default
	// DefaultMaxConns (10000); negative: no cap. At the cap a further
	// connection waits in the listen backlog until one closes. It
	// applies to a listener wrapped in LimitListener(ln, MaxConns), as
	// armature serve wraps its own; Serve and Handler do not apply it.
	MaxConns int
	// MaxSSEStreams caps concurrent event streams (the session event
	// stream and OpenAI stream: true), default 256, and
	// MaxSSEStreamsPerTenant one tenant's, default all of them on a
	// server with at most one token, else a quarter. A tenant over its
	// share gets 429 with Retry-After; a full server 503.
	MaxSSEStreams, MaxSSEStreamsPerTenant int
	// MaxTurns caps the turns in flight (a send or signal on any
	// surface, from admission until the turn has ended, including the
	// wait for the session's earlier turn: the writing of its answer,
	// which a slow client can stretch, holds none), default 256, and MaxTurnsPerTenant one
	// tenant's (default as for streams). A turn over them waits in a
	// queue of at most MaxQueuedTurns (default 1024) and
	// MaxQueuedTurnsPerTenant for the tenant (default as for streams)
	// for up to QueueWait (default 10s); a tenant over its share is then
	// refused with 429, a full server with 503, both with Retry-After.
	// A waiting turn's request body is read when it joins the queue (at
	// most MaxQueuedTurns × MaxBodyBytes held), so a client that gives
	// up leaves the queue at once; freed capacity goes to the waiting
	// tenant with the fewest turns running.
	MaxTurns, MaxTurnsPerTenant             int
	MaxQueuedTurns, MaxQueuedTurnsPerTenant int
	QueueWait                               time.Duration
	// SessionWait bounds how long a turn waits for its session while
	// another turn holds it (the session's earlier turn, or a replica
	// that stalled holding its lock): past it the turn fails with
	// invocation_cancelled (retryable, cause chat.ErrSessionBusy),
	// having run nothing (an approval's decision is not taken), and its
	// run is recorded as cancelled. Default 2m; negative: no bound. (A
	// turn whose client goes away stops waiting at once, see
	// chat.WithWaitContext.)
	SessionWait time.Duration
	// Logger receives request and error logs. Default: discard.
	Logger *slog.Logger
	// MetricReader, when set, is collected on each /metrics scrape and
	// its instruments written after the server's own series in the
	// Prometheus text format (names and attribute keys with dots as
	// underscores, a seconds unit as the _seconds suffix): the
	// observability §11 gen_ai instruments of an otelobserver built on a
	// MeterProvider with this reader, for one. A collection error leaves
	// them out of that scrape.
	MetricReader sdkmetric.Reader
	// DrainDelay is how long, at least, a shutting-down server keeps its
	// listener open and serving with /readyz answering 503, so that load
	// balancers see it leave before connections are refused; it then
	// waits for the turns in flight, within Serve's grace. Default: 0
	// on a loopback listener, 5s on others; never beyond the grace.
	DrainDelay time.Duration
	// EventNotifier, when set, tells the server of events other servers
	// sharing its run store stored (store/postgres: LISTEN/NOTIFY): the
	// session event streams (GET /v1/sessions/{id}/events) then read
	// what is new from the store on each notice, local or remote, so a
	// stream on any replica carries every replica's turns in the order
	// the store numbered them. It runs while Serve does.
	EventNotifier EventNotifier
	// CancelRelay, when set, carries cancel requests between the servers
	// sharing the run store: cancelling a live run another server runs
	// (POST /v1/runs/{id}/cancel, Server.Cancel) asks that server to
	// cancel it, and this server cancels the runs other servers are
	// asked to. It listens while Serve runs.
	CancelRelay CancelRelay
	// WatchRelay, when set, tells the servers sharing the run store
	// which sessions each watches live (see WatchRelay), so that a
	// session's event stream on any server carries a turn another runs
	// as it happens. It announces while Serve runs, and listens.
	WatchRelay WatchRelay
	// Ready, when set, is part of readiness: /readyz answers 503
	// (unavailable, "the database is unreachable") while it fails, e.g.
	// a database ping. Each probe is bounded by two seconds.
	Ready func(ctx context.Context) error
	// AllowedOrigins are the browser origins (scheme://host[:port], or
	// "*" for any) whose pages may call the API; the server's own origin
	// (its web UI) always may. A request from any other origin is
	// refused with 403 (see the package documentation, "Browser
	// safety").
	AllowedOrigins []string
	// AllowedHosts are the names the Host header may carry besides the
	// loopback names (localhost, 127.0.0.1, [::1]); "*" allows any. A
	// request naming another host is refused with 421, so that DNS
	// rebinding reaches nothing. A server with Tokens and no
	// AllowedHosts accepts any Host.
	AllowedHosts []string
	// DirectTools authorizes direct tool requests (POST
	// /v1/agents/{agent}/tools/{tool}: an operator invoking a declared
	// tool without the model, recorded as a run with
	// runtime.tool.direct.* events) per tenant: the tool names each
	// tenant may call, "*" for all of an agent's tools. A tenant without
	// an entry may call none (403 forbidden). A tool that needs approval
	// (agent.Tool.NeedsApproval in Agent.Gateway) cannot be called
	// directly, whether named or covered by "*": the request is 403
	// approval_required (CodeApprovalRequired), records no run and runs
	// nothing; only a turn runs it, once a human approved the call.
	DirectTools map[string][]string
	// Narration, when set, enables progress narration: each turn
	// records runtime.progress.narration events, human-readable progress
	// derived from its tool and lifecycle events (the built-in template
	// provider), and the OpenAI-compatible stream carries them as
	// event: stable_harness.progress.narration. Narration only reads
	// events; it never changes a turn.
	Narration *Narration
	// LiveTextEvery is how often at most a turn whose session someone
	// watches live (GET /v1/sessions/{id}/events, the web page) records
	// the text it streams as an agent.output.delta: the chunks that
	// arrive meanwhile are recorded together. Each record of a watched
	// turn is a store write of its own; a model streams a reply in tens
	// to hundreds of chunks. 0 means 25ms (40 updates a second);
	// negative records every chunk. The turn's own stream (its request's
	// SSE, the OpenAI stream) carries every chunk as it comes either way.
	LiveTextEvery time.Duration
	// StreamKeepAlive keeps the OpenAI-compatible streams (chat
	// completions and responses with stream: true) alive through the
	// proxies and load balancers that drop a connection idle for a while
	// (60 s is common), while a turn's model thinks, its tool runs, or it
	// waits for its session, longer than that: a stream quiet for
	// StreamKeepAlive opens (its headers; it otherwise opens with the
	// turn's first output) and gets a comment line (": keep-alive",
	// which SSE clients skip), again each time it stays quiet as long.
	// A turn that fails after its stream opened tells it in the stream
	// (an error event; response.failed), as one that fails after its
	// first output does, rather than by the response's status. Default
	// DefaultStreamKeepAlive; negative: no keep-alive.
	StreamKeepAlive time.Duration
	// DisableWebUI turns off the browser UI (package server/web) that is
	// otherwise served, without authentication, at / and /assets/.
	DisableWebUI bool
}

// DefaultTenant is the tenant of unauthenticated loopback servers.
const DefaultTenant = "default"

// ErrInvalidConfig is wrapped by configuration errors from New.
var ErrInvalidConfig = errors.New("server: invalid config")

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8080"
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 5 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 5 * time.Minute
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 2 * time.Minute
	}
	if c.MaxSSEStreams <= 0 {
		c.MaxSSEStreams = 256
	}
	if c.MaxTurns <= 0 {
		c.MaxTurns = 256
	}
	if c.MaxQueuedTurns <= 0 {
		c.MaxQueuedTurns = 1024
	}
	if c.QueueWait <= 0 {
		c.QueueWait = 10 * time.Second
	}
	if c.StreamKeepAlive == 0 {
		c.StreamKeepAlive = DefaultStreamKeepAlive
	}
	if c.SessionWait == 0 {
		c.SessionWait = DefaultSessionWait
	}
	// Tenants, not tokens: a tenant rotating its key holds two tokens
	// and is still one tenant (it got a quarter of every limit).
	distinct := make(map[string]bool, len(c.Tokens))
	for _, tk := range c.Tokens {
		distinct[tk.Tenant] = true
	}
	tenants := len(distinct)
	if c.MaxSSEStreamsPerTenant <= 0 {
		c.MaxSSEStreamsPerTenant = shareOf(c.MaxSSEStreams, tenants)
	}
	if c.MaxTurnsPerTenant <= 0 {
		c.MaxTurnsPerTenant = shareOf(c.MaxTurns, tenants)
	}
	if c.MaxQueuedTurnsPerTenant <= 0 {
		c.MaxQueuedTurnsPerTenant = shareOf(c.MaxQueuedTurns, tenants)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports a configuration error wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	c.setDefaults()
	if _, err := newBrowserGuard(c); err != nil {
		return err
	}
	if len(c.Agents) == 0 {
		return fmt.Errorf("%w: no agents", ErrInvalidConfig)
	}
	if c.Sessions == nil {
		return fmt.Errorf("%w: Sessions is required", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for _, a := range c.Agents {
		if a == nil || a.ID == "" || a.Chat == nil {
			return fmt.Errorf("%w: an agent needs an ID and a chat harness", ErrInvalidConfig)
		}
		if len(a.ID) > maxAgentName || !utf8.ValidString(a.ID) || strings.ContainsFunc(a.ID, controlOrFormat) {
			// It is the agent's name on every surface (a request names
			// it in at most maxAgentName bytes) and on its run records,
			// which refuse control characters: a turn of such an agent
			// ran without its run.
			return fmt.Errorf("%w: agent id %q must be 1-%d bytes of UTF-8 without control or format characters", ErrInvalidConfig, a.ID, maxAgentName)
		}
		if seen[a.ID] {
			return fmt.Errorf("%w: two agents are named %q", ErrInvalidConfig, a.ID)
		}
		seen[a.ID] = true
	}
	if c.DefaultAgent != "" && !seen[c.DefaultAgent] {
		return fmt.Errorf("%w: the default agent %q is not configured", ErrInvalidConfig, c.DefaultAgent)
	}
	for hint, id := range c.TaskHints {
		if !seen[id] {
			return fmt.Errorf("%w: task hint %q routes to unknown agent %q", ErrInvalidConfig, hint, id)
		}
	}
	// A direct tool names a tool of some agent: a name no agent declares
	// (a typo) would answer every request 404, silently.
	declared := map[string]bool{}
	for _, a := range c.Agents {
		for _, tl := range a.Gateway {
			declared[tl.Definition.Name] = true
		}
	}
	for tenant, names := range c.DirectTools {
		if tenant == "" {
			return fmt.Errorf("%w: direct_tools names an empty tenant", ErrInvalidConfig)
		}
		for _, n := range names {
			if n != "*" && !declared[n] {
				return fmt.Errorf("%w: direct_tools gives tenant %q tool %q, which no agent declares", ErrInvalidConfig, tenant, n)
			}
		}
	}
	secrets := make(map[string]string, len(c.Tokens))
	for _, t := range c.Tokens {
		if len(t.Secret) < MinTokenSecret || !validID(t.Tenant) {
			return fmt.Errorf("%w: a token needs a secret of at least 16 bytes and a tenant of [A-Za-z0-9._:-]", ErrInvalidConfig)
		}
		if other, dup := secrets[t.Secret]; dup && other != t.Tenant {
			// The first would always match: the other tenant could
			// never authenticate. (The secret is never printed.)
			return fmt.Errorf("%w: one token secret is given for tenants %q and %q", ErrInvalidConfig, other, t.Tenant)
		}
		secrets[t.Secret] = t.Tenant
	}
	if len(c.Tokens) == 0 && !loopback(c.Addr) {
		return fmt.Errorf("%w: listening on %s (not loopback) requires bearer tokens", ErrInvalidConfig, c.Addr)
	}
	return nil
}

// loopback reports whether addr listens on a loopback interface only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Server is the Armature HTTP server: the chat REST + SSE API, health and
// metrics, and (in their own files) the OpenHarness and OpenAI-compatible
// endpoints. It is safe for concurrent use.
type Server struct {
	cfg    Config
	log    *slog.Logger
	agents map[string]*Agent
	// subs are the open subscriptions of embedded callers (Subscribe),
	// which Stop and Serve's shutdown close.
	subs subscriptionSet
	// facts are what each agent's turns record the same way every
	// time, worked out once by New.
	facts map[*Agent]*agentFacts
	// lockWait is chat.WithLockWait(cfg.SessionWait), made once.
	lockWait chat.SendOption

	def     *Agent
	mux     *http.ServeMux
	handler http.Handler // mux behind the browser checks
	streams *limiter     // event streams
	turns   *limiter     // turns in flight and queued
	refused *refusals    // requests the limits refused
	browser *browserGuard
	metrics *metrics
	runs    *runtime.Recorder
	ownRuns bool // runs was created by New, so Serve closes it
	ready   atomic.Bool
	// refusing is set once a shutdown's drain delay has passed: new
	// turns are refused (503) while those in flight finish.
	refusing atomic.Bool
	// closing is closed when shutdown begins: event streams end so the
	// HTTP server can drain.
	closing chan struct{}
	// wakes are the session event streams waiting for remote events.
	wakes wakeups
	// watches are the subscriptions the WatchRelay announces.
	watches watching
	// direct are the direct tool calls running (a delete marks its
	// session's).
	direct    directCalls
	closeOnce sync.Once

	// inflight counts the turns under way, which a stop waits for.
	inflight turnCount
	// resuming are the signals with a request id under way on this
	// server (see signalFlight).
	resuming signalFlights
	// retries recognizes the official OpenAI SDKs' own retries.
	retries *clientRetries
	// patterns are the route patterns registered, in order: every
	// route goes through wrapWith (authentication, limits, logging),
	// which records it, so that the tenant isolation sweep (a test) can
	// tell a route it does not cover, a new one too. Written only by
	// New.
	patterns []string
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, agents: map[string]*Agent{}, mux: http.NewServeMux(), metrics: newMetrics(), runs: cfg.Runs,
		closing: make(chan struct{}), retries: newClientRetries(time.Now)}
	if s.runs == nil {
		rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: runtime.NewMemoryStore(runtime.MemoryConfig{}), Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		s.runs, s.ownRuns = rec, true
	}
	if cfg.Sessions != nil && !cfg.KeepRunsOnDelete {
		// A run whose records the store refused is not written back once
		// its conversation was deleted meanwhile (on any replica).
		s.runs.SetConversationGone(s.conversationGone)
	}
	s.facts = make(map[*Agent]*agentFacts, len(cfg.Agents))
	for _, a := range cfg.Agents {
		s.agents[a.ID] = a
		s.facts[a] = factsOf(a)
	}
	s.def = cfg.Agents[0]
	if cfg.DefaultAgent != "" {
		s.def = s.agents[cfg.DefaultAgent]
	}
	if err := s.routes(); err != nil {
		return nil, err
	}
	var err error
	if s.browser, err = newBrowserGuard(cfg); err != nil {
		return nil, err
	}
	s.handler = s.guard(s.mux)
	s.refused = &refusals{n: map[[2]string]int64{}}
	s.streams = newLimiter("stream", cfg.MaxSSEStreams, cfg.MaxSSEStreamsPerTenant, 0, 0, 0, s.refused)
	s.lockWait = chat.WithLockWait(cfg.SessionWait)
	s.turns = newLimiter("turn", cfg.MaxTurns, cfg.MaxTurnsPerTenant, cfg.MaxQueuedTurns, cfg.MaxQueuedTurnsPerTenant, cfg.QueueWait, s.refused)
	s.ready.Store(true)
	return s, nil
}

// Handler returns the server's HTTP handler (with the browser checks,
// authentication, body limits and logging), for use with any
// http.Server or httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// DefaultStreamKeepAlive is Config.StreamKeepAlive's default: a
// quarter of the 60 s idle timeout common to proxies and load balancers.
const DefaultStreamKeepAlive = 15 * time.Second

// DefaultSessionWait is Config.SessionWait's default.
const DefaultSessionWait = 2 * time.Minute

// answerFlushWait bounds how long shutdown, past its grace, lets the
// handlers of the turns it cancelled write their answers.
const answerFlushWait = 2 * time.Second

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting, lets in-flight turns finish (up to grace), and closes.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if n := s.cfg.EventNotifier; n != nil {
		nctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = n.Listen(nctx, s.wakes.wake) }()
	}
	if c := s.cfg.CancelRelay; c != nil {
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = c.ListenCancels(cctx, func(tenant, runID string) { s.runs.Cancel(cctx, tenant, runID) }) }()
	}
	if w := s.cfg.WatchRelay; w != nil {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		asked := make(chan struct{}, 1)
		go func() {
			_ = w.ListenWatches(wctx, func(tenant, sessionID string) {
				if tenant == "" && sessionID == "" {
					select { // another server asks for the sessions watched here
					case asked <- struct{}{}:
					default:
					}
					return
				}
				s.runs.WatchElsewhere(wctx, tenant, sessionID, WatchTTL)
			})
		}()
		go s.announceWatches(wctx, w, asked)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.ready.Store(false)
	s.closeOnce.Do(func() { close(s.closing) })
	deadline := time.Now().Add(grace)
	s.drain(ln, deadline)
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err := hs.Shutdown(sctx)
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		// Out of time: the turns still running end as cancelled runs
		// (their context is cancelled; nothing is saved for them).
		if n := s.runs.CancelAll(context.Background()); n > 0 {
			s.log.Warn("server: shutdown cancelled in-flight turns", "turns", n)
			t := time.NewTimer(5 * time.Second)
			select {
			case <-done:
			case <-t.C:
			}
			t.Stop()
		}
	}
	if s.ownRuns {
		if err := s.runs.Close(sctx); err != nil {
			s.log.Warn("server: writing queued run records failed", "error", err)
		}
	}
	// The SSE streams ended on s.closing; embedded callers'
	// subscriptions end now, their turns' events delivered.
	s.subs.closeAll()
	if errors.Is(err, context.DeadlineExceeded) {
		// The turns have ended (or were given up on); their handlers
		// still write the answers (a cancelled turn's is
		// invocation_cancelled). Let those connections go idle briefly
		// before closing whatever remains.
		fctx, fcancel := context.WithTimeout(context.Background(), answerFlushWait)
		if hs.Shutdown(fctx) != nil {
			_ = hs.Close()
		}
		fcancel()
	}
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	return nil
}

type tenantKey struct{}

// tenantOf returns the authenticated tenant of a request.
func tenantOf(r *http.Request) string {
	t, _ := r.Context().Value(tenantKey{}).(string)
	return t
}

// authenticate resolves the bearer token to a tenant. The scheme is
// case-insensitive (RFC 7235 §2.1): "bearer" is "Bearer".
func (s *Server) authenticate(r *http.Request) (string, error) {
	if len(s.cfg.Tokens) == 0 {
		return DefaultTenant, nil
	}
	if len(r.Header.Values("Authorization")) > 1 {
		// Which one counts would be up to each hop (a proxy checking
		// the last, this server reading the first): none does.
		return "", &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "send one Authorization header"}
	}
	secret, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return "", &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "a bearer token is required"}
	}
	for _, t := range s.cfg.Tokens {
		if subtle.ConstantTimeCompare([]byte(secret), []byte(t.Secret)) == 1 {
			return t.Tenant, nil
		}
	}
	return "", &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "invalid bearer token"}
}

// bearerToken returns the token of an Authorization header of the
// Bearer scheme, in any case, followed by one or more spaces (RFC 6750
// §2.1); ok is false for another scheme or no token.
func bearerToken(h string) (token string, ok bool) {
	scheme, rest, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(rest, " ")
	return token, token != ""
}

// handle registers an authenticated, size-limited, logged route.
func (s *Server) handle(pattern string, h handlerFunc) {
	s.mux.Handle(pattern, s.wrap(pattern, true, h))
}

// handlePublic registers a route without authentication.
func (s *Server) handlePublic(pattern string, h handlerFunc) {
	s.mux.Handle(pattern, s.wrap(pattern, false, h))
}

func (s *Server) wrap(pattern string, auth bool, h handlerFunc) http.Handler {
	return s.wrapWith(pattern, auth, h, s.writeError)
}

// wrapWith is wrap with the error renderer of the route's API (the REST
// envelope, or the OpenAI error shape).
func (s *Server) wrapWith(pattern string, auth bool, h handlerFunc, writeError func(http.ResponseWriter, *http.Request, error)) http.Handler {
	s.patterns = append(s.patterns, pattern)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		if cid := r.Header.Get("X-Correlation-ID"); correlationSafe(cid) {
			sw.Header().Set("X-Correlation-ID", cid)
			r = r.WithContext(withCorrelation(r.Context(), cid))
		}
		// X-Request-ID is echoed and logged (and on POST /v1/openharness
		// stands for a missing request_id); a W3C traceparent makes the
		// turn's spans children of the caller's span.
		rid := r.Header.Get("X-Request-ID")
		if rid != "" && ohHeaderSafe(rid) {
			sw.Header().Set("X-Request-ID", rid)
		} else {
			rid = ""
		}
		if r.Header.Get("Traceparent") != "" {
			r = r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		r.Body = http.MaxBytesReader(sw, r.Body, s.cfg.MaxBodyBytes)
		err := func() error {
			if auth {
				tenant, err := s.authenticate(r)
				if err != nil {
					sw.Header().Set("WWW-Authenticate", `Bearer realm="armature"`)
					return err
				}
				r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant))
			}
			if runsTurn(pattern) {
				if s.refusing.Load() {
					// Shutting down, past the drain delay: a new turn is
					// refused at once (to be retried on another replica)
					// rather than run into the grace deadline.
					return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "shutting down", RetryAfter: 1}
				}
				release, err := s.admitTurn(r)
				if err != nil {
					return err
				}
				defer release()
				// The turn's slot is freed as soon as the turn has
				// ended, before its answer is written (see turnEnded).
				sw.endTurn = release
				r = r.WithContext(context.WithValue(r.Context(), turnSlotKey{}, release))
			}
			return h(sw, r)
		}()
		if err != nil && clientGone(r, err) {
			// The client closed its connection (or half-closed it, and
			// still reads): 499, logged as a request, not as a server
			// failure. Written, so that a client still there never
			// reads an implicit 200.
			err = &Error{Status: statusClientClosed, Code: string(errcat.InvocationCancelled), Err: err,
				Message: "the request was cancelled: its client closed the connection while it waited, and nothing was done"}
		}
		if err != nil {
			writeError(sw, r, err)
		}
		s.metrics.request(pattern, sw.status)
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "http request",
			slog.String("method", r.Method), slog.String("route", pattern), slog.Int("status", sw.status),
			slog.Duration("duration", time.Since(start)), slog.String("tenant", tenantOf(r)),
			slog.String("correlation_id", sw.Header().Get("X-Correlation-ID")), slog.String("request_id", rid))
	})
}

// controlOrFormat reports a control character, or a format character
// (bidi overrides, zero-width ones) that would make an id read as
// another.
func controlOrFormat(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// correlationSafe reports whether an X-Correlation-ID header can be
// echoed and recorded on the turn's run: 1-128 printable ASCII bytes.
// Another (a tab, bytes of another encoding) is ignored: the run store
// refuses control characters, and a turn must not run without its run.
func correlationSafe(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// drainPoll spaces drain's looks at the turns in flight.
const drainPoll = 20 * time.Millisecond

// drain keeps the listener serving, /readyz answering 503, for the drain
// delay (load balancers see the replica leave, and the turns they still
// send run) and then until no turn is in flight or queued, or until
// deadline; past the delay, new turns are refused with 503 and
// Retry-After, so that the ones in flight can finish within the grace
// even under steady load.
func (s *Server) drain(ln net.Listener, deadline time.Time) {
	delay := s.cfg.DrainDelay
	if delay <= 0 && !loopback(ln.Addr().String()) {
		delay = 5 * time.Second
	}
	until := time.Now().Add(delay)
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for {
		now := time.Now()
		if !now.Before(deadline) {
			return
		}
		if !now.Before(until) {
			s.refusing.Store(true)
			if running, queued := s.turns.counts(); running+queued == 0 {
				return
			}
		}
		<-t.C
	}
}

// statusWriter records the status code; it passes Flush and the
// response controller's Unwrap through.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	// endTurn, on a route that runs a turn, frees the turn's slot: called
	// when the response's header goes out, unless the response is an
	// event stream, whose handler calls it once the turn has ended
	// (turnEnded). A turn is answered only once it has ended, so a
	// client slow to read its answer holds no turn slot.
	endTurn func()
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
		w.answering()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.wrote = true
		w.answering()
	}
	return w.ResponseWriter.Write(b)
}

// answering frees the turn's slot as the response's header goes out,
// unless the response is an event stream (see endTurn).
func (w *statusWriter) answering() {
	if w.endTurn != nil && !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		w.endTurn()
	}
}

// turnSlotKey is the context key of the release of a request's turn
// slot (see turnEnded).
type turnSlotKey struct{}

// turnEnded frees the turn slot of r (a route that runs a turn) once its
// turn has ended: what is left is writing the answer, which a client
// reading slowly must not stretch while it holds one of the server's
// turns (MaxTurns). A JSON answer frees it as its header goes out; an
// event stream's handler calls turnEnded before its final frames.
func turnEnded(r *http.Request) {
	if release, ok := r.Context().Value(turnSlotKey{}).(func()); ok {
		release()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// routes registers every endpoint.
func (s *Server) routes() error {
	s.handlePublic("GET /healthz", func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	})
	s.handlePublic("GET /readyz", func(w http.ResponseWriter, r *http.Request) error {
		// Not ready is an answer, not a failed request: written here,
		// so that a draining server's probes log no error each.
		notReady := func(msg string) error {
			var body errorBody
			body.Error.Code, body.Error.Message = CodeUnavailable, msg
			writeJSON(w, http.StatusServiceUnavailable, body)
			return nil
		}
		if !s.ready.Load() {
			return notReady("shutting down")
		}
		if s.cfg.Ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := s.cfg.Ready(ctx); err != nil {
				s.log.WarnContext(ctx, "server: not ready", "error", err)
				return notReady("the database is unreachable")
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return nil
	})
	s.handlePublic("GET /metrics", s.serveMetrics)
	s.chatRoutes()
	s.openAIRoutes()
	s.runRoutes()
	s.mux.Handle("POST /v1/openharness", s.wrapWith("POST /v1/openharness", true, s.openHarness(), s.writeErrorFor))
	s.handle("POST /v1/agents/{agent}/tools/{tool}", s.directTool)
	if !s.cfg.DisableWebUI {
		ui, err := web.New()
		if err != nil {
			return err
		}
		serveUI := func(w http.ResponseWriter, r *http.Request) error {
			ui.ServeHTTP(w, r)
			return nil
		}
		s.handlePublic("GET /{$}", serveUI)
		s.handlePublic("GET /assets/", serveUI)
	}
	// The catch-all pattern matches every method, so the mux never
	// answers 405 itself (it does only when no pattern matches the
	// request's method): unrouted tells a wrong method from a path that
	// is not served.
	s.mux.Handle("/", s.wrapWith("/", true, s.unrouted, s.writeErrorFor))
	return nil
}

// probeMethods are the methods unrouted tries a path with.
var probeMethods = [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// unrouted answers a request no route takes: 405 with the Allow header
// when the path is served with other methods, else 404.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range probeMethods {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		return notFound("route " + r.Method + " " + r.URL.Path)
	}
	methods := strings.Join(allow, ", ")
	w.Header().Set("Allow", methods)
	return &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed,
		Message: "method " + r.Method + " is not allowed on " + r.URL.Path + " (allowed: " + methods + ")"}
}

// agentFor resolves a task hint or agent id to an agent ("" = default).
func (s *Server) agentFor(hint string) (*Agent, error) {
	if hint == "" {
		return s.def, nil
	}
	if a, ok := s.agents[hint]; ok {
		return a, nil
	}
	if id, ok := s.cfg.TaskHints[hint]; ok {
		return s.agents[id], nil
	}
	return nil, badRequest("no agent serves %q", hint)
}

// MinTokenSecret is the shortest bearer token secret Config.Validate
// accepts, in bytes.
const MinTokenSecret = 16

// ValidTenant reports whether id can name a tenant (Token.Tenant): the
// rule of every API id (see validID).
func ValidTenant(id string) bool { return validID(id) }

// validID reports whether an API id (session, tenant) is well formed:
// 1-128 bytes of [A-Za-z0-9._:-], other than "." and ".." (path
// segments a client or the router resolves: /v1/sessions/.. is
// /v1, so such a session could be made but never reached).
func validID(id string) bool {
	if len(id) == 0 || len(id) > 128 || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// storeKey is the stored session id of a tenant's session: tenants share
// the store but never each other's keys ("/" cannot occur in API ids).
func storeKey(tenant, sessionID string) string { return tenant + "/" + sessionID }
