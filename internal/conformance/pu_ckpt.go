package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/migrate"
	"github.com/armature-go/armature/store/sqlite"
)

// §10 checkpoint cases (pipeline-utilities 024-076): a case with a
// checkpointer: that neither suspends nor resumes a suspension runs with
// graph.WithCheckpointer on a harness-held store — checkpoint.MemoryStore
// (in_memory, in_memory_batched with graph.BatchFanOutSaves) or the SQLite
// store's checkpoint view (sqlite). The graph is parsed by the ordinary
// path; the §10 directives are run here. Every save the engine makes is
// recorded (decoded with graph.DecodeCheckpoint) for the per-save
// assertions. Unknown directives fail the case.

// Case-level keys the checkpoint path runs.
var (
	ckptGraphKeys = []string{"name", "description", "state", "entry", "nodes", "edges", "initial_state", "subgraphs", "subgraph", "observers"}
	ckptKeys      = []string{"checkpointer", "first_run_expected_error", "saved_record_assertions", "resume",
		"crash_injection", "populate_checkpointer_via_runs", "invoke_with", "expected_error", "expected",
		"caller_correlation_id", "caller_invocation_id", "invariants", "every_save_assertions",
		"runtime_state_subclass", "seeded_record", "migrations", "expected_chain_ambiguity_error"}
	ckptResumeKeys       = []string{"from_first_run", "from_seeded_record", "expected", "invariants", "caller_invocation_id", "resume_with_modified_items", "expected_error", "expected_chain_ambiguity_error"}
	ckptResumeExpectKeys = []string{"final_state", "nodes_executed_during_resume", "nodes_skipped_during_resume",
		"instances_executed_during_resume", "instances_skipped_during_resume", "migrations_run", "successful_attempt_index_during_resume"}
	ckptRecordKeys = []string{"state", "completed_positions", "parent_states_present", "parent_states_outermost_first",
		"fan_out_progress", "fan_out_node_in_completed_positions"}
	ckptExpectKeys = []string{"final_state", "checkpoint_saves", "latest_record_assertions", "invariants"}
	ckptSeedKeys   = []string{"schema_version", "state", "parent_states", "completed_positions", "fan_out_progress"}
)

// ckptSpec is a checkpoint case's §10 directives.
type ckptSpec struct {
	store      string // in_memory, in_memory_batched, sqlite
	flushEvery int
	firstErr   *Value // first_run_expected_error
	saved      *Value // saved_record_assertions
	resume     *Value // resume:
	crashAfter string // crash_injection.after_node
	crashFan   *crashFanOut
	populate   int    // populate_checkpointer_via_runs
	resumeID   string // invoke_with.resume_invocation
	expectErr  *Value // expected_error (with resume_invocation)
	expected   *Value // expected: (a case without a resume)
	corrID     string // caller_correlation_id
	invID      string // caller_invocation_id
	invariants *Value // case-level invariants
	everySave  *Value // every_save_assertions
	subclass   string // runtime_state_subclass.schema_version
	seeded     *Value // seeded_record
	migrations []*ckptMigration
	ambiguity  string // expected_chain_ambiguity_error (case or resume level)
}

// crashFanOut is crash_injection.after_fan_out_instance.
type crashFanOut struct {
	node  string
	index int
}

// ckptMigration is one migrations: entry.
type ckptMigration struct {
	from, to, fn string
}

