package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
)

// SuspendOption configures a suspension.
type SuspendOption func(*suspendSignal)

// RerunOnResume suspends without marking the node completed
// (mark_node_completed=false): on resume the node body runs again, on the
// state with the signal payload applied. The body must be re-entrant.
func RerunOnResume() SuspendOption {
	return func(s *suspendSignal) { s.rerun = true }
}

// OnPersistFailed calls fn when persisting the suspension fails and
// nothing was stored from which the invocation could be resumed: a
// caller keeping state of its own for the suspension outside the
// graph's stores (an upstream's checkpoint) releases it there. The
// invocation's outcome is then an error (suspension_persistence_failed,
// invocation_cancelled, or the session check's), and fn runs on the
// invocation's goroutine before Invoke returns, with the invocation's
// context (Invoke's, without its cancellation: the write may have
// failed because it was cancelled).
//
// fn is not called when the outcome of the write is unknown: when the
// store failed to write the session and the paused record in one
// transaction (a checkpoint.SessionWriter), which may have committed,
// unless it reported a write conflict; or when the paused record's save
// failed after the session's write. Nor is it called for a resumed run
// that suspends again (its failed write leaves the paused record it
// resumed, from which the invocation can still be resumed), nor on a
// graph with a checkpointer (WithCheckpointer: its checkpoints can).
func OnPersistFailed(fn func(ctx context.Context)) SuspendOption {
	return func(s *suspendSignal) { s.persistFailed = fn }
}

// Suspend pauses the invocation at the calling node until a signal
// arrives (suspension §3): the engine persists a paused-invocation record
// and returns a Suspended outcome carrying the descriptor; a later
// [Graph.Resume] with the signal's payload continues the invocation.
//
// On success Suspend does not return. It records the suspension in the
// node's context, where the engine finds it whatever the node does next,
// and unwinds the node body and the middleware around it with a private
// panic the engine recovers: deferred calls run, code after Suspend and
// middleware code after next() do not. User code must not recover that
// panic; if it does, the invocation suspends anyway when the node
// returns.
//
// Suspend returns an error — category suspension_in_unsupported_context —
// when called outside a node body: outside an invocation, from
// middleware, an edge or a branch condition, or inside a fan-out instance
// or parallel branch whose node uses the Collect error policy.
func Suspend(ctx context.Context, d SignalDescriptor, opts ...SuspendOption) error {
	sc := scopeFrom(ctx)
	switch {
	case sc == nil:
		return unsupported("Suspend called outside an invocation")
	case sc.d == nil || !sc.d.inBody.Load():
		return unsupported("Suspend called outside a node body (from middleware, an edge or a condition)")
	case sc.fr.noSuspend != "":
		return unsupported("Suspend called inside " + sc.fr.noSuspend)
	}
	sig := &suspendSignal{desc: d, owner: sc.d}
	for _, o := range opts {
		if o != nil {
			o(sig)
		}
	}
	sc.d.suspended = sig
	panic(sig)
}

func unsupported(msg string) error {
	return errcat.New(errcat.SuspensionInUnsupportedContext, "graph: "+msg)
}

// suspendSignal unwinds a suspending node and travels up the dispatch
// levels, collecting one position per level, to the outermost frame.
type suspendSignal struct {
	desc  SignalDescriptor
	rerun bool
	// persistFailed is OnPersistFailed's fn.
	persistFailed func(context.Context)
	// owner is the dispatch whose node suspends (its event pair ends in
	// suspended).
	owner *dispatchCtx
	// stack holds the paused positions, innermost first.
	stack []position
	// node and namespace identify the suspending node.
	node      string
	namespace []string
}

func (s *suspendSignal) Error() string { return "graph: invocation suspended" }

// position is where one graph level is paused: the node (a subgraph node
// for outer levels) and that graph's state when it dispatched the node.
type position struct {
	node  string
	state State
}

