package errcat

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// carrierErr is an engine-style carrier: its own category and message,
// wrapping a cause.
type carrierErr struct {
	cat   Category
	cause error
	on    bool
}

func (e *carrierErr) Error() string      { return "carrier " + string(e.cat) + ": " + e.cause.Error() }
func (e *carrierErr) Message() string    { return "carrier " + string(e.cat) }
func (e *carrierErr) Category() Category { return e.cat }
func (e *carrierErr) Carrier() bool      { return e.on }
func (e *carrierErr) Unwrap() error      { return e.cause }

// loopErr wraps next, which may point back to itself.
type loopErr struct {
	name string
	next error
}

func (e *loopErr) Error() string { return e.name }
func (e *loopErr) Unwrap() error { return e.next }

// valueErr is a comparable value error.
type valueErr struct{ msg string }

func (e valueErr) Error() string { return e.msg }

// sliceErr is an uncomparable error value (it cannot key a map).
type sliceErr struct {
	tags []string
	next error
}

func (e sliceErr) Error() string { return fmt.Sprint(e.tags) }
func (e sliceErr) Unwrap() error { return e.next }

func TestCauseChain(t *testing.T) {
	root := errors.New("socket reset")
	provider := Wrap(ProviderUnavailable, "down", root)
	a := &loopErr{name: "a"}
	b := &loopErr{name: "b", next: a}
	a.next = b
	self := &loopErr{name: "self"}
	self.next = self

	tests := []struct {
		name     string
		err      error
		chain    []Link
		category Category
		message  string
	}{
		{name: "nil", err: nil, chain: nil},
		{name: "bare error", err: root, chain: []Link{{Message: "socket reset"}}, message: "socket reset"},
		{name: "categorized error uses its own message", err: provider,
			chain:    []Link{{Category: ProviderUnavailable, Message: "down"}, {Message: "socket reset"}},
			category: ProviderUnavailable, message: "down"},
		{name: "fmt wrapping is trimmed to its own text", err: fmt.Errorf("calling model: %w", provider),
			chain:    []Link{{Message: "calling model"}, {Category: ProviderUnavailable, Message: "down"}, {Message: "socket reset"}},
			category: ProviderUnavailable, message: "down"},
		{name: "wrapping not at the end keeps the whole text", err: fmt.Errorf("%w (while calling)", root),
			chain: []Link{{Message: "socket reset (while calling)"}, {Message: "socket reset"}}, message: "socket reset (while calling)"},
		{name: "carriers are skipped for the derived category", err: &carrierErr{NodeException, &carrierErr{ParallelBranchesBranchFailed, provider, true}, true},
			chain: []Link{
				{Category: NodeException, Message: "carrier node_exception", Carrier: true},
				{Category: ParallelBranchesBranchFailed, Message: "carrier parallel_branches_branch_failed", Carrier: true},
				{Category: ProviderUnavailable, Message: "down"},
				{Message: "socket reset"},
			},
			category: ProviderUnavailable, message: "down"},
		{name: "a Carrier() false link is not a carrier", err: &carrierErr{NodeException, provider, false},
			chain: []Link{
				{Category: NodeException, Message: "carrier node_exception"},
				{Category: ProviderUnavailable, Message: "down"},
				{Message: "socket reset"},
			},
			category: NodeException, message: "carrier node_exception"},
		{name: "outermost non-carrier category wins over a buried one", err: &carrierErr{NodeException, Wrap(ProviderInvalidRequest, "rejected", provider), true},
			chain: []Link{
				{Category: NodeException, Message: "carrier node_exception", Carrier: true},
				{Category: ProviderInvalidRequest, Message: "rejected"},
				{Category: ProviderUnavailable, Message: "down"},
				{Message: "socket reset"},
			},
			category: ProviderInvalidRequest, message: "rejected"},
		{name: "uncategorized under a carrier: no category, outermost non-carrier message",
			err: &carrierErr{NodeException, fmt.Errorf("parse: %w", root), true},
			chain: []Link{
				{Category: NodeException, Message: "carrier node_exception", Carrier: true},
				{Message: "parse"},
				{Message: "socket reset"},
			},
			message: "parse"},
		{name: "only carriers", err: &carrierErr{NodeException, &carrierErr{NodeException, errors.Join(), true}, true},
			chain: []Link{
				{Category: NodeException, Message: "carrier node_exception", Carrier: true},
				{Category: NodeException, Message: "carrier node_exception", Carrier: true},
			}},
		{name: "two-element cycle terminates", err: a,
			chain: []Link{{Message: "a"}, {Message: "b"}}, message: "a"},
		{name: "self cycle terminates", err: self,
			chain: []Link{{Message: "self"}}, message: "self"},
		{name: "joined errors follow the first", err: fmt.Errorf("outer: %w", errors.Join(provider, valueErr{"second"})),
			chain: []Link{
				{Message: "outer"},
				{Message: "provider_unavailable: down: socket reset\nsecond"},
				{Category: ProviderUnavailable, Message: "down"},
				{Message: "socket reset"},
			},
			category: ProviderUnavailable, message: "down"},
		{name: "comparable value errors", err: fmt.Errorf("w: %w", valueErr{"v"}),
			chain: []Link{{Message: "w"}, {Message: "v"}}, message: "w"},
		{name: "uncomparable errors do not break the walk", err: sliceErr{tags: []string{"t"}, next: provider},
			chain:    []Link{{Message: "[t]"}, {Category: ProviderUnavailable, Message: "down"}, {Message: "socket reset"}},
			category: ProviderUnavailable, message: "down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chain := CauseChain(tt.err)
			if diff := cmp.Diff(tt.chain, chain); diff != "" {
				t.Errorf("CauseChain (-want +got):\n%s", diff)
			}
			cat, msg := Derived(tt.err)
			if cat != tt.category || msg != tt.message {
				t.Errorf("Derived = %q, %q; want %q, %q", cat, msg, tt.category, tt.message)
			}
			if c2, m2 := DerivedFrom(chain); c2 != cat || m2 != msg {
				t.Errorf("DerivedFrom(chain) = %q, %q; Derived = %q, %q", c2, m2, cat, msg)
			}
		})
	}
}

// selfRef is an uncomparable error whose Unwrap returns a copy of the
// value its pointer refers to.
type selfRef struct {
	tags []string
	p    *selfRef
}

func (e selfRef) Error() string { return "selfRef" }
func (e selfRef) Unwrap() error { return *e.p }

func TestCauseChainUncomparableCycle(t *testing.T) {
	e := &selfRef{tags: []string{"x"}}
	e.p = e
	done := make(chan int, 1)
	go func() { done <- len(CauseChain(*e)) }() // leaks if it never returns
	select {
	case n := <-done:
		// Uncomparable errors cannot be remembered; the walk is bounded.
		if n < 1 || n > 256 {
			t.Errorf("chain length = %d, want 1..256", n)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("CauseChain did not terminate")
	}
}

func TestLinkJSON(t *testing.T) {
	// The wire shape of a link (pipeline-utilities §6.3).
	b, err := json.Marshal(Link{Category: NodeException, Message: "m", Carrier: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"category":"node_exception","message":"m","carrier":true}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}
