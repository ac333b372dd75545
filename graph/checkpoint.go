package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/migrate"
)

// WithCheckpointer registers checkpointing (pipeline-utilities §10.1.1):
// the engine saves a checkpoint record to store at every completed node
// event — of the outermost graph, of plain subgraphs and of the nodes
// inside fan-out instances (§10.3) — synchronously, before the next node
// runs, so that [Graph.ResumeCheckpoint] can continue an invocation that
// crashed or failed. Suspension's paused records go to the same store.
// Nodes must be idempotent (§10.5): a node that was running at a crash runs
// again on resume.
//
// A fan-out saves its per-instance progress (§10.11): on resume, instances
// whose contribution was saved are skipped and their contributions merged
// once; the others run again from their subgraph's entry. Parallel
// branches do not save individually: a crash inside a parallel-branches
// node re-runs that node whole on resume.
//
// A failing save fails the node with checkpoint_save_failed, raised to the
// caller (no retry middleware sees it). Both stores of this module keep
// the state as JSON, so every record supports state migration (§10.12.1).
func WithCheckpointer(store checkpoint.Store, opts ...CheckpointOption) CompileOption {
	return func(c *compileConfig) {
		c.checkpoints = store
		c.checkpointing = store != nil
		for _, o := range opts {
			if o != nil {
				o(&c.ckpt)
			}
		}
	}
}

// CheckpointOption configures checkpointing; see [WithCheckpointer].
type CheckpointOption func(*checkpointConfig)

type checkpointConfig struct {
	migrations []migrate.Migration
	flushEvery int
}

// CheckpointMigrations registers checkpoint state migrations
// (pipeline-utilities §10.12). A record saved under another schema version
// than the graph's ([Schema.WithVersion]) is migrated at resume along the
// unique shortest chain of migrations: its state and every parent state,
// in their JSON form. Two migrations of the same version pair fail
// compilation with checkpoint_state_migration_chain_ambiguous; at resume,
// no chain is checkpoint_state_migration_missing, two shortest chains
// checkpoint_state_migration_chain_ambiguous, a failing migration
// checkpoint_state_migration_failed, and a migrated state that does not
// decode checkpoint_record_invalid. Matching versions never consult the
// migrations.
func CheckpointMigrations(ms ...migrate.Migration) CheckpointOption {
	return func(c *checkpointConfig) { c.migrations = append(c.migrations, ms...) }
}

// BatchFanOutSaves batches the saves made from inside fan-out instances
// (pipeline-utilities §10.11.4): only every flushEvery-th of them is
// written, and the fan-out progress the other saves of the invocation
// record is the progress as of the latest flush. Saves of the outermost
// graph and of plain subgraphs and a fan-out node's own completion stay
// synchronous. The cost is re-execution: on resume, instances whose
// completion was not yet flushed run again (their contributions count
// once). flushEvery <= 1 disables batching, the default.
func BatchFanOutSaves(flushEvery int) CheckpointOption {
	return func(c *checkpointConfig) { c.flushEvery = flushEvery }
}

// CheckpointError reports a checkpointing failure: checkpoint_not_found,
// checkpoint_record_invalid or checkpoint_save_failed.
type CheckpointError struct {
	cat          errcat.Category
	InvocationID string
	Err          error
}

// Category returns the error's category.
func (e *CheckpointError) Category() errcat.Category { return e.cat }

