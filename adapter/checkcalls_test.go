package adapter_test

import (
	"errors"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

func TestCheckToolCalls(t *testing.T) {
	sentinel := errors.New("test: a tool call lacks an id or name")
	for _, tc := range []struct {
		name  string
		calls []llm.ToolCall
		ok    bool
	}{
		{"none", nil, true},
		{"whole", []llm.ToolCall{{ID: "c1", Name: "lookup"}, {ID: "c2", Name: "refund"}}, true},
		{"no id", []llm.ToolCall{{ID: "c1", Name: "lookup"}, {Name: "refund"}}, false},
		{"no name", []llm.ToolCall{{ID: "c1"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := adapter.CheckToolCalls("complete", tc.calls, sentinel)
			if tc.ok {
				if err != nil {
					t.Fatalf("CheckToolCalls = %v, want nil", err)
				}
				return
			}
			var pe *llm.ProviderError
			if !errors.Is(err, sentinel) || !errors.As(err, &pe) || pe.Cat != errcat.ProviderInvalidResponse {
				t.Fatalf("CheckToolCalls = %#v, want a provider_invalid_response wrapping the sentinel", err)
			}
		})
	}
}
