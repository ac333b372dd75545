package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/bytesize"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
	"github.com/armature-go/armature/store/sqlite"
)

// serveConfig is armature serve's configuration: flags, with environment
// variables as defaults.
type serveConfig struct {
	addr      string
	data      string
	database  string
	workspace string
	tokens    string
	logFormat string
	logLevel  slog.Level
	grace     time.Duration
	drain     time.Duration
	// sessionWait is --session-wait (server.Config.SessionWait).
	sessionWait time.Duration
	// keepAlive is --stream-keepalive (server.Config.StreamKeepAlive).
	keepAlive time.Duration
	origins   listFlag
	hosts     listFlag
	limits    limitFlags
	// cacheBytes bounds the decoded sessions kept in memory (all agents);
	// runRetention and runMaxBytes bound the run records and events.
	cacheBytes   byteSize
	runRetention time.Duration
	runMaxBytes  byteSize
	// keepRuns keeps a deleted session's run records (audit).
	keepRuns bool
	// reconcileEvery is how often a replica on a shared database ends
	// the runs of replicas that are gone.
	reconcileEvery time.Duration
	// sessionLocks is --max-session-locks: with --database, the session
	// locks the replica takes at once (0: --max-turns + lockSpare).
	sessionLocks int
	// durability is the SQLite store's synchronous level.
	durability sqlite.Durability
	// debugAddr, when set, serves net/http/pprof on a loopback listener
	// of its own.
	debugAddr string
}

// byteSize is a flag of bytes: a number with an optional KiB, MiB, GiB
// (or KB, MB, GB: also powers of 1024, as operators mean them) suffix.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// Set parses "1073741824", "512MiB", "1GiB", "64KB".
func (b *byteSize) Set(v string) error {
	n, err := parseBytes(v)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// parseBytes parses a size in bytes (bytesize.Parse).
func parseBytes(v string) (int64, error) { return bytesize.Parse(v) }

// envDefaults reads the environment variables that give flags their
// defaults, keeping the first malformed one: a value the flag would
// refuse is refused from the environment too, never replaced by the
// default (ARMATURE_RUN_RETENTION=90d kept 30 days of run records).
type envDefaults struct{ err error }

func (e *envDefaults) bad(key, v string, err error) {
	if e.err == nil {
		e.err = fmt.Errorf("serve: %s=%q: %v", key, v, err)
	}
}

// bytes is a size environment variable, or def when unset.
func (e *envDefaults) bytes(key string, def int64) byteSize {
	v := os.Getenv(key)
	if v == "" {
		return byteSize(def)
	}
	n, err := parseBytes(v)
	if err != nil {
		e.bad(key, v, err)
		return byteSize(def)
	}
	return byteSize(n)
}

// duration is a duration environment variable, or def when unset.
func (e *envDefaults) duration(key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.bad(key, v, err)
		return def
	}
	return d
}

// limitFlags are the server's fair-share limits (0: the server's
// default).
type limitFlags struct {
	streams, streamsPerTenant int
	turns, turnsPerTenant     int
	queued, queuedPerTenant   int
	// conns caps the connections served at once (server.Config.MaxConns:
	// 0 the default, negative no cap).
	conns int
}

// int is an integer environment variable, or def when unset.
func (e *envDefaults) int(key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	// As the flag reads it (flag.IntVar): 0x10 and 1_000 too.
	n, err := strconv.ParseInt(v, 0, strconv.IntSize)
	if err != nil {
		e.bad(key, v, errors.New("not an integer"))
		return def
	}
	return int(n)
}

// listFlag is a repeatable flag of comma-separated values; its first
// occurrence replaces the default (the environment variable's values).
type listFlag struct {
	vals []string
	set  bool
}

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.vals, ",")
}

// Set adds the comma-separated values of one occurrence.
func (l *listFlag) Set(v string) error {
	if !l.set {
		l.vals, l.set = nil, true
	}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			l.vals = append(l.vals, p)
		}
	}
	return nil
}

// envList is the values of a comma-separated environment variable.
func envList(key string) listFlag {
	var l listFlag
	_ = l.Set(os.Getenv(key))
	l.set = false
	return l
}

