package conformance

import (
	"errors"
	"strings"
	"testing"
)

// runSus runs a single-case suspension fixture through the real suite
// runner.
func runSus(t *testing.T, src string) error {
	t.Helper()
	return runSuiteCase(t, "suspension", newSuspensionSuite(), src)
}

func runSusCases(t *testing.T, tests []puCase) {
	t.Helper()
	runSelfTests(t, tests, runSus)
}

// susGraph is gate (suspends) → next → END.
const susGraph = `
state:
  fields:
    approved: {type: bool, default: false}
    log: {type: list, reducer: append, default: []}
    done: {type: bool, default: false}
entry: gate
nodes:
  gate:
    suspend_with_descriptor:
      signal_id: "sig-1"
      metadata: {kind: "approval"}
  next:
    update: {done: true}
edges:
  - {from: gate, to: next}
  - {from: next, to: END}
`

// susInitial is the initial, suspending invocation of susGraph.
const susInitial = `
invocations:
  - name: initial
    initial_state: {}
    expected:
      outcome: suspended
      suspended_state: {approved: false, log: [], done: false}
      descriptor: {signal_id: "sig-1", metadata: {kind: "approval"}}
      suspending_node: gate
`

const susResumeOK = `
  - name: resume
    resume_invocation: "<from previous suspended outcome>"
    signal_payload: {approved: true, log: ["b"]}
    expected:
      outcome: completed
      final_state: {approved: true, log: ["b"], done: true}
      execution_order: [next]
`

func TestSuspensionSuspendAndResume(t *testing.T) {
	runSusCases(t, []puCase{
		{"suspend then resume", susGraph + susInitial + susResumeOK + `
invariants:
  suspend_returns_suspended_outcome: true
  resume_merges_signal_payload: true
  resume_continues_after_suspending_node: true
  signal_payload_overwrites_field_directly: true
  reducer_not_consulted_on_signal_merge: true
`, ""},
		{"suspended_state mismatch", susGraph + strings.Replace(susInitial, "done: false}", "done: true}", 1), "suspended_state.done: want true"},
		{"descriptor metadata mismatch", susGraph + strings.Replace(susInitial, `metadata: {kind: "approval"}}`, `metadata: {kind: "review"}}`, 1), "descriptor.metadata.kind"},
		{"metadata_includes subset", susGraph + strings.Replace(susInitial, `metadata: {kind: "approval"}}`, `metadata_includes: {}}`, 1), ""},
		{"suspending_node mismatch", susGraph + strings.Replace(susInitial, "suspending_node: gate", "suspending_node: next", 1), "suspending_node: want"},
		{"resume re-running the gate is caught", susGraph + susInitial + strings.Replace(susResumeOK, "[next]", "[gate, next]", 1), "execution_order"},
		{"an invariant that holds cannot be asserted false", susGraph + susInitial + susResumeOK + `
invariants:
  resume_continues_after_suspending_node: false
`, "want false, got true"},
		{"resume of a completed invocation as suspended", `
state:
  fields:
    done: {type: bool, default: false}
entry: a
nodes:
  a: {update: {done: true}}
edges:
  - {from: a, to: END}
invocations:
  - name: first
    initial_state: {}
  - name: resume
    resume_invocation: "<from previous suspended outcome>"
    signal_payload: {}
`, "ended completed, not suspended"},
		{"record invalid for a completed invocation and an unknown id", `
state:
  fields:
    done: {type: bool, default: false}
entry: a
nodes:
  a: {update: {done: true}}
edges:
  - {from: a, to: END}
invocations:
  - name: first
    initial_state: {}
  - name: resume_completed
    resume_invocation: "<invocation_id from initial completed invoke>"
    signal_payload: {done: false}
    expected:
      outcome: errored
      error: {category: suspension_record_invalid}
  - name: resume_unknown
    resume_invocation: "00000000-0000-4000-8000-000000000000"
    signal_payload: {}
    expected:
      outcome: errored
      error: {category: suspension_record_invalid}
invariants:
  resume_against_non_suspended_raises_record_invalid: true
  resume_covers_completed_and_never_existed_cases: true
`, ""},
		{"invalid payload", susGraph + susInitial + `
  - name: resume
    resume_invocation: "<from previous suspended outcome>"
    signal_payload: {approved: "yes"}
    expected:
      outcome: errored
      error: {category: suspension_resume_payload_invalid}
invariants:
  invalid_payload_blocks_resume: true
  error_category_is_resume_payload_invalid: true
`, ""},
	})
}