// parseCheckpointCase parses a §10 checkpoint case: the graph through
// parseCase on the body without its §10 keys, the rest here.
func (p *geParser) parseCheckpointCase(body *Value) (*geCase, error) {
	// The caller's key check counted the §10 keys as unbuilt; this path
	// runs them.
	p.missing = nil
	cs := &ckptSpec{store: "in_memory"}
	stripped := &Value{Kind: KindMap, Pos: body.Pos}
	for _, f := range body.Fields {
		switch {
		case slices.Contains(ckptGraphKeys, f.Key):
			stripped.Fields = append(stripped.Fields, f)
			continue
		case !slices.Contains(ckptKeys, f.Key):
			return nil, &DirectiveUnknownError{Name: f.Key, Pos: f.Pos}
		}
		if err := p.parseCkptKey(cs, f); err != nil {
			return nil, err
		}
	}
	if (cs.resumeID == "") != (cs.expectErr == nil) {
		return nil, schemaErrorf(body.Pos, "expected_error and invoke_with.resume_invocation go together")
	}
	gc, err := p.parseCase(&Case{Body: stripped})
	if err != nil {
		return nil, err
	}
	gc.ckpt = cs
	return gc, nil
}

func (p *geParser) parseCkptKey(cs *ckptSpec, f *Field) error {
	v := f.Value
	var err error
	switch f.Key {
	case "checkpointer":
		return parseCkptStore(cs, v)
	case "first_run_expected_error":
		cs.firstErr = v
	case "saved_record_assertions":
		if err := checkKeyList(v, "saved_record_assertions", ckptRecordKeys); err != nil {
			return err
		}
		cs.saved = v
	case "resume":
		if err := checkCkptResume(v); err != nil {
			return err
		}
		cs.resume = v
		if a, ok := v.Get("expected_chain_ambiguity_error"); ok {
			if cs.ambiguity, err = str(a, "expected_chain_ambiguity_error"); err != nil {
				return err
			}
		}
	case "crash_injection":
		if len(v.Fields) != 1 {
			return schemaErrorf(v.Pos, "crash_injection names one boundary")
		}
		switch b := v.Fields[0]; b.Key {
		case "after_node":
			cs.crashAfter, err = str(b.Value, "crash_injection.after_node")
			return err
		case "after_fan_out_instance":
			node, err := str(mustGet(b.Value, "node"), "after_fan_out_instance.node")
			if err != nil {
				return err
			}
			idx := mustGet(b.Value, "index")
			if idx.Kind != KindInt || idx.Int < 0 {
				return schemaErrorf(b.Pos, "after_fan_out_instance.index must be a non-negative integer")
			}
			cs.crashFan = &crashFanOut{node: node, index: int(idx.Int)}
		default:
			return &DirectiveUnknownError{Name: b.Key, Pos: b.Pos}
		}
	case "populate_checkpointer_via_runs":
		if v.Kind != KindInt || v.Int < 0 || v.Int > 100 {
			return schemaErrorf(v.Pos, "populate_checkpointer_via_runs must be an integer between 0 and 100")
		}
		cs.populate = int(v.Int)
	case "invoke_with":
		rv, ok := v.Get("resume_invocation")
		if !ok || len(v.Fields) != 1 {
			return schemaErrorf(v.Pos, "invoke_with takes resume_invocation only in a checkpoint case")
		}
		cs.resumeID, err = str(rv, "resume_invocation")
	case "expected_error":
		cs.expectErr = v
	case "expected":
		if err := checkKeyList(v, "expected", ckptExpectKeys); err != nil {
			return err
		}
		cs.expected = v
	case "caller_correlation_id":
		cs.corrID, err = str(v, f.Key)
	case "caller_invocation_id":
		cs.invID, err = str(v, f.Key)
	case "invariants":
		cs.invariants = v
	case "every_save_assertions":
		if err := checkKeyList(v, f.Key, []string{"schema_version"}); err != nil {
			return err
		}
		cs.everySave = v
	case "runtime_state_subclass":
		if err := checkKeyList(v, f.Key, []string{"schema_version"}); err != nil {
			return err
		}
		cs.subclass, err = versionString(mustGet(v, "schema_version"), "runtime_state_subclass.schema_version")
	case "seeded_record":
		if err := checkKeyList(v, f.Key, ckptSeedKeys); err != nil {
			return err
		}
		cs.seeded = v
	case "migrations":
		if v.Kind != KindList {
			return schemaErrorf(v.Pos, "migrations must be a list")
		}
		for _, it := range v.Items {
			if err := checkKeyList(it, "migration", []string{"from_version", "to_version", "migrate"}); err != nil {
				return err
			}
			m := &ckptMigration{}
			if m.from, err = versionString(mustGet(it, "from_version"), "from_version"); err != nil {
				return err
			}
			if m.to, err = versionString(mustGet(it, "to_version"), "to_version"); err != nil {
				return err
			}
			if m.fn, err = str(mustGet(it, "migrate"), "migrate"); err != nil {
				return err
			}
			if _, ok := ckptMigrationMocks[m.fn]; !ok {
				return &DirectiveUnknownError{Name: m.fn, Pos: it.Pos}
			}
			cs.migrations = append(cs.migrations, m)
		}
	case "expected_chain_ambiguity_error":
		cs.ambiguity, err = str(v, f.Key)
	}
	return err
}