// suspendedAt handles a suspension reaching dispatch level d: the owning
// dispatch emits its suspended event; every level records its position.
// At the outermost frame the signal becomes the dispatch's result;
// elsewhere it keeps unwinding.
func (fr *frame) suspendedAt(n *node, pre State, d *dispatchCtx, sig *suspendSignal) error {
	if d != nil && sig.owner == d {
		sig.node, sig.namespace = n.name, slices.Clone(fr.namespace(n))
		d.emitSuspended(sig.desc)
	}
	sig.stack = append(sig.stack, position{node: n.name, state: pre})
	if fr.path != nil {
		return sig
	}
	panic(sig)
}

// emitSuspended ends the current attempt with a suspended event.
func (d *dispatchCtx) emitSuspended(desc SignalDescriptor) {
	d.pending = false
	dd := desc
	d.fr.emitNodeEvent(d.n, &NodeEvent{
		Phase: PhaseSuspended, NodeName: d.n.name, Step: d.step, PreState: d.curState,
		AttemptIndex: d.curAttempt, Descriptor: &dd, FanOutConfig: d.curFan, ParallelBranchesConfig: d.curPar,
		Metadata: d.cell.load(),
	})
}

// rethrowSuspend re-raises a suspension recovered from a unit goroutine
// (fan-out instance, branch) at the composite node's level: the composite
// node becomes the suspending node, and the unit's index or branch name
// is added to the descriptor's metadata (suspension §8.2, §8.3).
func (d *dispatchCtx) rethrowSuspend(sig *suspendSignal, key string, val any) {
	desc := sig.desc
	desc.Metadata = maps.Clone(desc.Metadata)
	if desc.Metadata == nil {
		desc.Metadata = map[string]any{}
	}
	desc.Metadata[key] = val
	panic(&suspendSignal{desc: desc, rerun: sig.rerun, persistFailed: sig.persistFailed, owner: d})
}

// recoverSuspend turns a suspension panic in a unit goroutine into an
// error, so that it reaches the composite node's goroutine.
func recoverSuspend(err *error) {
	if p := recover(); p != nil {
		if sig, ok := p.(*suspendSignal); ok {
			*err = sig
			return
		}
		panic(p)
	}
}

// Suspension describes a Suspended outcome (suspension §5).
type Suspension struct {
	// Descriptor is what the invocation waits for.
	Descriptor SignalDescriptor
	// NodeName is the suspending node's name in its immediate graph;
	// Namespace its full path. SuspendingNode is the outermost graph's
	// node on that path (a subgraph, fan-out or parallel-branches node
	// when the suspension came from inside one).
	NodeName       string
	Namespace      []string
	SuspendingNode string
	// RerunOnResume reports that the node runs again on resume
	// (mark_node_completed=false).
	RerunOnResume bool
}

// WithCheckpointStore sets the store for paused-invocation records (and,
// later, checkpoints). The default is an in-memory store private to the
// compiled graph, so only the same process can resume; give every worker
// the same durable store to resume anywhere.
func WithCheckpointStore(s checkpoint.Store) CompileOption {
	return func(c *compileConfig) { c.checkpoints = s }
}

// pausedData is the engine payload of a paused-invocation record.
type pausedData struct {
	Format int    `json:"format"`
	Graph  string `json:"graph,omitempty"` // the writing graph's name (WithName)
	// Token identifies the suspension (a resumed run that suspends again
	// writes a new one), so that a resume ending never consumes a
	// suspension another resume of the invocation wrote meanwhile.
	// Records written before it existed have none. It is encoded before
	// the positions, so that pausedToken reads only the record's head.
	Token      string           `json:"token,omitempty"`
	Positions  []pausedPosition `json:"positions"` // outermost first
	Descriptor SignalDescriptor `json:"descriptor"`
	Rerun      bool             `json:"rerun_on_resume"`
	NodeName   string           `json:"node_name"`
	Namespace  []string         `json:"namespace"`
	Completed  []NodePosition   `json:"completed_positions"`
	FanOut     []FanOutProgress `json:"fan_out_progress,omitempty"`
	// Session is a checkpoint record's CheckpointRecord.Session (absent
	// from suspension records and from checkpoints written before it
	// existed; the format stays 1, so older builds still read records
	// that carry it).
	Session *CheckpointSession `json:"session_basis,omitempty"`
	// SessionLists, in a suspension record of format
	// pausedFormatSessionLists, holds per append-only session list field
	// how many items the outermost paused state holds: the first that
	// many of the session's, which the suspension stored with the record.
	// The record's state holds the field empty.
	SessionLists map[string]int `json:"session_lists,omitempty"`
}

