package graph

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/uuid"
	"github.com/armature-go/armature/migrate"
	"github.com/armature-go/armature/session"
)

// End is the routing sentinel that halts execution. It is not a node name:
// node names may not contain NUL, so a node may be called "END" without
// colliding with it.
const End = "\x00END"

// NodeFunc is a node body. It receives the current state (which it must
// not modify) and returns a partial update. Returning an error fails the
// node with node_exception; the error is kept as the cause.
type NodeFunc func(ctx context.Context, s State) (Update, error)

// RouteFunc is a conditional edge: it receives the post-update state and
// returns the destination node name or [End]. Returning an error fails
// with edge_exception; returning an undeclared name fails with
// routing_error.
type RouteFunc func(ctx context.Context, s State) (string, error)

// Builder assembles a graph. Methods record mistakes (a duplicate node, an
// empty name) instead of panicking; [Builder.Compile] reports the first
// one. A Builder is not safe for concurrent use.
type Builder struct {
	schema *Schema
	entry  string
	nodes  map[string]*node
	order  []string
	edges  []*edge
	mws    []Middleware
	errs   []error
}

type node struct {
	name string
	fn   NodeFunc
	sub  *Graph
	fan  *FanOut
	par  *ParallelBranches
	proj projection
	out  *edge
	// mws is the per-node middleware; chain is the full chain (per-graph
	// then per-node), resolved at compile time.
	mws   []Middleware
	chain []Middleware
	// ns is the node's namespace when its graph is the outermost one.
	ns []string
	// errs are option mistakes reported at compile time.
	errs []error
	// callable marks the synthetic node of an inline-callable parallel
	// branch (its events carry NodeEvent.CallableBranch).
	callable bool
}

type edge struct {
	from  string
	to    string // static destination; "" for conditional
	route RouteFunc
	dests []string
}

type projection struct {
	inputs, outputs       map[string]string // sub ← parent, parent ← sub
	hasInputs, hasOutputs bool
	declared              bool
	in, out               []string
}

// NewBuilder starts a graph over schema.
func NewBuilder(schema *Schema) *Builder {
	b := &Builder{schema: schema, nodes: make(map[string]*node)}
	if schema == nil {
		b.errs = append(b.errs, compileErr(errcat.InvalidGraph, "", "", "nil schema"))
	}
	return b
}

func (b *Builder) add(n *node) *Builder {
	switch {
	case n.name == "" || strings.ContainsRune(n.name, 0):
		b.errs = append(b.errs, compileErr(errcat.InvalidGraph, n.name, "", "node names must be non-empty and contain no NUL"))
		return b
	case b.nodes[n.name] != nil:
		b.errs = append(b.errs, compileErr(errcat.InvalidGraph, n.name, "", "node %q is declared twice", n.name))
		return b
	}
	if len(n.errs) > 0 {
		b.errs = append(b.errs, n.errs...)
		return b
	}
	n.ns = []string{n.name}
	b.nodes[n.name] = n
	b.order = append(b.order, n.name)
	return b
}

// NodeOption configures a node: its middleware, and for subgraph nodes
// its projection.
type NodeOption func(*node)

// WithMiddleware sets the node's middleware chain, outermost first. It
// runs inside the graph's own middleware (see [Builder.Use]).
func WithMiddleware(mws ...Middleware) NodeOption {
	return func(n *node) {
		for _, m := range mws {
			if m == nil {
				n.errs = append(n.errs, compileErr(errcat.InvalidGraph, n.name, "", "node %q: nil middleware", n.name))
				return
			}
		}
		n.mws = append(n.mws, mws...)
	}
}

// AddNode adds a node running fn.
func (b *Builder) AddNode(name string, fn NodeFunc, opts ...NodeOption) *Builder {
	if fn == nil {
		b.errs = append(b.errs, compileErr(errcat.InvalidGraph, name, "", "node %q has a nil function", name))
		return b
	}
	return b.add(applyOptions(&node{name: name, fn: fn}, opts))
}

func applyOptions(n *node, opts []NodeOption) *node {
	for _, o := range opts {
		if o != nil {
			o(n)
		}
	}
	return n
}