func TestSuspensionRerunOnResume(t *testing.T) {
	src := strings.Replace(susGraph, `metadata: {kind: "approval"}`, "metadata: {kind: \"approval\"}\n      mark_node_completed: false", 1)
	runSusCases(t, []puCase{
		// The gate suspends again on the re-run: RerunOnResume re-enters it.
		{"mark_node_completed false re-runs the node", src + susInitial + `
  - name: resume
    resume_invocation: "<from previous suspended outcome>"
    signal_payload: {}
    expected:
      outcome: suspended
      execution_order: [gate]
`, ""},
		{"resume_continues_after_suspending_node catches the re-run", src + susInitial + `
  - name: resume
    resume_invocation: "<from previous suspended outcome>"
    signal_payload: {}
    expected:
      outcome: suspended
invariants:
  resume_continues_after_suspending_node: true
`, "resumed at gate, want next"},
	})
}

func TestSuspensionObserverAndMiddleware(t *testing.T) {
	runSusCases(t, []puCase{
		{"suspended event carries the descriptor; the resume's events are its own", susGraph + `
observers:
  - {name: obs, attach: graph, target: outer, behavior: record}
invocations:
  - name: initial
    initial_state: {}
    expected:
      outcome: suspended
      observer_events:
        obs:
          - {phase: started, node_name: gate}
          - {phase: suspended, node_name: gate, descriptor: {signal_id: "sig-1", metadata: {kind: "approval"}}}
      observer_event_invariants:
        no_completed_event_for_suspending_node: true
        suspended_event_carries_descriptor: true
        started_followed_by_suspended_in_order: true
  - name: resume
    resume_invocation: "<from previous suspended outcome>"
    signal_payload: {}
    expected:
      outcome: completed
      observer_events:
        obs:
          - {phase: started, node_name: next}
          - {phase: completed, node_name: next}
`, ""},
		{"event descriptor mismatch", susGraph + `
observers:
  - {name: obs, attach: graph, target: outer, behavior: record}
invocations:
  - name: initial
    initial_state: {}
    expected:
      outcome: suspended
      observer_events:
        obs:
          - {phase: started, node_name: gate}
          - {phase: suspended, node_name: gate, descriptor: {signal_id: "other"}}
`, "descriptor"},
		{"pre-next logged, post-next skipped", strings.Replace(susGraph, "  gate:\n", "  gate:\n    wrap_with_middleware:\n      - {name: logger, pre_log: pre, post_log: post}\n", 1) + `
invocations:
  - name: initial
    initial_state: {}
    expected:
      outcome: suspended
      middleware_log_captured: [pre]
  - name: resume
    resume_invocation: "<from previous suspended outcome>"
    signal_payload: {}
    expected:
      outcome: completed
      middleware_log_captured: []
invariants:
  middleware_pre_next_block_runs_on_suspending_node: true
  middleware_post_next_block_skipped_on_suspending_node: true
`, ""},
		{"post-next logged around a returning node", strings.Replace(susGraph, "  next:\n", "  next:\n    wrap_with_middleware:\n      - {name: logger, pre_log: pre, post_log: post}\n", 1) + susInitial + `
  - name: resume
    resume_invocation: "<from previous suspended outcome>"
    signal_payload: {}
    expected:
      outcome: completed
      middleware_log_captured: [pre]
`, "middleware_log_captured"},
		{"suspend from middleware is rejected", `
state:
  fields:
    ran: {type: bool, default: false}
entry: gate
nodes:
  gate:
    wrap_with_middleware:
      - name: bad
        pre_next_calls_suspend_with_descriptor: {signal_id: "mw"}
    update: {ran: true}
edges:
  - {from: gate, to: END}
invocations:
  - name: initial
    initial_state: {}
    expected:
      outcome: errored
      error: {category: suspension_in_unsupported_context}
      final_state_at_error: {ran: false}
invariants:
  middleware_suspend_raises_unsupported_context: true
  wrapped_node_does_not_execute_after_middleware_suspend_attempt: true
`, ""},
	})
}

func TestSuspensionCheckpointer(t *testing.T) {
	base := susGraph + "checkpointer: in_memory\n" + `
invocations:
  - name: initial
    initial_state: {}
    expected:
      outcome: suspended
      checkpointer_assertions: {paused_invocation_record_exists: true, record_type: "suspended"}
  - name: resume
    resume_invocation: "<from previous suspended outcome>"
    signal_payload: {}
    expected:
      outcome: completed
      checkpointer_assertions: {paused_invocation_record_exists: false}
invariants:
  paused_record_persists_via_checkpointer_backend: true
  record_type_distinguishes_suspended_from_checkpointed: true
`
	runSusCases(t, []puCase{
		{"paused record in the harness store", base, ""},
		{"record_type mismatch", strings.Replace(base, `record_type: "suspended"`, `record_type: "checkpoint"`, 1), "record_type"},
	})
}

