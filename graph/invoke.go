package graph

import (
	"context"
	"fmt"
	"slices"

	"github.com/armature-go/armature/errcat"
)

// Status is an invocation's outcome category (graph-engine §3).
type Status int

// Invocation outcomes.
const (
	// Completed: the graph reached End; Result.State is the final state.
	Completed Status = iota + 1
	// Errored: a node, edge or merge failed; Result.Err says why and
	// Result.State is the recoverable state.
	Errored
	// Suspended: a node suspended the invocation awaiting a signal
	// (suspension capability; reserved).
	Suspended
)

// String returns "completed", "errored" or "suspended".
func (s Status) String() string {
	switch s {
	case Completed:
		return "completed"
	case Errored:
		return "errored"
	case Suspended:
		return "suspended"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Result is an invocation's outcome.
type Result struct {
	Status Status
	// State is the final state (Completed) or the outermost graph's
	// recoverable state at the failure (Errored).
	State State
	// InvocationID and CorrelationID are the ids the invocation ran with
	// (caller-supplied or minted).
	InvocationID  string
	CorrelationID string
	// Path lists the outermost graph's nodes dispatched, in order,
	// including the failing one.
	Path []string
	// Err is the failure when Status is Errored: a *NodeError (or a
	// *StateError for an invalid input), categorized per [errcat].
	Err error
}

// InvokeOption configures one invocation.
type InvokeOption func(*invokeConfig) error

type invokeConfig struct {
	invocationID  string
	correlationID string
	observers     []*observerReg
}

// WithInvocationID supplies the invocation id (otherwise minted as a
// UUIDv4). It must be a non-empty URL-safe string.
func WithInvocationID(id string) InvokeOption {
	return func(c *invokeConfig) error {
		if !urlSafe(id) {
			return invalidOption("invocation id must be a non-empty URL-safe string")
		}
		c.invocationID = id
		return nil
	}
}

// WithCorrelationID supplies the cross-backend correlation id (otherwise
// minted as a UUIDv4). It must be a non-empty URL-safe string.
func WithCorrelationID(id string) InvokeOption {
	return func(c *invokeConfig) error {
		if !urlSafe(id) {
			return invalidOption("correlation id must be a non-empty URL-safe string")
		}
		c.correlationID = id
		return nil
	}
}

// WithObserver adds an invocation-scoped observer: it receives this
// invocation's events only, after the graph-attached observers.
func WithObserver(obs Observer, opts ...ObserverOption) InvokeOption {
	return func(c *invokeConfig) error {
		r, err := newObserverReg(obs, opts)
		if err != nil {
			return err
		}
		c.observers = append(c.observers, r)
		return nil
	}
}

func urlSafe(s string) bool {
	if s == "" || len(s) > 512 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || c == ':') {
			return false
		}
	}
	return true
}

// invocation is the per-invoke runtime shared by every frame.
type invocation struct {
	g      *Graph
	id     string
	corrID string
	step   int
	w      *worker
	// obs is the observer snapshot: obs[i] belongs to g.graphs[i].
	obs    []([]*observerReg)
	invObs []*observerReg

	// Inline storage, so a small invocation allocates once.
	res     Result
	top     frame
	root    scopeCtx
	obsBuf  [4][]*observerReg
	pathBuf [8]string
}

func (inv *invocation) graphObservers(g *Graph) []*observerReg {
	for i, gg := range inv.g.graphs {
		if gg == g {
			return inv.obs[i]
		}
	}
	return nil
}

// frame is one graph run within an invocation: the outermost graph or a
// subgraph.
type frame struct {
	inv          *invocation
	g            *Graph
	prefix       []string
	parentStates []State
	obs          []*observerReg
	fanChain     []*int
	branchChain  []*string
	path         *[]string
}

func (f *frame) namespace(n *node) []string {
	if len(f.prefix) == 0 {
		return n.ns
	}
	ns := make([]string, len(f.prefix)+1)
	copy(ns, f.prefix)
	ns[len(f.prefix)] = n.name
	return ns
}

