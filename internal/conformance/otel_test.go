package conformance

import (
	"strings"
	"testing"
)

// otelBase is a two-node session graph with logging nodes and an otel
// observer.
const otelBase = `
state:
  fields:
    x: {type: int, default: 0}
entry: a
nodes:
  a:
    update_pure: {x: 1}
    emits_log: {message: "in a", level: INFO}
  b:
    raises: {category: node_exception, message: boom}
edges:
  - {from: a, to: b}
  - {from: b, to: END}
observers:
  - {name: o, attach: graph, target: outer, behavior: otel}
initial_state: {}
session_store: in_memory
session_id: "s1"
`

// TestOTelAssertions runs span and log expectations through the real
// runner: passing ones, and each kind of mismatch.
func TestOTelAssertions(t *testing.T) {
	tree := func(nodeB string) string {
		return `expected:
  outcome: errored
  otel_spans:
    o:
      name: openarmature.invocation
      status: ERROR
      attributes: {openarmature.invocation_id: "<uuid>", openarmature.session_id: "s1", openarmature.outcome: errored}
      children:
        - {name: a, status: OK, attributes: {openarmature.node.namespace: [a]}, children: []}
        - ` + nodeB + `
`
	}
	logs := func(rec string) string {
		return "  log_records:\n    - " + rec + "\n"
	}
	runSSCases(t, []puCase{
		{name: "pass", src: otelBase + tree(`{name: b, status: ERROR, attributes: {openarmature.error.category: node_exception}}`) +
			logs(`{body: "in a", level: INFO, attributes: {openarmature.session_id: "s1", openarmature.correlation_id: "<uuid>"}}`) +
			"invariants:\n  session_id_uniform_across_span_tree: s1\n  all_logs_carry_session_id: s1\n"},
		{name: "span_tree", src: strings.Replace(otelBase, "observers:\n  - {name: o, attach: graph, target: outer, behavior: otel}\n", "", 1) +
			"expected:\n  outcome: errored\n  span_tree:\n    - name: openarmature.invocation\n      children: [{name: a}, {name: b}]\n"},
		{name: "wrong status", src: otelBase + tree(`{name: b, status: OK}`), fail: "status: want OK, got ERROR"},
		{name: "wrong name", src: otelBase + tree(`{name: c}`), fail: `want "c", got "b"`},
		{name: "extra child", src: otelBase + tree(`{name: b, children: [{name: z}]}`), fail: "want 1 spans, got 0"},
		{name: "absent attribute present", src: otelBase + tree(`{name: b, attributes_absent: [openarmature.session_id]}`), fail: "must be absent"},
		{name: "log body", src: otelBase + "expected:\n  outcome: errored\n" + logs(`{body: "nope"}`), fail: `want "nope", got "in a"`},
		{name: "log attribute", src: otelBase + "expected:\n  outcome: errored\n" + logs(`{body: "in a", attributes_absent: [openarmature.session_id]}`), fail: "must be absent"},
		{name: "session invariant", src: otelBase + "expected:\n  outcome: errored\ninvariants:\n  session_id_uniform_across_span_tree: s2\n", fail: `want "s2"`},
		{name: "unknown otel observer", src: otelBase + "expected:\n  outcome: errored\n  otel_spans: {ghost: {name: x}}\n", fail: "no observer ghost"},
	})
}

func TestOTelParse(t *testing.T) {
	runSSCases(t, []puCase{
		{name: "unknown span key", src: otelBase + "expected:\n  span_tree: [{name: x, colour: red}]\n", fail: "colour"},
		{name: "unknown status", src: otelBase + "expected:\n  span_tree: [{name: x, status: MAYBE}]\n", fail: "MAYBE"},
		{name: "span without name", src: otelBase + "expected:\n  span_tree: [{status: OK}]\n", fail: "needs a name"},
		{name: "unknown log level", src: strings.Replace(otelBase, "level: INFO", "level: LOUD", 1), fail: "LOUD"},
		{name: "unknown log key", src: otelBase + "expected:\n  log_records: [{body: x, colour: red}]\n", fail: "colour"},
	})
}
