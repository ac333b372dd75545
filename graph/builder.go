package graph

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/uuid"
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
	errs   []error
}

type node struct {
	name string
	fn   NodeFunc
	sub  *Graph
	proj projection
	out  *edge
	// ns is the node's namespace when its graph is the outermost one.
	ns []string
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
	n.ns = []string{n.name}
	b.nodes[n.name] = n
	b.order = append(b.order, n.name)
	return b
}

// AddNode adds a node running fn.
func (b *Builder) AddNode(name string, fn NodeFunc) *Builder {
	if fn == nil {
		b.errs = append(b.errs, compileErr(errcat.InvalidGraph, name, "", "node %q has a nil function", name))
		return b
	}
	return b.add(&node{name: name, fn: fn})
}

// SubgraphOption configures how a subgraph node projects state across its
// boundary (graph-engine §2).
type SubgraphOption func(*projection)

// Inputs copies parent fields into subgraph fields at entry: the map is
// subgraph field → parent field. Unnamed subgraph fields start from their
// defaults.
func Inputs(m map[string]string) SubgraphOption {
	return func(p *projection) { p.inputs, p.hasInputs = m, true }
}

// Outputs merges subgraph fields into parent fields at exit through the
// parent's reducers: the map is parent field → subgraph field. It replaces
// the default field-name matching.
func Outputs(m map[string]string) SubgraphOption {
	return func(p *projection) { p.outputs, p.hasOutputs = m, true }
}

// ProjectIn declares the same-name in-set: these fields are copied from the
// parent into the subgraph at entry. Declaring either set selects the
// declared boundary form, in which an omitted set is empty and nothing
// falls back to field-name matching.
func ProjectIn(fields ...string) SubgraphOption {
	return func(p *projection) { p.declared, p.in = true, append(p.in, fields...) }
}

// ProjectOut declares the same-name out-set: these fields are merged from
// the subgraph into the parent at exit (see [ProjectIn]).
func ProjectOut(fields ...string) SubgraphOption {
	return func(p *projection) { p.declared, p.out = true, append(p.out, fields...) }
}

// AddSubgraph adds a node that runs the compiled graph sub against its own
// state. Without options nothing is projected in and fields with matching
// names are merged back out through the parent's reducers.
func (b *Builder) AddSubgraph(name string, sub *Graph, opts ...SubgraphOption) *Builder {
	if sub == nil {
		b.errs = append(b.errs, compileErr(errcat.InvalidGraph, name, "", "subgraph node %q has a nil graph", name))
		return b
	}
	n := &node{name: name, sub: sub}
	for _, o := range opts {
		if o != nil {
			o(&n.proj)
		}
	}
	return b.add(n)
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
	logger *slog.Logger
	newID  func() string
}

// WithLogger sets the logger for compile warnings and observer failures.
// The default discards.
func WithLogger(l *slog.Logger) CompileOption {
	return func(c *compileConfig) { c.logger = l }
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
	schema   *Schema
	entry    string
	nodes    map[string]*node
	order    []string
	warnings []Warning
	logger   *slog.Logger
	newID    func() string

	observers atomic.Pointer[[]*observerReg]
	obsMu     sync.Mutex
	// graphs lists g and every graph reachable through subgraph nodes.
	graphs []*Graph

	activeMu sync.Mutex
	active   map[*worker]struct{}
	byID     map[string]*worker
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
		if n.sub == nil {
			continue
		}
		w, err := checkProjection(b.schema, n)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
	}
	if err := checkReachable(b.entry, b.order, nodes); err != nil {
		return nil, err
	}
	g := &Graph{
		schema:   b.schema,
		entry:    b.entry,
		nodes:    nodes,
		order:    append([]string(nil), b.order...),
		warnings: warnings,
		logger:   cfg.logger,
		newID:    cfg.newID,
		active:   make(map[*worker]struct{}),
		byID:     make(map[string]*worker),
	}
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
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
			if s := g.nodes[name].sub; s != nil {
				visit(s)
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
	var warnings []Warning
	seen := map[string]bool{}
	for _, t := range trips {
		r, _ := parent.Reducer(t.parent)
		if r.RoundTripIdempotent() || seen[t.parent] {
			continue
		}
		seen[t.parent] = true
		warnings = append(warnings, Warning{
			Category: errcat.ProjectionReducerRoundTrip, Node: n.name, Field: t.parent,
			Message: fmt.Sprintf("subgraph node %q copies field %q in and merges it back out through reducer %s, which is not round-trip-idempotent: the value is merged twice", n.name, t.parent, r.Name()),
		})
	}
	return warnings, nil
}

// Warnings returns the compile-time warnings.
func (g *Graph) Warnings() []Warning { return append([]Warning(nil), g.warnings...) }

// Schema returns the graph's state schema.
func (g *Graph) Schema() *Schema { return g.schema }

// Entry returns the entry node's name.
func (g *Graph) Entry() string { return g.entry }

// Nodes returns the node names in declaration order.
func (g *Graph) Nodes() []string { return append([]string(nil), g.order...) }