// Use appends per-graph middleware, outermost first. It wraps every node
// of this graph (a subgraph, fan-out or parallel-branches node as a single
// dispatch), outside each node's own middleware. It does not reach into
// subgraphs: their nodes see only their own graph's middleware.
func (b *Builder) Use(mws ...Middleware) *Builder {
	for _, m := range mws {
		if m == nil {
			b.errs = append(b.errs, compileErr(errcat.InvalidGraph, "", "", "nil graph middleware"))
			return b
		}
	}
	b.mws = append(b.mws, mws...)
	return b
}

// Inputs copies parent fields into subgraph fields at entry: the map is
// subgraph field → parent field. Unnamed subgraph fields start from their
// defaults.
func Inputs(m map[string]string) NodeOption {
	return func(n *node) { n.proj.inputs, n.proj.hasInputs = m, true }
}

// Outputs merges subgraph fields into parent fields at exit through the
// parent's reducers: the map is parent field → subgraph field. It replaces
// the default field-name matching.
func Outputs(m map[string]string) NodeOption {
	return func(n *node) { n.proj.outputs, n.proj.hasOutputs = m, true }
}

// ProjectIn declares the same-name in-set: these fields are copied from the
// parent into the subgraph at entry. Declaring either set selects the
// declared boundary form, in which an omitted set is empty and nothing
// falls back to field-name matching.
func ProjectIn(fields ...string) NodeOption {
	return func(n *node) { n.proj.declared, n.proj.in = true, append(n.proj.in, fields...) }
}

// ProjectOut declares the same-name out-set: these fields are merged from
// the subgraph into the parent at exit (see [ProjectIn]).
func ProjectOut(fields ...string) NodeOption {
	return func(n *node) { n.proj.declared, n.proj.out = true, append(n.proj.out, fields...) }
}

// AddSubgraph adds a node that runs the compiled graph sub against its own
// state. Without projection options nothing is projected in and fields
// with matching names are merged back out through the parent's reducers.
func (b *Builder) AddSubgraph(name string, sub *Graph, opts ...NodeOption) *Builder {
	if sub == nil {
		b.errs = append(b.errs, compileErr(errcat.InvalidGraph, name, "", "subgraph node %q has a nil graph", name))
		return b
	}
	return b.add(applyOptions(&node{name: name, sub: sub}, opts))
}

// AddEdge adds a static edge from → to (to may be [End]).
func (b *Builder) AddEdge(from, to string) *Builder {
	b.edges = append(b.edges, &edge{from: from, to: to})
	return b
}

// AddConditionalEdge adds a conditional edge from a node. destinations
// optionally lists the names route may return; they are checked at compile
// time and used for reachability. Without them every node counts as
// reachable from this edge.
func (b *Builder) AddConditionalEdge(from string, route RouteFunc, destinations ...string) *Builder {
	if route == nil {
		b.errs = append(b.errs, compileErr(errcat.InvalidGraph, from, "", "conditional edge from %q has a nil function", from))
		return b
	}
	b.edges = append(b.edges, &edge{from: from, route: route, dests: destinations})
	return b
}

// SetEntry declares the entry node. There is no implicit default.
func (b *Builder) SetEntry(name string) *Builder {
	b.entry = name
	return b
}

// CompileOption configures a compiled graph.
type CompileOption func(*compileConfig)

type compileConfig struct {
	now           func() time.Time
	logger        *slog.Logger
	newID         func() string
	sessions      *SessionConfig
	tailHints     []session.ListTail // WithSessionTail
	checkpoints   checkpoint.Store
	checkpointing bool
	ckpt          checkpointConfig
	name          string
	callableHead  *time.Duration           // WithCallableBranchHead
	forget        []func(sessionID string) // WithSessionForget
}

// WithLogger sets the logger for compile warnings and observer failures.
// The default discards.
func WithLogger(l *slog.Logger) CompileOption {
	return func(c *compileConfig) { c.logger = l }
}

// WithClock sets the clock that stamps observer events; the default is
// time.Now.
func WithClock(now func() time.Time) CompileOption {
	return func(c *compileConfig) { c.now = now }
}

