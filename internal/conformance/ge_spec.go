package conformance

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/armature-go/armature/graph"
)

// Capabilities a graph-engine case may need that are not built yet. The
// strings are what the summary prints after "not implemented: ".
const (
	capMiddleware = "pipeline-utilities middleware (§2)"
	capCheckpoint = "pipeline-utilities checkpointing (§10)"
	capMigration  = "pipeline-utilities state migration (§10.12)"
	// capSuspensionSingle: a suspension resume written in the
	// single-invocation invoke: block (suspension fixtures resume through
	// invocations:, whose placeholders name earlier outcomes).
	capSuspensionSingle = "suspension resume in a single-invocation invoke: block"
	capObservability    = "observability (OTel spans and logs)"
	capHarness          = "harness"
	capChat             = "harness-chat"
)

// keySet is the vocabulary of one fixture mapping: each known key maps to
// "" when supported, or to the capability it needs when not built yet.
type keySet map[string]string

// vocab builds a keySet from a space-separated list of supported keys
// followed by (capability, space-separated keys) pairs.
func vocab(supported string, notBuilt ...string) keySet {
	ks := keySet{}
	for _, k := range strings.Fields(supported) {
		ks[k] = ""
	}
	for i := 0; i+1 < len(notBuilt); i += 2 {
		for _, k := range strings.Fields(notBuilt[i+1]) {
			ks[k] = notBuilt[i]
		}
	}
	return ks
}

