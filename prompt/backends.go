package prompt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/armature-go/armature/errcat"
)

// notFound is the prompt_not_found error of a fetch.
func notFound(name, label string) error {
	return errcat.New(errcat.PromptNotFound, fmt.Sprintf("prompt: no prompt %q with label %q", name, label))
}

// Memory is a Backend over prompts held in memory, keyed by name and
// label. It reads nothing, so FetchOptions.MaxAge does not apply. Safe for
// concurrent use; Put replaces a prompt atomically.
type Memory struct {
	now     func() time.Time
	mu      sync.RWMutex
	prompts map[[2]string]*Prompt
}

// NewMemory returns a Memory backend holding prompts (each under its Name
// and Label; an empty Label is DefaultLabel). now is the clock of
// FetchedAt; nil means time.Now.
func NewMemory(now func() time.Time, prompts ...*Prompt) *Memory {
	if now == nil {
		now = time.Now
	}
	m := &Memory{now: now, prompts: map[[2]string]*Prompt{}}
	for _, p := range prompts {
		m.Put(p)
	}
	return m
}

// Put adds or replaces p under its name and label, computing its
// TemplateHash when empty. The backend keeps p: do not modify it after.
func (m *Memory) Put(p *Prompt) {
	if p.Label == "" {
		p.Label = DefaultLabel
	}
	if p.TemplateHash == "" {
		p.TemplateHash = HashTemplate(p)
	}
	m.mu.Lock()
	m.prompts[[2]string{p.Name, p.Label}] = p
	m.mu.Unlock()
}

// Fetch implements Backend.
func (m *Memory) Fetch(ctx context.Context, name, label string, opts FetchOptions) (*Prompt, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	m.mu.RLock()
	p, ok := m.prompts[[2]string{name, label}]
	m.mu.RUnlock()
	if !ok {
		return nil, notFound(name, label)
	}
	cp := *p
	cp.FetchedAt = m.now()
	return &cp, nil
}

// CacheConfig configures a Cache.
type CacheConfig struct {
	// TTL is how long a cached prompt is served to fetches that set no
	// MaxAge; zero means until evicted.
	TTL time.Duration
	// MaxEntries bounds the cache; zero means 1024. Past it, an arbitrary
	// entry is evicted.
	MaxEntries int
	// ServeStale serves an expired entry (TTL) when the source is
	// unavailable, with a warning, unless the fetch's MaxAge forbids it.
	ServeStale bool
	// StaleRetry, with ServeStale, is how long after a failed read of the
	// source the fetches without MaxAge are served the stale entry at
	// once, without reading the source again: during an outage, one fetch
	// per StaleRetry waits for the source (up to its timeout), not every
	// fetch. Zero means DefaultStaleRetry; it is never longer than TTL;
	// negative reads the source at every fetch. A fetch with MaxAge
	// always reads the source as MaxAge requires.
	StaleRetry time.Duration
	// Now is the cache's clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the stale-serve warnings; nil discards.
	Logger *slog.Logger
}

// DefaultStaleRetry is CacheConfig.StaleRetry's default.
const DefaultStaleRetry = 10 * time.Second

// Cache is a Backend that caches another's prompts by name and label
// (prompt-management §5): a fetch with MaxAge 0 always reads the source,
// one with a positive MaxAge is served from the cache only when the
// entry is younger, and one without MaxAge when the entry is within TTL.
// Every read of the source refreshes the entry, unless a read that began
// later has already refreshed it: a slow read never puts back a version
// an overtaking read replaced. A served prompt keeps the FetchedAt of its
// source read. Safe for concurrent use.
//
// With ServeStale, a fetch without MaxAge whose entry expired while the
// source is unavailable (prompt_store_unavailable) is served the expired
// entry, with a warning; for StaleRetry after that failed read, such
// fetches are served it at once, without waiting on the source again,
// and the first fetch past it reads the source. A successful read (a
// MaxAge 0 fetch's included) ends the wait. A read a caller gave up
// (its context ended) starts no wait. Fetches with MaxAge are never
// served a stale entry (prompt-management §5).
//
// Concurrent fetches that miss the same entry with the same MaxAge (other
// than 0) share one source read. A caller whose context ends stops
// waiting at once, with an error; the shared read goes on for the others
// and is cancelled only when no caller waits for it any more. A fetch
// with MaxAge 0 always makes its own read.
type Cache struct {
	src     Backend
	cfg     CacheConfig
	log     *slog.Logger
	mu      sync.Mutex
	items   map[[2]string]cacheEntry
	flights map[flightKey]*flight
	// seq numbers the source reads in the order they begin.
	seq uint64
}

