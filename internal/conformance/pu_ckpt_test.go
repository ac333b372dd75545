package conformance

import (
	"errors"
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

func TestPipelineCheckpointNotImplemented(t *testing.T) {
	for _, tt := range []struct{ extra, reason string }{
		{"expected: {checkpoint_saves: []}\n", "completed_positions with step/attempt_index"},
		{"caller_correlation_id: x\nresume: {from_first_run: true}\n", "caller_correlation_id"},
		{"crash_injection: {after_fan_out_instance: {node: n, index: 0}}\n", "per-instance fan-out progress"},
		{"resume: {from_first_run: true, expected: {successful_attempt_index_during_resume: 1}}\n", "successful_attempt_index_during_resume"},
		{"saved_record_assertions: {fan_out_progress: {}}\nresume: {from_first_run: true}\n", "fan_out_progress is not recorded"},
	} {
		err := runPU(t, ckptCase("update_pure: {b_ran: true}", tt.extra))
		var ni *NotImplementedError
		if !errors.As(err, &ni) || !strings.HasPrefix(ni.Capability, capCheckpoint+": ") || !strings.Contains(ni.Capability, tt.reason) {
			t.Errorf("%q: want not implemented %s naming %q, got %v", tt.extra, capCheckpoint, tt.reason, err)
		}
	}
}
