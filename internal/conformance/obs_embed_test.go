package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// obsEmbedBase is a passing embedding case; tests splice lines into it.
const obsEmbedBase = `state:
  fields:
    out: {type: record, default: null}
entry: n
nodes:
  n:
    calls_embed:
      input: ["a", "b"]
      stores_response_in: out
edges:
  - {from: n, to: END}
initial_state: {}
mock_embedding:
  - status: 200
    body:
      object: list
      model: m
      data:
        - {object: embedding, index: 0, embedding: [0.1, 0.2]}
        - {object: embedding, index: 1, embedding: [0.3, 0.4]}
      usage: {prompt_tokens: 2, total_tokens: 2}
typed_observers:
  - {name: c, kind: typed_event_collector}
expected:
  observers:
    c:
      contains_event:
        event_type: EmbeddingEvent
        fields: {model: m, input_count: 2, dimensions: 2, usage: {input_tokens: 2}}
`

const obsPromptBlock = `prompt_backend:
  type: filesystem
  prompts:
    q:
      name: q
      version: "v1"
      label: production
      template: "about {{topic}}"
render_variables: {topic: rain}
`

func runObsCase(t *testing.T, src string) error {
	t.Helper()
	_, cases, err := ParseFixture(capObs, "case.yaml", []byte(src))
	if err != nil {
		t.Fatalf("ParseFixture: %v", err)
	}
	return newObservabilitySuite().RunCase(context.Background(), cases[0])
}

func TestObsEmbedDirectives(t *testing.T) {
	if err := runObsCase(t, obsEmbedBase); err != nil {
		t.Fatalf("base case: %v", err)
	}
	unknown := func(err error) bool {
		var du *DirectiveUnknownError
		return errors.As(err, &du)
	}
	tests := []struct {
		name string
		src  string
		ok   func(error) bool
	}{
		{"unknown calls_embed key", strings.Replace(obsEmbedBase, "      stores_response_in: out\n", "      stores_response_in: out\n      colour: red\n", 1), unknown},
		{"unknown config key", strings.Replace(obsEmbedBase, "      stores_response_in: out\n", "      stores_response_in: out\n      config: {size: 3}\n", 1), unknown},
		{"unknown mock key", strings.Replace(obsEmbedBase, "  - status: 200\n", "  - status: 200\n    delay: 3\n", 1), unknown},
		{"unknown raises key", strings.Replace(obsEmbedBase, "  - status: 200\n", "  - status: 503\n    raises: {error_type: X, message: y, code: 1}\n", 1), unknown},
		{"raises on a success", strings.Replace(obsEmbedBase, "  - status: 200\n", "  - status: 200\n    raises: {error_type: X, message: y}\n", 1), isSchema},
		{"input and rendered input", strings.Replace(obsEmbedBase, "    calls_embed:\n", "    renders_prompt: q\n    calls_embed:\n      input_from_rendered_prompt: true\n", 1) + obsPromptBlock, isSchema},
		{"renders without a backend", strings.Replace(obsEmbedBase, "    calls_embed:\n", "    renders_prompt: q\n    calls_embed:\n", 1), isSchema},
		{"renders an unknown prompt", strings.Replace(obsEmbedBase, "    calls_embed:\n", "    renders_prompt: nope\n    calls_embed:\n", 1) + obsPromptBlock, isSchema},
		{"unknown prompt key", strings.Replace(obsEmbedBase+obsPromptBlock, `      label: production`, "      label: production\n      tags: [x]", 1), unknown},
		{"unknown group key", strings.Replace(obsEmbedBase, "    calls_embed:\n", "    renders_prompt_group: {group_name: g, members: [q, q], active_prompt: q, size: 2}\n    calls_embed:\n", 1) + obsPromptBlock, unknown},
		{"group member not active", strings.Replace(obsEmbedBase, "    calls_embed:\n", "    renders_prompt_group: {group_name: g, members: [q, q], active_prompt: r}\n    calls_embed:\n", 1) + obsPromptBlock, isSchema},
		{"wrong event expectation", strings.Replace(obsEmbedBase, "dimensions: 2", "dimensions: 3", 1), func(err error) bool { return err != nil && !unknown(err) && !isSchema(err) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := runObsCase(t, tc.src); !tc.ok(err) {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func isSchema(err error) bool { return errors.Is(err, ErrSchemaInvalid) }

// TestObsRenderedEmbed: a node that renders a prompt embeds the
// rendered text, and its event carries the prompt's identity.
func TestObsRenderedEmbed(t *testing.T) {
	src := strings.Replace(strings.Replace(obsEmbedBase, "      input: [\"a\", \"b\"]\n", "      input_from_rendered_prompt: true\n", 1),
		"    calls_embed:\n", "    renders_prompt: q\n    calls_embed:\n", 1)
	src = strings.Replace(src, "        - {object: embedding, index: 1, embedding: [0.3, 0.4]}\n", "", 1)
	src = strings.Replace(src, "fields: {model: m, input_count: 2, dimensions: 2, usage: {input_tokens: 2}}",
		`fields: {input_strings: ["about rain"], active_prompt: {name: q, version: v1, label: production, template_hash: "<any-string>", rendered_hash: "<any-string>"}}`, 1)
	if err := runObsCase(t, src+obsPromptBlock); err != nil {
		t.Fatal(err)
	}
}
