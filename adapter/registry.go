package adapter

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
)

// Factory builds the adapter of one workspace agent. It runs once per
// agent at startup; it should validate the agent's backend-native
// section (Agent.DecodeConfig) and fail early.
type Factory func(ctx context.Context, req FactoryRequest) (Adapter, error)

// FactoryRequest is a Factory's argument.
type FactoryRequest struct {
	// Workspace is the compiled workspace; Agent the agent to build.
	Workspace *Workspace
	Agent     *Agent
	// Logger is the runtime's logger (never nil).
	Logger *slog.Logger
	// DataDir is the directory armature serve keeps its data in (its
	// --data) when it serves from the embedded SQLite store, and
	// Database the PostgreSQL connection string it serves from (its
	// --database) otherwise; both are empty for an embedded runtime. An
	// adapter whose upstream keeps state of its own (checkpoints) may
	// keep it there when its section names no store, so that it
	// survives restarts, and is shared by replicas, as the runtime's
	// does. Database holds credentials: never log it.
	DataDir, Database string
}

// Registry maps adapter names to factories: the extension point through
// which embedded callers, and armature serve binaries built in other
// modules, provide backends ("embedded callers may provide adapter
// factories keyed by adapter name"). The workspace stays generic: an
// agent's backend field names a registered adapter. The zero value is
// an empty registry ready to use; it is safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Factory
}

// NewRegistry returns a registry holding the given factories, keyed by
// name; it fails like Register.
func NewRegistry(factories map[string]Factory) (*Registry, error) {
	r := &Registry{}
	for _, name := range slices.Sorted(maps.Keys(factories)) {
		if err := r.Register(name, factories[name]); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds the factory of the adapter named name (a lower-case
// word such as "adk"). A name registered already is ErrDuplicate.
func (r *Registry) Register(name string, f Factory) error {
	if !validName(name) || f == nil {
		return fmt.Errorf("%w: an adapter needs a name of [a-z0-9_-] and a factory (got %q)", ErrInvalidConfig, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicate, name)
	}
	if r.m == nil {
		r.m = map[string]Factory{}
	}
	r.m[name] = f
	return nil
}

// Lookup returns the factory registered under name.
func (r *Registry) Lookup(name string) (Factory, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.m[name]
	return f, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.m))
}

// Build builds the adapter of a workspace agent with the factory its
// backend names (ErrUnknownAdapter when none is registered).
func (r *Registry) Build(ctx context.Context, req FactoryRequest) (Adapter, error) {
	name := req.Agent.Backend
	if name == "" {
		name = Native
	}
	f, ok := r.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: agent %s names backend %q (registered: %v)", ErrUnknownAdapter, req.Agent.ID, name, r.Names())
	}
	if req.Logger == nil {
		req.Logger = slog.New(slog.DiscardHandler)
	}
	a, err := f(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("adapter: %s: agent %s: %w", name, req.Agent.ID, err)
	}
	return a, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