// scope is what a node body can learn from its context.
type scope struct {
	inv   *invocation
	fr    *frame
	node  *node
	step  int
	state State
}

type scopeKey struct{}

// scopeCtx carries a scope; it is one allocation per node instead of a
// scope plus a context.WithValue node.
type scopeCtx struct {
	context.Context
	sc scope
}

func (c *scopeCtx) Value(key any) any {
	if key == (scopeKey{}) {
		return &c.sc
	}
	return c.Context.Value(key)
}

func scopeFrom(ctx context.Context) *scope {
	s, _ := ctx.Value(scopeKey{}).(*scope)
	return s
}

// InvocationID returns the id of the invocation ctx belongs to, or "".
// It is readable anywhere within the invocation: nodes, edges, and
// anything they call with their context.
func InvocationID(ctx context.Context) string {
	if s := scopeFrom(ctx); s != nil {
		return s.inv.id
	}
	return ""
}

// CorrelationID returns the correlation id of the invocation ctx belongs
// to, or "".
func CorrelationID(ctx context.Context) string {
	if s := scopeFrom(ctx); s != nil {
		return s.inv.corrID
	}
	return ""
}

// NodeInfo describes the node executing in a context.
type NodeInfo struct {
	// Name is the node's name in its immediate graph.
	Name string
	// Namespace is the path from the outermost graph to the node.
	Namespace []string
	// Step is the node execution's step in the outermost invocation.
	Step int
	// AttemptIndex is the retry attempt (0 without retry middleware).
	AttemptIndex int
}

// CurrentNode returns the node executing in ctx, if any.
func CurrentNode(ctx context.Context) (NodeInfo, bool) {
	s := scopeFrom(ctx)
	if s == nil || s.node == nil {
		return NodeInfo{}, false
	}
	return NodeInfo{Name: s.node.name, Namespace: slices.Clone(s.fr.namespace(s.node)), Step: s.step}, true
}

// Invoke runs the graph from its entry node on the default state overlaid
// with input (fields set directly, validated against their types). It
// returns when the graph reaches End or fails; observer delivery goes on
// in the background (see [Graph.Drain]).
//
// The error is nil exactly when the outcome is not Errored; when it is
// Errored the error is also Result.Err. Invalid options return a nil
// Result and an error wrapping ErrInvalidOption.
func (g *Graph) Invoke(ctx context.Context, input Update, opts ...InvokeOption) (*Result, error) {
	if g == nil {
		return nil, ErrNilGraph
	}
	var cfg invokeConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	inv := &invocation{g: g, id: cfg.invocationID, corrID: cfg.correlationID, invObs: cfg.observers}
	if inv.id == "" {
		inv.id = g.newID()
	}
	if inv.corrID == "" {
		inv.corrID = g.newID()
	}
	res := &inv.res
	res.InvocationID, res.CorrelationID = inv.id, inv.corrID

	st, err := g.schema.New(input)
	if err != nil {
		res.Status, res.State, res.Err = Errored, g.schema.Defaults(), err
		return res, err
	}

	observed := len(inv.invObs) > 0
	if len(g.graphs) <= len(inv.obsBuf) {
		inv.obs = inv.obsBuf[:len(g.graphs)]
	} else {
		inv.obs = make([][]*observerReg, len(g.graphs))
	}
	for i, gg := range g.graphs {
		inv.obs[i] = *gg.observers.Load()
		observed = observed || len(inv.obs[i]) > 0
	}
	if observed {
		inv.w = g.startWorker(ctx, inv.id)
		defer inv.w.close()
	}

	res.Path = inv.pathBuf[:0]
	fr := &inv.top
	*fr = frame{inv: inv, g: g, obs: inv.obs[0], path: &res.Path}
	inv.root = scopeCtx{Context: ctx, sc: scope{inv: inv, fr: fr}}
	final, err := g.run(&inv.root, fr, st)
	if err != nil {
		res.Status, res.Err = Errored, err
		res.State = st
		if ne, ok := err.(*NodeError); ok {
			res.State = ne.OutermostState()
		}
		return res, err
	}
	res.Status, res.State = Completed, final
	return res, nil
}

