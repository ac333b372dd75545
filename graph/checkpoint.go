package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
)

// WithCheckpointer registers checkpointing (pipeline-utilities §10.1.1):
// the engine saves a checkpoint record to store at every completed node
// event of the outermost graph and of plain subgraphs, synchronously,
// before the next node runs, so that [Graph.ResumeCheckpoint] can continue
// an invocation that crashed or failed. Suspension's paused records go to
// the same store. Nodes must be idempotent (§10.5): a node that was
// running at a crash runs again on resume.
//
// Fan-out instances and parallel branches do not save individually (yet):
// a crash inside a fan-out or parallel-branches node re-runs that node
// whole on resume.
func WithCheckpointer(store checkpoint.Store) CompileOption {
	return func(c *compileConfig) {
		c.checkpoints = store
		c.checkpointing = store != nil
	}
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

// checkpointable reports whether saves happen in this frame: the
// outermost graph and plain subgraphs, not fan-out instances or branches.
func (fr *frame) checkpointable() bool {
	if !fr.inv.g.checkpointing {
		return false
	}
	for i := range fr.fanChain {
		if fr.fanChain[i] != nil || fr.branchChain[i] != nil {
			return false
		}
	}
	return true
}

// saveCheckpoint records where the invocation stands after node n
// completed (st is the post-merge state and the run continues after n) or
// failed (st is the pre-node state and n runs again on resume).
func (fr *frame) saveCheckpoint(ctx context.Context, n *node, st State, rerun bool) error {
	inv := fr.inv
	if !rerun {
		inv.completedNodes++
	}
	data := pausedData{Format: pausedFormat, Rerun: rerun, NodeName: n.name, Namespace: slices.Clone(fr.namespace(n))}
	for i, name := range fr.prefix {
		raw, err := fr.parentStates[i].MarshalJSON()
		if err != nil {
			return err
		}
		data.Positions = append(data.Positions, pausedPosition{Node: name, State: raw})
	}
	raw, err := st.MarshalJSON()
	if err != nil {
		return err
	}
	data.Positions = append(data.Positions, pausedPosition{Node: n.name, State: raw})
	payload, err := json.Marshal(data)
	if err != nil {
		return err
	}
	rec := checkpoint.Record{
		InvocationID: inv.id, Kind: checkpoint.KindCheckpoint, CorrelationID: inv.corrID,
		SessionID: inv.sessionID, Data: payload, CompletedNodeCount: inv.completedNodes,
	}
	if s := inv.g.sess; s != nil {
		rec.SchemaVersion = s.cfg.SchemaVersion
	}
	return inv.g.checkpoints.Save(context.WithoutCancel(ctx), rec)
}

// ResumeCheckpoint continues an invocation from its latest checkpoint
// (pipeline-utilities §10.4): after the last completed node, or at the
// node that failed. The resumed run is a new invocation — a fresh
// invocation id (any WithInvocationID is ignored) — that keeps the
// original correlation and session ids; retry budgets start afresh.
//
// It fails with checkpoint_not_found when the graph has no checkpointer or
// the store has no checkpoint for the id, and with
// checkpoint_record_invalid when the record cannot be read against this
// graph.
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
	rec, err := g.checkpoints.Load(ctx, checkpoint.Key{InvocationID: invocationID, Kind: checkpoint.KindCheckpoint})
	if err != nil {
		if errors.Is(err, checkpoint.ErrNotFound) {
			return fail(errcat.CheckpointNotFound, err)
		}
		return fail(errcat.CheckpointRecordInvalid, err)
	}
	var data pausedData
	if err := json.Unmarshal(rec.Data, &data); err != nil || data.Format != pausedFormat || len(data.Positions) == 0 {
		return fail(errcat.CheckpointRecordInvalid, fmt.Errorf("malformed checkpoint record (format %d): %v", data.Format, err))
	}
	stack, err := g.decodePositions(data.Positions)
	if err != nil {
		return fail(errcat.CheckpointRecordInvalid, err)
	}
	cfg.invocationID, cfg.correlationID, cfg.sessionID = "", rec.CorrelationID, rec.SessionID
	inv, res := g.newInvocation(ctx, cfg)
	defer inv.close()
	inv.completedNodes = rec.CompletedNodeCount
	if cfg.sessionID != "" && g.sess != nil {
		_, at, err := g.sess.load(ctx, g.schema, cfg.sessionID)
		if err != nil {
			res.Status, res.State, res.Err = Errored, stack[0].state, err
			return res, err
		}
		inv.sess = &binding{s: g.sess, id: cfg.sessionID, at: at}
	}
	final, err := g.resumeRun(&inv.root, inv.topFrame(), stack, !data.Rerun)
	return g.finish(ctx, inv, res, stack[0].state, final, err)
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