func parseCkptStore(cs *ckptSpec, v *Value) error {
	if v.Kind == KindString {
		switch v.Str {
		case "in_memory", "sqlite":
			cs.store = v.Str
			return nil
		}
		return &DirectiveUnknownError{Name: v.Str, Pos: v.Pos}
	}
	if err := checkKeyList(v, "checkpointer", []string{"kind", "fan_out_internal_save_batching"}); err != nil {
		return err
	}
	kind, err := str(mustGet(v, "kind"), "checkpointer.kind")
	if err != nil {
		return err
	}
	if kind != "in_memory_batched" {
		return &DirectiveUnknownError{Name: kind, Pos: v.Pos}
	}
	b := mustGet(v, "fan_out_internal_save_batching")
	if err := checkKeyList(b, "fan_out_internal_save_batching", []string{"flush_every"}); err != nil {
		return err
	}
	fe := mustGet(b, "flush_every")
	if fe.Kind != KindInt || fe.Int < 1 || fe.Int > 10000 {
		return schemaErrorf(fe.Pos, "flush_every must be a positive integer")
	}
	cs.store, cs.flushEvery = kind, int(fe.Int)
	return nil
}

// checkKeyList fails on a key of mapping v outside keys.
func checkKeyList(v *Value, what string, keys []string) error {
	if v == nil || v.Kind != KindMap {
		return schemaErrorf(v.Pos, "%s must be a mapping", what)
	}
	for _, f := range v.Fields {
		if !slices.Contains(keys, f.Key) {
			return &DirectiveUnknownError{Name: what + "." + f.Key, Pos: f.Pos}
		}
	}
	return nil
}

func checkCkptResume(v *Value) error {
	if err := checkKeyList(v, "resume", ckptResumeKeys); err != nil {
		return err
	}
	for _, f := range v.Fields {
		switch f.Key {
		case "from_first_run", "from_seeded_record":
			if f.Value.Kind != KindBool || !f.Value.Bool {
				return schemaErrorf(f.Pos, "resume.%s must be true", f.Key)
			}
		case "expected":
			if err := checkKeyList(f.Value, "resume.expected", ckptResumeExpectKeys); err != nil {
				return err
			}
		}
	}
	return nil
}

// ckptMigrationMocks are the migrations: harness functions (the fixtures'
// mock names). should_not_run records that it ran and fails.
var ckptMigrationMocks = map[string]func(map[string]any) (map[string]any, error){
	"add_new_field_default": addField("new_field", "v2_default"),
	"add_v2_field":          addField("v2_field", "v2_default"),
	"add_v3_field":          addField("v3_field", "v3_default"),
	"identity_passthrough":  func(s map[string]any) (map[string]any, error) { return s, nil },
	"irrelevant":            func(s map[string]any) (map[string]any, error) { return s, nil },
	"should_not_run": func(map[string]any) (map[string]any, error) {
		return nil, errors.New("conformance: the should_not_run migration ran")
	},
	"raises_keyerror": func(map[string]any) (map[string]any, error) { return nil, &KeyError{Key: "legacy_value"} },
}

