package conformance

import (
	"fmt"
	"strings"
	"testing"
)

const ckptBase = `
state:
  fields:
    a_ran: {type: bool, default: false}
    b_ran: {type: bool, default: false}
entry: node_a
nodes:
  node_a:
    update_pure: {a_ran: true}
  node_b:
    %s
edges:
  - {from: node_a, to: node_b}
  - {from: node_b, to: END}
initial_state: {}
checkpointer: in_memory
`

func ckptCase(nodeB, rest string) string {
	return strings.Replace(ckptBase, "%s", nodeB, 1) + rest
}

const ckptFlaky = "flaky: {fail_first_invocation_only: true, on_success: {b_ran: true}}"

func TestPipelineCheckpointCases(t *testing.T) {
	failResume := `first_run_expected_error: {category: node_exception, raised_from: node_b}
saved_record_assertions:
  state: %s
  completed_positions:
    - {namespace: [], node_name: node_a, step: 0, attempt_index: 0}
resume:
  from_first_run: true
  expected:
    final_state: {a_ran: true, b_ran: true}
    nodes_executed_during_resume: %s
    nodes_skipped_during_resume: [node_a]
  invariants:
    resumed_invocation_id_differs_from_original: true
    resumed_correlation_id_matches_original: true
`
	fill := func(state, executed string) string {
		s := strings.Replace(failResume, "%s", state, 1)
		return ckptCase(ckptFlaky, strings.Replace(s, "%s", executed, 1))
	}
	crash := func(after, state string) string {
		return ckptCase("update_pure: {b_ran: true}", `crash_injection: {after_node: `+after+`}
saved_record_assertions:
  state: `+state+`
  completed_positions:
    - {namespace: [], node_name: node_a, step: 0, attempt_index: 0}
resume:
  from_first_run: true
  expected:
    final_state: {a_ran: true, b_ran: true}
    nodes_executed_during_resume: [node_b]
    nodes_skipped_during_resume: [node_a]
  invariants:
    after_node_crash_rolls_node_forward: true
`)
	}
	runPUCases(t, []puCase{
		{"failure resume", fill("{a_ran: true, b_ran: false}", "[node_b]"), ""},
		{"wrong saved state", fill("{a_ran: false, b_ran: false}", "[node_b]"), "saved_record_assertions.state"},
		{"skipped node said to run", fill("{a_ran: true, b_ran: false}", "[node_a, node_b]"), "nodes_executed_during_resume: node node_a"},
		{"first run did not fail", ckptCase("update_pure: {b_ran: true}", `first_run_expected_error: {category: node_exception}
resume: {from_first_run: true}
`), "the first run completed"},
		{"crash after node_a", crash("node_a", "{a_ran: true, b_ran: false}"), ""},
		{"crash record state", crash("node_a", "{a_ran: true, b_ran: true}"), "saved_record_assertions.state"},
		{"crash node never completes", crash("nowhere", "{a_ran: true, b_ran: false}"), "crash_injection"},
		{"resume unknown id", ckptCase("update_pure: {b_ran: true}", `invoke_with: {resume_invocation: ghost}
expected_error: {category: checkpoint_not_found, transient: false}
`), ""},
		{"resume unknown id after populating", ckptCase("update_pure: {b_ran: true}", `populate_checkpointer_via_runs: 2
invoke_with: {resume_invocation: ghost}
expected_error: {category: checkpoint_not_found}
`), ""},
		{"wrong resume error category", ckptCase("update_pure: {b_ran: true}", `invoke_with: {resume_invocation: ghost}
expected_error: {category: checkpoint_record_invalid}
`), "error category"},
	})
}

func TestPipelineCheckpointDirectives(t *testing.T) {
	saves := `expected:
  final_state: {a_ran: true, b_ran: true}
  checkpoint_saves:
    - after_node: node_a
      state: {a_ran: true, b_ran: false}
      completed_positions: [{namespace: [], node_name: node_a, step: 0, attempt_index: 0}]
    - after_node: node_b
      state: {a_ran: true, b_ran: true}
  latest_record_assertions: {correlation_id: c-1, parent_states: [], fan_out_progress: null, schema_version: "<any-string>"}
  invariants: {save_count: %s, last_saved_at_monotonic_across_saves: true, completed_positions_step_monotonic: true}
caller_correlation_id: c-1
`
	ids := `caller_correlation_id: corr-1
caller_invocation_id: first-1
first_run_expected_error: {category: node_exception, raised_from: node_b}
resume:
  from_first_run: true
  caller_invocation_id: resume-1
  expected: {final_state: {a_ran: true, b_ran: true}}
invariants:
  first_run_invocation_id: first-1
  first_run_correlation_id: %s
  saved_record_correlation_id: corr-1
  correlation_id_uniform_across_both_runs: true
  resumed_run_invocation_id_is_fresh_uuidv4: true
  resumed_run_invocation_id_not_caller_supplied: true
`
	seeded := `seeded_record:
  schema_version: v0
  state: {a_ran: true}
  completed_positions: [{namespace: [], node_name: node_a, step: 0, attempt_index: 0}]
%s
resume:
  from_seeded_record: true
  expected_error:
    category: checkpoint_state_migration_missing
    carries: {from_version: v0, to_version: "", registered_migrations_count: %s}
`
	runPUCases(t, []puCase{
		{"every save", ckptCase("update_pure: {b_ran: true}", strings.Replace(saves, "%s", "2", 1)), ""},
		{"save count", ckptCase("update_pure: {b_ran: true}", strings.Replace(saves, "%s", "3", 1)), "invariant save_count"},
		{"ids across resume", ckptCase(ckptFlaky, strings.Replace(ids, "%s", "corr-1", 1)), ""},
		{"wrong correlation id", ckptCase(ckptFlaky, strings.Replace(ids, "%s", "other", 1)), "invariant first_run_correlation_id"},
		{"migration missing", ckptCase(ckptFlaky, fmt.Sprintf(seeded, "", "0")), ""},
		{"unrelated migration", ckptCase(ckptFlaky, fmt.Sprintf(seeded, "migrations: [{from_version: v3, to_version: v4, migrate: irrelevant}]", "1")), ""},
		{"migration count", ckptCase(ckptFlaky, fmt.Sprintf(seeded, "", "2")), "carries.registered_migrations_count"},
		{"unknown directive", ckptCase(ckptFlaky, "teleport: mars\n"), "fixture_directive_unknown: teleport"},
		{"unknown resume invariant", ckptCase(ckptFlaky, `first_run_expected_error: {category: node_exception}
resume: {from_first_run: true, invariants: {bogus: true}}
`), "fixture_directive_unknown: resume.invariants.bogus"},
		{"unknown migration mock", ckptCase(ckptFlaky, "migrations: [{from_version: a, to_version: b, migrate: nope}]\n"), "fixture_directive_unknown: nope"},
	})
}
