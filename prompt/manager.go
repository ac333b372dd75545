package prompt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/armature-go/armature/errcat"
)

// Backend is a source of prompts (prompt-management §5). Fetch returns
// the prompt named name under label, or an error in prompt_not_found
// (errors.Is(err, errcat.PromptNotFound)) or prompt_store_unavailable.
// Fetch must be safe for concurrent use and must not modify the prompts
// it returns.
type Backend interface {
	Fetch(ctx context.Context, name, label string, opts FetchOptions) (*Prompt, error)
}

// FetchOptions are a fetch's optional inputs.
type FetchOptions struct {
	// MaxAge bounds the age of a cached prompt the backend may serve
	// (prompt-management §5 cache_ttl_seconds): nil lets the backend's
	// own caching decide, 0 forces a fresh read, a positive duration
	// rejects cached entries older than it. Backends without a cache
	// ignore it. A negative duration is invalid.
	MaxAge *time.Duration
}

// validate rejects a negative MaxAge.
func (o FetchOptions) validate() error {
	if o.MaxAge != nil && *o.MaxAge < 0 {
		return fmt.Errorf("prompt: negative cache max age %v", *o.MaxAge)
	}
	return nil
}

// ErrInvalidArgument is matched by errors for invalid arguments (a
// negative max age), which are not prompt-management categories.
var ErrInvalidArgument = errors.New("prompt: invalid argument")

// MaxAge returns a pointer to d, for FetchOptions.MaxAge.
func MaxAge(d time.Duration) *time.Duration { return &d }

// LabelResolver chooses the label of a fetch that names none
// (prompt-management §7).
type LabelResolver interface {
	Resolve(name string) string
}

// Labels is a LabelResolver from a mapping: the name's own entry, else the
// "default" entry, else DefaultLabel. Load one from JSON
// ({"default": "production", "classify": "staging"}) with json.Unmarshal.
type Labels map[string]string

// Resolve implements LabelResolver.
func (l Labels) Resolve(name string) string {
	if v, ok := l[name]; ok && v != "" {
		return v
	}
	if v, ok := l["default"]; ok && v != "" {
		return v
	}
	return DefaultLabel
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Backends are consulted in order (prompt-management §9). At least
	// one is required.
	Backends []Backend
	// Resolver, if set, chooses the label of fetches that name none.
	Resolver LabelResolver
	// DefaultMaxAge, if set, is the MaxAge of fetches that give none.
	DefaultMaxAge *time.Duration
	// Logger receives a warning when a backend is unavailable and the
	// next one serves the prompt; nil discards.
	Logger *slog.Logger
	// Now is the manager's clock for render times; nil means time.Now.
	Now func() time.Time
}

// Manager fetches prompts from its backends and renders them
// (prompt-management §6). It is safe for concurrent use.
type Manager struct {
	cfg ManagerConfig
	log *slog.Logger
}

// NewManager returns a Manager. No backend, a nil backend or a negative
// DefaultMaxAge is an error matching ErrInvalidArgument.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if len(cfg.Backends) == 0 {
		return nil, fmt.Errorf("%w: a prompt manager needs at least one backend", ErrInvalidArgument)
	}
	for i, b := range cfg.Backends {
		if b == nil {
			return nil, fmt.Errorf("%w: backend %d is nil", ErrInvalidArgument, i)
		}
	}
	if err := (FetchOptions{MaxAge: cfg.DefaultMaxAge}).validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	cfg.Backends = append([]Backend(nil), cfg.Backends...)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, log: log}, nil
}

// Label returns the label a fetch of name uses when label is "": the
// resolver's choice, else DefaultLabel.
func (m *Manager) Label(name, label string) string {
	switch {
	case label != "":
		return label
	case m.cfg.Resolver != nil:
		return m.cfg.Resolver.Resolve(name)
	}
	return DefaultLabel
}

// Fetch returns the prompt named name under label ("" lets the resolver
// choose): the first backend that has it serves it; prompt_not_found from
// a backend ends the search (a retired prompt is not served from a
// fallback), prompt_store_unavailable moves on to the next backend, and
// only when every backend is unavailable is the error
// prompt_store_unavailable.
func (m *Manager) Fetch(ctx context.Context, name, label string, opts FetchOptions) (*Prompt, error) {
	if opts.MaxAge == nil {
		opts.MaxAge = m.cfg.DefaultMaxAge
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	label = m.Label(name, label)
	var errs []error
	for i, b := range m.cfg.Backends {
		p, err := b.Fetch(ctx, name, label, opts)
		if err == nil {
			if len(errs) > 0 {
				m.log.WarnContext(ctx, "prompt: backend unavailable, served by a fallback",
					"prompt", name, "label", label, "backend", i, "error", errors.Join(errs...))
			}
			return p, nil
		}
		if !errors.Is(err, errcat.PromptStoreUnavailable) || ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, errcat.Wrap(errcat.PromptStoreUnavailable,
		fmt.Sprintf("prompt: %q (label %q): every backend is unavailable", name, label), errors.Join(errs...))
}

// Render renders p with vars (see [Render]), at the manager's clock.
func (m *Manager) Render(p *Prompt, vars map[string]any, opts RenderOptions) (*Result, error) {
	if opts.Now.IsZero() && m.cfg.Now != nil {
		opts.Now = m.cfg.Now()
	}
	return Render(p, vars, opts)
}

// Get fetches and renders in one call.
func (m *Manager) Get(ctx context.Context, name, label string, vars map[string]any, fopts FetchOptions, ropts RenderOptions) (*Result, error) {
	p, err := m.Fetch(ctx, name, label, fopts)
	if err != nil {
		return nil, err
	}
	return m.Render(p, vars, ropts)
}