type pausedPosition struct {
	Node  string          `json:"node"`
	State json.RawMessage `json:"state"`
}

const pausedFormat = 1

// pausedFormatSessionLists is the format of a suspension record whose
// outermost state leaves its session lists to the session
// (pausedData.SessionLists): a build that reads format 1 only refuses it
// (suspension_record_invalid) rather than resume without the history.
const pausedFormatSessionLists = 2

// suspend persists a suspension (the session first, then the paused
// record, so that no paused record exists without its session state) and
// fills the Suspended result.
func (g *Graph) suspend(ctx context.Context, inv *invocation, sig *suspendSignal, res *Result) error {
	slices.Reverse(sig.stack) // outermost first
	if inv.sess != nil && inv.sess.rebase != nil {
		// A resumed run whose session moved on suspends again: the paused
		// state is the session as stored plus what the run added.
		sig.stack[0].state = inv.sess.rebase.apply(sig.stack[0].state)
	}
	outer := sig.stack[0].state
	var lists map[string]int
	if inv.sess != nil {
		// The session write below stores the paused state's session
		// fields with the record (in one transaction, or first): the
		// record names how many items of each append-only session list
		// the paused state holds instead of holding them, so that a
		// suspension costs what the turn adds, not the history. The
		// resume takes them from the session. The result reports outer,
		// partial when the run loaded its session by its tail, as Start
		// is (Result.SessionOffsets).
		sig.stack[0].state, lists = inv.sess.pausedState(outer)
	}
	res.Status, res.State = Suspended, outer
	res.Suspension = &Suspension{
		Descriptor: sig.desc, NodeName: sig.node, Namespace: sig.namespace,
		SuspendingNode: sig.stack[0].node, RerunOnResume: sig.rerun,
	}
	data := pausedData{Format: pausedFormat, Graph: g.name, Descriptor: sig.desc, Rerun: sig.rerun, NodeName: sig.node, Namespace: sig.namespace,
		Token: g.newID()}
	if len(lists) > 0 {
		data.Format, data.SessionLists = pausedFormatSessionLists, lists
	}
	for _, p := range sig.stack {
		raw, err := p.state.MarshalJSON()
		if err != nil {
			return g.persistFailed(ctx, inv, sig, res, fmt.Errorf("encoding the paused state: %w", err), true)
		}
		data.Positions = append(data.Positions, pausedPosition{Node: p.node, State: raw})
	}
	if !sig.rerun {
		data.Completed = append(data.Completed, NodePosition{Namespace: sig.namespace, NodeName: sig.node})
	}
	payload, err := json.Marshal(data)
	if err != nil {
		return g.persistFailed(ctx, inv, sig, res, fmt.Errorf("encoding the paused record: %w", err), true)
	}
	if inv.resumeKey != nil && !g.stillPaused(ctx, inv) {
		// Another resume of the invocation ended it, or suspended it
		// anew, while this one ran: this suspension must not replace
		// that outcome.
		err := &SuspensionError{cat: errcat.SuspensionRecordInvalid, InvocationID: inv.id,
			Err: errors.New("the resume was completed by another worker")}
		res.Status, res.Err, res.Suspension = Errored, err, nil
		return err
	}
	rec := checkpoint.Record{
		InvocationID: inv.id, Kind: checkpoint.KindSuspended, CorrelationID: inv.corrID,
		SessionID: inv.sessionID, SignalID: sig.desc.SignalID, Data: payload, CompletedNodeCount: len(data.Completed),
	}
	if g.sess != nil {
		rec.SchemaVersion = g.sess.cfg.SchemaVersion
	}
	if inv.sess != nil {
		// One transaction for both when the store can: no crash can leave
		// a session holding a suspended turn without its paused record.
		if sw := g.sessionWriter(); sw != nil {
			inv.sess.forceWrite = true
			// unsent: the store holds nothing of this write (it never
			// got it, or refused it as a conflict); otherwise a failed
			// transaction may still have committed.
			unsent := true
			err := inv.sess.write(ctx, outer, true, res.Suspension, func(w *sessionWrite) (session.WriteResult, error) {
				wr, err := sw.WriteSuspended(ctx, checkpoint.SuspendWrite{Save: w.save, Append: w.appendReq, Record: rec})
				unsent = err != nil && errors.Is(err, session.ErrWriteConflict)
				return wr, err
			})
			if err != nil {
				return g.persistFailed(ctx, inv, sig, res, err, unsent)
			}
			return nil
		}
		// Otherwise the session first: a crash in between leaves a
		// session without a paused record, never the reverse.
		if err := inv.sess.write(ctx, outer, true, res.Suspension, func(w *sessionWrite) (session.WriteResult, error) {
			if w.appendReq != nil {
				return inv.sess.s.appender.Append(ctx, *w.appendReq)
			}
			return inv.sess.s.cfg.Store.Save(ctx, *w.save)
		}); err != nil {
			// The paused record, written only after the session, is not:
			// nothing can resume the invocation.
			return g.persistFailed(ctx, inv, sig, res, err, true)
		}
	}
	if err := g.checkpoints.Save(ctx, rec); err != nil {
		// The store may have saved the record all the same.
		return g.persistFailed(ctx, inv, sig, res, err, false)
	}
	return nil
}