// run executes g's nodes from its entry until End.
func (g *Graph) run(ctx context.Context, fr *frame, st State) (State, error) {
	cur := g.nodes[g.entry]
	for {
		if err := ctx.Err(); err != nil {
			return st, fr.fail(errcat.InvocationCancelled, cur, st, "", "", fmt.Errorf("invocation cancelled before node %q: %w", cur.name, err))
		}
		if fr.path != nil {
			*fr.path = append(*fr.path, cur.name)
		}
		var (
			next string
			err  error
		)
		if cur.sub != nil {
			st, next, err = g.stepSubgraph(ctx, fr, cur, st)
		} else {
			st, next, err = g.stepNode(ctx, fr, cur, st)
		}
		if err != nil {
			return st, err
		}
		if next == End {
			return st, nil
		}
		cur = g.nodes[next]
	}
}

func (fr *frame) fail(cat errcat.Category, n *node, st State, field, reducer string, cause error) *NodeError {
	return &NodeError{
		cat: cat, Node: n.name, Namespace: slices.Clone(fr.namespace(n)),
		Field: field, Reducer: reducer, State: st, ParentStates: fr.parentStates, Err: cause,
	}
}

// stepNode runs one function node: started event, body, merge, edge,
// completed event.
func (g *Graph) stepNode(ctx context.Context, fr *frame, n *node, pre State) (State, string, error) {
	inv := fr.inv
	step := inv.step
	inv.step++
	if inv.w != nil {
		fr.emitNode(n, step, PhaseStarted, pre, State{}, nil)
	}
	nctx := &scopeCtx{Context: ctx, sc: scope{inv: inv, fr: fr, node: n, step: step, state: pre}}

	post, next, nerr := g.execute(nctx, fr, n, pre)
	if inv.w != nil {
		if nerr != nil {
			fr.emitNode(n, step, PhaseCompleted, pre, State{}, nerr)
		} else {
			fr.emitNode(n, step, PhaseCompleted, pre, post, nil)
		}
	}
	if nerr != nil {
		return nerr.State, "", nerr
	}
	return post, next, nil
}

func (g *Graph) execute(ctx context.Context, fr *frame, n *node, pre State) (State, string, *NodeError) {
	upd, err := callNode(ctx, n.fn, pre)
	if err != nil {
		return State{}, "", fr.fail(errcat.NodeException, n, pre, "", "", err)
	}
	post, merr := pre.merge(upd)
	if merr != nil {
		return State{}, "", fr.fail(merr.cat, n, pre, merr.Field, merr.Reducer, merr)
	}
	next, nerr := g.route(ctx, fr, n, post)
	if nerr != nil {
		return State{}, "", nerr
	}
	return post, next, nil
}

func callNode(ctx context.Context, fn NodeFunc, s State) (u Update, err error) {
	defer func() {
		if p := recover(); p != nil {
			u, err = nil, newPanicError(p)
		}
	}()
	return fn(ctx, s)
}

func callRoute(ctx context.Context, fn RouteFunc, s State) (dest string, err error) {
	defer func() {
		if p := recover(); p != nil {
			dest, err = "", newPanicError(p)
		}
	}()
	return fn(ctx, s)
}

// route resolves n's outgoing edge against the post-update state.
func (g *Graph) route(ctx context.Context, fr *frame, n *node, post State) (string, *NodeError) {
	e := n.out
	if e == nil {
		return "", fr.fail(errcat.RoutingError, n, post, "", "", fmt.Errorf("node %q has no outgoing edge", n.name))
	}
	if e.route == nil {
		return e.to, nil
	}
	dest, err := callRoute(ctx, e.route, post)
	if err != nil {
		return "", fr.fail(errcat.EdgeException, n, post, "", "", err)
	}
	if dest != End && g.nodes[dest] == nil {
		return "", fr.fail(errcat.RoutingError, n, post, "", "", fmt.Errorf("conditional edge from %q returned %q, which is neither a declared node nor End", n.name, dest))
	}
	return dest, nil
}