func addField(name string, v any) func(map[string]any) (map[string]any, error) {
	return func(s map[string]any) (map[string]any, error) {
		s[name] = v
		return s, nil
	}
}

// ckptHarness is a checkpoint case's store stack and records.
type ckptHarness struct {
	x     *geExec
	cs    *ckptSpec
	store checkpoint.Store // what the graph saves to (recording, crash, abort)
	base  checkpoint.Store // the real backend

	mu    sync.Mutex
	saves []*graph.CheckpointRecord // every save, decoded, in order
	migs  []string                  // "<from>-><to>" per migration run
	// crash: the record saved at the crash point, and the release of the
	// abandoned run.
	crashed chan *checkpoint.Record
	release chan struct{}
	fired   bool
	// abort (fan_out abort_after_instance): cancels the first run's fan-out.
	abortNode  string
	abortIndex int
	abortArmed bool
	abortFn    context.CancelFunc
	aborted    bool
}

// Save records the engine's save, then applies the crash and abort
// boundaries.
func (h *ckptHarness) Save(ctx context.Context, r checkpoint.Record) error {
	if err := h.base.Save(ctx, r); err != nil {
		return err
	}
	if r.Kind != checkpoint.KindCheckpoint {
		return nil
	}
	rec, err := graph.DecodeCheckpoint(&r)
	if err != nil {
		return fmt.Errorf("conformance: the engine saved an unreadable checkpoint: %w", err)
	}
	h.mu.Lock()
	h.saves = append(h.saves, rec)
	crash := !h.fired && h.crashHere(rec)
	if crash {
		h.fired = true
	}
	if h.abortArmed && h.abortFn != nil && instanceCompleted(rec, h.abortNode, h.abortIndex) {
		h.abortArmed, h.aborted = false, true
		h.abortFn()
	}
	h.mu.Unlock()
	if crash {
		rc := r
		h.crashed <- &rc
		<-h.release
		return errors.New("conformance: crash-injected invocation abandoned")
	}
	return nil
}

func (h *ckptHarness) crashHere(rec *graph.CheckpointRecord) bool {
	cs := h.cs
	switch {
	case cs.crashAfter != "":
		return !rec.Rerun && rec.Path[len(rec.Path)-1] == cs.crashAfter
	case cs.crashFan != nil:
		return instanceCompleted(rec, cs.crashFan.node, cs.crashFan.index)
	}
	return false
}

// instanceCompleted reports whether rec shows the fan-out instance
// completed.
func instanceCompleted(rec *graph.CheckpointRecord, node string, index int) bool {
	for _, p := range rec.FanOutProgress {
		if p.FanOutNodeName == node && index < len(p.Instances) && p.Instances[index].State == graph.InstanceCompleted {
			return true
		}
	}
	return false
}

// Load, Take, Delete and List reach the backend.
func (h *ckptHarness) Load(ctx context.Context, k checkpoint.Key) (*checkpoint.Record, error) {
	return h.base.Load(ctx, k)
}

// Take reaches the backend.
func (h *ckptHarness) Take(ctx context.Context, k checkpoint.Key) (*checkpoint.Record, error) {
	return h.base.Take(ctx, k)
}

// Delete reaches the backend.
func (h *ckptHarness) Delete(ctx context.Context, k checkpoint.Key) error {
	return h.base.Delete(ctx, k)
}

// List reaches the backend.
func (h *ckptHarness) List(ctx context.Context, req checkpoint.ListRequest) (checkpoint.ListResponse, error) {
	return h.base.List(ctx, req)
}

func (h *ckptHarness) savesSnapshot() []*graph.CheckpointRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.saves)
}

// migrations returns the graph's checkpoint migrations, recording runs.
func (h *ckptHarness) migrations() []migrate.Migration {
	var out []migrate.Migration
	for _, m := range h.cs.migrations {
		fn, name := ckptMigrationMocks[m.fn], m.from+"->"+m.to
		out = append(out, migrate.Migration{From: m.from, To: m.to, Fn: func(s map[string]any) (map[string]any, error) {
			h.mu.Lock()
			h.migs = append(h.migs, name)
			h.mu.Unlock()
			return fn(s)
		}})
	}
	return out
}