var (
	caseKeys = vocab(
		"name description state entry nodes edges initial_state observers invoke invoke_with "+
			"expected expected_error expected_compile_error expected_compile_warning invariants "+
			"run_count graph subgraph subgraphs invocations conformance_version middleware clock_stub "+
			"subgraph_with_idx session_store session_id seeded_session session_migrations session_state auto_save "+
			"checkpointer",
		capCheckpoint, "crash_injection resume saved_record_assertions first_run_expected_error "+
			"populate_checkpointer_via_runs every_save_assertions runtime_state_subclass",
		capMigration, "migrations seeded_record expected_chain_ambiguity_error",
		capHarness, "harness transmissions",
		capChat, "chat_turns signal_arrivals",
		capObservability, "typed_observers mock_llm caller_metadata caller_correlation_id caller_invocation_id "+
			"disable_llm_spans caller_global_otel_active langfuse_client",
	)
	graphWrapperKeys = vocab("state entry nodes edges subgraph subgraphs")
	subgraphKeys     = vocab("name description state entry nodes edges middleware")
	stateKeys        = vocab("fields schema_version")
	fieldKeys        = vocab("type default reducer alt_reducer required")
	nodeKeys         = vocab(
		"update update_pure update_from_field raises invoke_drain_events_for "+
			"subgraph inputs outputs projects_in projects_out fan_out parallel_branches "+
			"flaky flaky_by_index flaky_instance_only sleep_ms error_category middleware "+
			"explicit_save_session mapping suspend_with_descriptor conditional_suspend on_other_indices "+
			"wrap_with_middleware emits_log flaky_per_index flaky_resume_aware",
		capObservability, "update_pure_from_state calls_llm calls_llm_from_wrapper "+
			"augment_metadata augment_metadata_from_field capture_invocation_metadata_into",
	)
	edgeKeys      = vocab("from to condition")
	conditionKeys = vocab("if_field equals gt then else callable field message")
	raisesKeys    = vocab("category message exception_kind")
	nodeDrainKeys = vocab("timeout_seconds snapshot_observer")
	observerKeys  = vocab("name attach target behavior sleep_ms_per_event phases")
	sleepKeys     = vocab("first_invocation subsequent_invocations")
	// An invoke: block's resume_invocation without a payload is a §10
	// checkpoint resume (pipeline-utilities 030).
	invokeKeys     = vocab("drain", capCheckpoint, "resume_invocation", capSuspensionSingle, "signal_payload")
	drainKeys      = vocab("timeout_seconds")
	invocationKeys = vocab(
		"name description initial_state drain expected expected_error invariants "+
			"session_id loaded_session_state expected_final_state saved_session_assertions loaded_invoke_state_for_* "+
			"resume_invocation signal_payload",
		capObservability, "correlation_id caller_invocation_id caller_metadata",
		capCheckpoint, "populate_checkpointer_via_runs first_run_expected_error resume crash_injection",
	)
	expectKeys = vocab(
		"final_state execution_order outcome error expected_error expected_compile_error "+
			"expected_compile_warning observer_events delivery_order drain_summary node_drain_summaries "+
			"node_accumulator_snapshots node_accumulator_snapshot_invariants final_accumulator_state "+
			"no_propagated_error empty_phases_raises_at_registration invariants observer_event_invariants "+
			"trace_records timing_records expected_observer_event expected_attempt_events "+
			"expected_failure_isolation_event no_failure_isolation_event concurrency_invariant recoverable_state "+
			"loaded_session_state saved_session_assertions store_after expected_final_state no_session_load "+
			"no_session_save store_untouched no_auto_save_on_end inner_pre_state instance_pre_states migrations_run "+
			"suspended_state descriptor suspending_node final_state_at_error middleware_log_captured checkpointer_assertions "+
			"otel_spans span_tree log_records",
		capCheckpoint, "saved_record_assertions instances_executed_during_resume instances_skipped_during_resume",
		capObservability, "metrics observers",
	)
	errorExpectKeys = vocab(
		"category raised_from message recoverable_state execution_order carries " +
			"flaky_call_count fan_out_category branch_name cause_message cause raised_at",
	)
	outcomeErrorKeys = vocab("category message")
	eventKeys        = vocab(
		"step phase node_name namespace pre_state post_state error parent_states attempt_index " +
			"fan_out_index branch_name fan_out_index_chain branch_name_chain invocation_id correlation_id descriptor",
	)
	eventErrorKeys   = vocab("category message")
	deliveryKeys     = vocab("observer step phase")
	drainSummaryKeys = vocab("timeout_reached undelivered_count undelivered_count_min")

	// pipeline-utilities directives (conformance-adapter §5.1, §5.4, §6.7
	// and the pipeline-utilities fixture headers).
	middlewareBlockKeys = vocab("per_graph per_node")
	fanOutKeys          = vocab("subgraph items_field item_field count collect_field target_field error_policy " +
		"errors_field concurrency concurrent_mode on_empty count_field inputs extra_outputs instance_middleware mapping " +
		"abort_after_instance")
	intSourceKeys      = vocab("callable field chunk_size")
	branchesKeys       = vocab("branches error_policy errors_field")
	branchKeys         = vocab("subgraph inputs outputs call middleware when")
	whenKeys           = vocab("field")
	flakyKeys          = vocab("failure_sequence success_update fail_first_invocation_only on_success")
	flakyByIndexKeys   = vocab("fail_when_idx fail_count_per_idx category success_compute")
	flakyInstanceKeys  = vocab("fail_count_per_instance category success_compute")
	flakyPerIndexKeys  = vocab("fail_first_run_indices always_fail_indices category success_compute")
	flakyResumeKeys    = vocab("fail_first_invocation_count fail_resumed_invocation_count category on_success")
	failureEntryKeys   = vocab("transient category message cause")
	causeKeys          = vocab("category message cause")
	clockStubKeys      = vocab("type advance_ms_per_call")
	backoffKeys        = vocab("type seconds")
	classifierKeys     = vocab("type transient_categories")
	onCompleteKeys     = vocab("capture_to")
	degradedFuncKeys   = vocab("callable template target_field")
	predicateKeys      = vocab("matches_category")
	onCaughtKeys       = vocab("kind increment_field capture_message_field")
	concurrencyInvKeys = vocab("max_in_flight")
	// sessions directives (IMPLEMENTERS-NOTES §4, sessions fixtures).
	sessionStoreKeys  = vocab("type behavior")
	storeBehaviorKeys = vocab("load_raises")
	sessionStateKeys  = vocab("fields")
	seededKeys        = vocab("schema_version state")
	migrationKeys     = vocab("from_version to_version migrate")
	savedKeys         = vocab("state schema_version excludes_fields")
	storeAfterKeys    = vocab("load_returns_none_for_session_id load_returns_for_session_id loaded_state loaded_schema_version")
	errCauseKeys      = vocab("exception_type")
	// suspension directives (IMPLEMENTERS-NOTES §4, suspension fixtures).
	suspendKeys     = vocab("signal_id metadata mark_node_completed")
	condSuspendKeys = vocab("suspend_on_item_index descriptor")
	descriptorKeys  = vocab("signal_id metadata metadata_includes")
	wrapKeys        = vocab("name pre_log post_log pre_next_calls_suspend_with_descriptor")
	cpAssertKeys    = vocab("paused_invocation_record_exists record_type")
	mappingKeys     = vocab("inputs outputs")
	// middlewareKeys is the vocabulary of each middleware type.
	middlewareKeys = map[string]keySet{
		"trace_recorder":    vocab("type name pre_marker post_marker"),
		"short_circuit":     vocab("type name partial_update"),
		"error_recovery":    vocab("type name partial_update"),
		"error_raiser":      vocab("type name message"),
		"retry":             vocab("type name max_attempts backoff classifier"),
		"timing":            vocab("type name node_name on_complete"),
		"failure_isolation": vocab("type name degraded_update event_name predicate catch on_caught"),
	}
)