func parseServe(args []string, stderr io.Writer) (serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c serveConfig
	env := &envDefaults{}
	fs.StringVar(&c.addr, "addr", envOr("ARMATURE_ADDR", "127.0.0.1:8080"), "listen address (env ARMATURE_ADDR); non-loopback addresses require tokens")
	fs.StringVar(&c.data, "data", envOr("ARMATURE_DATA", "armature-data"), "data directory holding armature.db (env ARMATURE_DATA); unused with --database")
	fs.StringVar(&c.database, "database", os.Getenv("ARMATURE_DATABASE_URL"), "PostgreSQL URL (postgres://…) to serve from, as one of many replicas, instead of the embedded SQLite store (env ARMATURE_DATABASE_URL)")
	fs.StringVar(&c.workspace, "workspace", os.Getenv("ARMATURE_WORKSPACE"), "workspace YAML declaring agents and routes (env ARMATURE_WORKSPACE); none serves the offline demo agent")
	fs.StringVar(&c.tokens, "tokens", os.Getenv("ARMATURE_TOKENS"), "bearer tokens as secret:tenant pairs, comma separated (env ARMATURE_TOKENS)")
	fs.StringVar(&c.logFormat, "log", envOr("ARMATURE_LOG", "text"), "log format: text or json (env ARMATURE_LOG)")
	if v := os.Getenv("ARMATURE_LOG_LEVEL"); v != "" {
		if err := c.logLevel.UnmarshalText([]byte(v)); err != nil {
			return c, fmt.Errorf("serve: ARMATURE_LOG_LEVEL: %w", err)
		}
	}
	fs.TextVar(&c.logLevel, "log-level", c.logLevel, "the least severe log records written: debug, info (one line per HTTP request), warn or error (env ARMATURE_LOG_LEVEL)")
	c.origins, c.hosts = envList("ARMATURE_ALLOW_ORIGINS"), envList("ARMATURE_ALLOW_HOSTS")
	fs.Var(&c.origins, "allow-origin", "browser origins (scheme://host[:port], or *) whose pages may call the API, repeatable or comma separated (env ARMATURE_ALLOW_ORIGINS); the server's own page always may")
	fs.Var(&c.hosts, "allow-host", "host names the Host header may carry besides localhost, 127.0.0.1 and [::1], repeatable or comma separated, * for any (env ARMATURE_ALLOW_HOSTS); needed behind a proxy or on a LAN name without tokens")
	for _, l := range []struct {
		p           *int
		name, env   string
		description string
	}{
		{&c.limits.streams, "max-streams", "ARMATURE_MAX_STREAMS", "concurrent event streams (session events, OpenAI stream: true); 0: 256"},
		{&c.limits.streamsPerTenant, "max-streams-per-tenant", "ARMATURE_MAX_STREAMS_PER_TENANT", "one tenant's event streams; 0: all with at most one tenant, else a quarter"},
		{&c.limits.turns, "max-turns", "ARMATURE_MAX_TURNS", "turns in flight on every surface; 0: 256"},
		{&c.limits.turnsPerTenant, "max-turns-per-tenant", "ARMATURE_MAX_TURNS_PER_TENANT", "one tenant's turns in flight; 0: as for streams"},
		{&c.limits.queued, "max-queued-turns", "ARMATURE_MAX_QUEUED_TURNS", "turns waiting for capacity (up to 10s each); 0: 1024"},
		{&c.limits.queuedPerTenant, "max-queued-turns-per-tenant", "ARMATURE_MAX_QUEUED_TURNS_PER_TENANT", "one tenant's waiting turns; 0: as for streams"},
	} {
		fs.IntVar(l.p, l.name, env.int(l.env, 0), l.description+" (env "+l.env+"); over a tenant's share: 429, over the total: 503")
	}
	fs.IntVar(&c.limits.conns, "max-conns", env.int("ARMATURE_MAX_CONNS", 0),
		"connections served at once (env ARMATURE_MAX_CONNS); 0: 10000, negative: no cap; a further one waits until one closes")
	c.cacheBytes = env.bytes("ARMATURE_SESSION_CACHE_BYTES", 64<<20)
	fs.Var(&c.cacheBytes, "session-cache-bytes", "memory for decoded sessions, all agents together, by their stored size (env ARMATURE_SESSION_CACHE_BYTES; default 64MiB); a session over it is re-read on each turn")
	fs.DurationVar(&c.runRetention, "run-retention", env.duration("ARMATURE_RUN_RETENTION", 30*24*time.Hour), "how long finished run records and their events are kept (env ARMATURE_RUN_RETENTION); 0 keeps them forever")
	keep := false
	if v := os.Getenv("ARMATURE_KEEP_RUNS_ON_DELETE"); v != "" {
		var err error
		if keep, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("serve: ARMATURE_KEEP_RUNS_ON_DELETE must be true or false, not %q", v)
		}
	}
	fs.BoolVar(&c.keepRuns, "keep-runs-on-delete", keep, "keep a deleted session's run records and events (its messages, tool calls and replies) until --run-retention prunes them, for an audit trail (env ARMATURE_KEEP_RUNS_ON_DELETE); default: deleting a session deletes them")
	c.runMaxBytes = env.bytes("ARMATURE_RUN_MAX_BYTES", 1<<30)
	fs.Var(&c.runMaxBytes, "run-max-bytes", "size cap of run records and events, oldest pruned first (env ARMATURE_RUN_MAX_BYTES; default 1GiB); 0: no cap")
	fs.DurationVar(&c.reconcileEvery, "reconcile-interval", env.duration("ARMATURE_RECONCILE_INTERVAL", 15*time.Second), "with --database: how often the runs a dead replica left started are ended as their turns ended (env ARMATURE_RECONCILE_INTERVAL); 0: only at startup")
	fs.IntVar(&c.sessionLocks, "max-session-locks", env.int("ARMATURE_MAX_SESSION_LOCKS", 0),
		"with --database: sessions whose turn lock the replica takes at once without waiting, one PostgreSQL connection each (env ARMATURE_MAX_SESSION_LOCKS); "+
			"0: --max-turns + 16 (272 by default), so that every turn in flight gets its session's lock; a quarter as many more wait for sessions other replicas hold. "+
			"A turn that finds none left waits for one as for a busy session (--session-wait)")
	fs.DurationVar(&c.drain, "drain-delay", env.duration("ARMATURE_DRAIN_DELAY", 0), "how long, at least, shutdown keeps serving with /readyz at 503 before it closes the listener (env ARMATURE_DRAIN_DELAY); 0: none on loopback, 5s otherwise; within --grace")
	fs.StringVar(&c.debugAddr, "debug-addr", os.Getenv("ARMATURE_DEBUG_ADDR"), "loopback address (127.0.0.1:6060) serving Go's profiler, /debug/pprof/, on a listener of its own without authentication (env ARMATURE_DEBUG_ADDR); empty: none")
	fs.DurationVar(&c.grace, "grace", 30*time.Second, "how long shutdown waits for in-flight turns")
	fs.DurationVar(&c.sessionWait, "session-wait", env.duration("ARMATURE_SESSION_WAIT", server.DefaultSessionWait),
		"how long a turn waits for its session while another turn (or a stalled replica) holds it, before failing, retryable, having run nothing (env ARMATURE_SESSION_WAIT); 0: no bound")
	fs.DurationVar(&c.keepAlive, "stream-keepalive", env.duration("ARMATURE_STREAM_KEEPALIVE", server.DefaultStreamKeepAlive),
		"how long an OpenAI-compatible stream (stream: true) may stay quiet before it gets a ': keep-alive' comment line, opening it if the turn has sent nothing yet, so that proxies that drop idle connections keep it (env ARMATURE_STREAM_KEEPALIVE); 0: never")
	c.durability = sqlite.DurabilityFull
	if v := os.Getenv("ARMATURE_DURABILITY"); v != "" {
		if err := c.durability.UnmarshalText([]byte(v)); err != nil {
			return c, fmt.Errorf("serve: ARMATURE_DURABILITY: %w", err)
		}
	}
	fs.TextVar(&c.durability, "durability", c.durability, "what an acknowledged turn survives on the SQLite store, `full|normal` (env ARMATURE_DURABILITY): "+
		"full fsyncs every commit (one per group of concurrent turns), so a turn survives a power loss or OS crash; "+
		"normal fsyncs at WAL checkpoints only, so it survives a crash of the process but a power loss may lose the last tens of milliseconds of turns. "+
		"Unused with --database (PostgreSQL's synchronous_commit decides)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	if env.err != nil {
		return c, env.err
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return c, fmt.Errorf("serve: --log (ARMATURE_LOG) must be text or json, not %q", c.logFormat)
	}
	// A negative duration or limit means nothing the flag documents:
	// refused rather than read as zero (or as the default).
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--grace", c.grace}, {"--drain-delay (ARMATURE_DRAIN_DELAY)", c.drain}, {"--run-retention (ARMATURE_RUN_RETENTION)", c.runRetention},
		{"--reconcile-interval (ARMATURE_RECONCILE_INTERVAL)", c.reconcileEvery}, {"--session-wait (ARMATURE_SESSION_WAIT)", c.sessionWait},
		{"--stream-keepalive (ARMATURE_STREAM_KEEPALIVE)", c.keepAlive}} {
		if d.v < 0 {
			return c, fmt.Errorf("serve: %s must not be negative, not %v", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"--max-streams", c.limits.streams}, {"--max-streams-per-tenant", c.limits.streamsPerTenant}, {"--max-turns", c.limits.turns},
		{"--max-turns-per-tenant", c.limits.turnsPerTenant}, {"--max-queued-turns", c.limits.queued}, {"--max-queued-turns-per-tenant", c.limits.queuedPerTenant},
		{"--max-session-locks (ARMATURE_MAX_SESSION_LOCKS)", c.sessionLocks}} {
		if n.v < 0 {
			return c, fmt.Errorf("serve: %s must not be negative, not %d", n.name, n.v)
		}
	}
	if strings.TrimSpace(c.addr) == "" {
		// An empty address listens on every interface (on a random
		// port): never what an unset variable (--addr=$LISTEN) meant,
		// and the loopback default must not be assumed for it.
		return c, errors.New("serve: --addr (ARMATURE_ADDR) must not be empty; the default is 127.0.0.1:8080")
	}
	return c, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// parseTokens reads "secret:tenant,secret:tenant": a secret holds no
// comma or colon, a tenant is 1-128 bytes of [A-Za-z0-9._:-] (not "."
// or ".."). What the server would refuse only once the store opened (a
// short secret, a tenant it cannot serve, one secret for two tenants) is
// refused here, and so is a secret no Authorization header can carry (a
// control character, surrounding whitespace, which HTTP trims). An
// error names the token by its position, never by a secret or a tenant:
// either half may be the secret of a pair written tenant:secret.
func parseTokens(s string) ([]server.Token, error) {
	var out []server.Token
	tenants := map[string]string{}
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n++
		secret, tenant, ok := strings.Cut(part, ":")
		switch {
		case !ok || secret == "" || tenant == "":
			return nil, fmt.Errorf("serve: token %d: a token must be secret:tenant", n)
		case len(secret) < server.MinTokenSecret:
			return nil, fmt.Errorf("serve: token %d: a token must be secret:tenant with a secret of at least %d bytes", n, server.MinTokenSecret)
		case strings.TrimSpace(secret) != secret || strings.ContainsFunc(secret, unicode.IsControl) || !utf8.ValidString(secret):
			return nil, fmt.Errorf("serve: token %d: the secret must be UTF-8 without control characters or surrounding whitespace (an Authorization header could not carry it)", n)
		case !server.ValidTenant(tenant):
			return nil, fmt.Errorf("serve: token %d: the tenant must be 1-128 bytes of [A-Za-z0-9._:-], other than \".\" and \"..\"", n)
		}
		if other, dup := tenants[secret]; dup && other != tenant {
			// The first would always match: the other tenant could
			// never authenticate.
			return nil, fmt.Errorf("serve: token %d: its secret is another tenant's too", n)
		}
		tenants[secret] = tenant
		out = append(out, server.Token{Secret: secret, Tenant: tenant})
	}
	return out, nil
}

