package eino_test

import (
	"context"
	"errors"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// rateLimited is a model that answers every call with a 429.
type rateLimited struct{}

func (rateLimited) Ready(context.Context) error { return nil }
func (rateLimited) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, &llm.ProviderError{Cat: errcat.ProviderRateLimit, Provider: "openai", Op: "complete", StatusCode: 429, Message: "slow down"}
}

// TestProviderErrorCategory: a bridged model's failure keeps its
// category through the upstream framework's own wrapping, streamed or
// not, so the turn fails in the right bucket (provider_rate_limit,
// retryable) rather than as an internal error.
func TestProviderErrorCategory(t *testing.T) {
	ctx := context.Background()
	for _, streaming := range []string{`{"streaming":false}`, `{"streaming":true}`} {
		ag := &adapter.Agent{ID: "x", Backend: eino.Name, Provider: rateLimited{}, Config: []byte(streaming)}
		a, err := eino.Factory(ctx, adapter.FactoryRequest{Agent: ag})
		if err != nil {
			t.Fatal(err)
		}
		drop := adapter.EmitterFunc(func(context.Context, adapter.Event) bool { return false })
		_, err = a.Run(ctx, &adapter.Request{Agent: ag, SessionID: "s", Input: llm.UserText("hello")}, drop)
		var pe *llm.ProviderError
		if !errors.Is(err, errcat.ProviderRateLimit) || !errors.As(err, &pe) || pe.StatusCode != 429 {
			t.Errorf("section %s: the turn failed with %v, want the model's provider_rate_limit", streaming, err)
		}
	}
}