// cacheEntry is a cached prompt and the number of the read that got it.
type cacheEntry struct {
	p   *Prompt
	seq uint64
	// retryAt, after a failed read of an expired entry, is when the
	// source is read again for fetches without MaxAge (StaleRetry).
	retryAt time.Time
}

// flightKey identifies a shared read: the prompt and the fetch's MaxAge
// (passed on to the source, which may be a cache itself).
type flightKey struct {
	name, label string
	maxAge      time.Duration // -1: none
}

// flight is a source read under way and the callers waiting for it.
type flight struct {
	done    chan struct{}
	p       *Prompt
	err     error
	waiters int // under Cache.mu
	cancel  context.CancelFunc
}

// NewCache returns a Cache over src.
func NewCache(src Backend, cfg CacheConfig) *Cache {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 1024
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cache{src: src, cfg: cfg, log: log, items: map[[2]string]cacheEntry{}, flights: map[flightKey]*flight{}}
}

// Fetch implements Backend.
func (c *Cache) Fetch(ctx context.Context, name, label string, opts FetchOptions) (*Prompt, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	key := [2]string{name, label}
	c.mu.Lock()
	entry := c.items[key]
	c.mu.Unlock()
	cached := entry.p
	var age time.Duration
	if cached != nil {
		now := c.cfg.Now()
		age = now.Sub(cached.FetchedAt)
		switch {
		case opts.MaxAge != nil:
			if *opts.MaxAge > 0 && age <= *opts.MaxAge {
				return cached, nil
			}
		case c.cfg.TTL == 0 || age <= c.cfg.TTL:
			return cached, nil
		case c.cfg.ServeStale && now.Before(entry.retryAt):
			// The source failed a moment ago: the stale entry, at once.
			return cached, nil
		}
	}
	var (
		p   *Prompt
		err error
	)
	if opts.MaxAge != nil && *opts.MaxAge == 0 {
		p, err = c.read(ctx, key, opts)
	} else {
		p, err = c.shared(ctx, key, opts)
	}
	if err != nil {
		if cached != nil && c.cfg.ServeStale && opts.MaxAge == nil && errors.Is(err, errcat.PromptStoreUnavailable) {
			var retry time.Duration
			if ctx.Err() == nil {
				retry = c.backOff(key, cached)
			}
			c.log.WarnContext(ctx, "prompt: source unavailable, serving a stale cached prompt",
				"prompt", name, "label", label, "age", age, "retry_in", retry, "error", err)
			return cached, nil
		}
		return nil, err
	}
	return p, nil
}