// runServe runs armature serve until ctx ends or SIGINT/SIGTERM.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer, opts Options) error {
	c, err := parseServe(args, stderr)
	if err != nil {
		return err
	}
	hopts := &slog.HandlerOptions{Level: c.logLevel}
	var handler slog.Handler = slog.NewTextHandler(stderr, hopts)
	if c.logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, hopts)
	}
	// OpenTelemetry's own errors (failed exports) are log records in the
	// configured format, not plain lines; logged locally only, never
	// exported over OTLP (whose failure would log again).
	routeOTelErrors(slog.New(handler))
	tel, err := setupTelemetry(ctx, os.Getenv)
	if err != nil {
		return err
	}
	// Log records of a turn carry its invocation, correlation and
	// session ids (and, exporting, its trace and span), to correlate
	// with the exported spans.
	log := slog.New(tel.logHandler(handler))
	defer func() {
		// After the recorder and the store have closed (deferred later,
		// run earlier): the spans and logs of the last turns flush.
		if err := tel.shutdown(context.Background()); err != nil {
			log.Warn("serve: flushing the OpenTelemetry export failed", "error", err)
		}
	}()
	lf, err := setupLangfuse(log)
	if err != nil {
		return fmt.Errorf("serve: Langfuse: %w", err)
	}
	defer lf.shutdown()
	tokens, err := parseTokens(c.tokens)
	if err != nil {
		return err
	}
	// The workspace is read and its agents built before the store opens:
	// a mistake in it must not migrate a shared database on its way out.
	ws, err := loadWorkspace(c.workspace)
	if err != nil {
		return err
	}
	adWS, err := ws.adapterWorkspace()
	if err != nil {
		return fmt.Errorf("serve: workspace: %w", err)
	}
	prompts, err := ws.promptManager(log)
	if err != nil {
		return fmt.Errorf("serve: workspace: %w", err)
	}
	// A managed prompt every turn would miss is refused now (see
	// checkPrompts), not at each turn.
	if err := ws.checkPrompts(ctx, prompts, log); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	// Every agent runs through its backend's adapter: the native one
	// (the agent graph), or one an embedding program registered. A
	// backend nobody registered is refused here, before the store opens.
	reg, err := ws.adapters(prompts, opts.Adapters)
	if err != nil {
		return err
	}
	for _, ag := range adWS.Agents {
		name := ag.Backend
		if name == "" {
			name = adapter.Native
		}
		if _, ok := reg.Lookup(name); !ok {
			return fmt.Errorf("serve: workspace: %w: agent %s names backend %q (registered: %v)", adapter.ErrUnknownAdapter, ag.ID, name, reg.Names())
		}
	}
	be, err := openBackend(ctx, c, log)
	if err != nil {
		return err
	}
	defer be.close()

	runs, err := runtime.NewRecorder(runtime.RecorderConfig{Store: be.runs, Logger: log})
	if err != nil {
		return err
	}
	// Run records are written behind the turns in batches; closing the
	// recorder (before the store) writes what is still queued.
	defer func() {
		if err := runs.Close(context.Background()); err != nil {
			log.Warn("serve: flushing run records failed", "error", err)
		}
	}()
	cfg := server.Config{Sessions: be.sessions, Runs: runs, KeepRunsOnDelete: c.keepRuns, Tokens: tokens, Addr: c.addr, Logger: log,
		DrainDelay: c.drain, Ready: be.ready, EventNotifier: be.notifier, CancelRelay: be.cancels, WatchRelay: be.watches,
		AllowedOrigins: c.origins.vals, AllowedHosts: c.hosts.vals,
		MaxSSEStreams: c.limits.streams, MaxSSEStreamsPerTenant: c.limits.streamsPerTenant,
		MaxTurns: c.limits.turns, MaxTurnsPerTenant: c.limits.turnsPerTenant,
		MaxQueuedTurns: c.limits.queued, MaxQueuedTurnsPerTenant: c.limits.queuedPerTenant, MaxConns: c.limits.conns,
		SessionWait: cmp.Or(c.sessionWait, -1), StreamKeepAlive: cmp.Or(c.keepAlive, -1), DefaultAgent: ws.DefaultAgent, TaskHints: ws.TaskHints, MetricReader: tel.prom}
	// One session cache for every agent: --session-cache-bytes is the
	// server's budget, not each agent's.
	cache := graph.NewSessionCache(0, int64(c.cacheBytes))
	if p := ws.Progress; p != nil && p.Narration.Enabled {
		cfg.Narration = &server.Narration{Style: p.Narration.Style}
	}
	cfg.DirectTools = ws.DirectTools
	// The observer renders a turn's events after the turn answered: at
	// shutdown (deferred, before the telemetry flush) the graphs' event
	// queues drain, so the last turns' spans and metrics are exported.
	var graphs []*graph.Graph
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		for _, g := range graphs {
			if _, err := g.Drain(dctx); err != nil {
				log.Warn("serve: draining observer events failed", "error", err)
			}
		}
	}()
	for i, spec := range ws.Agents {
		ag := adWS.Agents[i]
		fr := adapter.FactoryRequest{Workspace: adWS, Agent: ag, Logger: log, Database: c.database}
		if c.database == "" {
			fr.DataDir = c.data
		}
		a, err := reg.Build(ctx, fr)
		if err != nil {
			return fmt.Errorf("serve: agent %s: %w", spec.ID, err)
		}
		if c, ok := a.(io.Closer); ok {
			// An upstream's own stores (ADK-Go's session database, Eino's
			// checkpoint pool) close at shutdown, after the turns.
			defer func() {
				if err := c.Close(); err != nil {
					log.Warn("serve: closing the agent's adapter failed", "agent", spec.ID, "error", err)
				}
			}()
		}
		served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: ag, Workspace: adWS,
			Sessions: be.sessions, SessionCache: cache, Records: be.records, Locker: be.locker,
			CompileOptions: []graph.CompileOption{graph.WithLogger(log)},
			Chat: func(cc *chat.Config) error {
				cc.Logger = log
				graphs = append(graphs, cc.Graph)
				if err := lf.attach(cc.Graph, spec.ID); err != nil {
					return fmt.Errorf("langfuse: %w", err)
				}
				if _, err := cc.Graph.AddObserver(tel.obs.Observe, tel.observerOptions()...); err != nil {
					return err
				}
				if tel.tp != nil {
					cc.Tracer = tel.tp.Tracer("github.com/armature-go/armature/chat")
				}
				return nil
			}})
		if err != nil {
			return fmt.Errorf("serve: agent %s: %w", spec.ID, err)
		}
		// Direct tool calls are bounded as the agent's own calls are
		// (checked when the workspace loaded).
		if served.ToolTimeout, served.MaxToolResultBytes, err = spec.toolBounds(); err != nil {
			return fmt.Errorf("serve: agent %s: %w", spec.ID, err)
		}
		cfg.Agents = append(cfg.Agents, served)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	// Runs a crash left open are reconciled now, before serving, with
	// what the session store holds: completed or suspended if their
	// turn committed, failed (run_interrupted) otherwise. So the
	// inspector never shows a turn as running forever, nor a committed
	// turn as failed. A run whose session cannot be read stays started
	// until the next start.
	// On a shared database, the runs of replicas still alive are in
	// flight and are left alone (the store lists only gone replicas'
	// runs, see postgres.RunStore.UnfinishedRuns).
	if be.recover {
		if sum, err := srv.RecoverRuns(ctx); err != nil {
			log.Warn("serve: reconciling runs left started failed; they stay started", "runs", sum.Left, "error", err)
		} else if sum.Total() > 0 {
			log.Warn("serve: reconciled runs the last shutdown left started",
				"completed", sum.Completed, "suspended", sum.Suspended, "failed", sum.Failed)
		}
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	// At most cfg.MaxConns connections at once: a further one waits in
	// the backlog until one closes.
	ln = server.LimitListener(ln, cfg.MaxConns)
	if c.debugAddr != "" {
		_, stopDebug, err := serveDebug(c.debugAddr, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopDebug()
	}
	// Old and excess run records are pruned in the background, in
	// batches that interleave with the turns' writes.
	pruneCtx, stopPrune := context.WithCancel(ctx)
	pruned := make(chan struct{})
	go func() {
		defer close(pruned)
		if be.pruner == nil {
			return
		}
		runtime.Prune(pruneCtx, be.pruner, runtime.PruneConfig{Retention: c.runRetention, MaxBytes: int64(c.runMaxBytes),
			OnPass: func(res runtime.PruneResult, err error) {
				switch {
				case err != nil:
					log.Warn("serve: pruning run records failed", "error", err)
				case res.Runs > 0:
					log.Info("pruned run records", "runs", res.Runs, "events", res.Events, "bytes_left", res.Bytes)
				}
			}})
	}()
	defer func() { stopPrune(); <-pruned }()
	// On a shared database, the runs of a replica killed mid-turn are
	// ended by the survivors, without waiting for a restart.
	if be.shared && c.reconcileEvery > 0 {
		reconciled := make(chan struct{})
		go func() {
			defer close(reconciled)
			reconcileAbandoned(pruneCtx, srv, c.reconcileEvery, log)
		}()
		defer func() { stopPrune(); <-reconciled }()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "armature %s serving on http://%s (data: %s)\n", version, ln.Addr(), be.where)
	log.Info("serving", "addr", ln.Addr().String(), "agents", len(cfg.Agents), "auth", len(tokens) > 0)
	return srv.Serve(ctx, ln, c.grace)
}

// reconcileAbandoned ends, every interval until ctx is done, the runs
// that replicas which are gone left started (Server.RecoverAbandonedRuns).
func reconcileAbandoned(ctx context.Context, srv *server.Server, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sum, err := srv.RecoverAbandonedRuns(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("serve: reconciling the runs of a gone replica failed; retried later", "runs", sum.Left, "error", err)
		case sum.Total() > 0:
			log.Warn("serve: reconciled the runs a gone replica left started",
				"completed", sum.Completed, "suspended", sum.Suspended, "failed", sum.Failed)
		}
	}
}