func (h *ckptHarness) migrationsRun() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.migs)
}

// abortMiddleware is the fan_out abort_after_instance harness directive:
// a process-level abort between the instance's completion save and the
// next instance's dispatch. It runs the fan-out node under a context the
// harness store cancels at that save (so no further instance starts), and
// fails the node with the abort.
func (h *ckptHarness) abortMiddleware(node string, index int) graph.Middleware {
	return graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		h.mu.Lock()
		arm := !h.aborted
		if arm {
			h.abortNode, h.abortIndex, h.abortArmed, h.abortFn = node, index, true, cancel
		}
		h.mu.Unlock()
		u, err := next(cctx, s)
		h.mu.Lock()
		aborted := arm && h.aborted
		h.abortArmed, h.abortFn = false, nil
		h.mu.Unlock()
		if aborted {
			return nil, fmt.Errorf("conformance: process aborted after fan-out %s instance %d", node, index)
		}
		return u, err
	})
}

// newCkptHarness opens the case's backend: the runner's Backend when it
// has one, else the store the fixture names.
func newCkptHarness(ctx context.Context, x *geExec) (*ckptHarness, func(), error) {
	cs := x.gc.ckpt
	h := &ckptHarness{x: x, cs: cs, crashed: make(chan *checkpoint.Record, 1), release: make(chan struct{})}
	cleanup := func() {}
	if b, ok := ctx.Value(backendKey{}).(Backend); ok && b != nil {
		st, done, err := b.Checkpoints(ctx)
		if err != nil {
			return nil, nil, err
		}
		h.base, h.store = st, h
		return h, done, nil
	}
	switch cs.store {
	case "sqlite":
		dir, err := os.MkdirTemp("", "armature-ckpt-*")
		if err != nil {
			return nil, nil, err
		}
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, "ckpt.db")})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, nil, err
		}
		h.base = st.Checkpoints()
		cleanup = func() {
			_ = st.Close(context.Background())
			_ = os.RemoveAll(dir)
		}
	default:
		h.base = checkpoint.NewMemoryStore(nil)
	}
	h.store = h
	return h, cleanup, nil
}

// compileOptions are the checkpointer's graph options.
func (h *ckptHarness) compileOptions() []graph.CheckpointOption {
	opts := []graph.CheckpointOption{graph.CheckpointMigrations(h.migrations()...)}
	if h.cs.flushEvery > 0 {
		opts = append(opts, graph.BatchFanOutSaves(h.cs.flushEvery))
	}
	return opts
}

