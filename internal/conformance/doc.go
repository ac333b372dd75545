// Package conformance runs the OpenArmature conformance fixtures against
// Armature's real runtime (spec/conformance-adapter: the "adapter").
//
// # Running it
//
//	go test -v -run TestConformance ./internal/conformance/
//
// The fixtures are read in place from a spec checkout, never copied into
// this repository. The checkout is $ARMATURE_SPEC_DIR (the directory that
// holds spec/) when set, else <module root>/../shared/openarmature-spec,
// where the module root is the nearest directory above the working
// directory that holds go.mod — so the default works from the package
// directory that go test uses. When the checkout is missing the test is
// skipped, unless $CI is non-empty, in which case it fails.
//
// Every *.yaml under spec/<capability>/conformance/ is discovered and run
// (conformance-adapter §8.1). A case is one entry of a fixture's cases:
// list, or the whole file when it has none (an invocations: fixture is one
// case). File-level keys such as subgraph:, subgraphs: and invariants: are
// merged into every case of the file.
//
// # Reading the summary
//
// TestConformance prints one line per suite (capability directory),
//
//	graph-engine: 68 passed, 0 failed, 0 not implemented
//
// followed by every case that did not pass, indented, as
// "<file> > <case>: <reason>" ("<file>: <reason>" for single-case files).
// The reasons are:
//
//   - "not implemented: <capability>": the case needs something Armature
//     has not built yet (a whole suite, or e.g. "pipeline-utilities
//     checkpointing (§10)"). It does not pass, and it fails the test
//     unless its suite is named in not-implemented.txt, the allow-list
//     of suites not built yet, which only shrinks: a suite on it with
//     every case implemented fails the test too, until it is removed
//     (conformance-adapter §9: a missing primitive is never skipped).
//   - "fixture_directive_unknown: <name> at <file>:<line>": the fixture
//     uses a key, vocabulary value or invariant name the runner does not
//     know. Per conformance-adapter §8.2 this is a failure, never a skip.
//   - "fixture_schema_invalid: ...": the fixture is structurally broken.
//   - anything else: an assertion failed, e.g.
//     "final_state.items[2]: want "z", got "y"". Several failures of one
//     invocation are listed on continuation lines.
//
// The test fails when any case of any suite failed, or when the
// allow-list is breached.
//
// # Structure
//
// A [Runner] discovers suites and dispatches each case to the
// [CaseRunner] registered for its suite in a [Registry];
// [DefaultRegistry] holds the implemented ones (graph-engine,
// pipeline-utilities, sessions, suspension, observability and others). A
// suite without a runner reports every case as not implemented, and a
// runner returns a [*NotImplementedError] for a case that needs a
// capability it lacks, so later capabilities plug in by adding a registry
// entry and removing those errors.
//
// Fixtures are decoded into [Value] trees that keep mapping order and
// source lines (node directives run in document order, §8.3). The
// graph-engine runner parses a case fully — rejecting unknown directives
// before anything runs — builds the schema, subgraphs and graph on package
// graph, attaches the harness observers of §6.1 (record, accumulate,
// raise, with optional per-event pacing), invokes, performs the fixture's
// drain (and then always a full drain, so observer assertions see every
// delivered event), and asserts the expected blocks, value matchers (§5.10)
// and named invariants (§5.9, resolved through a registry of exact names
// and name-pattern families).
//
// The pipeline-utilities suite runs on the same runner (same parser,
// builder and invariant registry) with the pipeline vocabulary of
// conformance-adapter §5.1, §5.4, §5.8 and §6.7:
//
//   - middleware: blocks (per_graph / per_node, at case level and inside
//     subgraph declarations), a node's own middleware:, fan-out
//     instance_middleware: and branch middleware:. Canonical retry,
//     timing (reading the clock_stub) and failure_isolation build the
//     engine's middleware; trace_recorder, short_circuit, error_recovery
//     and error_raiser are the fixture-only test middleware, built on
//     graph.MiddlewareFunc, recording into side channels asserted by
//     trace_records / timing_records.
//   - the failure mocks flaky (sequence and compact forms),
//     flaky_by_index and flaky_instance_only are real node bodies with
//     per-execution counters; a failure raises a mock error carrying its
//     category, its transient flag (Transient() bool) and its cause:
//     chain.
//   - fan_out: and parallel_branches: nodes (subgraph and call: branches,
//     when:) build graph.FanOut and graph.ParallelBranches.
//   - a recording observer on the outermost graph captures every node
//     and failure-isolation event, for expected_observer_event,
//     expected_attempt_events, expected_failure_isolation_event (with
//     caught_exception chain matching: carrier links match on the keys
//     the fixture gives, so their messages are not pinned) and the
//     fixture-specific invariants (invariants_pu.go, each a real check
//     defined by its fixture's .md).
//
// execution_order lists the outer nodes that executed: composite nodes
// and nodes whose body ran — a node short-circuited by middleware is
// dispatched (it is in Result.Path) but did not execute.
//
// The sessions suite also runs on the same runner, with the sessions
// vocabulary (IMPLEMENTERS-NOTES §4; ss_*.go, invariants_ss.go):
//
//   - session_store (in_memory, or {type, behavior{load_raises}}) registers
//     a counting, fault-injecting store around the real
//     session.MemoryStore on the outermost graph (graph.WithSessions, with
//     session_state fields, state.schema_version, auto_save and
//     session_migrations). It records every load / save / append call
//     (an Append delta counts as a save), the node a call came from
//     (graph.CurrentNode: explicit saves vs the save at End) and the record
//     right after each write. The harness reads and seeds the memory store
//     directly, so its own reads are never counted.
//   - session_migrations name the mocks add_ten_to_value,
//     multiply_value_by_two and raises_keyerror (which returns a *KeyError,
//     so cause {exception_type: KeyError} matches by type name); every run
//     is recorded for migrations_run and the migration invariants.
//   - session_id (case level, or per invocation) binds an invocation
//     (graph.WithSessionID); seeded_session is saved before the first one.
//   - explicit_save_session runs graph.SaveSession with the node's update
//     accumulated so far, at its place in document order.
//   - loaded_session_state is the session's stored record before the
//     invocation, and the engine's entry load must have resolved to it
//     (returned it, or confirmed its cached copy is that version);
//     loaded_invoke_state_for_<field> reads the first node body's input.
//   - saved_session_assertions / store_after read the store after the
//     invocation; no_session_load, no_session_save, store_untouched and
//     no_auto_save_on_end read the invocation's store calls.
//   - inner_pre_state / instance_pre_states come from harness observers
//     on every subgraph; a subgraph's or fan-out's mapping{inputs,
//     outputs} maps onto graph.Inputs / Outputs and graph.FanOut
//     (the "<fan_out_item>" input is the ItemField, the first output the
//     TargetField / CollectField, further outputs ExtraOutputs).
//   - expected_error raised_at: registration expects Compile to fail
//     (e.g. duplicate migrations); carries also reads the accessor fields
//     of migrate.Error (from_version, to_version,
//     registered_migrations_count, registry_description).
//
// Sessions 012 and suspension 011 run on the OpenTelemetry capture
// (otel.go, observability §4–§7):
//
//   - an observer with behavior: otel is a real otelobserver.Observer
//     (registered with graph.InvocationEvents) on a private
//     TracerProvider with an in-memory exporter; a case asserting
//     span_tree, which names no observer, gets one implicitly on the
//     outermost graph.
//   - otel_spans{observer: tree | [trees]} and span_tree [trees] compare
//     the run's span forest: name, status (OK / ERROR / UNSET),
//     attributes as a subset with value matchers, attributes_absent, and
//     children in span start order (exact count when given).
//   - a node's emits_log{message, level} logs with the node's context on
//     an slog logger built with otelobserver.LogHandler over a capturing
//     handler; log_records compares the run's records in order (body,
//     level, attributes subset, attributes_absent).
//   - session_id_uniform_across_span_tree, all_logs_carry_session_id,
//     invocation_span_carries_outcome_suspended,
//     node_span_carries_suspension_attributes and
//     otel_status_code_is_OK_per_4_2_mapping read those captures.
//
// The observability suite (obs_*.go) reuses the graph-engine parser and
// builder for a case's graph and the OTel capture above: the implicit
// otelobserver on the outermost graph, span_tree (with
// status_description and exception_recorded) compared per invocation.
// Its own directives are caller_correlation_id (graph.WithCorrelationID),
// invocations: N (N runs of the case's initial_state), no_edge_spans,
// invocation_count and the invariants in obsInvariants (correlation ids,
// fan-out instance indices, retry attempt siblings). Two fixture
// shorthands are rewritten into graph-engine vocabulary:
// update_pure_from_state {t: <s>_times_two} is update_from_field {t: s,
// multiplier: 2}, and flaky {fail_count, category, on_success} a
// failure_sequence of fail_count failures then success_update. Model,
// tool, embedding and rerank calls (calls_llm, calls_tool, calls_embed,
// calls_rerank against mock_llm / mock_embedding / mock_rerank; obs_llm.go,
// obs_embed.go), managed prompts (prompt_backend, render_variables,
// renders_prompt, renders_prompt_group; obs_prompt.go), typed-event
// collectors and §11 metrics are the suite's own parts. Every other
// observability key (Langfuse, caller metadata, detached traces, log
// trace/span ids, edge when: conditions, unlisted invariants) makes the
// case not implemented, naming it. Fixture mismatch absorbed: observability 004 declares a node nothing
// routes to (a graph-engine unreachable_node compile error); such nodes
// are dropped (absorbUntargetedNodes).
//
// The suspension suite runs on the same runner too, with the pipeline
// recording observer attached and the suspension vocabulary
// (IMPLEMENTERS-NOTES §4; sus_*.go, invariants_sus.go):
//
//   - suspend_with_descriptor{signal_id, metadata, mark_node_completed}
//     is a node body calling graph.Suspend (mark_node_completed: false
//     adds graph.RerunOnResume); conditional_suspend{suspend_on_item_index,
//     descriptor} suspends in the fan-out instance of that index and runs
//     the sibling on_other_indices directives in the others.
//   - wrap_with_middleware entries are real middleware innermost on the
//     node: {pre_log, post_log} log markers before next() and after it
//     returns; {pre_next_calls_suspend_with_descriptor} calls graph.Suspend
//     from the middleware and returns its error without calling next().
//     middleware_log_captured is the run's markers in order.
//   - an invocation with resume_invocation + signal_payload (an empty
//     mapping included) is Graph.Resume(id, payload): "<from previous
//     suspended outcome>" / "<from NAME suspended outcome>" name an
//     earlier suspended invocation, "<invocation_id from initial completed
//     invoke>" the first (completed) one, anything else not in <...> is a
//     literal id. resume_invocation without a payload is a §10 checkpoint
//     resume (not implemented).
//   - suspended_state and final_state_at_error are Result.State;
//     descriptor{signal_id, metadata | metadata_includes} and
//     suspending_node (the outermost dispatch node) read Result.Suspension;
//     observer events render a suspended event's descriptor.
//   - checkpointer: in_memory registers a harness-held
//     checkpoint.MemoryStore (graph.WithCheckpointStore), read right after
//     each run for checkpointer_assertions{paused_invocation_record_exists,
//     record_type}. A case with checkpointer: that neither suspends nor
//     resumes a suspension is a §10 checkpointing case (pu_ckpt.go).
//
// §10 checkpoint cases (pipeline-utilities 025, 029, 030, 070) compile the
// outermost graph with graph.WithCheckpointer on a harness-held
// checkpoint.MemoryStore:
//   - first_run_expected_error checks the first Invoke's error
//     {category, raised_from}; resume: {from_first_run: true} then calls
//     Graph.ResumeCheckpoint with the first run's invocation id and checks
//     final_state, nodes_executed/skipped_during_resume (node bodies run
//     in the resumed run, inner nodes included) and the invariants
//     resumed_invocation_id_differs_from_original,
//     resumed_correlation_id_matches_original,
//     after_node_crash_rolls_node_forward, subgraph_re_entry_uses_parent_states
//     and inner_first_node_not_re_run.
//   - crash_injection{after_node: X} wraps the store: right after the
//     engine's own save of X's completed checkpoint, the first run's
//     goroutine is held inside Save and the invocation abandoned; the
//     resume reads the record the engine wrote. The held run is released
//     (its Save fails) when the case ends.
//   - saved_record_assertions read the engine's record as far as it
//     records it: state (the last position's), completed_positions as the
//     count (CompletedNodeCount) plus, for a record saved at a completed
//     node, that node's name and parent namespace; parent_states_present
//     and parent_states_outermost_first read the position stack. Steps and
//     attempt indexes of earlier positions are not recorded, so not
//     checked.
//   - invoke_with{resume_invocation} + expected_error{category, transient}
//     resume an id directly; populate_checkpointer_via_runs first runs
//     the graph to completion that many times.
//
// Anything else in a §10 case (per-save and record-shape assertions,
// fan-out progress, caller ids, case-level invariants, other checkpointer
// backends) keeps the case not implemented, with what is missing after
// the capability.
//   - every node body run and middleware step is logged with its run: the
//     invocation context carries a run index, because a resume reuses the
//     invocation id. execution_order of a resume and its observer events
//     are the resume's own.
//
// Checkpointing (§10) and state-migration (§10.12) cases are recognized
// by their case keys and reported as not implemented before the rest of
// the case (written in the §10 vocabulary) is validated.
//
// Fixture mismatches the runner absorbs, each documented where it is
// done: graph-engine 020's undeclared initial_state key
// (absorbedFields); pipeline-utilities 022's subgraph_with_idx: key
// (parseSubgraphs), 023's undeclared item_field (absorbedItemFields), and
// 019 / 034's errors_field records (matchFinalState) and 019's
// list<dict<string,string>> errors field type (compileGraph); suspension
// 007's fan-out without collect_field (parseFanOut).
//
// Cases are independent: each gets fresh graphs, observers and matcher
// bindings, and cases run one at a time because the drain fixtures are
// timing-sensitive.
package conformance
