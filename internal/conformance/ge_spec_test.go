package conformance

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// geBase is a valid graph-engine case; tests splice lines into it.
const geBase = `state:
  fields:
    v: {type: int, default: 0}
entry: a
nodes:
  a:
    update: {v: 1}
edges:
  - {from: a, to: END}
observers:
  - {name: obs, attach: graph, target: outer, behavior: record}
expected:
  final_state: {v: 1}
`

func parseGE(t *testing.T, src string) (*geCase, error) {
	t.Helper()
	_, cases, err := ParseFixture("graph-engine", "case.yaml", []byte(src))
	if err != nil {
		t.Fatalf("ParseFixture: %v", err)
	}
	if len(cases) != 1 {
		t.Fatalf("got %d cases, want 1", len(cases))
	}
	return (&geParser{invariants: newInvariantRegistry()}).parseCase(cases[0])
}

func TestGraphEngineUnknownDirectives(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"node directive", strings.Replace(geBase, "    update: {v: 1}\n", "    update: {v: 1}\n    teleport: mars\n", 1),
			"fixture_directive_unknown: teleport at case.yaml:8"},
		{"top-level key", geBase + "frobnicate: true\n",
			"fixture_directive_unknown: frobnicate at case.yaml:14"},
		{"expected key", geBase + "  vibes: good\n",
			"fixture_directive_unknown: vibes at case.yaml:14"},
		{"invariant", geBase + "  invariants: {moon_phase_ok: true}\n",
			"fixture_directive_unknown: moon_phase_ok at case.yaml:14"},
		{"reducer name", strings.Replace(geBase, "{type: int, default: 0}", "{type: int, default: 0, reducer: sideways}", 1),
			"fixture_directive_unknown: sideways at case.yaml:3"},
		{"reducer factory", strings.Replace(geBase, "{type: int, default: 0}", "{type: int, reducer: {zigzag: {}}}", 1),
			"fixture_directive_unknown: zigzag at case.yaml:3"},
		{"field key", strings.Replace(geBase, "{type: int, default: 0}", "{type: int, colour: red}", 1),
			"fixture_directive_unknown: colour at case.yaml:3"},
		{"observer behavior", strings.Replace(geBase, "behavior: record", "behavior: sing", 1),
			"fixture_directive_unknown: sing at case.yaml:11"},
		{"observer event key", geBase + "  observer_events:\n    obs:\n      - {step: 0, mood: happy}\n",
			"fixture_directive_unknown: mood at case.yaml:16"},
		{"edge callable", strings.Replace(geBase, "  - {from: a, to: END}", "  - {from: a, condition: {callable: coin_flip}}", 1),
			"fixture_directive_unknown: coin_flip at case.yaml:9"},
		{"unknown wins over not implemented", strings.Replace(geBase, "    update: {v: 1}\n", "    fan_out: {subgraph: x}\n    teleport: mars\n", 1),
			"fixture_directive_unknown: teleport at case.yaml:8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseGE(t, tt.src)
			var de *DirectiveUnknownError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want *DirectiveUnknownError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("err = %q, want %q", err, tt.want)
			}
		})
	}
}

func TestGraphEngineNotImplemented(t *testing.T) {
	tests := []struct {
		name, src, capability string
	}{
		{"checkpoint resume without a checkpointer", geBase + "invoke_with: {resume_invocation: x}\n", capCheckpoint},
		{"llm node", strings.Replace(geBase, "    update: {v: 1}\n", "    update: {v: 1}\n    calls_llm: {}\n", 1), capObservability},
		{"metrics", geBase + "  metrics: {}\n", capObservability},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseGE(t, tt.src)
			var ni *NotImplementedError
			if !errors.As(err, &ni) {
				t.Fatalf("err = %v, want *NotImplementedError", err)
			}
			// A §10 case names what it misses after the capability.
			if ni.Capability != tt.capability && !strings.HasPrefix(ni.Capability, tt.capability+": ") {
				t.Errorf("capability = %q, want %q", ni.Capability, tt.capability)
			}
		})
	}
}