func TestSuspensionComposites(t *testing.T) {
	fanOut := `
subgraph:
  name: leaf
  state:
    fields:
      idx: {type: int, default: 0}
      out: {type: int, default: 0}
  entry: p
  nodes:
    p:
      conditional_suspend:
        suspend_on_item_index: 1
        descriptor: {signal_id: "fo", metadata: {kind: "k"}}
      on_other_indices:
        update_from_field: {out: idx, multiplier: 10}
  edges:
    - {from: p, to: END}
state:
  fields:
    items: {type: list<int>, default: [0, 1, 2]}
    results: {type: list<int>, reducer: append, default: []}
entry: fo
nodes:
  fo:
    fan_out: {subgraph: leaf, items_field: items, item_field: idx, collect_field: out, target_field: results, error_policy: POLICY}
edges:
  - {from: fo, to: END}
`
	runSusCases(t, []puCase{
		{"fail_fast fan-out suspends as a whole", strings.Replace(fanOut, "POLICY", "fail_fast", 1) + `
invocations:
  - name: initial
    initial_state: {}
    expected:
      outcome: suspended
      suspending_node: fo
      descriptor: {signal_id: "fo", metadata_includes: {kind: "k", fan_out_index: 1}}
invariants:
  single_instance_suspend_suspends_whole_fan_out: true
  siblings_cancelled_under_fail_fast: true
  descriptor_carries_fan_out_index: true
`, ""},
		{"collect fan-out rejects the suspension", strings.Replace(fanOut, "POLICY", "collect", 1) + `
invocations:
  - name: initial
    initial_state: {}
    expected:
      outcome: errored
      error: {category: suspension_in_unsupported_context}
invariants:
  collect_mode_suspend_rejected_at_runtime: true
`, ""},
		{"conditional_suspend outside a fan-out", `
state:
  fields:
    v: {type: int, default: 0}
entry: a
nodes:
  a:
    conditional_suspend: {suspend_on_item_index: 0, descriptor: {signal_id: s}}
edges:
  - {from: a, to: END}
invocations:
  - name: initial
    initial_state: {}
    expected:
      outcome: suspended
`, "outside a fan-out instance"},
	})
}

func TestSuspensionParse(t *testing.T) {
	resume := func(extra string) string {
		return susGraph + susInitial + "  - name: resume\n" + extra
	}
	tests := []struct {
		name, src string
		want      error
		msg       string
	}{
		{"unknown placeholder", resume("    resume_invocation: \"<from somewhere>\"\n    signal_payload: {}\n"), ErrDirectiveUnknown, "<from somewhere>"},
		{"unknown invocation name", resume("    resume_invocation: \"<from ghost suspended outcome>\"\n    signal_payload: {}\n"), ErrSchemaInvalid, `no earlier invocation named "ghost"`},
		{"payload without resume", resume("    signal_payload: {}\n"), ErrSchemaInvalid, "signal_payload needs resume_invocation"},
		{"resume with initial_state", resume("    resume_invocation: x\n    signal_payload: {}\n    initial_state: {}\n"), ErrSchemaInvalid, "takes no initial_state"},
		{"checkpoint resume", resume("    resume_invocation: x\n"), ErrNotImplemented, capCheckpoint},
		{"unknown descriptor key", strings.Replace(susGraph, `signal_id: "sig-1"`, "signal_id: \"sig-1\"\n      colour: red", 1) + susInitial, ErrDirectiveUnknown, "colour"},
		{"on_other_indices alone", strings.Replace(susGraph, "    update: {done: true}\n", "    on_other_indices: {update: {done: true}}\n", 1) + susInitial, ErrSchemaInvalid, "needs conditional_suspend"},
		{"empty wrap entry", strings.Replace(susGraph, "  next:\n", "  next:\n    wrap_with_middleware: [{name: x}]\n", 1) + susInitial, ErrSchemaInvalid, "needs pre_log"},
		{"checkpointer_assertions without checkpointer", susGraph + strings.Replace(susInitial, "      suspending_node: gate\n", "      suspending_node: gate\n      checkpointer_assertions: {record_type: suspended}\n", 1), ErrSchemaInvalid, "need a checkpointer"},
		{"unknown checkpointer", susGraph + "checkpointer: carrier_pigeon\n" + susInitial, ErrDirectiveUnknown, "carrier_pigeon"},
		{"otel span status", susGraph + "observers:\n  - {name: o, behavior: otel}\n" + strings.Replace(susInitial, "      suspending_node: gate\n", "      suspending_node: gate\n      otel_spans: {o: {name: x, status: SUSPENDED}}\n", 1), ErrDirectiveUnknown, "SUSPENDED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, cases, err := ParseFixture("suspension", "case.yaml", []byte(tt.src))
			if err != nil {
				t.Fatalf("ParseFixture: %v", err)
			}
			p := &geParser{invariants: newInvariantRegistry()}
			_, err = p.parseCase(cases[0])
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %q, want it to mention %q", err, tt.msg)
			}
		})
	}
}
