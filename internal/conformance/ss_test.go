package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// runSS runs a single-case sessions fixture through the real suite runner.
func runSS(t *testing.T, src string) error {
	t.Helper()
	return runSuiteCase(t, "sessions", newSessionsSuite(), src)
}

func runSSCases(t *testing.T, tests []puCase) {
	t.Helper()
	runSelfTests(t, tests, runSS)
}

// ssHistory is a two-turn session over an append-reduced list.
const ssHistory = `
state:
  fields:
    history: {type: list, reducer: append, default: []}
    scratch: {type: str, default: ""}
entry: turn
nodes:
  turn:
    update_pure: {history: ["x"], scratch: "tmp"}
edges:
  - {from: turn, to: END}
session_store: in_memory
`

// ssValue is a single-node graph over an int value at schema v2.
const ssValue = `
state:
  schema_version: "v2"
  fields:
    value: {type: int, default: 0}
entry: noop
nodes:
  noop:
    update_pure: {}
edges:
  - {from: noop, to: END}
session_store: in_memory
session_id: "s"
`

func TestSessionsStoreAndLoad(t *testing.T) {
	runSSCases(t, []puCase{
		{"resume loads, appends and overwrites", ssHistory + `
invocations:
  - session_id: s1
    loaded_session_state: null
    expected_final_state: {history: ["x"], scratch: "tmp"}
    saved_session_assertions: {state: {history: ["x"], scratch: "tmp"}}
  - session_id: s1
    initial_state: {}
    loaded_session_state: {history: ["x"], scratch: "tmp"}
    expected_final_state: {history: ["x", "x"], scratch: "tmp"}
    saved_session_assertions: {state: {history: ["x", "x"], scratch: "tmp"}}
invariants:
  second_invoke_loads_first_invoke_state: true
  saved_record_overwrites_prior: true
  projected_field_persists_across_invokes: true
`, ""},
		{"loaded_session_state mismatch", ssHistory + `
invocations:
  - {session_id: s1}
  - {session_id: s1, loaded_session_state: {history: ["x", "x"], scratch: "tmp"}}
`, "loaded_session_state.history: want 2 items"},
		{"loaded null but a record exists", ssHistory + `
invocations:
  - {session_id: s1}
  - {session_id: s1, loaded_session_state: null}
`, "want no record"},
		{"a different session is not loaded", ssHistory + `
invocations:
  - {session_id: s1}
  - {session_id: s2, loaded_session_state: null, expected_final_state: {history: ["x"], scratch: "tmp"}}
invariants:
  second_invoke_loads_first_invoke_state: false
`, ""},
		{"projection keeps scratch out", ssHistory + `
session_state: {fields: [history]}
invocations:
  - session_id: s1
    saved_session_assertions: {state: {history: ["x"]}, excludes_fields: [scratch]}
  - session_id: s1
    loaded_session_state: {history: ["x"]}
    loaded_invoke_state_for_scratch: ""
invariants:
  scratch_field_never_persisted: true
`, ""},
		{"excludes_fields catches a persisted field", ssHistory + `
invocations:
  - session_id: s1
    saved_session_assertions: {excludes_fields: [scratch]}
`, "the record holds scratch"},
		{"scratch invariant needs a projection", ssHistory + `
invocations:
  - {session_id: s1}
invariants:
  scratch_field_never_persisted: true
`, "declares no session_state projection"},
		{"saved assertions need a save", ssHistory + `
auto_save: false
invocations:
  - session_id: s1
    saved_session_assertions: {state: {history: ["x"]}}
`, `did not save session "s1"`},
		{"no session id never touches the store", ssHistory + `
initial_state: {}
expected:
  no_session_load: true
  no_session_save: true
  store_untouched: true
`, ""},
		{"store_untouched fails when the store is used", ssHistory + `
session_id: s1
expected:
  store_untouched: true
`, "store_untouched: want true, got false"},
		{"load_raises injects a load failure", strings.Replace(ssHistory, "session_store: in_memory", "session_store: {type: in_memory, behavior: {load_raises: session_load_failed}}", 1) + `
session_id: s1
expected_error: {category: session_load_failed}
expected:
  no_session_save: true
invariants:
  node_never_invoked: true
  error_category_not: [session_save_failed]
`, ""},
	})
}