// backOff makes the fetches without MaxAge serve the stale entry cached
// of key at once for StaleRetry, the source having just failed to
// refresh it, and returns that period (0: none, or the entry was
// replaced meanwhile).
func (c *Cache) backOff(key [2]string, cached *Prompt) time.Duration {
	retry := c.cfg.StaleRetry
	switch {
	case retry < 0:
		return 0
	case retry == 0:
		retry = DefaultStaleRetry
	}
	if c.cfg.TTL > 0 {
		retry = min(retry, c.cfg.TTL)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.items[key]
	if !ok || cur.p != cached {
		return 0
	}
	cur.retryAt = c.cfg.Now().Add(retry)
	c.items[key] = cur
	return retry
}

// read reads the source for key and records the outcome.
func (c *Cache) read(ctx context.Context, key [2]string, opts FetchOptions) (*Prompt, error) {
	c.mu.Lock()
	c.seq++
	seq := c.seq
	c.mu.Unlock()
	p, err := c.src.Fetch(ctx, key[0], key[1], opts)
	c.mu.Lock()
	c.record(key, seq, p, err)
	c.mu.Unlock()
	return p, err
}

// record stores the outcome of read seq of key (c.mu held): a prompt
// replaces the entry, prompt_not_found drops it, unless a read that began
// later has already been recorded.
func (c *Cache) record(key [2]string, seq uint64, p *Prompt, err error) {
	if cur, ok := c.items[key]; ok && cur.seq > seq {
		return
	}
	switch {
	case err == nil:
		if _, ok := c.items[key]; !ok && len(c.items) >= c.cfg.MaxEntries {
			for k := range c.items {
				delete(c.items, k)
				break
			}
		}
		c.items[key] = cacheEntry{p: p, seq: seq}
	case errors.Is(err, errcat.PromptNotFound):
		delete(c.items, key)
	}
}

// shared joins the read of key under way for the same MaxAge, or starts
// one, and waits for it or for ctx.
func (c *Cache) shared(ctx context.Context, key [2]string, opts FetchOptions) (*Prompt, error) {
	fk := flightKey{name: key[0], label: key[1], maxAge: -1}
	if opts.MaxAge != nil {
		fk.maxAge = *opts.MaxAge
	}
	c.mu.Lock()
	f := c.flights[fk]
	if f == nil {
		c.seq++
		seq := c.seq
		// The read belongs to no caller: it ends when no one waits.
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), cancel: cancel}
		c.flights[fk] = f
		go c.fly(fctx, fk, f, key, seq, opts)
	}
	f.waiters++
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.p, f.err
	case <-ctx.Done():
		c.mu.Lock()
		if f.waiters--; f.waiters == 0 {
			// Nobody waits: cancel the read, and let the next fetch start
			// its own rather than join a cancelled one.
			if c.flights[fk] == f {
				delete(c.flights, fk)
			}
			f.cancel()
		}
		c.mu.Unlock()
		return nil, errcat.Wrap(errcat.PromptStoreUnavailable,
			fmt.Sprintf("prompt: fetching %q (label %q): the caller gave up", key[0], key[1]), context.Cause(ctx))
	}
}

// fly performs a shared read.
func (c *Cache) fly(ctx context.Context, fk flightKey, f *flight, key [2]string, seq uint64, opts FetchOptions) {
	defer f.cancel()
	p, err := c.fetchSource(ctx, key, opts)
	c.mu.Lock()
	if c.flights[fk] == f {
		delete(c.flights, fk)
	}
	if ctx.Err() == nil || err == nil {
		c.record(key, seq, p, err)
	}
	f.p, f.err = p, err
	c.mu.Unlock()
	close(f.done)
}

// fetchSource reads the source, a panic in it reported as the store
// being unavailable (the read runs on a goroutine of its own).
func (c *Cache) fetchSource(ctx context.Context, key [2]string, opts FetchOptions) (p *Prompt, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, errcat.New(errcat.PromptStoreUnavailable, fmt.Sprintf("prompt: fetching %q (label %q): the source panicked: %v", key[0], key[1], r))
		}
	}()
	return c.src.Fetch(ctx, key[0], key[1], opts)
}

// Dir is a Backend reading prompt files from a directory: the prompt
// named N is the file N.yaml (names may contain slashes: subdirectories).
// A file lists the prompt's versions, oldest first, and maps labels to
// versions; "latest" is the last version unless the file maps it:
//
//	labels: {production: "2", staging: "3"}
//	versions:
//	  - version: "2"
//	    template: "Answer {{ question }} briefly."
//	  - version: "3"
//	    chat_template:
//	      - {role: system, content: "You are {{ persona }}."}
//	      - {placeholder: history}
//	      - {role: user, content: "{{ question }}"}
//	    sampling: {temperature: 0.2, max_tokens: 512}
//	    token_budget: {input_max_tokens: 4000}
//	    metadata: {owner: support-team}
//
// A version has template or chat_template, and optionally sampling,
// token_budget and metadata. Every fetch reads the file (no cache; wrap
// it in a Cache if reads cost). A missing file or label is
// prompt_not_found; a file that cannot be read or parsed is
// prompt_store_unavailable (the manager then tries its next backend).
type Dir struct {
	fsys fs.FS
	now  func() time.Time
}

