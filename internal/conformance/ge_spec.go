package conformance

import (
	"strings"
	"time"
)

// Capabilities a graph-engine case may need that are not built yet. The
// strings are what the summary prints after "not implemented: ".
const (
	capFanOut        = "pipeline-utilities fan-out (§9)"
	capBranches      = "pipeline-utilities parallel branches (§11)"
	capMiddleware    = "pipeline-utilities middleware (§2)"
	capFailureMocks  = "pipeline-utilities failure mocks (§6)"
	capCheckpoint    = "pipeline-utilities checkpointing (§10)"
	capSuspension    = "suspension"
	capSessions      = "sessions"
	capObservability = "observability"
	capHarness       = "harness"
	capChat          = "harness-chat"
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
			"run_count graph subgraph subgraphs invocations conformance_version",
		capSessions, "session_store session_id seeded_session session_migrations session_state auto_save schema_version",
		capCheckpoint, "checkpointer",
		capMiddleware, "middleware",
		capHarness, "harness transmissions",
		capChat, "chat_turns signal_arrivals",
		capObservability, "typed_observers mock_llm caller_metadata caller_correlation_id caller_invocation_id "+
			"disable_llm_spans caller_global_otel_active langfuse_client",
	)
	graphWrapperKeys = vocab("state entry nodes edges subgraph subgraphs")
	subgraphKeys     = vocab("name description state entry nodes edges")
	stateKeys        = vocab("fields")
	fieldKeys        = vocab("type default reducer alt_reducer")
	nodeKeys         = vocab(
		"update update_pure update_from_field raises invoke_drain_events_for "+
			"subgraph inputs outputs projects_in projects_out",
		capFanOut, "fan_out",
		capBranches, "parallel_branches",
		capSuspension, "suspend_with_descriptor conditional_suspend on_other_indices",
		capMiddleware, "wrap_with_middleware",
		capSessions, "explicit_save_session mapping",
		capObservability, "emits_log update_pure_from_state calls_llm calls_llm_from_wrapper "+
			"augment_metadata augment_metadata_from_field capture_invocation_metadata_into",
		capFailureMocks, "flaky flaky_by_index flaky_per_index flaky_instance_only flaky_resume_aware failure_sequence cause",
	)
	edgeKeys       = vocab("from to condition")
	conditionKeys  = vocab("if_field equals then else callable field message")
	raisesKeys     = vocab("category message")
	nodeDrainKeys  = vocab("timeout_seconds snapshot_observer")
	observerKeys   = vocab("name attach target behavior sleep_ms_per_event phases")
	sleepKeys      = vocab("first_invocation subsequent_invocations")
	invokeKeys     = vocab("drain", capSuspension, "resume_invocation signal_payload")
	drainKeys      = vocab("timeout_seconds")
	invocationKeys = vocab(
		"name description initial_state drain expected expected_error invariants",
		capSessions, "session_id",
		capSuspension, "resume_invocation signal_payload",
		capObservability, "correlation_id caller_invocation_id caller_metadata",
		capCheckpoint, "populate_checkpointer_via_runs first_run_expected_error resume crash_injection",
	)
	expectKeys = vocab(
		"final_state execution_order outcome error expected_error expected_compile_error "+
			"expected_compile_warning observer_events delivery_order drain_summary node_drain_summaries "+
			"node_accumulator_snapshots node_accumulator_snapshot_invariants final_accumulator_state "+
			"no_propagated_error empty_phases_raises_at_registration invariants observer_event_invariants",
		capSuspension, "suspended_state descriptor suspending_node final_state_at_error",
		capSessions, "loaded_session_state saved_session_assertions store_after expected_final_state",
		capCheckpoint, "checkpointer_assertions saved_record_assertions",
		capObservability, "otel_spans span_tree log_records metrics observers",
		capFailureMocks, "caught_exception",
	)
	errorExpectKeys = vocab(
		"category raised_from message recoverable_state execution_order carries",
		capSessions, "cause raised_at",
	)
	outcomeErrorKeys = vocab("category message")
	eventKeys        = vocab(
		"step phase node_name namespace pre_state post_state error parent_states attempt_index "+
			"fan_out_index branch_name fan_out_index_chain branch_name_chain invocation_id correlation_id",
		capSuspension, "descriptor",
	)
	eventErrorKeys   = vocab("category message")
	deliveryKeys     = vocab("observer step phase")
	drainSummaryKeys = vocab("timeout_reached undelivered_count undelivered_count_min")
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
}

type geGraph struct {
	name   string
	pos    Pos
	fields []*geField
	entry  string
	nodes  []*geNode
	edges  []*geEdge
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
}

type stepKind uint8

const (
	stepUpdate stepKind = iota
	stepUpdateFromField
	stepRaise
	stepDrainEventsFor
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
	// stepRaise
	message  string
	category string
	// stepDrainEventsFor
	hasTimeout bool
	timeout    time.Duration
	observer   string
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
	behavior  string // record | accumulate | raise
	sleepAll  time.Duration
	sleepSeq  bool // first_invocation / subsequent_invocations form
	sleepNext time.Duration
	phases    []string
	hasPhases bool
}

type geInvocation struct {
	name       string
	pos        Pos
	initial    *Value
	drain      *geDrain
	expect     *geExpect
	invariants []*invariantUse
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
}

type geSnapshotInvariants struct {
	node, observer string
	pos            Pos
	uses           []*invariantUse
}

type geErrorExpect struct {
	pos              Pos
	category         *Value
	raisedFrom       *Value
	message          *Value
	recoverableState *Value
	executionOrder   *Value
	carries          *Value
}