func TestGraphEngineSchemaInvalid(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"no state", "entry: a\nnodes: {a: {update: {v: 1}}}\n", "graph has no state:"},
		{"edge without target", strings.Replace(geBase, "{from: a, to: END}", "{from: a}", 1), "has neither to: nor condition:"},
		{"undeclared subgraph", strings.Replace(geBase, "    update: {v: 1}\n", "    subgraph: nowhere\n", 1), `undeclared subgraph "nowhere"`},
		{"inputs without subgraph", strings.Replace(geBase, "    update: {v: 1}\n", "    update: {v: 1}\n    inputs: {x: v}\n", 1), "need subgraph:"},
		{"snapshot of a record observer", strings.Replace(geBase, "    update: {v: 1}\n", "    invoke_drain_events_for: {timeout_seconds: 1, snapshot_observer: obs}\n", 1), "not a declared accumulate observer"},
		{"negative timeout", geBase + "invoke: {drain: {timeout_seconds: -1}}\n", "timeout_seconds must be between 0 and 3600"},
		{"undeclared observer in expectations", geBase + "  observer_events: {ghost: []}\n", `undeclared observer "ghost"`},
		{"bad run_count", geBase + "run_count: 0\n", "run_count must be an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseGE(t, tt.src)
			if !errors.Is(err, ErrSchemaInvalid) {
				t.Fatalf("err = %v, want fixture_schema_invalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestGraphEngineParseShapes(t *testing.T) {
	src := `subgraph:
  name: inner
  state: {fields: {x: {type: int}}}
  entry: i
  nodes: {i: {update: {x: 1}}}
  edges: [{from: i, to: END}]
state:
  fields:
    v: {type: int, default: 0}
    items: {type: list, reducer: {merge_by_key: {key: null}}, alt_reducer: append}
entry: a
nodes:
  a:
    raises: {category: provider_unavailable, message: down}
    update_from_field: {v: v, multiplier: 2}
    update: {v: 1}
  s:
    subgraph: inner
    projects_in: [x]
    projects_out: []
edges:
  - from: a
    condition: {if_field: v, equals: 1, then: s, else: END}
  - {from: s, to: END}
initial_state: {v: 2}
invocations:
  - {name: first, drain: {}}
  - {name: second, drain: {timeout_seconds: null}, initial_state: {v: 3}}
  - {name: third, drain: {timeout_seconds: 0.25}}
`
	gc, err := parseGE(t, src)
	if err != nil {
		t.Fatal(err)
	}
	a := gc.outer.node("a")
	var kinds []stepKind
	for _, st := range a.steps {
		kinds = append(kinds, st.kind)
	}
	if diff := cmp.Diff([]stepKind{stepRaise, stepUpdateFromField, stepUpdate}, kinds); diff != "" {
		t.Errorf("node directives must keep document order (-want +got):\n%s", diff)
	}
	if a.steps[0].category != "provider_unavailable" || a.steps[0].message != "down" {
		t.Errorf("raises = %+v", a.steps[0])
	}
	items := gc.outer.field("items")
	if len(items.reducers) != 2 || items.reducers[0].name != "merge_by_key" || items.reducers[0].hasKey || items.reducers[1].name != "append" {
		t.Errorf("items reducers = %+v %+v", items.reducers[0], items.reducers[1])
	}
	s := gc.outer.node("s").sub
	if s.name != "inner" || !s.hasIn || !s.hasOut || len(s.projectsOut) != 0 || s.hasInputs {
		t.Errorf("subgraph use = %+v", s)
	}
	if len(gc.invocations) != 3 || gc.single {
		t.Fatalf("invocations = %d single=%t", len(gc.invocations), gc.single)
	}
	if got := gc.invocations[0].initial.String(); got != "{v: 2}" {
		t.Errorf("case-level initial_state must default the invocations, got %s", got)
	}
	if got := gc.invocations[1].initial.String(); got != "{v: 3}" {
		t.Errorf("an invocation's own initial_state wins, got %s", got)
	}
	d := []*geDrain{gc.invocations[0].drain, gc.invocations[1].drain, gc.invocations[2].drain}
	if d[0].hasTimeout || d[1].hasTimeout || !d[2].hasTimeout || d[2].timeout.Milliseconds() != 250 {
		t.Errorf("drains = %+v %+v %+v", d[0], d[1], d[2])
	}
}