// reducerNames are the parameter-less canonical reducers (graph-engine §2).
var reducerNames = []string{"last_write_wins", "append", "merge", "concat_flatten", "merge_all"}

// geCase is a parsed graph-engine case.
type geCase struct {
	pos       Pos
	runCount  int
	outer     *geGraph
	subgraphs map[string]*geGraph
	// compileOnly cases (a graph: wrapper with no run-time expectations)
	// stop after compilation.
	compileOnly bool
	observers   []*geObserver
	invocations []*geInvocation
	// single is true when the case is not an invocations: fixture.
	single       bool
	compileError *Value // expected_compile_error
	compileWarn  *Value // expected_compile_warning
	invariants   []*invariantUse
	// clock is the clock_stub the timing middleware reads (nil: real).
	clock *clockStub
	// pipeline is set for pipeline-utilities cases.
	pipeline bool
	// probeConcurrency adds the in-flight probe to every fan-out (an
	// expectation has a concurrency_invariant).
	probeConcurrency bool
	// sess is the sessions configuration; nil when the case uses no
	// session directive.
	sess *ssConfig
	// checkpointer registers a harness-held checkpoint.MemoryStore as the
	// outermost graph's paused-record store (checkpointer: in_memory).
	checkpointer bool
	// ckpt is a §10 checkpoint case's directives (pu_ckpt.go); nil
	// otherwise.
	ckpt *ckptSpec
	// implicitOTel attaches an OTel observer to the outermost graph for
	// span_tree expectations (which name no observer).
	implicitOTel bool
}

// clockStub is a deterministic monotonic clock: every reading advances it
// by step.
type clockStub struct {
	step time.Duration
}

type geGraph struct {
	// schemaVersion is state.schema_version (outermost graph only).
	schemaVersion string
	name          string
	pos           Pos
	fields        []*geField
	entry         string
	nodes         []*geNode
	edges         []*geEdge
	// perGraph is the graph's middleware: block per_graph chain; perNode
	// its per_node chains (merged with nodes' own middleware: keys).
	perGraph []*mwSpec
	perNode  map[string][]*mwSpec
}