// Error formats the failure.
func (e *CheckpointError) Error() string {
	s := fmt.Sprintf("graph: %s: invocation %q", e.cat, e.InvocationID)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Message returns the error's own message.
func (e *CheckpointError) Message() string {
	return fmt.Sprintf("%s: invocation %q", e.cat, e.InvocationID)
}

// Unwrap returns the cause.
func (e *CheckpointError) Unwrap() error { return e.Err }

// Is matches the error's category.
func (e *CheckpointError) Is(target error) bool { return errcat.Matches(e.cat, target) }

// frameworkCat reports categories of the engine's own machinery, which
// fail a composite node even under the Collect policy, unwrapped.
func frameworkCat(c errcat.Category) bool {
	return c.Framework() || strings.HasPrefix(string(c), "checkpoint_")
}

// Fan-out instance states (pipeline-utilities §10.11). They are wire
// identifiers and must not change.
const (
	InstanceNotStarted = "not_started"
	InstanceInFlight   = "in_flight"
	InstanceCompleted  = "completed"
)

// NodePosition is one completed node attempt (pipeline-utilities §10.2).
type NodePosition struct {
	// Namespace is the path of subgraph, fan-out and parallel-branches
	// nodes above the node (empty at the outermost graph).
	Namespace []string `json:"namespace"`
	NodeName  string   `json:"node_name"`
	// Step is the attempt's step, monotonic across the invocation.
	Step         int `json:"step"`
	AttemptIndex int `json:"attempt_index"`
	// FanOutIndex is the innermost enclosing fan-out instance, if any.
	FanOutIndex *int `json:"fan_out_index,omitempty"`
}

// FanOutLineage identifies one enclosing fan-out instance.
type FanOutLineage struct {
	Namespace      []string `json:"namespace"`
	FanOutNodeName string   `json:"fan_out_node_name"`
	FanOutIndex    int      `json:"fan_out_index"`
	// Occurrence is the enclosing fan-out's [FanOutProgress.Occurrence].
	Occurrence int `json:"occurrence,omitempty"`
}

// FanOutProgress is the saved progress of one fan-out in flight
// (pipeline-utilities §10.11), keyed by namespace, node name and
// enclosing lineage — and, for a fan-out nested in a fan-out instance, by
// its occurrence in that instance.
type FanOutProgress struct {
	// Namespace is the path above the fan-out node.
	Namespace      []string `json:"namespace"`
	FanOutNodeName string   `json:"fan_out_node_name"`
	InstanceCount  int      `json:"instance_count"`
	// Occurrence numbers the dispatches of a nested fan-out node within
	// its enclosing instance's run, from 0 (a loop in the instance's
	// subgraph dispatches it again): on resume the progress applies only
	// to the dispatch of the same occurrence, the instance running again
	// from its entry. It is 0 for a fan-out not nested in one, and in
	// records written before the field existed (absent: the first
	// dispatch, as those records were read).
	Occurrence int `json:"occurrence,omitempty"`
	// EnclosingLineage lists the fan-out instances the fan-out runs in,
	// outermost first; empty for a fan-out not nested in one.
	EnclosingLineage []FanOutLineage  `json:"enclosing_fan_out_lineage,omitempty"`
	Instances        []FanOutInstance `json:"instances"`
}

// FanOutInstance is one instance's saved progress.
type FanOutInstance struct {
	// State is InstanceNotStarted, InstanceInFlight or InstanceCompleted.
	State string `json:"state"`
	// Result is a completed instance's contribution: the collect field's
	// value, or with ResultIsError the {"category", "message"} record of a
	// failure the Collect policy recorded.
	Result        json.RawMessage `json:"result,omitempty"`
	ResultIsError bool            `json:"result_is_error"`
	// ExtraOutputs holds a completed instance's extra-output sources.
	ExtraOutputs map[string]json.RawMessage `json:"extra_outputs,omitempty"`
	// CompletedInnerPositions are the inner node attempts an in-flight
	// instance completed (informational: it restarts from its entry).
	CompletedInnerPositions []NodePosition `json:"completed_inner_positions,omitempty"`
}

// CheckpointRecord is a checkpoint record's content (pipeline-utilities
// §10.2) as the engine reads and writes it: [DecodeCheckpoint] opens a
// stored record, [CheckpointRecord.Encode] builds one (for tooling and
// tests that seed a store).
type CheckpointRecord struct {
	InvocationID  string
	CorrelationID string
	SessionID     string
	SchemaVersion string
	SavedAt       time.Time
	// Path names the node each graph level stands at, outermost first:
	// subgraph (or fan-out) nodes, then the node the record was saved at.
	Path []string
	// State is the innermost level's state there; ParentStates the states
	// of the levels above, outermost first (len(Path)-1 of them).
	State        json.RawMessage
	ParentStates []json.RawMessage
	// Rerun says the node at the end of Path runs on resume (it failed, or
	// it is a fan-out in flight); otherwise the run continues after it.
	Rerun              bool
	CompletedPositions []NodePosition
	FanOutProgress     []FanOutProgress
	// Session is what the invocation had loaded of its session when the
	// record was saved, which ResumeCheckpoint rebases the resumed run's
	// writes on; nil for an invocation without a session, and in records
	// written before the field existed (ResumeCheckpoint then guesses it,
	// see [Graph.ResumeCheckpoint]). Builds that predate it ignore it.
	Session *CheckpointSession
}

// CheckpointSession is a checkpoint's record of the session its
// invocation had loaded (or last saved itself), in the coordinates of the
// record's outermost state, by session field name. Its JSON names are
// wire identifiers and must not change.
type CheckpointSession struct {
	// Lists holds, per append-only list field (append, dedupe_append,
	// concat_flatten), how many leading items of the record's list the
	// session stored: the items after them are the invocation's own.
	Lists map[string]int `json:"lists,omitempty"`
	// Values holds, per other field, the hex SHA-256 of the JSON encoding
	// of the value the invocation loaded: a record's value that differs
	// is the invocation's write.
	Values map[string]string `json:"values,omitempty"`
}

// DecodeCheckpoint opens a checkpoint record. A malformed payload fails
// with checkpoint_record_invalid.
func DecodeCheckpoint(r *checkpoint.Record) (*CheckpointRecord, error) {
	invalid := func(err error) (*CheckpointRecord, error) {
		return nil, &CheckpointError{cat: errcat.CheckpointRecordInvalid, InvocationID: r.InvocationID, Err: err}
	}
	if r.Kind != checkpoint.KindCheckpoint {
		return invalid(fmt.Errorf("a %q record is not a checkpoint", r.Kind))
	}
	var d pausedData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		return invalid(fmt.Errorf("malformed checkpoint payload: %w", err))
	}
	if d.Format != pausedFormat || len(d.Positions) == 0 {
		return invalid(fmt.Errorf("malformed checkpoint payload (format %d, %d positions)", d.Format, len(d.Positions)))
	}
	c := &CheckpointRecord{
		InvocationID: r.InvocationID, CorrelationID: r.CorrelationID, SessionID: r.SessionID,
		SchemaVersion: r.SchemaVersion, SavedAt: r.SavedAt, Rerun: d.Rerun,
		CompletedPositions: d.Completed, FanOutProgress: d.FanOut, Session: d.Session,
	}
	for i, p := range d.Positions {
		c.Path = append(c.Path, p.Node)
		if i == len(d.Positions)-1 {
			c.State = p.State
		} else {
			c.ParentStates = append(c.ParentStates, p.State)
		}
	}
	return c, nil
}

