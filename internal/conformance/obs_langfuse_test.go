package conformance

import (
	"errors"
	"strings"
	"testing"
)

// obsLangfuseBase is a passing Langfuse case; tests splice lines into it.
const obsLangfuseBase = `state:
  fields:
    msg: {type: string, default: ""}
entry: ask
nodes:
  ask:
    calls_llm:
      messages: [{role: user, content: "hi"}]
      stores_response_in: msg
edges:
  - {from: ask, to: END}
initial_state: {}
mock_llm:
  - status: 200
    body:
      id: cc-1
      object: chat.completion
      model: test-model
      choices:
        - {index: 0, message: {role: assistant, content: "hello"}, finish_reason: stop}
      usage: {prompt_tokens: 3, completion_tokens: 1, total_tokens: 4}
langfuse_observer:
  disable_provider_payload: false
expected:
  langfuse_trace:
    id: "<uuid-hex>"
    name: "ask"
    metadata:
      correlation_id: "<corr_id_1>"
    observations:
      - type: span
        name: "ask"
        metadata: {correlation_id: "<corr_id_1>"}
        children:
          - type: generation
            name: "openarmature.llm.complete"
            model: "test-model"
            usage: {input: 3, output: 1, total: 4}
            output: "hello"
            children: []
  invariants:
    correlation_id_consistency: true
    trace_id_equals_invocation_id_dashes_stripped: true
`

func TestObsLangfuseDirectives(t *testing.T) {
	if err := runObsCase(t, obsLangfuseBase); err != nil {
		t.Fatalf("base case: %v", err)
	}
	unknown := func(err error) bool {
		var du *DirectiveUnknownError
		return errors.As(err, &du)
	}
	mismatch := func(err error) bool {
		return err != nil && !unknown(err) && !isSchema(err) && !errors.Is(err, ErrNotImplemented)
	}
	tests := []struct {
		name string
		src  string
		ok   func(error) bool
	}{
		{"unknown observer key", strings.Replace(obsLangfuseBase, "  disable_provider_payload: false\n", "  disable_provider_payload: false\n  colour: red\n", 1), unknown},
		{"unknown hook", strings.Replace(obsLangfuseBase, "  disable_provider_payload: false\n", "  disable_provider_payload: false\n  trace_input_from_state: returns_pi\n", 1), unknown},
		{"tiny byte cap", strings.Replace(obsLangfuseBase, "  disable_provider_payload: false\n", "  disable_provider_payload: false\n  payload_byte_cap: 10\n", 1), isSchema},
		{"unknown trace key", strings.Replace(obsLangfuseBase, `    name: "ask"`+"\n    metadata:", `    name: "ask"`+"\n    tags: [x]\n    metadata:", 1), unknown},
		{"unknown observation key", strings.Replace(obsLangfuseBase, `            model: "test-model"`, `            model: "test-model"`+"\n            cost: 1", 1), unknown},
		{"unknown client mode", strings.Replace(obsLangfuseBase, "langfuse_observer:", "langfuse_client: {mode: borrowed}\nlangfuse_observer:", 1), isSchema},
		{"wrong output", strings.Replace(obsLangfuseBase, `output: "hello"`, `output: "bye"`, 1), mismatch},
		{"missing child", strings.Replace(obsLangfuseBase, "        children:\n          - type: generation", "        children: []\n        xchildren:\n          - type: generation", 1), unknown},
		{"payload off", strings.Replace(obsLangfuseBase, "disable_provider_payload: false", "disable_provider_payload: true", 1), mismatch},
		{"wrong usage", strings.Replace(obsLangfuseBase, "usage: {input: 3, output: 1, total: 4}", "usage: {input: 3, output: 1}", 1), mismatch},
		{"failing invariant", strings.Replace(obsLangfuseBase, "    trace_id_equals_invocation_id_dashes_stripped: true\n", "    trace_id_equals_invocation_id_dashes_stripped: false\n", 1), mismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := runObsCase(t, tc.src); !tc.ok(err) {
				t.Errorf("err = %v", err)
			}
		})
	}
}