// WithName names the compiled graph. A subgraph's name is reported on
// its [SubgraphEvent]s (observability §5.3 openarmature.subgraph.name)
// and selects it for detached tracing; unnamed graphs report "". The
// name is written in the graph's paused records, and a graph resumes
// only records its own name wrote (or that carry none): graphs sharing
// one checkpoint store (the agents of one server) cannot resume each
// other's suspensions ([ErrOtherGraph]).
func WithName(name string) CompileOption {
	return func(c *compileConfig) { c.name = name }
}

// DefaultCallableBranchHead is how long an inline callable branch of a
// parallel-branches node runs before the next branch starts, unless it
// returns first (see [WithCallableBranchHead]).
const DefaultCallableBranchHead = 5 * time.Millisecond

// WithCallableBranchHead sets how long an inline callable branch of the
// graph's parallel-branches nodes runs, after its started event, before
// the next branch starts (unless it returns first); the default is
// DefaultCallableBranchHead. A callable that finishes within it does so
// before the next branch starts, as under a single-threaded scheduler
// that runs a callable until it first waits: under fail_fast, the
// branches after one that fails at once never start. A longer head makes
// that hold even when the process is starved of CPU, at the cost of
// starting branches that wait on I/O that much later; zero starts the
// next branch at the callable's started event. Subgraph branches always
// start the next branch at their first event.
func WithCallableBranchHead(d time.Duration) CompileOption {
	return func(c *compileConfig) { c.callableHead = &d }
}

// WithIDGenerator sets the function minting invocation and correlation ids
// when the caller supplies none. The default mints UUIDv4s.
func WithIDGenerator(f func() string) CompileOption {
	return func(c *compileConfig) { c.newID = f }
}

// Warning is a non-fatal compile-time diagnostic.
type Warning struct {
	Category errcat.Category
	Node     string
	Field    string
	Message  string
}

// Graph is a compiled, immutable, executable graph. It is safe for
// concurrent use: any number of invocations may run at once. Observers may
// be added and removed at any time; a change takes effect from the next
// invocation.
type Graph struct {
	now           func() time.Time
	checkpointing bool
	sess          *sessions
	checkpoints   checkpoint.Store
	payloads      payloadSchemas // compiled resume payload schemas
	// ckptMigrations are the checkpoint state migrations (never nil);
	// ckptFlushEvery batches fan-out internal saves when above 1.
	ckptMigrations *migrate.Registry
	ckptFlushEvery int
	mws            []Middleware
	schema         *Schema
	entry          string
	name           string
	nodes          map[string]*node
	order          []string
	warnings       []Warning
	logger         *slog.Logger
	newID          func() string
	// callableHead is WithCallableBranchHead's duration.
	callableHead time.Duration
	// forget are the WithSessionForget functions, called by the
	// DeleteSession of g and of every graph g is a subgraph of.
	forget []func(sessionID string)

	observers atomic.Pointer[[]*observerReg]
	obsMu     sync.Mutex
	// graphs lists g and every graph reachable through subgraph nodes.
	graphs []*Graph

	// byID holds the invocations whose observer deliveries are still
	// under way, by invocation id; invocations sharing an id are chained
	// (worker.same), oldest first.
	activeMu sync.Mutex
	byID     map[string]*worker
	// dl bounds the goroutines delivering observer events (observer.go).
	dl deliverers
	// resuming holds the invocation ids a Resume of this graph is
	// running (see Graph.Resume).
	resuming sync.Map
}