// Encode builds the stored record.
func (c *CheckpointRecord) Encode() (checkpoint.Record, error) {
	if len(c.Path) == 0 || len(c.ParentStates) != len(c.Path)-1 {
		return checkpoint.Record{}, fmt.Errorf("%w: a checkpoint needs a path and one parent state per level above the last",
			checkpoint.ErrInvalidRequest)
	}
	d := pausedData{Format: pausedFormat, Rerun: c.Rerun, NodeName: c.Path[len(c.Path)-1], Namespace: c.Path,
		Completed: c.CompletedPositions, FanOut: c.FanOutProgress, Session: c.Session}
	for i, node := range c.Path {
		st := c.State
		if i < len(c.ParentStates) {
			st = c.ParentStates[i]
		}
		d.Positions = append(d.Positions, pausedPosition{Node: node, State: st})
	}
	payload, err := json.Marshal(d)
	if err != nil {
		return checkpoint.Record{}, err
	}
	return checkpoint.Record{
		InvocationID: c.InvocationID, Kind: checkpoint.KindCheckpoint, CorrelationID: c.CorrelationID,
		SessionID: c.SessionID, SchemaVersion: c.SchemaVersion, SavedAt: c.SavedAt, Data: payload,
		CompletedNodeCount: len(c.CompletedPositions),
	}, nil
}

// ckptRun is an invocation's checkpointing state: the completed positions,
// the fan-outs in flight and, on a resumed run, the saved fan-out progress
// not yet re-entered. Its mutex serializes saves, which fan-out instances
// make concurrently.
type ckptRun struct {
	mu        sync.Mutex
	completed []NodePosition
	// fanouts are the fan-outs in flight, in start order: fanouts[0] is
	// the outermost (the resume point of instance-internal saves).
	fanouts []*liveFanOut
	// resume holds a resumed run's saved fan-out progress by key.
	resume map[string]*FanOutProgress
	// pending counts unflushed fan-out internal saves (batching).
	pending   int
	lastSaved time.Time
}

