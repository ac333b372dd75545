package llm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// A provider's own call timeout (provider_unavailable wrapping
// context.DeadlineExceeded) is a transient failure, retried; a bare
// context error, the caller's cancellation, is not.
func TestDefaultTransientProviderTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"provider timeout", &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "openai", Op: "complete", Message: "transport failure", Err: context.DeadlineExceeded}, true},
		{"provider timeout, wrapped", fmt.Errorf("llm: openai complete: %w", &llm.ProviderError{Cat: errcat.ProviderUnavailable, Err: context.DeadlineExceeded}), true},
		{"caller cancelled", fmt.Errorf("call: %w", context.Canceled), false},
		{"caller deadline", context.DeadlineExceeded, false},
		{"invalid request wrapping a deadline", &llm.ProviderError{Cat: errcat.ProviderInvalidRequest, Err: context.DeadlineExceeded}, false},
		{"plain failure", errors.New("boom"), false},
	} {
		if got := llm.DefaultTransient(tc.err); got != tc.want {
			t.Errorf("%s: DefaultTransient = %v, want %v", tc.name, got, tc.want)
		}
	}
}