// persistFailed fails a suspension whose persistence failed with cause.
// lost reports that nothing was stored from which the invocation could be
// resumed: sig's OnPersistFailed callback is called then, unless the
// invocation is a resumed run (the paused record it resumed stays) or
// the graph checkpoints (its checkpoint stays).
func (g *Graph) persistFailed(ctx context.Context, inv *invocation, sig *suspendSignal, res *Result, cause error, lost bool) error {
	var err error = &SuspensionError{cat: errcat.SuspensionPersistenceFailed, InvocationID: res.InvocationID, Err: cause}
	if ctx.Err() != nil {
		// The caller's cancellation or deadline ended the write, not a
		// failing store: the invocation was cancelled (retryable), not a
		// session that cannot go on.
		err = errcat.Wrap(errcat.InvocationCancelled, "graph: the invocation was cancelled while its suspension was persisted", cause)
	}
	if cerr, ok := unwrapCheck(cause); ok {
		// The session check refused the suspended state: nothing stored.
		err = cerr
		res.State = res.Start
	}
	res.Status, res.Err, res.Suspension = Errored, err, nil
	if lost && sig.persistFailed != nil && inv.resumeKey == nil && !g.checkpointing {
		sig.persistFailed(context.WithoutCancel(ctx))
	}
	return err
}

// SuspensionError reports a failure of the suspension machinery:
// suspension_persistence_failed, suspension_record_invalid or
// suspension_resume_payload_invalid.
type SuspensionError struct {
	cat          errcat.Category
	InvocationID string
	// Field names the offending payload field, for
	// suspension_resume_payload_invalid.
	Field string
	Err   error
}

// Category returns the error's category.
func (e *SuspensionError) Category() errcat.Category { return e.cat }