func TestSessionsAutoSaveAndStoreAfter(t *testing.T) {
	base := `
state:
  fields:
    step: {type: str, default: ""}
entry: A
nodes:
  A:
    update_pure: {step: "A"}
    explicit_save_session: true
  B:
    update_pure: {step: "B"}
edges:
  - {from: A, to: B}
  - {from: B, to: END}
session_store: in_memory
session_id: s6
`
	runSSCases(t, []puCase{
		{"auto-save off leaves only the explicit save", base + `
auto_save: false
expected:
  final_state: {step: "B"}
  no_auto_save_on_end: true
  store_after: {load_returns_for_session_id: s6, loaded_state: {step: "A"}, loaded_schema_version: ""}
`, ""},
		{"auto-save at End is detected", base + `
expected:
  no_auto_save_on_end: true
`, "no_auto_save_on_end: want true, got false"},
		{"store_after loaded_state mismatch", base + `
expected:
  store_after: {load_returns_for_session_id: s6, loaded_state: {step: "A"}}
`, `store_after.loaded_state.step: want "A", got "B"`},
		{"store_after none for an absent session", base + `
expected:
  store_after: {load_returns_none_for_session_id: other}
`, ""},
		{"store_after none fails when a record exists", base + `
expected:
  store_after: {load_returns_none_for_session_id: s6}
`, `load("s6") returns {step: "B"}`},
		{"mid-invoke save survives a crash", strings.Replace(base, `    update_pure: {step: "B"}`, `    raises: {category: node_exception}`, 1) + `
expected_error: {category: node_exception, raised_from: B}
expected:
  store_after: {load_returns_for_session_id: s6, loaded_state: {step: "A"}}
invariants:
  mid_invoke_save_survives_subsequent_crash: true
`, ""},
		{"mid-invoke invariant rejects a completed run", base + `
invariants:
  mid_invoke_save_survives_subsequent_crash: true
`, "ended completed"},
		{"explicit save without a store fails the node", strings.Replace(base, "session_store: in_memory\n", "", 1) + `
expected_error: {category: node_exception, raised_from: A}
`, ""},
	})
}

func TestSessionsMigrations(t *testing.T) {
	seeded := `
seeded_session:
  schema_version: "v1"
  state: {value: 1}
`
	mig := func(fn string) string {
		return "session_migrations:\n  - {from_version: v1, to_version: v2, migrate: " + fn + "}\n"
	}
	runSSCases(t, []puCase{
		{"add_ten_to_value", ssValue + seeded + mig("add_ten_to_value") + `
expected:
  migrations_run: ["v1->v2"]
  final_state: {value: 11}
  loaded_session_state: {value: 1}
  saved_session_assertions: {schema_version: "v2", state: {value: 11}}
invariants:
  single_migration_invocation: true
  migration_runs_before_projection_merge: true
`, ""},
		{"multiply_value_by_two", ssValue + seeded + mig("multiply_value_by_two") + `
expected:
  final_state: {value: 2}
`, ""},
		{"migrations_run mismatch", ssValue + seeded + mig("add_ten_to_value") + `
expected:
  migrations_run: []
`, "migrations_run: want 0 items [], got 1 items"},
		{"raises_keyerror is a KeyError cause", ssValue + seeded + mig("raises_keyerror") + `
expected_error:
  category: session_state_migration_failed
  carries: {from_version: v1, to_version: v2, registered_migrations_count: 1}
  cause: {exception_type: KeyError}
invariants:
  node_never_invoked: true
  error_category_not: [session_load_failed]
`, ""},
		{"cause type mismatch", ssValue + seeded + mig("raises_keyerror") + `
expected_error:
  category: session_state_migration_failed
  cause: {exception_type: ValueError}
`, "no ValueError in the cause chain"},
		{"error_category_not catches the category", ssValue + seeded + mig("raises_keyerror") + `
expected_error: {category: session_state_migration_failed}
invariants:
  error_category_not: [session_state_migration_failed]
`, "failed with session_state_migration_failed"},
		{"missing migration carries the pair", ssValue + seeded + `
expected_error:
  category: session_state_migration_missing
  carries: {from_version: v1, to_version: v2, registered_migrations_count: 0}
expected:
  store_after: {load_returns_for_session_id: s, loaded_schema_version: v1, loaded_state: {value: 1}}
`, ""},
		{"duplicate migrations fail at registration", strings.Replace(ssValue, "session_id: \"s\"\n", "", 1) + `
session_migrations:
  - {from_version: v1, to_version: v2, migrate: add_ten_to_value}
  - {from_version: v1, to_version: v2, migrate: multiply_value_by_two}
expected_error:
  category: session_state_migration_chain_ambiguous
  raised_at: registration
  carries: {from_version: v1, to_version: v2}
invariants:
  no_invoke_attempted: true
`, ""},
		{"raised_at registration when compilation succeeds", ssValue + `
expected_error:
  category: session_state_migration_chain_ambiguous
  raised_at: registration
`, "compilation succeeded"},
	})
}