// backend is the storage armature serve runs on: the embedded SQLite
// store of a data directory (one process), or a PostgreSQL database
// shared by replicas.
type backend struct {
	sessions session.Store
	records  checkpoint.Store // also a checkpoint.SessionWriter of sessions
	runs     runtime.Store
	pruner   runtime.Pruner // nil: the backend does not prune
	locker   chat.Locker    // nil: one process owns the store
	ready    func(context.Context) error
	notifier server.EventNotifier // nil: one process writes the store
	cancels  server.CancelRelay   // nil: one process runs the turns
	watches  server.WatchRelay    // nil: one process serves the streams
	recover  bool                 // reconcile runs left started at startup
	shared   bool                 // replicas share the store
	where    string               // for the startup line
	close    func()
}

// lockSpare is what --max-session-locks adds by default to --max-turns:
// the locks taken outside the turn limit (a session's deletion, the
// resumption of a suspended turn once decided).
const lockSpare = 16

// defaultMaxTurns is server.Config.MaxTurns's default (--max-turns 0).
const defaultMaxTurns = 256

// lockerConfig sizes the PostgreSQL session locker from the turns the
// replica runs at once: each turn in flight can hold its session's lock
// (a connection of the locker's MaxHeld; the locker adds a quarter as
// many for waits for sessions another replica holds). A locker sized
// apart from --max-turns made its 65th turn wait without bound for one
// of 64 connections.
func (c serveConfig) lockerConfig() postgres.LockerConfig {
	n := c.sessionLocks
	if n <= 0 {
		n = min(cmp.Or(c.limits.turns, defaultMaxTurns), math.MaxInt32-lockSpare) + lockSpare
	}
	return postgres.LockerConfig{MaxHeld: int32(min(n, math.MaxInt32))}
}