// liveFanOut is a fan-out in flight. With batching, durable is its
// progress as of the latest flush; cur is always up to date.
type liveFanOut struct {
	key          string
	prog         FanOutProgress // identity and count; Instances unused
	cur, durable []FanOutInstance
	// stack is the resume point of a fan-out outside any fan-out instance:
	// the levels above it and the fan-out node with its pre-state.
	stack []position
	// nested is set when the fan-out runs inside a fan-out instance.
	nested bool
}

// instRef is the fan-out instance a frame runs in.
type instRef struct {
	fo *liveFanOut
	i  int
	// dispatches counts the fan-out dispatches of the instance's current
	// run (its subgraph levels included), by fan-out node: the next
	// dispatch's occurrence (guarded by the ckptRun's mutex).
	dispatches map[string]int
}

// restart resets the dispatch counts when the instance's subgraph runs
// (again, under instance middleware retry) from its entry.
func (r *instRef) restart(c *ckptRun) {
	c.mu.Lock()
	r.dispatches = nil
	c.mu.Unlock()
}

func progressKey(ns []string, node string, lineage []FanOutLineage) string {
	type elem struct {
		N []string
		F string
		I int
		O int `json:",omitempty"`
	}
	k := struct {
		N []string
		F string
		L []elem
	}{N: ns, F: node}
	for _, l := range lineage {
		k.L = append(k.L, elem{l.Namespace, l.FanOutNodeName, l.FanOutIndex, l.Occurrence})
	}
	b, _ := json.Marshal(k)
	return string(b)
}

// lineage returns the fan-out instances the frame runs in, outermost
// first.
func (fr *frame) lineage() []FanOutLineage {
	var out []FanOutLineage
	for i, idx := range fr.fanChain {
		if idx != nil {
			out = append(out, FanOutLineage{Namespace: slices.Clone(fr.prefix[:i]), FanOutNodeName: fr.prefix[i], FanOutIndex: *idx})
		}
	}
	return out
}

// inBranch reports whether the frame runs inside a parallel branch, where
// nothing is checkpointed.
func (fr *frame) inBranch() bool {
	return slices.ContainsFunc(fr.branchChain, func(b *string) bool { return b != nil })
}

// stackAt returns the position stack of the frame's levels with node at
// the innermost one.
func (fr *frame) stackAt(node string, st State) []position {
	stack := make([]position, 0, len(fr.prefix)+1)
	for i, name := range fr.prefix {
		stack = append(stack, position{node: name, state: fr.parentStates[i]})
	}
	return append(stack, position{node: node, state: st})
}