func TestSessionsComposition(t *testing.T) {
	sub := `
subgraphs:
  inner:
    state:
      fields:
        inner_input: {type: str, default: ""}
        inner_output: {type: str, default: ""}
    entry: work
    nodes:
      work:
        update_pure: {inner_output: "done"}
    edges:
      - {from: work, to: END}
state:
  fields:
    summary: {type: str, default: ""}
    result: {type: str, default: ""}
entry: dispatch
nodes:
  dispatch:
    subgraph: inner
    mapping:
      inputs: {inner_input: summary}
      outputs: {result: inner_output}
edges:
  - {from: dispatch, to: END}
session_store: in_memory
session_id: s10
seeded_session:
  state: {summary: "outer"}
`
	fan := `
subgraphs:
  per_item:
    state:
      fields:
        item: {type: str, default: ""}
        tag: {type: str, default: ""}
        processed: {type: str, default: ""}
    entry: process
    nodes:
      process:
        update_pure: {processed: "ok"}
    edges:
      - {from: process, to: END}
state:
  fields:
    items: {type: list, default: []}
    label: {type: str, default: "L"}
    outputs: {type: list, reducer: append, default: []}
entry: fan
nodes:
  fan:
    fan_out:
      subgraph: per_item
      items_field: items
      mapping:
        inputs: {item: "<fan_out_item>", tag: label}
        outputs: {outputs: processed}
edges:
  - {from: fan, to: END}
session_store: in_memory
session_id: s11
seeded_session:
  state: {items: ["a", "b"]}
`
	runSSCases(t, []puCase{
		{"subgraph mapping and inner pre-state", sub + `
expected:
  inner_pre_state: {inner_input: "outer", inner_output: ""}
  final_state: {summary: "outer", result: "done"}
  saved_session_assertions: {state: {summary: "outer", result: "done"}}
invariants:
  subgraph_state_fields_match_subgraph_schema: true
  subgraph_does_not_see_session_state_directly: true
  no_inner_session_load_or_save: true
`, ""},
		{"inner_pre_state mismatch", sub + `
expected:
  inner_pre_state: {inner_input: "outer"}
`, `inner_pre_state: unexpected key "inner_output"`},
		{"fan-out mapping: item, inputs and outputs", fan + `
expected:
  instance_pre_states:
    - {item: "a", tag: "L", processed: ""}
    - {item: "b", tag: "L", processed: ""}
  final_state: {items: ["a", "b"], label: "L", outputs: ["ok", "ok"]}
invariants:
  fan_out_instance_state_fields_match_subgraph_schema: true
  fan_out_instances_do_not_see_session_state_directly: true
  no_per_instance_session_load_or_save: true
`, ""},
		{"subgraph invariant without a subgraph node", fan + `
invariants:
  subgraph_state_fields_match_subgraph_schema: true
`, "no subgraph node"},
		{"unknown fan-out placeholder", strings.Replace(fan, `"<fan_out_item>"`, `"<fan_out_index>"`, 1),
			"fixture_directive_unknown: <fan_out_index>"},
		{"mapping beside inputs", strings.Replace(sub, "    mapping:\n", "    inputs: {inner_input: summary}\n    mapping:\n", 1),
			"inputs given both directly and in mapping"},
	})
}

