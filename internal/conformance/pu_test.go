package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// runPU runs a single-case pipeline-utilities fixture through the real
// suite runner.
func runPU(t *testing.T, src string) error {
	t.Helper()
	return runSuiteCase(t, "pipeline-utilities", newPipelineUtilitiesSuite(), src)
}

// runSuiteCase runs a single-case fixture of a suite through the real
// suite runner.
func runSuiteCase(t *testing.T, suite string, runner *graphEngineSuite, src string) error {
	t.Helper()
	_, cases, err := ParseFixture(suite, "case.yaml", []byte(src))
	if err != nil {
		t.Fatalf("ParseFixture: %v", err)
	}
	if len(cases) != 1 {
		t.Fatalf("got %d cases, want 1", len(cases))
	}
	return runner.RunCase(context.Background(), cases[0])
}

// puCase is one self-test: a fixture and either "" (must pass) or a
// substring the failure must contain.
type puCase struct {
	name, src, fail string
}

func runPUCases(t *testing.T, tests []puCase) {
	t.Helper()
	runSelfTests(t, tests, runPU)
}

// runSelfTests runs each case with run and checks it passes, or fails
// with the expected message.
func runSelfTests(t *testing.T, tests []puCase, run func(*testing.T, string) error) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t, tt.src)
			switch {
			case tt.fail == "" && err != nil:
				t.Fatalf("want pass, got %v", err)
			case tt.fail != "" && err == nil:
				t.Fatalf("want a failure mentioning %q, the case passed", tt.fail)
			case tt.fail != "" && !strings.Contains(err.Error(), tt.fail):
				t.Fatalf("want a failure mentioning %q, got %v", tt.fail, err)
			}
		})
	}
}

const puTraceBase = `
state:
  fields:
    trace: {type: list<string>, reducer: append, default: []}
entry: a
nodes:
  a:
    update: {trace: ["a"]}
edges:
  - {from: a, to: END}
initial_state: {}
`

func TestPipelineMiddlewareSpecs(t *testing.T) {
	runPUCases(t, []puCase{
		{"trace_recorder markers compose outer to inner", puTraceBase + `
middleware:
  per_graph:
    - {type: trace_recorder, name: g, pre_marker: g.pre, post_marker: g.post}
  per_node:
    a:
      - {type: trace_recorder, name: n, pre_marker: n.pre, post_marker: n.post}
expected:
  final_state: {trace: [g.pre, n.pre, a, n.post, g.post]}
  execution_order: [a]
  trace_records:
    n:
      - {state_in: {trace: []}, partial_update_returned: {trace: [n.pre, a, n.post]}, pre_seen: true, post_seen: true}
`, ""},
		{"trace order mismatch fails", puTraceBase + `
middleware:
  per_node:
    a:
      - {type: trace_recorder, name: m1, pre_marker: m1.pre, post_marker: m1.post}
      - {type: trace_recorder, name: m2, pre_marker: m2.pre, post_marker: m2.post}
expected:
  final_state: {trace: [m2.pre, m1.pre, a, m1.post, m2.post]}
`, "final_state.trace[0]"},
		{"short_circuit skips the node", puTraceBase + `
middleware:
  per_node:
    a:
      - {type: short_circuit, partial_update: {trace: [sc]}}
expected:
  final_state: {trace: [sc]}
  execution_order: []
`, ""},
		{"short-circuited node is not in execution_order", puTraceBase + `
middleware:
  per_node:
    a:
      - {type: short_circuit, partial_update: {trace: [sc]}}
expected:
  execution_order: [a]
`, "execution_order"},
		{"timing with the clock stub", puTraceBase + `
middleware:
  per_node:
    a:
      - {type: timing, node_name: a, on_complete: {capture_to: timing_records}}
clock_stub: {type: deterministic_monotonic, advance_ms_per_call: 7}
expected:
  timing_records:
    - {node_name: a, duration_ms: 7, outcome: success, exception_category: null}
`, ""},
		{"timing record mismatch fails", puTraceBase + `
middleware:
  per_node:
    a:
      - {type: timing, on_complete: {capture_to: timing_records}}
clock_stub: {type: deterministic_monotonic, advance_ms_per_call: 7}
expected:
  timing_records:
    - {node_name: a, duration_ms: 5}
`, "timing_records[0].duration_ms"},
		{"unknown middleware type", puTraceBase + `
middleware:
  per_node:
    a:
      - {type: circuit_breaker}
`, "fixture_directive_unknown: circuit_breaker"},
		{"unknown middleware key", puTraceBase + `
middleware:
  per_node:
    a:
      - {type: retry, max_attempts: 2, jitter: true}
`, "fixture_directive_unknown: jitter"},
		{"per_node names an undeclared node", puTraceBase + `
middleware:
  per_node:
    b:
      - {type: trace_recorder, name: r}
`, "fixture_schema_invalid"},
	})
}