func (g *geGraph) node(name string) *geNode {
	for _, n := range g.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

func (g *geGraph) field(name string) *geField {
	for _, f := range g.fields {
		if f.name == name {
			return f
		}
	}
	return nil
}

type geField struct {
	name     string
	pos      Pos
	typ      string
	def      *Value // nil: use the type's zero value
	reducers []*geReducer
	required bool
}

type geReducer struct {
	name   string
	pos    Pos
	maxLen int
	key    string
	hasKey bool // key given and not null
}

type geNode struct {
	name  string
	pos   Pos
	steps []*geStep
	sub   *geSubUse
	fan   *geFanOut
	par   *geBranches
	// mws is the node's own middleware: list.
	mws []*mwSpec
	// wrap is the node's wrap_with_middleware list (suspension 014,
	// 015), innermost of the node's middleware.
	wrap []*mwSpec
}

// composite reports whether the node dispatches a subgraph, fan-out or
// parallel branches (it has no body of its own).
func (n *geNode) composite() bool { return n.sub != nil || n.fan != nil || n.par != nil }

// subgraphNames lists the subgraphs the node runs.
func (n *geNode) subgraphNames() []subRef {
	var out []subRef
	switch {
	case n.sub != nil:
		out = append(out, subRef{n.sub.name, n.sub.pos})
	case n.fan != nil:
		out = append(out, subRef{n.fan.sub, n.fan.pos})
	case n.par != nil:
		for _, b := range n.par.branches {
			if b.sub != "" {
				out = append(out, subRef{b.sub, b.pos})
			}
		}
	}
	return out
}

type subRef struct {
	name string
	pos  Pos
}

// mwSpec is one middleware entry (pipeline-utilities fixtures 001-016,
// 058-075): a canonical middleware (retry, timing, failure_isolation) or
// a fixture-only test middleware.
type mwSpec struct {
	typ  string
	name string
	pos  Pos
	// custom is a middleware a suite built itself (observability
	// calls_llm_from_wrapper); it is used as is.
	custom graph.Middleware
	// trace_recorder
	preMarker, postMarker string
	hasMarkers            bool
	// short_circuit, error_recovery: the partial update returned
	partial *Value
	// error_raiser
	message string
	// retry
	maxAttempts int
	backoff     time.Duration
	classifier  string
	// transientCats is classifier.transient_categories: the categories
	// retried.
	transientCats []string
	// timing
	nodeName  string
	captureTo string
	// emits_log (typ mwEmitsLog): the record logged before next(), for
	// a composite node, which has no body to log from.
	logStep *geStep
	// fn is the middleware of typ mwFunc, built by a suite's runner.
	fn graph.Middleware
	// wrap_with_middleware (typ mwWrap): the markers logged before and
	// after next(), or the descriptor Suspend is called with before
	// next().
	preLog, postLog string
	hasPre, hasPost bool
	suspendInMw     *susDescriptor
	// failure_isolation
	eventName      string
	degraded       *Value // static degraded_update
	degradedTmpl   string // callable state_derived degraded_update
	degradedTarget string
	predicateCat   string
	hasPredicate   bool
	catch          []string
	onCaught       *onCaughtSpec
}

// onCaughtSpec is the record_to_state_side_channel on_caught callback of
// fixture 062.
type onCaughtSpec struct {
	incrementField string
	messageField   string
}

// intSource is a fan-out count / concurrency: a literal, null
// (unbounded, concurrency only) or a named harness callable.
type intSource struct {
	pos      Pos
	literal  int
	null     bool
	callable string // state_field_read | queue_chunk
	field    string
	chunk    int
}

type geFanOut struct {
	pos                   Pos
	sub                   string
	itemsField, itemField string
	count                 *intSource
	collect, target       string
	errorPolicy           string
	errorsField           string
	concurrency           *intSource
	concurrentMode        string
	onEmpty               string
	countField            string
	inputs, extraOutputs  map[string]string
	instanceMws           []*mwSpec
	// abortAfter is the abort_after_instance harness directive (§10
	// checkpoint cases): a process-level abort after that instance's
	// completion save.
	abortAfter *int
}

type geBranches struct {
	pos         Pos
	branches    []*geBranch
	errorPolicy string
	errorsField string
}

type geBranch struct {
	name            string
	pos             Pos
	sub             string
	inputs, outputs map[string]string
	call            *geNode
	mws             []*mwSpec
	whenField       string
}

type stepKind uint8

const (
	stepUpdate stepKind = iota
	stepUpdateFromField
	stepRaise
	stepDrainEventsFor
	stepSleep
	stepFlaky
	stepSaveSession
	stepSuspend
	stepCondSuspend
	stepLog
	// stepCustom runs a suite's own directive (custom).
	stepCustom
)

// geStep is one node behavior directive, executed in document order.
type geStep struct {
	kind stepKind
	pos  Pos
	// stepUpdate
	update *Value
	// stepUpdateFromField: targets[i] = state[sources[i]] * multiplier
	targets, sources []string
	multiplier       *Value
	// stepRaise; stepLog (message and level)
	message  string
	category string
	level    slog.Level
	// stepDrainEventsFor
	hasTimeout bool
	timeout    time.Duration
	observer   string
	// stepSleep
	sleep time.Duration
	// stepFlaky
	flaky *flakySpec
	// stepSuspend, stepCondSuspend: the descriptor; stepCondSuspend
	// suspends in the fan-out instance of index suspendIndex and runs
	// otherwise (on_other_indices) instead.
	suspend      *susDescriptor
	suspendIndex int64
	otherwise    []*geStep
	// stepCustom: a directive a suite parsed itself (observability
	// calls_llm, calls_tool), writing into the node's update.
	custom func(ctx context.Context, s graph.State, upd graph.Update) error
}

// flakySpec is a failure mock (conformance-adapter §5.1).
type flakySpec struct {
	kind string // flaky | flaky_by_index | flaky_instance_only
	// flaky sequence form; a nil entry is a succeeding attempt.
	seq []*failEntry
	// flaky compact form
	firstInvocationOnly bool
	compact             bool
	// flaky_by_index / flaky_instance_only
	failWhenIdx *int64
	failCount   int
	category    string
	// flaky_per_index: instance indices failing the first invocation
	// (firstRun) or every invocation; flaky_resume_aware: failures on the
	// first invocation (failCount) and on any later one (resumedCount).
	perIndex     []int64
	alwaysFail   bool
	resumedCount int
	// success is success_update / on_success / success_compute.
	success *Value
}

// failEntry is one failure of a failure_sequence (or a cause link).
type failEntry struct {
	transient bool
	category  string
	message   string
	cause     *failEntry
}

type geSubUse struct {
	name                    string
	pos                     Pos
	inputs, outputs         []*Field
	hasInputs, hasOutputs   bool
	projectsIn, projectsOut []string
	hasIn, hasOut           bool
}

type geEdge struct {
	pos  Pos
	from string
	to   string // static destination, or the declared destination of a callable condition
	cond *geCond
}

type geCond struct {
	ifField   string
	equals    *Value
	gt        *Value // instead of equals: a number the field must exceed
	then, els string
	callable  string
	field     string
	message   string
}

type geObserver struct {
	name      string
	pos       Pos
	attach    string // graph | invocation
	target    string // outer | inner | <subgraph name>
	behavior  string // record | accumulate | raise | otel
	sleepAll  time.Duration
	sleepSeq  bool // first_invocation / subsequent_invocations form
	sleepNext time.Duration
	phases    []string
	hasPhases bool
}

type geInvocation struct {
	// sessionID is the invocation's session_id (its own, else the
	// case-level one); "" invokes without a session.
	sessionID  string
	name       string
	pos        Pos
	initial    *Value
	drain      *geDrain
	expect     *geExpect
	invariants []*invariantUse
	// resume makes the invocation a suspension resume (Graph.Resume);
	// nil for an Invoke.
	resume *susResume
}

type geDrain struct {
	pos        Pos
	hasTimeout bool
	timeout    time.Duration
}

type geExpect struct {
	pos                    Pos
	finalState             *Value
	executionOrder         *Value
	outcome                *Value
	errorCategory          *Value
	expectedError          *geErrorExpect
	observerEvents         []*Field
	deliveryOrder          *Value
	drainSummary           *Value
	nodeDrainSummaries     []*Field
	nodeSnapshots          []*Field
	nodeSnapshotInvariants []*geSnapshotInvariants
	finalAccumulator       []*Field
	noPropagatedError      *Value
	emptyPhases            *Value
	invariants             []*invariantUse
	observerInvariants     []*invariantUse
	// pipeline-utilities expectations
	observerEventList *Value // observer_events given as a bare list
	traceRecords      []*Field
	timingRecords     *Value
	observerEvent     *Value
	attemptEvents     *Value
	fiEvent           *Value
	noFIEvent         *Value
	maxInFlight       *Value
	recoverableState  *Value
	// observability expectations (otel.go)
	spanTree   *Value
	otelSpans  []*Field
	logRecords *Value
	// sessions expectations (nil when none)
	ss *ssExpect
	// suspension expectations (nil when none)
	sus *susExpect
}

type geSnapshotInvariants struct {
	node, observer string
	pos            Pos
	uses           []*invariantUse
}

type geErrorExpect struct {
	pos              Pos
	flakyCallCount   *Value
	fanOutCategory   *Value
	branchName       *Value
	causeMessage     *Value
	category         *Value
	raisedFrom       *Value
	message          *Value
	recoverableState *Value
	executionOrder   *Value
	carries          *Value
	// sessions: cause {exception_type}; raisedAt "registration" means
	// the failure is expected from Compile, before any invoke.
	cause    *Value
	raisedAt string
}