// openBackend opens the backend c names: --database, else --data.
func openBackend(ctx context.Context, c serveConfig, log *slog.Logger) (*backend, error) {
	if c.database != "" {
		st, err := postgres.Open(ctx, postgres.Config{URL: c.database, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("serve: database: %w", err)
		}
		locker := st.SessionLocker(c.lockerConfig())
		return &backend{sessions: st, records: st.Checkpoints(), runs: st.Runs(), pruner: st.Runs(), locker: locker, ready: st.Ping, notifier: st, cancels: st, watches: st, recover: true, shared: true,
			where: "postgres", close: func() { locker.Close(); st.Close() }}, nil
	}
	if err := os.MkdirAll(c.data, 0o750); err != nil {
		return nil, fmt.Errorf("serve: data directory: %w", err)
	}
	// One process owns a data directory, so turns of a session serialize
	// in that process and need no cross-process leases.
	unlock, err := lockDataDir(c.data)
	if err != nil {
		return nil, err
	}
	// The server is the file's only Store (SoleWriter): a warm turn's
	// version check needs no query, and another Store opening the data
	// directory meanwhile (another armature serve, a tool) fails at once
	// instead of writing behind the server's back.
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(c.data, "armature.db"), Logger: log, Durability: c.durability,
		SoleWriter: true})
	if err != nil {
		unlock()
		return nil, err
	}
	// /readyz fails once the store found its file damaged (Ping): every
	// turn would fail, and a load balancer should stop sending them.
	return &backend{sessions: st, records: st.Checkpoints(), runs: st.Runs(), pruner: st.Runs(), recover: true, ready: st.Ping,
		where: c.data, close: func() { _ = st.Close(context.Background()); unlock() }}, nil
}