const puFlakyBase = `
state:
  fields:
    v: {type: int, default: 0}
    src: {type: int, default: 9}
entry: target
nodes:
  target:
    flaky:
      failure_sequence:
        - {transient: %s, category: %s, message: "throttle"}
      success_update: {v: src}
edges:
  - {from: target, to: END}
initial_state: {}
middleware:
  per_node:
    target:
      - {type: retry, max_attempts: 3, backoff: {type: deterministic, seconds: 0}}
`

// flakyFixture fills puFlakyBase's transient flag and category.
func flakyFixture(transient, category string) string {
	return strings.Replace(strings.Replace(puFlakyBase, "%s", transient, 1), "%s", category, 1)
}

func TestPipelineFailureMocks(t *testing.T) {
	runPUCases(t, []puCase{
		{"transient: true is retried whatever the category; success reads a state field", flakyFixture("true", "provider_invalid_request") + `
observers:
  - {name: obs, attach: graph, target: outer, behavior: record}
expected:
  final_state: {v: 9, src: 9}
  observer_events:
    obs:
      - {phase: started, attempt_index: 0}
      - {phase: completed, attempt_index: 0, error: node_exception}
      - {phase: started, attempt_index: 1}
      - {phase: completed, attempt_index: 1, post_state: {v: 9, src: 9}}
`, ""},
		{"transient: false is not retried", flakyFixture("false", "provider_invalid_request") + `
expected_error:
  category: node_exception
  message: throttle
  flaky_call_count: 1
`, ""},
		{"flaky_call_count mismatch fails", flakyFixture("false", "provider_invalid_request") + `
expected_error:
  category: node_exception
  flaky_call_count: 2
`, "flaky_call_count: want 2, got 1"},
		{"flaky_by_index fails the instance whose item matches", puFanOut(`
      flaky_by_index: {fail_when_idx: 2, success_compute: {result: x}}`, "collect", `
expected:
  final_state:
    items: [1, 2, 3]
    results: [1, 3]
    errors: [{fan_out_index: 1, category: node_exception}]
`), ""},
		{"flaky_instance_only with instance retry", puFanOut(`
      flaky_instance_only: {fail_count_per_instance: 1, category: provider_rate_limit, success_compute: {result: x}}`, "fail_fast", `
expected:
  final_state: {items: [1, 2, 3], results: [1, 2, 3], errors: []}
`, `
      instance_middleware:
        - {type: retry, max_attempts: 2, backoff: {type: deterministic, seconds: 0}}`), ""},
		{"unknown failure-entry key", strings.Replace(flakyFixture("true", "provider_invalid_request"), `message: "throttle"`, `message: "throttle", delay: 1`, 1),
			"fixture_directive_unknown: delay"},
	})
}

// puFanOut builds a three-instance fan-out fixture whose subgraph node
// body is node, with the given error policy, expectations and extra
// fan_out keys.
func puFanOut(node, policy, expect string, extra ...string) string {
	return `
subgraph:
  name: unit
  state:
    fields:
      x: {type: int, default: 0}
      result: {type: int, default: 0}
  entry: work
  nodes:
    work:` + node + `
  edges:
    - {from: work, to: END}
state:
  fields:
    items: {type: list<int>, default: [1, 2, 3]}
    results: {type: list<int>, reducer: append, default: []}
    errors: {type: "list<dict<string,string>>", reducer: append, default: []}
entry: process
nodes:
  process:
    fan_out:
      subgraph: unit
      items_field: items
      item_field: x
      collect_field: result
      target_field: results
      error_policy: ` + policy + `
      errors_field: errors` + strings.Join(extra, "") + `
edges:
  - {from: process, to: END}
initial_state: {}
` + expect
}

