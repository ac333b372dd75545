package migrate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/armature-go/armature/errcat"
)

// Func migrates a state in its structural form (a JSON object decoded into
// map[string]any; see the package documentation for the value types) from
// one schema version to the next. It must be pure: no I/O, deterministic
// output. It may modify and return its input.
type Func func(state map[string]any) (map[string]any, error)

// Migration is one registered edge of the migration graph.
type Migration struct {
	From, To string
	Fn       Func
}

// Kind selects the error categories a Registry reports: sessions and
// checkpoints share the machinery but not the categories.
type Kind int

// Registry kinds.
const (
	// Session migrations report session_state_migration_* categories.
	Session Kind = iota + 1
	// Checkpoint migrations report checkpoint_state_migration_*.
	Checkpoint
)

func (k Kind) cats() (missing, ambiguous, failed errcat.Category) {
	if k == Checkpoint {
		return errcat.CheckpointStateMigrationMissing, errcat.CheckpointStateMigrationChainAmbiguous, errcat.CheckpointStateMigrationFailed
	}
	return errcat.SessionStateMigrationMissing, errcat.SessionStateMigrationChainAmbiguous, errcat.SessionStateMigrationFailed
}

// Registry is an immutable set of migrations with shortest-path chain
// resolution (pipeline-utilities §10.12, sessions §7). It is safe for
// concurrent use.
type Registry struct {
	kind  Kind
	edges map[string][]Migration // from → migrations, sorted by To
	n     int
}

// NewRegistry builds a registry. Two migrations with the same (From, To)
// pair fail with the kind's chain-ambiguous category; a migration without
// a function or versions is rejected too.
func NewRegistry(kind Kind, ms ...Migration) (*Registry, error) {
	if kind != Session && kind != Checkpoint {
		kind = Session
	}
	r := &Registry{kind: kind, edges: map[string][]Migration{}, n: len(ms)}
	_, ambiguous, _ := kind.cats()
	seen := map[[2]string]bool{}
	for _, m := range ms {
		if m.From == "" || m.To == "" || m.Fn == nil {
			return nil, &Error{cat: ambiguous, From: m.From, To: m.To, Registered: len(ms),
				msg: "a migration needs a from version, a to version and a function"}
		}
		k := [2]string{m.From, m.To}
		if seen[k] {
			return nil, &Error{cat: ambiguous, From: m.From, To: m.To, Registered: len(ms),
				msg: fmt.Sprintf("migration %s → %s is registered twice", m.From, m.To)}
		}
		seen[k] = true
		r.edges[m.From] = append(r.edges[m.From], m)
	}
	for _, es := range r.edges {
		slices.SortFunc(es, func(a, b Migration) int { return strings.Compare(a.To, b.To) })
	}
	return r, nil
}

// Len returns the number of registered migrations.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return r.n
}

// Describe lists the registered edges, e.g. "v1→v2, v2→v3".
func (r *Registry) Describe() string {
	if r == nil || r.n == 0 {
		return "(none)"
	}
	var parts []string
	for _, from := range sortedKeys(r.edges) {
		for _, m := range r.edges[from] {
			parts = append(parts, m.From+"→"+m.To)
		}
	}
	return strings.Join(parts, ", ")
}

// Resolve returns the unique shortest chain of migrations from one version
// to another (empty when they are equal). It fails with the kind's missing
// category when no chain exists and its chain-ambiguous category when two
// distinct shortest chains exist.
func (r *Registry) Resolve(from, to string) ([]Migration, error) {
	if from == to {
		return nil, nil
	}
	missing, ambiguous, _ := r.kind.cats()
	// BFS counting shortest paths; a node reached by two shortest paths
	// makes every path through it ambiguous. Counts saturate at 2 (more
	// than one is all that matters): a graph of d diamonds in a row has
	// 2^d shortest chains, which would overflow an exact count.
	type visit struct {
		dist  int
		paths int // 1, or 2 for "two or more"
		prev  Migration
	}
	seen := map[string]*visit{from: {paths: 1}}
	frontier := []string{from}
	for len(frontier) > 0 && seen[to] == nil {
		var next []string
		for _, v := range frontier {
			for _, m := range r.edgesFrom(v) {
				w, ok := seen[m.To]
				switch {
				case !ok:
					seen[m.To] = &visit{dist: seen[v].dist + 1, paths: seen[v].paths, prev: m}
					next = append(next, m.To)
				case w.dist == seen[v].dist+1:
					w.paths = min(w.paths+seen[v].paths, 2)
				}
			}
		}
		frontier = next
	}
	target := seen[to]
	if target == nil {
		return nil, &Error{cat: missing, From: from, To: to, Registered: r.Len(), Registry: r.Describe(),
			msg: fmt.Sprintf("no migration chain from schema version %q to %q", from, to)}
	}
	if target.paths > 1 {
		return nil, &Error{cat: ambiguous, From: from, To: to, Registered: r.Len(), Registry: r.Describe(),
			msg: fmt.Sprintf("two or more distinct shortest migration chains from %q to %q", from, to)}
	}
	chain := make([]Migration, target.dist)
	for v, i := to, target.dist-1; i >= 0; i-- {
		chain[i] = seen[v].prev
		v = chain[i].From
	}
	return chain, nil
}

func (r *Registry) edgesFrom(v string) []Migration {
	if r == nil {
		return nil
	}
	return r.edges[v]
}

// Apply migrates state from one version to another along the resolved
// chain. A migration that fails (or panics) stops the chain with the
// kind's failed category, keeping the cause; later migrations do not run.
func (r *Registry) Apply(state map[string]any, from, to string) (map[string]any, error) {
	chain, err := r.Resolve(from, to)
	if err != nil {
		return nil, err
	}
	_, _, failed := r.kind.cats()
	for _, m := range chain {
		state, err = call(m.Fn, state)
		if err != nil {
			return nil, &Error{cat: failed, From: m.From, To: m.To, Registered: r.Len(), Registry: r.Describe(),
				msg: fmt.Sprintf("migration %s → %s failed", m.From, m.To), Err: err}
		}
		if state == nil {
			return nil, &Error{cat: failed, From: m.From, To: m.To, Registered: r.Len(), Registry: r.Describe(),
				msg: fmt.Sprintf("migration %s → %s returned no state", m.From, m.To)}
		}
	}
	return state, nil
}

func call(fn Func, s map[string]any) (out map[string]any, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("migration panicked: %v", p)
		}
	}()
	return fn(s)
}

// Error reports a migration failure. Its fields are the ones the spec
// exposes (pipeline-utilities §10.10): FromVersion / ToVersion,
// RegisteredMigrationsCount, RegistryDescription.
type Error struct {
	cat        errcat.Category
	From, To   string
	Registered int
	Registry   string
	msg        string
	Err        error
}

// Category returns the error's category.
func (e *Error) Category() errcat.Category { return e.cat }

// Error formats the failure with the "migrate:" prefix.
func (e *Error) Error() string {
	s := "migrate: " + string(e.cat) + ": " + e.msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Message returns the error's own message.
func (e *Error) Message() string { return e.msg }

// Unwrap returns the failed migration's error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the error's category.
func (e *Error) Is(target error) bool { return errcat.Matches(e.cat, target) }

// FromVersion returns the chain's source version.
func (e *Error) FromVersion() string { return e.From }

// ToVersion returns the chain's target version.
func (e *Error) ToVersion() string { return e.To }

// RegisteredMigrationsCount returns how many migrations were registered.
func (e *Error) RegisteredMigrationsCount() int { return e.Registered }

// RegistryDescription lists the registered migrations.
func (e *Error) RegistryDescription() string { return e.Registry }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