func TestSessionsFixtureErrors(t *testing.T) {
	runSSCases(t, []puCase{
		{"unknown store type", strings.Replace(ssHistory, "session_store: in_memory", "session_store: redis", 1) + "session_id: s\n",
			"fixture_directive_unknown: redis"},
		{"unknown store behavior", strings.Replace(ssHistory, "session_store: in_memory", "session_store: {type: in_memory, behavior: {save_raises: x}}", 1),
			"fixture_directive_unknown: save_raises"},
		{"unknown migration mock", ssValue + "session_migrations:\n  - {from_version: v1, to_version: v2, migrate: teleport}\n",
			"fixture_directive_unknown: teleport"},
		{"unknown seeded key", ssValue + "seeded_session: {state: {}, owner: me}\n",
			"fixture_directive_unknown: owner"},
		{"unknown store_after key", ssValue + "expected:\n  store_after: {load_returns_none_for_session_id: s, colour: red}\n",
			"fixture_directive_unknown: colour"},
		{"unknown cause key", ssValue + "expected_error: {category: x, cause: {exception_type: KeyError, traceback: []}}\n",
			"fixture_directive_unknown: traceback"},
		{"unknown raised_at", ssValue + "expected_error: {category: x, raised_at: lunchtime}\n",
			"fixture_directive_unknown: lunchtime"},
		{"unknown sessions invariant", ssValue + "invariants: {session_feels_fresh: true}\n",
			"fixture_directive_unknown: session_feels_fresh"},
		{"unknown invocation key", ssHistory + "invocations:\n  - {session_id: s, loaded_sessionstate: {}}\n",
			"fixture_directive_unknown: loaded_sessionstate"},
		{"session_state without a store", strings.Replace(ssHistory, "session_store: in_memory\n", "session_state: {fields: [history]}\n", 1),
			"session_state needs a session_store"},
		{"store expectation without a store", strings.Replace(ssHistory, "session_store: in_memory\n", "", 1) + "session_id: s\nexpected:\n  store_untouched: true\n",
			"store_untouched needs a session_store"},
		{"loaded state without a session id", ssHistory + "invocations:\n  - {loaded_session_state: null}\n",
			"need a session_id"},
		{"loaded invoke state of an undeclared field", ssHistory + "invocations:\n  - {session_id: s, loaded_invoke_state_for_ghost: 1}\n",
			"loaded_invoke_state_for_ghost: no such state field"},
		{"seeded session without an id", ssHistory + "seeded_session: {state: {history: []}}\ninitial_state: {}\n",
			"seeded_session needs a session_id"},
	})
}