// Error formats the failure.
func (e *SuspensionError) Error() string {
	s := fmt.Sprintf("graph: %s: invocation %q", e.cat, e.InvocationID)
	if e.Field != "" {
		s += fmt.Sprintf(" (field %q)", e.Field)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Message returns the error's own message.
func (e *SuspensionError) Message() string {
	var pe *PayloadError
	if errors.As(e.Err, &pe) {
		return pe.Error()
	}
	return fmt.Sprintf("%s: invocation %q", e.cat, e.InvocationID)
}

// Unwrap returns the cause.
func (e *SuspensionError) Unwrap() error { return e.Err }

// Is matches the error's category.
func (e *SuspensionError) Is(target error) bool { return errcat.Matches(e.cat, target) }

// Resume continues a suspended invocation (suspension §7) with the
// signal's payload: each payload field overwrites the state field of the
// same name (reducers are not consulted; undeclared fields are dropped),
// then execution continues after the suspending node — or re-runs it if
// it suspended with [RerunOnResume]. The invocation keeps its invocation,
// correlation and session ids. The options may add observers; ids given
// in them are ignored.
//
// It fails with suspension_record_invalid when no paused record exists
// for the id (never suspended, already resumed, completed or errored), and
// with suspension_resume_payload_invalid when a payload value does not fit
// its field's type; the record then stays, so a corrected resume can
// follow.
//
// The paused record stays until the resumed run ends: a crash mid-resume
// leaves it, so the resume can be retried. A completed run deletes it —
// together with the session write, in one transaction, when the store is a
// checkpoint.SessionWriter — and an errored run retires it. A resume
// whose context is cancelled before the record is read fails with
// invocation_cancelled and leaves the record. Of concurrent resumes of one
// invocation on one Graph only the first runs: the others fail at once
// with suspension_record_invalid wrapping [ErrResumeUnderWay], running
// and writing nothing. Across graphs and processes every resume may
// execute, but only the first to end takes effect: a resume that ends
// after another one ended the invocation or suspended it anew leaves the
// other's outcome — its paused record included — as it is (one that
// completes or suspends again fails with suspension_record_invalid; one
// that fails keeps its error but retires nothing).
// (Each suspension carries a token the ending resume checks just before
// it writes; the store offers no compare-and-write, so two resumes ending
// within that instant can still both write.)
//
// With a checkpointer ([WithCheckpointer]) the resume first saves the
// invocation's checkpoint at the resume point — the paused state with the
// payload, after the suspending node (or at it, for [RerunOnResume]) — so
// that [Graph.ResumeCheckpoint] continues from there and never runs the
// suspension again; if that save fails the resume fails with
// checkpoint_save_failed and the paused record stays.
func (g *Graph) Resume(ctx context.Context, invocationID string, payload Update, opts ...InvokeOption) (*Result, error) {
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
	res := &Result{InvocationID: invocationID}
	if _, busy := g.resuming.LoadOrStore(invocationID, struct{}{}); busy {
		// Another resume of the invocation runs in this process: it
		// consumes the paused record (completing, failing or suspending
		// again), so this one, a duplicate, must neither run nor write.
		err := &SuspensionError{cat: errcat.SuspensionRecordInvalid, InvocationID: invocationID, Err: ErrResumeUnderWay}
		res.Status, res.Err = Errored, err
		return res, err
	}
	defer g.resuming.Delete(invocationID)
	p, err := g.pausedResume(ctx, invocationID, payload)
	if err != nil {
		res.Status, res.Err = Errored, err
		return res, err
	}
	rec, data, stack, key := p.rec, p.data, p.stack, p.key
	res.CorrelationID = rec.CorrelationID
	stack[0].state = p.state
	// The record stays until the resumed run commits: a crash mid-resume
	// leaves it for a retry, and of two concurrent resumes only the first
	// to commit succeeds (see commitResume).
	cfg.invocationID, cfg.correlationID, cfg.sessionID = rec.InvocationID, rec.CorrelationID, rec.SessionID
	cfg.resumed = true
	inv, res := g.newInvocation(ctx, cfg)
	defer inv.close()
	inv.resumeKey, inv.resumeToken = &key, data.Token
	if len(data.SessionLists) > 0 && (cfg.sessionID == "" || g.sess == nil) {
		// Only a graph with sessions writes such a record, for an
		// invocation bound to one: without one, nothing holds the
		// history (and no checkpoint may be written from the state
		// without it).
		err := &SuspensionError{cat: errcat.SuspensionRecordInvalid, InvocationID: invocationID,
			Err: errors.New("the paused record leaves its history to a session, and the resume has none")}
		res.Status, res.State, res.Err = Errored, stack[0].state, err
		return res, err
	}
	if cfg.sessionID != "" && g.sess != nil {
		// The paused state is authoritative; the session record only
		// supplies the version the save at End builds on.
		_, at, err := g.sess.load(ctx, g.schema, cfg.sessionID, false)
		if err != nil {
			res.Status, res.State, res.Err = Errored, stack[0].state, err
			return res, err
		}
		if len(data.SessionLists) > 0 {
			if !at.exists && cfg.refuseStale {
				res.State = stack[0].state
				return g.staleResume(ctx, key, res)
			}
			if err := g.withSessionLists(p, at); err != nil {
				res.Status, res.State, res.Err = Errored, stack[0].state, err
				return res, err
			}
			stack[0].state = p.state
		}
		rb := g.sess.newRebase(g.schema, p.outer, at)
		if cfg.refuseStale && (rb.stale() || !at.exists) {
			res.State = stack[0].state
			return g.staleResume(ctx, key, res)
		}
		inv.sess = &binding{s: g.sess, id: cfg.sessionID, inv: inv.id, at: at, check: cfg.check, marks: cfg.marks, hooks: cfg.hooks, rebase: rb, resumed: true}
	}
	if inv.ckpt != nil {
		// The signal arrived: the invocation's checkpoint moves to the
		// resume point, so that ResumeCheckpoint never runs the suspension
		// again (nor a fan-out it ended) once the resume has started.
		if err := inv.checkpointResume(ctx, stack, data.Rerun); err != nil {
			res.Status, res.State, res.Err = Errored, stack[0].state, err
			return res, err
		}
	}
	fr := inv.topFrame()
	final, err := g.resumeRun(&inv.root, fr, stack, !data.Rerun)
	return g.finish(ctx, inv, res, stack[0].state, final, err)
}

// pausedRun is a paused invocation read for a resume, its payload
// checked and overlaid.
type pausedRun struct {
	rec   *checkpoint.Record
	data  pausedData
	stack []position
	key   checkpoint.Key
	outer State // the paused outermost state
	state State // outer with the payload overlaid
	// payload is the resume's payload, by field, as overlaid.
	payload Update
}

// pausedResume loads invocationID's paused record and checks payload
// against it: the suspension's PayloadSchema, then the state fields it
// sets. Errors are *SuspensionError: suspension_record_invalid (no such
// record, or a malformed one) or suspension_resume_payload_invalid;
// or, when ctx ended before the record was read, an error of category
// invocation_cancelled.
func (g *Graph) pausedResume(ctx context.Context, invocationID string, payload Update) (*pausedRun, error) {
	invalid := func(cat errcat.Category, field string, cause error) (*pausedRun, error) {
		return nil, &SuspensionError{cat: cat, InvocationID: invocationID, Field: field, Err: cause}
	}
	key := checkpoint.Key{InvocationID: invocationID, Kind: checkpoint.KindSuspended}
	rec, err := g.checkpoints.Load(ctx, key)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, checkpoint.ErrNotFound) {
			// The caller gave up (cancelled, deadline): the record was not
			// read, not found invalid, and a retry can still resume it.
			return nil, errcat.Wrap(errcat.InvocationCancelled,
				fmt.Sprintf("graph: the resume of invocation %q was cancelled before its paused record was read", invocationID), err)
		}
		return invalid(errcat.SuspensionRecordInvalid, "", err)
	}
	var data pausedData
	if err := json.Unmarshal(rec.Data, &data); err != nil || (data.Format != pausedFormat && data.Format != pausedFormatSessionLists) ||
		len(data.Positions) == 0 || (data.Format == pausedFormatSessionLists) != (len(data.SessionLists) > 0) {
		return invalid(errcat.SuspensionRecordInvalid, "", fmt.Errorf("malformed paused record (format %d): %v", data.Format, err))
	}
	if data.Graph != "" && data.Graph != g.name {
		// Another graph's suspension in a shared store (another agent's
		// turn): its state and nodes are not this graph's to run. A
		// record without a name (written before records carried one) is
		// resumed by any graph, as it was then.
		return invalid(errcat.SuspensionRecordInvalid, "", fmt.Errorf("%w: it is graph %q's, not %q's", ErrOtherGraph, data.Graph, g.name))
	}
	stack, err := g.decodePositions(data.Positions)
	if err != nil {
		return invalid(errcat.SuspensionRecordInvalid, "", err)
	}
	if len(data.Descriptor.PayloadSchema) > 0 {
		if err := g.payloads.validatePayload(data.Descriptor.PayloadSchema, payload); err != nil {
			field := ""
			var pe *PayloadError
			if errors.As(err, &pe) {
				field = pe.Path
			}
			return invalid(errcat.SuspensionResumePayloadInvalid, field, err)
		}
	}
	// Shallow overlay of the payload on the outermost state (suspension §6).
	outer := stack[0].state
	vals := slices.Clone(outer.vals)
	for _, k := range sortedKeys(payload) {
		i, ok := g.schema.index[k]
		if !ok {
			continue // undeclared fields are dropped
		}
		v, err := g.schema.fields[i].typ.Check(payload[k])
		if err != nil {
			return invalid(errcat.SuspensionResumePayloadInvalid, k, err)
		}
		vals[i] = v
	}
	return &pausedRun{rec: rec, data: data, stack: stack, key: key, outer: outer, state: State{schema: g.schema, vals: vals}, payload: payload}, nil
}