// runCheckpointCase runs a §10 case.
func runCheckpointCase(ctx context.Context, gc *geCase) error {
	cs := gc.ckpt
	x := newGeExec(ctx, gc)
	defer x.close()
	h, cleanup, err := newCkptHarness(ctx, x)
	if err != nil {
		return fmt.Errorf("opening the checkpointer: %w", err)
	}
	defer cleanup()
	x.ckpt = h
	x.ckptStore = h.store
	if err := x.build(); err != nil {
		if cs.ambiguity != "" {
			return checkCategory("expected_chain_ambiguity_error", cs.ambiguity, err)
		}
		return fmt.Errorf("compilation failed: %w", err)
	}
	if cs.ambiguity != "" && cs.resume == nil {
		return fmt.Errorf("expected_chain_ambiguity_error: compilation succeeded and there is no resume to raise it")
	}
	if _, err := x.outer.AddObserver(x.pu.record); err != nil {
		return fmt.Errorf("registering the recording observer: %w", err)
	}
	initial := map[string]any{}
	if inv := gc.invocations[0]; inv.initial != nil && !inv.initial.IsNull() {
		n, ok := inv.initial.Native().(map[string]any)
		if !ok {
			return schemaErrorf(inv.initial.Pos, "initial_state must be a mapping")
		}
		initial = n
	}
	if cs.subclass != "" {
		// Go has no state subclasses: Invoke takes an Update. The runtime
		// "subclass instance" is a state of the schema re-versioned to the
		// subclass's version, passed as its fields; the records must carry
		// the declared schema's version whatever the input was built on.
		st, err := x.outer.Schema().WithVersion(cs.subclass).New(graph.Update(initial))
		if err != nil {
			return fmt.Errorf("runtime_state_subclass: %w", err)
		}
		initial = st.Map()
	}
	m := newMatcher()
	for i := range cs.populate {
		res, err := x.outer.Invoke(ctx, graph.Update(initial))
		if err != nil {
			return fmt.Errorf("populating run %d: %w", i+1, err)
		}
		if _, err := h.base.Load(ctx, checkpoint.Key{InvocationID: res.InvocationID, Kind: checkpoint.KindCheckpoint}); err != nil {
			return fmt.Errorf("populating run %d saved no checkpoint: %w", i+1, err)
		}
	}
	switch {
	case cs.resumeID != "":
		_, err := x.outer.ResumeCheckpoint(ctx, cs.resumeID)
		if err == nil {
			return fmt.Errorf("expected_error: resuming %q succeeded", cs.resumeID)
		}
		return checkCkptError(cs.expectErr, err)
	case cs.seeded != nil:
		return x.runSeeded(ctx, m, h)
	case cs.resume == nil:
		return x.runCkptOnce(ctx, m, h, initial)
	}

	// The first run: to its error, or abandoned at the crash point.
	first, rec, err := x.ckptFirstRun(ctx, h, initial)
	if err != nil {
		return err
	}
	if cs.crashAfter != "" || cs.crashFan != nil {
		// The abandoned first run is still in flight (inside Save) until
		// the case ends, so the process-wide drain waits for its release.
		defer func() {
			close(h.release)
			<-first.done
			_, _ = x.outer.Drain(ctx)
		}()
	}
	if cs.saved != nil {
		if err := checkSavedRecord(m, cs.saved, rec); err != nil {
			return err
		}
	}
	if items, ok := cs.resume.Get("resume_with_modified_items"); ok {
		if err := h.modifyRecord(ctx, first.id, items); err != nil {
			return err
		}
	}
	return x.ckptResume(ctx, m, h, first)
}

// modifyRecord is resume_with_modified_items: the outermost state's
// fields in the saved record are replaced (the user changed the input
// between the runs).
func (h *ckptHarness) modifyRecord(ctx context.Context, id string, items *Value) error {
	stored, err := h.base.Load(ctx, checkpoint.Key{InvocationID: id, Kind: checkpoint.KindCheckpoint})
	if err != nil {
		return fmt.Errorf("resume_with_modified_items: %w", err)
	}
	rec, err := graph.DecodeCheckpoint(stored)
	if err != nil {
		return err
	}
	outer := &rec.State
	if len(rec.ParentStates) > 0 {
		outer = &rec.ParentStates[0]
	}
	st, err := h.x.outer.Schema().DecodeState(*outer)
	if err != nil {
		return err
	}
	if st, err = st.Schema().New(graph.Update(mergeMaps(st.Map(), items.Native().(map[string]any)))); err != nil {
		return fmt.Errorf("resume_with_modified_items: %w", err)
	}
	if *outer, err = st.MarshalJSON(); err != nil {
		return err
	}
	out, err := rec.Encode()
	if err != nil {
		return err
	}
	return h.base.Save(ctx, out)
}

func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// ckptFirst is the first run of a resume case.
type ckptFirst struct {
	id, corrID string
	run        int
	done       chan struct{}
}