// Compile validates the graph and returns it. Errors are *CompileError with
// a graph-engine §2 category; warnings are available from
// [Graph.Warnings] and logged.
func (b *Builder) Compile(opts ...CompileOption) (*Graph, error) {
	cfg := compileConfig{}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if len(b.errs) > 0 {
		return nil, b.errs[0]
	}
	if b.entry == "" {
		return nil, compileErr(errcat.NoDeclaredEntry, "", "", "no entry node declared; call SetEntry")
	}
	if b.nodes[b.entry] == nil {
		return nil, compileErr(errcat.DanglingEdge, b.entry, "", "entry %q is not a declared node", b.entry)
	}
	nodes := make(map[string]*node, len(b.nodes))
	for name, n := range b.nodes {
		c := *n
		c.out = nil
		if len(b.mws)+len(n.mws) > 0 {
			c.chain = append(append(make([]Middleware, 0, len(b.mws)+len(n.mws)), b.mws...), n.mws...)
		}
		nodes[name] = &c
	}
	for _, e := range b.edges {
		src := nodes[e.from]
		if src == nil {
			return nil, compileErr(errcat.DanglingEdge, e.from, "", "edge from undeclared node %q", e.from)
		}
		if e.route == nil {
			if e.to != End && nodes[e.to] == nil {
				return nil, compileErr(errcat.DanglingEdge, e.from, "", "edge %q → %q: %q is not a declared node", e.from, e.to, e.to)
			}
		}
		for _, d := range e.dests {
			if d != End && nodes[d] == nil {
				return nil, compileErr(errcat.DanglingEdge, e.from, "", "conditional edge from %q names undeclared destination %q", e.from, d)
			}
		}
		if src.out != nil {
			return nil, compileErr(errcat.MultipleOutgoingEdges, e.from, "", "node %q has more than one outgoing edge; branch with a conditional edge", e.from)
		}
		ec := *e
		src.out = &ec
	}
	var warnings []Warning
	for _, name := range b.order {
		n := nodes[name]
		var (
			w   []Warning
			err error
		)
		switch {
		case n.sub != nil:
			w, err = checkProjection(b.schema, n)
		case n.fan != nil:
			w, err = checkFanOut(b.schema, n)
		case n.par != nil:
			w, err = checkBranches(b.schema, n)
		}
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
	}
	if err := checkReachable(b.entry, b.order, nodes); err != nil {
		return nil, err
	}
	var sess *sessions
	if cfg.sessions != nil {
		var err error
		sc := *cfg.sessions
		sc.Tail = mergeTailHints(sc, b.schema, cfg.tailHints)
		if sess, err = compileSessions(sc, b.schema); err != nil {
			return nil, err
		}
	}
	ckptMigrations, err := migrate.NewRegistry(migrate.Checkpoint, cfg.ckpt.migrations...)
	if err != nil {
		return nil, err
	}
	if cfg.checkpoints == nil {
		cfg.checkpoints = checkpoint.NewMemoryStore(nil)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	g := &Graph{
		now:            cfg.now,
		checkpointing:  cfg.checkpointing,
		checkpoints:    cfg.checkpoints,
		ckptMigrations: ckptMigrations,
		ckptFlushEvery: cfg.ckpt.flushEvery,
		sess:           sess,
		mws:            append([]Middleware(nil), b.mws...),
		schema:         b.schema,
		entry:          b.entry,
		name:           cfg.name,
		nodes:          nodes,
		order:          append([]string(nil), b.order...),
		warnings:       warnings,
		logger:         cfg.logger,
		newID:          cfg.newID,
		callableHead:   DefaultCallableBranchHead,
		forget:         cfg.forget,
		byID:           make(map[string]*worker),
	}
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.callableHead != nil {
		g.callableHead = max(*cfg.callableHead, 0)
	}
	if g.newID == nil {
		g.newID = uuid.New
	}
	g.observers.Store(&[]*observerReg{})
	g.graphs = collectGraphs(g)
	for _, name := range g.order {
		if g.nodes[name].out == nil {
			g.logger.Warn("graph: node has no outgoing edge; reaching it fails with routing_error", "node", name)
		}
	}
	for _, w := range warnings {
		g.logger.Warn("graph: compile warning", "category", string(w.Category), "node", w.Node, "field", w.Field, "message", w.Message)
	}
	return g, nil
}

func collectGraphs(root *Graph) []*Graph {
	seen := map[*Graph]bool{}
	var out []*Graph
	var visit func(g *Graph)
	visit = func(g *Graph) {
		if seen[g] {
			return
		}
		seen[g] = true
		out = append(out, g)
		for _, name := range g.order {
			n := g.nodes[name]
			switch {
			case n.sub != nil:
				visit(n.sub)
			case n.fan != nil:
				visit(n.fan.Subgraph)
			case n.par != nil:
				for _, br := range n.par.Branches {
					if br.Subgraph != nil {
						visit(br.Subgraph)
					}
				}
			}
		}
	}
	visit(root)
	return out
}

func checkReachable(entry string, order []string, nodes map[string]*node) error {
	seen := map[string]bool{entry: true}
	queue := []string{entry}
	for len(queue) > 0 {
		n := nodes[queue[0]]
		queue = queue[1:]
		var next []string
		switch {
		case n.out == nil:
			continue // fails at run time with routing_error if reached
		case n.out.route == nil:
			next = []string{n.out.to}
		case len(n.out.dests) > 0:
			next = n.out.dests
		default:
			return nil // an undeclared conditional edge may reach any node
		}
		for _, d := range next {
			if d != End && !seen[d] {
				seen[d] = true
				queue = append(queue, d)
			}
		}
	}
	for _, name := range order {
		if !seen[name] {
			return compileErr(errcat.UnreachableNode, name, "", "node %q is unreachable from entry %q", name, entry)
		}
	}
	return nil
}

// checkProjection validates a subgraph node's projection and returns the
// round-trip warnings it triggers.
func checkProjection(parent *Schema, n *node) ([]Warning, error) {
	p, sub := &n.proj, n.sub.schema
	if p.declared && (p.hasInputs || p.hasOutputs) {
		return nil, compileErr(errcat.ConflictingProjectionForms, n.name, "",
			"subgraph node %q declares both same-name projection sets and an inputs/outputs mapping", n.name)
	}
	undeclared := func(side, field string) error {
		return compileErr(errcat.MappingReferencesUndeclaredField, n.name, field,
			"subgraph node %q: projection names field %q, which the %s schema does not declare", n.name, field, side)
	}
	for _, sf := range sortedKeys(p.inputs) {
		if !sub.Has(sf) {
			return nil, undeclared("subgraph", sf)
		}
		if pf := p.inputs[sf]; !parent.Has(pf) {
			return nil, undeclared("parent", pf)
		}
	}
	for _, pf := range sortedKeys(p.outputs) {
		if !parent.Has(pf) {
			return nil, undeclared("parent", pf)
		}
		if sf := p.outputs[pf]; !sub.Has(sf) {
			return nil, undeclared("subgraph", sf)
		}
	}
	for _, f := range append(append([]string(nil), p.in...), p.out...) {
		if !parent.Has(f) {
			return nil, undeclared("parent", f)
		}
		if !sub.Has(f) {
			return nil, undeclared("subgraph", f)
		}
	}
	// Round trips: parent field → subgraph field → same parent field.
	type pair struct{ parent, sub string }
	var trips []pair
	switch {
	case p.declared:
		out := map[string]bool{}
		for _, f := range p.out {
			out[f] = true
		}
		for _, f := range p.in {
			if out[f] {
				trips = append(trips, pair{f, f})
			}
		}
	case p.hasInputs:
		for _, sf := range sortedKeys(p.inputs) {
			pf := p.inputs[sf]
			if p.hasOutputs {
				if p.outputs[pf] == sf {
					trips = append(trips, pair{pf, sf})
				}
			} else if sf == pf {
				trips = append(trips, pair{pf, sf})
			}
		}
	}
	fields := make([]string, len(trips))
	for i, t := range trips {
		fields[i] = t.parent
	}
	return roundTripWarnings(parent, n.name, fields), nil
}

// roundTripWarnings returns a projection_reducer_round_trip warning for
// each parent field (once) whose reducer is not round-trip-idempotent.
func roundTripWarnings(parent *Schema, node string, fields []string) []Warning {
	var warnings []Warning
	seen := map[string]bool{}
	for _, f := range fields {
		r, _ := parent.Reducer(f)
		if r.RoundTripIdempotent() || seen[f] {
			continue
		}
		seen[f] = true
		warnings = append(warnings, Warning{
			Category: errcat.ProjectionReducerRoundTrip, Node: node, Field: f,
			Message: fmt.Sprintf("node %q copies field %q in and merges it back out through reducer %s, which is not round-trip-idempotent: the value is merged twice", node, f, r.Name()),
		})
	}
	return warnings
}

// Warnings returns the compile-time warnings.
func (g *Graph) Warnings() []Warning { return append([]Warning(nil), g.warnings...) }

// Schema returns the graph's state schema.
func (g *Graph) Schema() *Schema { return g.schema }

// Entry returns the entry node's name.
func (g *Graph) Entry() string { return g.entry }

// Nodes returns the node names in declaration order.
func (g *Graph) Nodes() []string { return append([]string(nil), g.order...) }

// Name returns the name given with [WithName] ("" when unnamed).
func (g *Graph) Name() string { return g.name }