// withSessionLists puts back into p's paused states the session list
// items its record left to the session (pausedData.SessionLists), from
// at, the session loaded whole; the fields the payload set keep the
// payload's value in the resumed state. It fails with
// suspension_record_invalid when the session does not hold them.
func (g *Graph) withSessionLists(p *pausedRun, at loaded) error {
	if len(p.data.SessionLists) == 0 {
		return nil
	}
	invalid := func(err error) error {
		return &SuspensionError{cat: errcat.SuspensionRecordInvalid, InvocationID: p.rec.InvocationID, Err: err}
	}
	outer, err := g.sess.pausedLists(p.outer, at, p.data.SessionLists, nil)
	if err != nil {
		return invalid(err)
	}
	state, err := g.sess.pausedLists(p.state, at, p.data.SessionLists, func(name string) bool {
		_, set := p.payload[name]
		return set
	})
	if err != nil {
		return invalid(err)
	}
	p.outer, p.state = outer, state
	return nil
}

// CheckResume reports whether [Graph.Resume] would accept payload for
// invocationID, without resuming anything: the paused record exists and
// is readable, and the payload fits the suspension's PayloadSchema and
// the state fields it sets. The errors are Resume's:
// suspension_record_invalid or suspension_resume_payload_invalid
// (*SuspensionError), or invocation_cancelled when ctx ended first. A caller that records a resume (a run record, an
// audit entry) checks first, so that a refused payload records nothing.
// It is a check at one instant: a concurrent resume or supersession can
// still make the resume fail.
func (g *Graph) CheckResume(ctx context.Context, invocationID string, payload Update) error {
	if g == nil {
		return ErrNilGraph
	}
	_, err := g.pausedResume(ctx, invocationID, payload)
	return err
}

