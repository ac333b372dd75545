package errcat

import (
	"errors"
	"fmt"
	"testing"
)

func TestOfAndIs(t *testing.T) {
	root := errors.New("boom")
	inner := Wrap(ReducerError, "merging", root)
	outer := Wrap(NodeException, "node b", fmt.Errorf("context: %w", inner))
	tests := []struct {
		name string
		err  error
		want Category
	}{
		{"nil", nil, ""},
		{"plain", root, ""},
		{"direct", inner, ReducerError},
		{"outermost wins", outer, NodeException},
		{"wrapped by fmt", fmt.Errorf("x: %w", outer), NodeException},
		{"joined", errors.Join(root, inner), ReducerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Of(tt.err); got != tt.want {
				t.Errorf("Of = %q, want %q", got, tt.want)
			}
			if tt.want != "" && !errors.Is(tt.err, tt.want) {
				t.Errorf("errors.Is(err, %q) = false", tt.want)
			}
		})
	}
	if !errors.Is(outer, root) {
		t.Error("the root cause must stay reachable")
	}
	if !errors.Is(outer, ReducerError) || errors.Is(outer, RoutingError) {
		t.Error("errors.Is must match every category in the chain and no other")
	}
	if !errors.Is(outer, New(NodeException, "another instance")) {
		t.Error("an *Error target matches by category")
	}
}

func TestChain(t *testing.T) {
	err := Wrap(NodeException, "", fmt.Errorf("a: %w", errors.Join(New(RoutingError, "r"), Wrap(ReducerError, "", New(StateValidationError, "")))))
	got := Chain(err)
	want := []Category{NodeException, RoutingError, ReducerError, StateValidationError}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Chain = %v, want %v", got, want)
	}
	if Chain(nil) != nil {
		t.Error("Chain(nil) must be nil")
	}
}

func TestErrorFormatting(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{nil, "<nil>"},
		{New(RoutingError, ""), "routing_error"},
		{New(RoutingError, "no route"), "routing_error: no route"},
		{Wrap(NodeException, "node b", errors.New("boom")), "node_exception: node b: boom"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	var nilErr *Error
	if nilErr.Category() != "" || nilErr.Unwrap() != nil || nilErr.Is(NodeException) {
		t.Error("a nil *Error must be inert")
	}
	if NodeException.Error() != "node_exception" || NodeException.String() != "node_exception" {
		t.Error("Category must render as its identifier")
	}
}