// TestCountingStore drives the harness store directly: every call is
// recorded, an Append counts as a save, calls from a node body carry its
// namespace, and load_raises fails every load.
func TestCountingStore(t *testing.T) {
	ss := newSSState(context.Background(), &ssConfig{hasStore: true, autoSave: true})
	ctx := context.Background()
	st := ss.store
	if _, err := st.Load(ctx, session.LoadRequest{SessionID: "a"}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("load of a missing session: %v", err)
	}
	if _, err := st.Save(ctx, session.SaveRequest{SessionID: "a", SchemaVersion: "v1",
		State: map[string]json.RawMessage{"xs": json.RawMessage(`[1]`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, session.AppendRequest{SessionID: "a", SchemaVersion: "v1", ExpectedVersion: 1,
		Append: map[string][]json.RawMessage{"xs": {json.RawMessage(`2`)}}}); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Load(ctx, session.LoadRequest{SessionID: "a"})
	if err != nil || rec.Version != 2 {
		t.Fatalf("load after append: %v %v", rec, err)
	}
	r := &ssRun{Calls: ss.calls, SessionID: "a"}
	if got := len(r.writes()); got != 2 {
		t.Errorf("writes = %d, want 2 (append counts as a save)", got)
	}
	if got := len(r.loads()); got != 2 {
		t.Errorf("loads = %d, want 2", got)
	}
	last := ss.calls[2]
	after, _ := decodeRecord(last.After)
	if !deepEqual(after, map[string]any{"xs": []any{int64(1), int64(2)}}) || last.Fields[0] != "xs" {
		t.Errorf("append call = %+v, after %s", last, formatValue(after))
	}
	if ss.calls[0].Outcome != "not_found" || ss.calls[3].Outcome != "record" {
		t.Errorf("load outcomes = %s, %s", ss.calls[0].Outcome, ss.calls[3].Outcome)
	}

	// A save from inside a node body is attributed to the node.
	schema, err := graph.NewSchema(graph.NewDynamicField("v", graph.TypeInt))
	if err != nil {
		t.Fatal(err)
	}
	b := graph.NewBuilder(schema)
	b.AddNode("n", func(ctx context.Context, _ graph.State) (graph.Update, error) {
		return nil, graph.SaveSession(ctx, graph.Update{"v": 5})
	})
	b.AddEdge("n", graph.End)
	b.SetEntry("n")
	g, err := b.Compile(graph.WithSessions(graph.SessionConfig{Store: st, DisableAutoSave: true}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(ctx, nil, graph.WithSessionID("b")); err != nil {
		t.Fatal(err)
	}
	save := ss.calls[len(ss.calls)-1]
	if !save.write() || !save.InNode || len(save.Namespace) != 1 || save.Namespace[0] != "n" {
		t.Errorf("explicit save call = %+v", save)
	}

	faulty := newSSState(context.Background(), &ssConfig{hasStore: true, loadRaises: "session_load_failed"})
	_, err = faulty.store.Load(ctx, session.LoadRequest{SessionID: "a"})
	if errcat.Of(err) != "session_load_failed" {
		t.Errorf("injected load error = %v (category %q)", err, errcat.Of(err))
	}
}

func TestMigrationMocks(t *testing.T) {
	out, err := migrationMocks["add_ten_to_value"](map[string]any{"value": 1})
	if err != nil || !deepEqual(out["value"], 11) {
		t.Errorf("add_ten_to_value: %v %v", out, err)
	}
	out, err = migrationMocks["multiply_value_by_two"](map[string]any{"value": 2.5})
	if err != nil || !deepEqual(out["value"], 5.0) {
		t.Errorf("multiply_value_by_two: %v %v", out, err)
	}
	_, err = migrationMocks["add_ten_to_value"](map[string]any{})
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Key != "value" || err.Error() != "KeyError: 'value'" {
		t.Errorf("missing value: %v", err)
	}
	_, err = migrationMocks["raises_keyerror"](map[string]any{"value": 0})
	if !errors.As(err, &ke) || errorTypeName(err) != "KeyError" {
		t.Errorf("raises_keyerror: %v", err)
	}
}

func TestSeededSession(t *testing.T) {
	gc := &geCase{outer: &geGraph{schemaVersion: "v3"}}
	cfg := &ssConfig{hasStore: true, sessionID: "seed",
		seeded: &ssSeed{state: yamlValue(t, `{items: [a, b], n: 2}`)}}
	ss := newSSState(context.Background(), cfg)
	if err := ss.seed(gc); err != nil {
		t.Fatal(err)
	}
	rec := ss.peek("seed")
	if rec == nil || rec.SchemaVersion != "v3" {
		t.Fatalf("seeded record = %+v", rec)
	}
	st, _ := decodeRecord(rec)
	if !deepEqual(st, map[string]any{"items": []any{"a", "b"}, "n": int64(2)}) {
		t.Errorf("seeded state = %s", formatValue(st))
	}
	if len(ss.calls) != 0 {
		t.Errorf("seeding went through the counting store: %d calls", len(ss.calls))
	}
}

func TestFanOutMapping(t *testing.T) {
	p := &geParser{invariants: newInvariantRegistry()}
	fo, err := p.parseFanOut(yamlValue(t, `
subgraph: s
items_field: xs
mapping:
  inputs: {item: "<fan_out_item>", ctx: shared}
  outputs: {out: processed, other: extra}
`))
	if err != nil {
		t.Fatal(err)
	}
	if fo.itemField != "item" || fo.inputs["ctx"] != "shared" || fo.target != "out" || fo.collect != "processed" ||
		fo.extraOutputs["other"] != "extra" {
		t.Errorf("mapped fan-out = %+v", fo)
	}
	if _, err := p.parseFanOut(yamlValue(t, `{subgraph: s, items_field: xs, item_field: a, mapping: {inputs: {b: "<fan_out_item>"}}}`)); err == nil ||
		!strings.Contains(err.Error(), "item field is given twice") {
		t.Errorf("duplicate item field: %v", err)
	}
}