// sessionWriter returns the checkpoint store as a SessionWriter when it
// writes the graph's own session store.
func (g *Graph) sessionWriter() checkpoint.SessionWriter {
	if g.sess == nil {
		return nil
	}
	if sw, ok := g.checkpoints.(checkpoint.SessionWriter); ok && sw.SessionStore() == g.sess.cfg.Store {
		return sw
	}
	return nil
}

// commitResume ends a resumed run that completed: it saves the session and
// deletes the paused record — in one transaction when the store can — so
// that the resume takes effect exactly once. A record already gone means
// another worker completed this resume first: the outcome is then
// suspension_record_invalid and this run's session state is not written.
func (g *Graph) commitResume(ctx context.Context, inv *invocation, final State) error {
	key := *inv.resumeKey
	gone := func(err error) error {
		return &SuspensionError{cat: errcat.SuspensionRecordInvalid, InvocationID: key.InvocationID,
			Err: fmt.Errorf("the resume was completed by another worker: %w", err)}
	}
	if !g.stillPaused(ctx, inv) {
		// Another resume ended the invocation or suspended it anew: write
		// nothing (a check before the writes below, which cannot compare).
		return gone(checkpoint.ErrNotFound)
	}
	if inv.sess != nil && !g.sess.cfg.DisableAutoSave {
		if sw := g.sessionWriter(); sw != nil {
			inv.sess.forceWrite = true
			err := inv.sess.write(ctx, final, true, nil, func(w *sessionWrite) (session.WriteResult, error) {
				return sw.WriteResumed(ctx, checkpoint.ResumeWrite{Save: w.save, Append: w.appendReq, Key: key})
			})
			if err != nil && errors.Is(err, checkpoint.ErrNotFound) {
				return gone(err)
			}
			if cerr, ok := unwrapCheck(err); ok {
				return cerr
			}
			return err
		}
		if err := inv.sess.save(ctx, final, true); err != nil {
			if cerr, ok := unwrapCheck(err); ok {
				return cerr
			}
			return err
		}
	}
	taken, err := g.checkpoints.Take(ctx, key)
	if err != nil {
		if errors.Is(err, checkpoint.ErrNotFound) {
			return gone(err)
		}
		return &SuspensionError{cat: errcat.SuspensionPersistenceFailed, InvocationID: key.InvocationID, Err: err}
	}
	if pausedToken(taken) != inv.resumeToken {
		// Another resume suspended the invocation anew after the check
		// above: put its record back.
		_ = g.checkpoints.Save(context.WithoutCancel(ctx), *taken)
		return gone(checkpoint.ErrNotFound)
	}
	return nil
}