func TestPipelineErrorsFieldMatching(t *testing.T) {
	body := `
      flaky_by_index: {fail_when_idx: 2, success_compute: {result: x}}`
	runPUCases(t, []puCase{
		{"numeric string index and no message", puFanOut(body, "collect", `
expected:
  final_state: {items: [1, 2, 3], results: [1, 3], errors: [{fan_out_index: "1", category: node_exception}]}
`), ""},
		{"wrong index fails", puFanOut(body, "collect", `
expected:
  final_state: {items: [1, 2, 3], results: [1, 3], errors: [{fan_out_index: "2", category: node_exception}]}
`), "final_state.errors[0].fan_out_index"},
		{"non-numeric string does not match an int", puFanOut(body, "collect", `
expected:
  final_state: {items: [1, 2, 3], results: [1, 3], errors: [{fan_out_index: "one", category: node_exception}]}
`), "final_state.errors[0].fan_out_index"},
		{"unknown record key fails", puFanOut(body, "collect", `
expected:
  final_state: {items: [1, 2, 3], results: [1, 3], errors: [{fan_out_index: 1, stack: x}]}
`), `missing key "stack"`},
		{"record count mismatch fails", puFanOut(body, "collect", `
expected:
  final_state: {items: [1, 2, 3], results: [1, 3], errors: []}
`), "want 0 records"},
		{"the rest of the final state stays exact", puFanOut(body, "collect", `
expected:
  final_state: {items: [1, 2, 3], results: [1, 3, 4], errors: [{fan_out_index: 1}]}
`), "final_state.results"},
	})
}

// puIsolated builds a single-instance fan-out whose instance fails with
// a chained cause and is degraded by instance failure isolation.
func puIsolated(caught string) string {
	return `
subgraph:
  name: unit
  state:
    fields:
      x: {type: int, default: 0}
      out: {type: string, default: ""}
  entry: work
  nodes:
    work:
      flaky:
        failure_sequence:
          - transient: false
            category: provider_invalid_response
            message: surface
            cause: {category: null, message: origin}
  edges:
    - {from: work, to: END}
state:
  fields:
    items: {type: list<int>, default: [1]}
    results: {type: list<string>, reducer: append, default: []}
entry: process
nodes:
  process:
    fan_out:
      subgraph: unit
      items_field: items
      item_field: x
      collect_field: out
      target_field: results
      instance_middleware:
        - {type: failure_isolation, degraded_update: {out: degraded}, event_name: isolated}
edges:
  - {from: process, to: END}
initial_state: {}
expected:
  final_state: {items: [1], results: [degraded]}
  expected_failure_isolation_event:
    event_name: isolated
    post_state: {out: degraded}
    caught_exception:` + caught
}

func TestPipelineCaughtExceptionChain(t *testing.T) {
	runPUCases(t, []puCase{
		{"chain with an unpinned carrier message", puIsolated(`
      category: provider_invalid_response
      message: surface
      chain:
        - {carrier: true, category: node_exception}
        - {carrier: false, category: provider_invalid_response, message: surface}
        - {carrier: false, category: null, message: origin}
`), ""},
		{"carrier flag mismatch fails", puIsolated(`
      chain:
        - {carrier: false, category: node_exception}
        - {carrier: false, category: provider_invalid_response}
        - {carrier: false, category: null}
`), "chain[0].carrier"},
		{"missing link fails", puIsolated(`
      chain:
        - {carrier: true, category: node_exception}
        - {carrier: false, category: provider_invalid_response}
`), "want 2 items"},
		{"derived category is the outermost non-carrier", puIsolated(`
      category: node_exception
`), "caught_exception.category"},
		{"null category matches only an uncategorized link", puIsolated(`
      chain:
        - {carrier: true, category: node_exception}
        - {carrier: false, category: null}
        - {carrier: false, category: null}
`), "chain[1].category"},
		{"post_state is exact", strings.Replace(puIsolated(`
      category: provider_invalid_response
`), "post_state: {out: degraded}", "post_state: {}", 1), "post_state"},
		{"fixture invariants run real checks", puIsolated(`
      category: provider_invalid_response
  invariants:
    chain_has_two_non_carrier_links: true
    derived_category_is_outermost_non_carrier_with_category: true
    node_level_chain_is_single_non_carrier_link: false
`), ""},
		{"a false invariant fails", puIsolated(`
      category: provider_invalid_response
  invariants:
    node_level_chain_is_single_non_carrier_link: true
`), "node_level_chain_is_single_non_carrier_link"},
		{"unknown invariant", puIsolated(`
      category: provider_invalid_response
  invariants:
    chain_is_pretty: true
`), "fixture_directive_unknown: chain_is_pretty"},
		{"unknown caught_exception key", puIsolated(`
      category: provider_invalid_response
      stack: []
`), "fixture_directive_unknown: stack"},
	})
}

func TestPipelineNotImplemented(t *testing.T) {
	for _, tt := range []struct{ extra, capability string }{
		{"migrations: []\nseeded_record: {}\n", capMigration},
	} {
		err := runPU(t, puTraceBase+tt.extra+"invariants: {some_section_10_predicate: true}\n")
		var ni *NotImplementedError
		if !errors.As(err, &ni) || !strings.HasPrefix(ni.Capability, tt.capability) {
			t.Errorf("%q: want not implemented %q, got %v", tt.extra, tt.capability, err)
		}
	}
}