func (x *geExec) firstRunOptions() []graph.InvokeOption {
	var opts []graph.InvokeOption
	if cs := x.gc.ckpt; cs.corrID != "" {
		opts = append(opts, graph.WithCorrelationID(cs.corrID))
	}
	if cs := x.gc.ckpt; cs.invID != "" {
		opts = append(opts, graph.WithInvocationID(cs.invID))
	}
	return opts
}

func (x *geExec) ckptFirstRun(ctx context.Context, h *ckptHarness, initial map[string]any) (*ckptFirst, *checkpoint.Record, error) {
	cs := x.gc.ckpt
	f := &ckptFirst{run: x.sus.nextRun(), done: make(chan struct{})}
	rctx := withRunIndex(ctx, f.run)
	if cs.crashAfter != "" || cs.crashFan != nil {
		var res *graph.Result
		go func() {
			defer close(f.done)
			res, _ = x.outer.Invoke(rctx, graph.Update(initial), x.firstRunOptions()...)
		}()
		select {
		case rec := <-h.crashed:
			f.id, f.corrID = rec.InvocationID, rec.CorrelationID
			return f, rec, nil
		case <-f.done:
			return nil, nil, fmt.Errorf("crash_injection: the first run ended %s before the crash boundary's checkpoint", res.Status)
		}
	}
	defer close(f.done)
	res, err := x.outer.Invoke(rctx, graph.Update(initial), x.firstRunOptions()...)
	if res == nil {
		return nil, nil, fmt.Errorf("invoke returned no result: %w", err)
	}
	if _, derr := x.outer.Drain(ctx); derr != nil {
		return nil, nil, fmt.Errorf("draining: %w", derr)
	}
	f.id, f.corrID = res.InvocationID, res.CorrelationID
	if cs.firstErr != nil {
		if err == nil {
			return nil, nil, fmt.Errorf("first_run_expected_error: the first run completed")
		}
		if e := checkCkptError(cs.firstErr, err); e != nil {
			return nil, nil, fmt.Errorf("first_run_expected_error: %w", e)
		}
	} else if err != nil {
		return nil, nil, fmt.Errorf("first run ended %s: %v", res.Status, err)
	}
	rec, lerr := h.base.Load(ctx, checkpoint.Key{InvocationID: f.id, Kind: checkpoint.KindCheckpoint})
	if lerr != nil {
		return nil, nil, fmt.Errorf("no checkpoint record after the first run: %w", lerr)
	}
	return f, rec, nil
}

// ckptResume resumes the first run (or the seeded record) and checks the
// resume: block.
func (x *geExec) ckptResume(ctx context.Context, m *matcher, h *ckptHarness, first *ckptFirst) error {
	rv := x.gc.ckpt.resume
	var opts []graph.InvokeOption
	if c, ok := rv.Get("caller_invocation_id"); ok {
		id, err := str(c, "resume.caller_invocation_id")
		if err != nil {
			return err
		}
		opts = append(opts, graph.WithInvocationID(id))
	}
	runIdx := x.sus.nextRun()
	migsBefore := len(h.migrationsRun())
	res, err := x.outer.ResumeCheckpoint(withRunIndex(ctx, runIdx), first.id, opts...)
	if res == nil {
		return fmt.Errorf("resume returned no result: %w", err)
	}
	// The resumed run's events; a crashed first run is still blocked in
	// its save, so the process-wide drain waits for the case's end.
	if _, derr := x.outer.DrainEventsFor(ctx, res.InvocationID); derr != nil {
		return fmt.Errorf("draining: %w", derr)
	}
	r := &ckptResumed{first: first, res: res, err: err, run: runIdx, migs: h.migrationsRun()[migsBefore:]}
	if want := x.gc.ckpt.ambiguity; want != "" {
		if err == nil {
			return fmt.Errorf("expected_chain_ambiguity_error: the resume succeeded")
		}
		return checkCategory("expected_chain_ambiguity_error", want, err)
	}
	if want, ok := rv.Get("expected_error"); ok {
		if err == nil {
			return fmt.Errorf("resume.expected_error: the resume completed")
		}
		if e := checkCkptError(want, err); e != nil {
			return fmt.Errorf("resume.expected_error: %w", e)
		}
		return x.checkResumeInvariants(rv, r)
	}
	if err != nil {
		return fmt.Errorf("resume: ended %s: %v", res.Status, err)
	}
	if err := x.checkResumeExpected(m, rv, r); err != nil {
		return err
	}
	if err := x.checkResumeInvariants(rv, r); err != nil {
		return err
	}
	return x.checkCaseInvariants(h, r)
}