// enterFanOut registers a fan-out dispatch with count instances and
// returns its live progress and, on a resumed run, the saved progress of
// the same fan-out in the same enclosing instances and of the same
// occurrence there (consumed: a later dispatch of the node starts
// afresh). It returns nil inside parallel branches.
//
// A fan-out not nested in a fan-out instance is the resume point of the
// record that saved its progress: the resumed run's first dispatch of it
// is the one the progress was saved in. A nested one runs again with its
// enclosing instance, from the instance's entry: its progress applies to
// the dispatch of the saved occurrence, and to no other (one in another
// round of a loop in the instance's subgraph).
func (d *dispatchCtx) enterFanOut(count int) (*liveFanOut, *FanOutProgress) {
	fr, c := d.fr, d.fr.inv.ckpt
	if fr.inBranch() {
		return nil, nil
	}
	fo := &liveFanOut{prog: FanOutProgress{Namespace: slices.Clone(fr.prefix), FanOutNodeName: d.n.name,
		InstanceCount: count, EnclosingLineage: fr.lineage()}}
	if fo.prog.Namespace == nil {
		fo.prog.Namespace = []string{}
	}
	fo.nested = fr.inst != nil
	if !fo.nested {
		fo.stack = fr.stackAt(d.n.name, d.sc.state)
	}
	fo.cur = make([]FanOutInstance, count)
	for i := range fo.cur {
		fo.cur[i].State = InstanceNotStarted
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := fr.inst; r != nil {
		// The enclosing fan-outs' occurrences complete the lineage.
		if up := r.fo.prog.EnclosingLineage; len(fo.prog.EnclosingLineage) == len(up)+1 {
			for k := range up {
				fo.prog.EnclosingLineage[k].Occurrence = up[k].Occurrence
			}
			fo.prog.EnclosingLineage[len(up)].Occurrence = r.fo.prog.Occurrence
		}
		if d.fan != nil {
			// Another attempt of the same dispatch (node retry).
			fo.prog.Occurrence = d.fan.prog.Occurrence
		} else {
			k := progressKey(fo.prog.Namespace, d.n.name, nil)
			if r.dispatches == nil {
				r.dispatches = map[string]int{}
			}
			fo.prog.Occurrence = r.dispatches[k]
			r.dispatches[k]++
		}
	}
	fo.key = progressKey(fo.prog.Namespace, d.n.name, fo.prog.EnclosingLineage)
	saved := c.resume[fo.key]
	if saved != nil && saved.Occurrence != fo.prog.Occurrence {
		// Saved in another dispatch of the node: kept for that one.
		saved = nil
	}
	if saved != nil {
		delete(c.resume, fo.key)
	}
	if saved != nil && saved.InstanceCount == count && len(saved.Instances) <= count {
		for i, in := range saved.Instances {
			if in.State == InstanceCompleted {
				fo.cur[i] = in
			}
		}
	}
	fo.durable = slices.Clone(fo.cur)
	// A retried dispatch replaces the progress of its earlier attempt.
	c.fanouts = slices.DeleteFunc(c.fanouts, func(o *liveFanOut) bool { return o.key == fo.key })
	c.fanouts = append(c.fanouts, fo)
	d.fan = fo
	return fo, saved
}

// leaveFanOut drops a fan-out's progress when its dispatch is over.
func (c *ckptRun) leaveFanOut(fo *liveFanOut) {
	c.mu.Lock()
	c.fanouts = slices.DeleteFunc(c.fanouts, func(o *liveFanOut) bool { return o == fo })
	c.mu.Unlock()
}

// instanceStarted marks the frame's instance in flight at its first inner
// node.
func (fr *frame) instanceStarted() {
	c, r := fr.inv.ckpt, fr.inst
	c.mu.Lock()
	if in := &r.fo.cur[r.i]; in.State == InstanceNotStarted {
		in.State = InstanceInFlight
	}
	c.mu.Unlock()
}

// instanceDone records a finished instance's contribution — its update,
// or under Collect its failure — and saves. A failure that cancels the
// fan-out (FailFast, a framework failure, the invocation cancelled)
// records nothing: the instance stays in flight and runs again on resume.
func (d *dispatchCtx) instanceDone(ctx context.Context, fo *liveFanOut, i int, upd Update, runErr error, extraSrc []string) error {
	f := d.n.fan
	var in FanOutInstance
	switch {
	case runErr == nil:
		raw, err := json.Marshal(unwrapList(upd[f.CollectField]))
		if err != nil {
			return nil // not JSON-encodable: the instance re-runs on resume
		}
		in = FanOutInstance{State: InstanceCompleted, Result: raw}
		for _, sf := range extraSrc {
			raw, err := json.Marshal(unwrapList(upd[sf]))
			if err != nil {
				return nil
			}
			if in.ExtraOutputs == nil {
				in.ExtraOutputs = map[string]json.RawMessage{}
			}
			in.ExtraOutputs[sf] = raw
		}
	case f.ErrorPolicy == Collect && ctx.Err() == nil && !frameworkCat(errcat.Of(runErr)):
		raw, _ := json.Marshal(errorRecord{Category: string(errcat.Of(runErr)), Message: runErr.Error()})
		in = FanOutInstance{State: InstanceCompleted, Result: raw, ResultIsError: true}
	default:
		return nil
	}
	c := d.fr.inv.ckpt
	c.mu.Lock()
	fo.cur[i] = in
	c.mu.Unlock()
	return d.fr.inv.save(ctx, saveReq{internal: true})
}

// errorRecord is a Collect-mode failure as a saved contribution.
type errorRecord struct {
	Category string `json:"category"`
	Message  string `json:"message"`
}

// recordedError is a failure rolled forward from a saved record.
type recordedError struct{ rec errorRecord }

func (e *recordedError) Error() string             { return e.rec.Message }
func (e *recordedError) Category() errcat.Category { return errcat.Category(e.rec.Category) }

// restore decodes a saved completed instance into its unit result.
func restoreInstance(f *FanOut, in FanOutInstance, extraSrc []string) (unitResult, error) {
	if in.ResultIsError {
		var rec errorRecord
		if err := json.Unmarshal(in.Result, &rec); err != nil {
			return unitResult{}, err
		}
		return unitResult{err: &recordedError{rec}, ran: true}, nil
	}
	sub := f.Subgraph.schema
	decode := func(field string, raw json.RawMessage) (any, error) {
		if len(raw) == 0 || string(raw) == "null" {
			return nil, nil // an absent contribution is a null slot
		}
		return decodeValue(sub.Type(field), raw)
	}
	v, err := decode(f.CollectField, in.Result)
	if err != nil {
		return unitResult{}, fmt.Errorf("result: %w", err)
	}
	u := Update{f.CollectField: v}
	for _, sf := range extraSrc {
		if u[sf], err = decode(sf, in.ExtraOutputs[sf]); err != nil {
			return unitResult{}, fmt.Errorf("extra output %q: %w", sf, err)
		}
	}
	return unitResult{upd: u, ran: true}, nil
}

// saveReq is one save. A synchronous save records the stack (with node
// its innermost entry); an internal save (from inside a fan-out instance)
// records the outermost fan-out in flight as the resume point.
type saveReq struct {
	stack    []position
	rerun    bool
	pos      *NodePosition
	internal bool
}

// nodeCompleted saves after node n completed at frame fr with post (the
// edge leads to next).
func (fr *frame) nodeCompleted(ctx context.Context, d *dispatchCtx, post State, next string) error {
	if fr.inBranch() {
		return nil
	}
	n := d.n
	var pos *NodePosition
	if d.stepped { // subgraph wrappers have no event, hence no position
		pos = &NodePosition{Namespace: slices.Clone(fr.prefix), NodeName: n.name, Step: d.step,
			AttemptIndex: d.pAttempt, FanOutIndex: innermost(fr.fanChain)}
		if pos.Namespace == nil {
			pos.Namespace = []string{}
		}
	}
	if r := fr.inst; r != nil {
		c := fr.inv.ckpt
		if pos != nil {
			c.mu.Lock()
			in := &r.fo.cur[r.i]
			in.CompletedInnerPositions = append(in.CompletedInnerPositions, *pos)
			c.mu.Unlock()
		}
		if fr.instTop && next == End {
			return nil // the instance's completion save follows
		}
		return fr.inv.save(ctx, saveReq{internal: true})
	}
	return fr.inv.save(ctx, saveReq{stack: fr.stackAt(n.name, post), pos: pos})
}

// nodeFailed saves after node n failed at a level outside fan-out
// instances: n runs again on resume.
func (fr *frame) nodeFailed(ctx context.Context, n *node, pre State) {
	if fr.inst != nil || fr.inBranch() {
		return
	}
	_ = fr.inv.save(ctx, saveReq{stack: fr.stackAt(n.name, pre), rerun: true})
}

// save writes a checkpoint record. Saves are serialized per invocation.
func (inv *invocation) save(ctx context.Context, r saveReq) error {
	g, c := inv.g, inv.ckpt
	c.mu.Lock()
	defer c.mu.Unlock()
	batching := g.ckptFlushEvery > 1
	if r.internal {
		if len(c.fanouts) == 0 || c.fanouts[0].nested {
			return nil
		}
		top := c.fanouts[0]
		r.stack, r.rerun = top.stack, true
		if batching {
			if c.pending++; c.pending < g.ckptFlushEvery {
				return nil
			}
			c.pending = 0
			for _, fo := range c.fanouts {
				fo.durable = slices.Clone(fo.cur)
			}
		}
	}
	if r.pos != nil {
		c.completed = append(c.completed, *r.pos)
	}
	rec := CheckpointRecord{
		InvocationID: inv.id, CorrelationID: inv.corrID, SessionID: inv.sessionID, SchemaVersion: g.stateVersion(),
		Rerun: r.rerun, CompletedPositions: c.completed,
	}
	if inv.sess != nil {
		rec.Session = inv.sess.checkpointBasis(g.schema)
	}
	for i, p := range r.stack {
		raw, err := p.state.MarshalJSON()
		if err != nil {
			return &CheckpointError{cat: errcat.CheckpointSaveFailed, InvocationID: inv.id, Err: err}
		}
		rec.Path = append(rec.Path, p.node)
		if i == len(r.stack)-1 {
			rec.State = raw
		} else {
			rec.ParentStates = append(rec.ParentStates, raw)
		}
	}
	for _, fo := range c.fanouts {
		p := fo.prog
		p.Instances = fo.cur
		if batching {
			p.Instances = fo.durable
		}
		rec.FanOutProgress = append(rec.FanOutProgress, p)
	}
	// last_saved_at is monotonic per invocation (§10.2).
	now := g.now().UTC()
	if !now.After(c.lastSaved) {
		now = c.lastSaved.Add(time.Microsecond)
	}
	c.lastSaved, rec.SavedAt = now, now
	stored, err := rec.Encode()
	if err == nil {
		err = g.checkpoints.Save(context.WithoutCancel(ctx), stored)
	}
	if err != nil {
		return &CheckpointError{cat: errcat.CheckpointSaveFailed, InvocationID: inv.id, Err: err}
	}
	return nil
}

// checkpointResume saves the checkpoint of a suspended invocation whose
// resume starts: positioned where the resume continues (stack, the paused
// state with the signal's payload; rerun when the suspending node runs
// again), after the completed positions of the invocation's latest
// checkpoint. Without it the latest checkpoint stays the one saved before
// the suspension, and ResumeCheckpoint would run the suspending node (or
// the fan-out or parallel-branches node it suspended in) again even after
// the resumed invocation completed.
func (inv *invocation) checkpointResume(ctx context.Context, stack []position, rerun bool) error {
	stored, err := inv.g.checkpoints.Load(ctx, checkpoint.Key{InvocationID: inv.id, Kind: checkpoint.KindCheckpoint})
	if err == nil {
		if rec, derr := DecodeCheckpoint(stored); derr == nil {
			inv.ckpt.completed = rec.CompletedPositions
		}
	}
	return inv.save(ctx, saveReq{stack: stack, rerun: rerun})
}

// stateVersion is the schema version checkpoint records carry: the
// declared schema's, else the session configuration's.
func (g *Graph) stateVersion() string {
	if g.schema.version != "" || g.sess == nil {
		return g.schema.version
	}
	return g.sess.cfg.SchemaVersion
}

// ResumeCheckpoint continues an invocation from its latest checkpoint
// (pipeline-utilities §10.4): after the last completed node, or at the
// node that failed; a fan-out in flight skips the instances whose
// contribution was saved. The resumed run is a new invocation — a fresh
// invocation id (any WithInvocationID is ignored) — that keeps the
// original correlation and session ids; retry budgets start afresh.
// When the session gained turns after the checkpoint was saved, the
// resumed run's list items (those past what the invocation had loaded,
// as the record says: [CheckpointRecord.Session]) are merged after them
// through the field's reducer; a session field other than an
// append-only list that another invocation changed keeps its stored
// value unless the resumed run writes it, and then, with
// SessionConfig.Optimistic, the write fails with session_write_conflict
// (otherwise the run's value wins), as for a suspension's Resume (see
// [RefuseStaleResume]). A record written before checkpoints recorded
// their session, or one migrated from another schema version, falls back
// to a guess: a list's items past those the checkpoint and the stored
// session begin with (by encoding) are the invocation's own, and its
// other session fields are written as an invocation's are (last write
// wins).
//
// It fails with checkpoint_not_found when the graph has no checkpointer or
// the store has no checkpoint for the id, with the
// checkpoint_state_migration_* categories when the record's schema version
// differs and cannot be migrated (see [CheckpointMigrations]), and with
// checkpoint_record_invalid when the record cannot be read against this
// graph — including a fan-out whose instance count differs from the saved
// one.
func (g *Graph) ResumeCheckpoint(ctx context.Context, invocationID string, opts ...InvokeOption) (*Result, error) {
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
	res := &Result{}
	fail := func(cat errcat.Category, cause error) (*Result, error) {
		err := &CheckpointError{cat: cat, InvocationID: invocationID, Err: cause}
		res.Status, res.Err = Errored, err
		return res, err
	}
	if !g.checkpointing {
		return fail(errcat.CheckpointNotFound, errors.New("the graph has no checkpointer"))
	}
	stored, err := g.checkpoints.Load(ctx, checkpoint.Key{InvocationID: invocationID, Kind: checkpoint.KindCheckpoint})
	if err != nil {
		if errors.Is(err, checkpoint.ErrNotFound) {
			return fail(errcat.CheckpointNotFound, err)
		}
		return fail(errcat.CheckpointRecordInvalid, err)
	}
	rec, err := DecodeCheckpoint(stored)
	if err != nil {
		res.Status, res.Err = Errored, err
		return res, err
	}
	ps := make([]pausedPosition, len(rec.Path))
	for i, node := range rec.Path {
		ps[i] = pausedPosition{Node: node, State: rec.State}
		if i < len(rec.ParentStates) {
			ps[i].State = rec.ParentStates[i]
		}
	}
	migrated := rec.SchemaVersion != g.stateVersion()
	if migrated {
		if err := g.migrateCheckpoint(ps, rec.SchemaVersion); err != nil {
			res.Status, res.Err = Errored, err
			return res, err
		}
	}
	stack, err := g.decodePositions(ps)
	if err != nil {
		return fail(errcat.CheckpointRecordInvalid, err)
	}
	cfg.invocationID, cfg.correlationID, cfg.sessionID = "", rec.CorrelationID, rec.SessionID
	inv, res := g.newInvocation(ctx, cfg)
	defer inv.close()
	inv.ckpt.completed = rec.CompletedPositions
	if len(rec.FanOutProgress) > 0 {
		inv.ckpt.resume = make(map[string]*FanOutProgress, len(rec.FanOutProgress))
		for i := range rec.FanOutProgress {
			p := &rec.FanOutProgress[i]
			inv.ckpt.resume[progressKey(p.Namespace, p.FanOutNodeName, p.EnclosingLineage)] = p
		}
	}
	if cfg.sessionID != "" && g.sess != nil {
		_, at, err := g.sess.load(ctx, g.schema, cfg.sessionID, false)
		if err != nil {
			res.Status, res.State, res.Err = Errored, stack[0].state, err
			return res, err
		}
		// The checkpoint's state is authoritative for the run; the session
		// may have gained turns since it was saved, which the run's writes
		// must build on, not overwrite (as a suspension's resume does).
		rb := g.sess.newCheckpointRebase(g.schema, stack[0].state, at, rec.Session, migrated)
		inv.sess = &binding{s: g.sess, id: cfg.sessionID, inv: inv.id, at: at, check: cfg.check, marks: cfg.marks, hooks: cfg.hooks, rebase: rb}
	}
	final, err := g.resumeRun(&inv.root, inv.topFrame(), stack, !rec.Rerun)
	return g.finish(ctx, inv, res, stack[0].state, final, err)
}

// migrateCheckpoint migrates every position's state (the record state and
// its parent states, which carry the record's version) to the graph's
// schema version.
func (g *Graph) migrateCheckpoint(ps []pausedPosition, from string) error {
	if _, err := g.ckptMigrations.Resolve(from, g.stateVersion()); err != nil {
		return err
	}
	for i := range ps {
		// The state decodes as a session's does (decodeStructural), so
		// one migration serves both and integers stay exact.
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(ps[i].State, &fields); err != nil || fields == nil {
			return &CheckpointError{cat: errcat.CheckpointRecordInvalid, Err: fmt.Errorf("state at node %q is not an object: %v", ps[i].Node, err)}
		}
		st, err := decodeStructuralFields(fields)
		if err != nil {
			return &CheckpointError{cat: errcat.CheckpointRecordInvalid, Err: fmt.Errorf("state at node %q: %w", ps[i].Node, err)}
		}
		out, err := g.ckptMigrations.Apply(st, from, g.stateVersion())
		if err != nil {
			return err
		}
		if ps[i].State, err = json.Marshal(out); err != nil {
			return &CheckpointError{cat: errcat.CheckpointRecordInvalid, Err: fmt.Errorf("migrated state at node %q: %w", ps[i].Node, err)}
		}
	}
	return nil
}

// decodePositions rebuilds a position stack (outermost first) against
// this compiled graph.
func (g *Graph) decodePositions(ps []pausedPosition) ([]position, error) {
	stack := make([]position, len(ps))
	at := g
	for i, p := range ps {
		n := at.nodes[p.Node]
		if n == nil || (i < len(ps)-1 && n.sub == nil) {
			return nil, fmt.Errorf("positioned at node %q, which this graph does not have", p.Node)
		}
		st, err := at.schema.DecodeState(p.State)
		if err != nil {
			return nil, fmt.Errorf("state at node %q: %w", p.Node, err)
		}
		stack[i] = position{node: p.Node, state: st}
		at = n.sub
	}
	return stack, nil
}
