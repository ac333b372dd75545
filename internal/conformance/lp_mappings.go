package conformance

import (
	"strings"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/llm/openai"
)

// lpEnv is what a mapping factory gets for one case.
type lpEnv struct {
	// ServerURL is the mock server's root URL ("http://127.0.0.1:port",
	// no trailing slash). The mock serves every path; the OpenAI mapping
	// uses ServerURL+"/v1" as its base URL.
	ServerURL string
	// Model is the bound model identifier for the case.
	Model string
	// Capabilities is mock_provider.capabilities (supports_image_input,
	// supports_native_response_format, supports_native_structured_output).
	Capabilities map[string]any
}

// lpMappingFactory builds the provider under test for a case.
type lpMappingFactory func(env lpEnv) (llm.Provider, error)

// lpMappings selects the implementation by the fixture's mapping: key
// (absent means "openai"). A mapping without an entry reports its cases
// as "not implemented: llm-provider <mapping> mapping".
//
// To plug in a new §8.x mapping (Anthropic, Gemini), add one entry here
// that builds the provider against env.ServerURL, honouring
// env.Capabilities for the structured-output path; every directive of
// the suite then runs against it unchanged.
var lpMappings = map[string]lpMappingFactory{
	"openai":    lpOpenAI,
	"anthropic": lpAnthropic,
	"gemini":    lpGemini,
	// streaming_unsupported_stub (fixture 060) is a mapping without the
	// Streamer capability: the OpenAI mapping with Stream hidden.
	"streaming_unsupported_stub": func(env lpEnv) (llm.Provider, error) {
		p, err := lpOpenAI(env)
		if err != nil {
			return nil, err
		}
		return lpAtomicOnly{p}, nil
	},
}

func lpOpenAI(env lpEnv) (llm.Provider, error) {
	mode := openai.StructuredNative
	if v, ok := env.Capabilities["supports_native_response_format"].(bool); ok && !v {
		mode = openai.StructuredPrompt
	}
	return openai.New(openai.Config{BaseURL: env.ServerURL + "/v1", APIKey: "sk-conformance-key", Model: env.Model, StructuredOutput: mode})
}

// lpAnthropic builds the §8.2 mapping; a mock without native structured
// output selects the §8.2.5.1 tool-coercion fallback.
func lpAnthropic(env lpEnv) (llm.Provider, error) {
	mode := anthropic.StructuredNative
	if v, ok := env.Capabilities["supports_native_structured_output"].(bool); ok && !v {
		mode = anthropic.StructuredTool
	}
	return anthropic.New(anthropic.Config{BaseURL: env.ServerURL, APIKey: "sk-ant-conformance-key", Model: env.Model, StructuredOutput: mode})
}

func lpGemini(env lpEnv) (llm.Provider, error) {
	mode := gemini.StructuredNative
	if v, ok := env.Capabilities["supports_native_structured_output"].(bool); ok && !v {
		mode = gemini.StructuredPrompt
	}
	return gemini.New(gemini.Config{BaseURL: env.ServerURL, APIKey: "AIza-conformance-key", Model: env.Model, StructuredOutput: mode})
}

// lpWireViews renders a sent request as the fixtures state
// expected_wire_request, for mappings whose body is not the whole story;
// the default is the JSON body.
var lpWireViews = map[string]func(w lpWire) any{
	// Gemini carries the bound model in the URL path
	// (/v1beta/models/{model}:generateContent, §8.3.1); the fixtures
	// state it as a "model" member beside the body's.
	"gemini": func(w lpWire) any {
		v := lpNative(w.Body)
		root, ok := v.(map[string]any)
		if !ok {
			return v
		}
		_, model, found := strings.Cut(w.Path, "/models/")
		if model, ok = strings.CutSuffix(model, ":generateContent"); found && ok {
			root["model"] = model
		}
		return root
	},
}

// lpWireView returns the expected_wire_request view of w for mapping.
func lpWireView(mapping string, w lpWire) any {
	if view, ok := lpWireViews[mapping]; ok {
		return view(w)
	}
	return lpNative(w.Body)
}

// lpAtomicOnly hides every optional capability of a provider.
type lpAtomicOnly struct{ llm.Provider }