// stepSubgraph runs a subgraph node: project in, run the child graph,
// project out through the parent's reducers, route. Subgraph wrappers emit
// no events and take no step.
func (g *Graph) stepSubgraph(ctx context.Context, fr *frame, n *node, pre State) (State, string, error) {
	sub := n.sub
	init, err := projectIn(n, pre)
	if err != nil {
		return pre, "", fr.fail(errcat.StateValidationError, n, pre, "", "", err)
	}
	child := &frame{
		inv:          fr.inv,
		g:            sub,
		prefix:       append(slices.Clip(fr.prefix), n.name),
		parentStates: append(slices.Clip(fr.parentStates), pre),
		obs:          fr.obs,
		fanChain:     append(slices.Clip(fr.fanChain), nil),
		branchChain:  append(slices.Clip(fr.branchChain), nil),
	}
	if own := fr.inv.graphObservers(sub); len(own) > 0 {
		child.obs = append(slices.Clip(fr.obs), own...)
	}
	final, err := sub.run(ctx, child, init)
	if err != nil {
		return pre, "", err
	}
	upd := projectOut(n, final, pre.schema)
	post, merr := pre.merge(upd)
	if merr != nil {
		return pre, "", fr.fail(merr.cat, n, pre, merr.Field, merr.Reducer, merr)
	}
	next, nerr := g.route(ctx, fr, n, post)
	if nerr != nil {
		return post, "", nerr
	}
	return post, next, nil
}

// projectIn builds the subgraph's initial state from its defaults and the
// node's input projection.
func projectIn(n *node, parent State) (State, error) {
	p := &n.proj
	var in Update
	switch {
	case p.declared:
		in = pick(parent, p.in, nil)
	case p.hasInputs:
		in = pick(parent, nil, p.inputs)
	}
	st, err := n.sub.schema.New(in)
	if err != nil {
		return State{}, fmt.Errorf("projecting into subgraph: %w", err)
	}
	return st, nil
}

// projectOut builds the parent update from the subgraph's final state.
func projectOut(n *node, final State, parent *Schema) Update {
	p := &n.proj
	switch {
	case p.declared:
		return pick(final, p.out, nil)
	case p.hasOutputs:
		return pick(final, nil, p.outputs)
	}
	u := make(Update)
	for i, f := range final.schema.fields {
		if parent.Has(f.name) {
			u[f.name] = unwrapList(final.vals[i])
		}
	}
	return u
}

// pick copies fields of src into an update: the same-name fields, and the
// renamed pairs (update field → src field).
func pick(src State, same []string, renamed map[string]string) Update {
	u := make(Update, len(same)+len(renamed))
	for _, f := range same {
		u[f], _ = src.Get(f)
	}
	for dst, from := range renamed {
		u[dst], _ = src.Get(from)
	}
	return u
}

// emitNode queues a node event for the frame's observers.
func (fr *frame) emitNode(n *node, step int, phase Phase, pre, post State, err *NodeError) {
	inv := fr.inv
	ev := &NodeEvent{
		Phase:            phase,
		NodeName:         n.name,
		Namespace:        fr.namespace(n),
		Step:             step,
		PreState:         pre,
		PostState:        post,
		ParentStates:     fr.parentStates,
		FanOutIndexChain: fr.fanChain,
		BranchNameChain:  fr.branchChain,
		InvocationID:     inv.id,
		CorrelationID:    inv.corrID,
	}
	if err != nil {
		ev.Err, ev.ErrorCategory = err, err.cat
	}
	if ev.ParentStates == nil {
		ev.ParentStates = []State{}
	}
	inv.w.emit(queued{ev: ev, phase: phase.bit(), graphs: fr.obs, invoked: inv.invObs})
}