// NewDir returns a Dir backend over the directory root.
func NewDir(root string) *Dir { return NewDirFS(os.DirFS(root), nil) }

// NewDirFS returns a Dir backend over fsys (for embedded prompt files);
// now is the clock of FetchedAt, nil meaning time.Now.
func NewDirFS(fsys fs.FS, now func() time.Time) *Dir {
	if now == nil {
		now = time.Now
	}
	return &Dir{fsys: fsys, now: now}
}

// dirFile is a prompt file's shape.
type dirFile struct {
	Labels   map[string]string `yaml:"labels"`
	Versions []struct {
		Version      string         `yaml:"version"`
		Template     *string        `yaml:"template"`
		ChatTemplate []any          `yaml:"chat_template"`
		Sampling     map[string]any `yaml:"sampling"`
		TokenBudget  map[string]any `yaml:"token_budget"`
		Metadata     map[string]any `yaml:"metadata"`
	} `yaml:"versions"`
}

// Fetch implements Backend.
func (d *Dir) Fetch(ctx context.Context, name, label string, opts FetchOptions) (*Prompt, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	file := name + ".yaml"
	if !fs.ValidPath(file) || path.Clean(file) != file {
		return nil, notFound(name, label)
	}
	data, err := fs.ReadFile(d.fsys, file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound(name, label)
	}
	if err != nil {
		return nil, errcat.Wrap(errcat.PromptStoreUnavailable, fmt.Sprintf("prompt: reading %s", file), err)
	}
	p, err := ParseFile(data, name, label)
	if err != nil {
		return nil, err
	}
	p.FetchedAt = d.now()
	return p, nil
}

// ParseFile parses a prompt file (see [Dir]) and returns the version
// label names, in prompt_not_found when the label is not in the file and
// prompt_store_unavailable when the file is invalid.
func ParseFile(data []byte, name, label string) (*Prompt, error) {
	invalid := func(err error) error {
		return errcat.Wrap(errcat.PromptStoreUnavailable, fmt.Sprintf("prompt: %s.yaml is invalid", name), err)
	}
	var f dirFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, invalid(err)
	}
	if len(f.Versions) == 0 {
		return nil, invalid(errors.New("no versions"))
	}
	// Two distinct version strings denote distinct contents, and one
	// string one content (prompt-management §3): a version named twice,
	// or not named, would let a label pick either.
	seen := make(map[string]bool, len(f.Versions))
	for i, v := range f.Versions {
		switch {
		case v.Version == "":
			return nil, invalid(fmt.Errorf("version %d has no version string", i+1))
		case seen[v.Version]:
			return nil, invalid(fmt.Errorf("version %q is given twice", v.Version))
		}
		seen[v.Version] = true
	}
	want, ok := f.Labels[label]
	if !ok {
		if label != "latest" {
			return nil, notFound(name, label)
		}
		want = f.Versions[len(f.Versions)-1].Version
	}
	for _, v := range f.Versions {
		if v.Version != want {
			continue
		}
		p := &Prompt{Name: name, Version: v.Version, Label: label, Metadata: v.Metadata}
		switch {
		case v.Template != nil && v.ChatTemplate != nil:
			return nil, invalid(fmt.Errorf("version %q has both template and chat_template", want))
		case v.Template != nil:
			t, err := ParseTemplate(*v.Template)
			if err != nil {
				return nil, invalid(err)
			}
			p.Template = t
		case v.ChatTemplate != nil:
			segs, err := ParseChat(v.ChatTemplate)
			if err != nil {
				return nil, invalid(err)
			}
			p.Chat = segs
		default:
			return nil, invalid(fmt.Errorf("version %q has no template", want))
		}
		if v.Sampling != nil {
			s, err := ParseSampling(v.Sampling)
			if err != nil {
				return nil, invalid(err)
			}
			p.Sampling = s
		}
		if v.TokenBudget != nil {
			p.TokenBudget = ParseTokenBudget(v.TokenBudget)
		}
		p.TemplateHash = HashTemplate(p)
		return p, nil
	}
	return nil, invalid(fmt.Errorf("label %q names version %q, which the file does not have", label, want))
}
