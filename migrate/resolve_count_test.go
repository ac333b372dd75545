package migrate_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/migrate"
)

// A chain of 64 diamonds (v_i → a_i → v_{i+1} and v_i → b_i → v_{i+1})
// has 2^64 shortest chains from v0 to v64. Resolve's count saturates
// instead of wrapping to 0, so it fails chain-ambiguous (sessions §7,
// pipeline-utilities §10.12) rather than returning one chain as unique.
func TestResolveManyShortestChainsIsAmbiguous(t *testing.T) {
	noop := func(s map[string]any) (map[string]any, error) { return s, nil }
	var ms []migrate.Migration
	const n = 64
	for i := range n {
		v, next := fmt.Sprint("v", i), fmt.Sprint("v", i+1)
		a, b := fmt.Sprint("a", i), fmt.Sprint("b", i)
		ms = append(ms,
			migrate.Migration{From: v, To: a, Fn: noop}, migrate.Migration{From: a, To: next, Fn: noop},
			migrate.Migration{From: v, To: b, Fn: noop}, migrate.Migration{From: b, To: next, Fn: noop})
	}
	reg, err := migrate.NewRegistry(migrate.Session, ms...)
	if err != nil {
		t.Fatal(err)
	}
	// One diamond is ambiguous:
	if _, err := reg.Resolve("v0", "v1"); !errors.Is(err, errcat.SessionStateMigrationChainAmbiguous) {
		t.Fatalf("one diamond: %v", err)
	}
	chain, err := reg.Resolve("v0", fmt.Sprint("v", n))
	if !errors.Is(err, errcat.SessionStateMigrationChainAmbiguous) {
		t.Fatalf("%d diamonds: Resolve = %d migrations, %v; want session_state_migration_chain_ambiguous", n, len(chain), err)
	}
}