// pausedToken returns the suspension token of a paused record ("" when
// it has none or cannot be read).
func pausedToken(r *checkpoint.Record) string {
	// The token precedes the positions (the paused states, as long as
	// the history they hold): read the record's members up to it only.
	dec := json.NewDecoder(bytes.NewReader(r.Data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return ""
		}
		if k == "token" {
			var tok string
			if dec.Decode(&tok) != nil {
				return ""
			}
			return tok
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}

// stillPaused reports whether the paused record a resumed run continues is
// still the one it loaded: no other resume of the invocation has ended it
// or suspended it anew. A store failure answers true (the writes that
// follow report it).
func (g *Graph) stillPaused(ctx context.Context, inv *invocation) bool {
	rec, err := g.checkpoints.Load(context.WithoutCancel(ctx), *inv.resumeKey)
	if err != nil {
		return !errors.Is(err, checkpoint.ErrNotFound)
	}
	return pausedToken(rec) == inv.resumeToken
}

// retireResumed deletes the paused record of a resumed run that errored,
// unless another resume of the invocation has replaced it meanwhile with
// a suspension of its own.
func (g *Graph) retireResumed(ctx context.Context, inv *invocation) {
	ctx = context.WithoutCancel(ctx)
	if rec, err := g.checkpoints.Load(ctx, *inv.resumeKey); err != nil || pausedToken(rec) != inv.resumeToken {
		return // gone, replaced, or unreadable: nothing of this run's to retire
	}
	_ = g.checkpoints.Delete(ctx, *inv.resumeKey)
}

// resumeRun continues a paused level: finishing the subgraph node it is
// paused in, or routing on from (or re-running) the suspending node.
func (g *Graph) resumeRun(ctx context.Context, fr *frame, stack []position, completed bool) (_ State, err error) {
	p := stack[0]
	n := g.nodes[p.node]
	st := p.state
	if len(stack) == 1 {
		if !completed {
			return g.runFrom(ctx, fr, n, st)
		}
		next, rerr := g.route(ctx, fr, n, st)
		if rerr != nil {
			return rerr.State, rerr
		}
		if next == End {
			return st, nil
		}
		return g.runFrom(ctx, fr, g.nodes[next], st)
	}
	// Paused inside subgraph node n: resume the subgraph, then finish n's
	// dispatch (projection out, merge, edge) and continue.
	defer func() {
		if pv := recover(); pv != nil {
			sig, ok := pv.(*suspendSignal)
			if !ok {
				panic(pv)
			}
			err = fr.suspendedAt(n, st, nil, sig)
		}
	}()
	final, err := n.sub.resumeRun(ctx, fr.child(n.sub, n.name, st, nil, nil), stack[1:], completed)
	if err != nil {
		return st, err
	}
	post, merr := st.merge(projectOut(n, final, st.schema))
	if merr != nil {
		ne := fr.fail(merr.cat, n, st, merr)
		return st, ne
	}
	next, rerr := g.route(ctx, fr, n, post)
	if rerr != nil {
		return rerr.State, rerr
	}
	if next == End {
		return post, nil
	}
	return g.runFrom(ctx, fr, g.nodes[next], post)
}