// runSeeded seeds the store with seeded_record and resumes it.
func (x *geExec) runSeeded(ctx context.Context, m *matcher, h *ckptHarness) error {
	cs := x.gc.ckpt
	if cs.resume == nil {
		return schemaErrorf(cs.seeded.Pos, "seeded_record needs a resume: {from_seeded_record: true}")
	}
	rec, err := x.seededRecord(cs.seeded)
	if err != nil {
		return err
	}
	stored, err := rec.Encode()
	if err != nil {
		return err
	}
	if err := h.base.Save(ctx, stored); err != nil {
		return fmt.Errorf("seeding the checkpoint: %w", err)
	}
	return x.ckptResume(ctx, m, h, &ckptFirst{id: rec.InvocationID, corrID: rec.CorrelationID})
}

// checkCategory matches an error's category.
func checkCategory(what, want string, err error) error {
	if got := string(errcat.Of(err)); got != want {
		return fmt.Errorf("%s: want category %s, got %q (%v)", what, want, got, err)
	}
	return nil
}

// checkCkptError matches {category, raised_from, transient, carries,
// cause} against err.
func checkCkptError(want *Value, err error) error {
	for _, f := range want.Fields {
		switch f.Key {
		case "category":
			if got := string(errcat.Of(err)); !scalarEqual(f.Value.Native(), got) {
				return fmt.Errorf("error category: want %s, got %q (%v)", f.Value.String(), got, err)
			}
		case "transient":
			if got := errcat.Of(err).Transient(); f.Value.Kind != KindBool || f.Value.Bool != got {
				return fmt.Errorf("error transient: want %s, got %v", f.Value.String(), got)
			}
		case "raised_from":
			var ne *graph.NodeError
			if !errors.As(err, &ne) {
				return fmt.Errorf("raised_from: the error is not attributed to a node: %v", err)
			}
			w := f.Value.Native()
			if !scalarEqual(w, ne.Node) && !slices.ContainsFunc(ne.Namespace, func(s string) bool { return scalarEqual(w, s) }) {
				return fmt.Errorf("raised_from: want %s, got node %q (namespace %v)", f.Value.String(), ne.Node, ne.Namespace)
			}
		case "carries":
			if err := checkMigrationCarries(f.Value, err); err != nil {
				return err
			}
		case "cause":
			if err := checkCause(f.Value, err); err != nil {
				return err
			}
		default:
			return &DirectiveUnknownError{Name: "expected_error." + f.Key, Pos: f.Pos}
		}
	}
	return nil
}

// checkMigrationCarries matches the §10.10 fields a migration error
// carries.
func checkMigrationCarries(want *Value, err error) error {
	var me *migrate.Error
	if !errors.As(err, &me) {
		return fmt.Errorf("carries: the error is not a migration error: %v", err)
	}
	for _, f := range want.Fields {
		var got any
		switch f.Key {
		case "from_version":
			got = me.FromVersion()
		case "to_version":
			got = me.ToVersion()
		case "registered_migrations_count":
			got = me.RegisteredMigrationsCount()
		case "registry_description":
			got = me.RegistryDescription()
		default:
			return &DirectiveUnknownError{Name: "carries." + f.Key, Pos: f.Pos}
		}
		if !scalarEqual(f.Value.Native(), normalize(got)) {
			return fmt.Errorf("carries.%s: want %s, got %v", f.Key, f.Value.String(), got)
		}
	}
	return nil
}
