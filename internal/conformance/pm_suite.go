package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
)

// promptSuite runs the prompt-management fixtures against package prompt:
// each backends: entry is a prompt.Memory (behind a prompt.Cache with a
// controllable clock when caching: true; behind a failing source when
// simulate_unavailable: true) wrapped in a call counter, each manager a
// prompt.Manager, and the calls run in order with their captures.
type promptSuite struct{}

// pmBackend is one fixture backend and its counters.
type pmBackend struct {
	name  string
	outer prompt.Backend
	clock *pmClock
	mu    sync.Mutex
	calls int // fetches reaching the backend
	reads int // fetches reaching its source (behind a cache)
}

// pmClock is a controllable clock.
type pmClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *pmClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *pmClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// pmCounting counts the fetches passing through it and fails them when
// unavailable.
type pmCounting struct {
	next        prompt.Backend
	count       func()
	unavailable bool
}

func (c *pmCounting) Fetch(ctx context.Context, name, label string, opts prompt.FetchOptions) (*prompt.Prompt, error) {
	c.count()
	if c.unavailable {
		return nil, errcat.Wrap(errcat.PromptStoreUnavailable, "simulated I/O error", errors.New("connection refused"))
	}
	return c.next.Fetch(ctx, name, label, opts)
}

// pmCase is one running case.
type pmCase struct {
	body     *Value
	backends map[string]*pmBackend
	order    []string
	captures map[string]any // *prompt.Prompt, *prompt.Result, *prompt.Group
	managers map[string]*prompt.Manager
}

// RunCase implements CaseRunner.
func (promptSuite) RunCase(ctx context.Context, c *Case) error {
	x := &pmCase{body: c.Body, backends: map[string]*pmBackend{}, captures: map[string]any{}, managers: map[string]*prompt.Manager{}}
	for _, f := range c.Body.Fields {
		switch k := f.Key; {
		case k == "backends", k == "manager", k == "calls", k == "expected", k == "name", k == "description",
			k == "label_resolver", k == "expected_backend_state", k == "expected_shared_prefix", k == "expected_message_equal",
			strings.HasSuffix(k, "_manager"), strings.HasSuffix(k, "_calls"), strings.HasSuffix(k, "_label_resolver"):
		default:
			return schemaErrorf(f.Pos, "prompt-management: unknown key %q", k)
		}
	}
	if err := x.buildBackends(); err != nil {
		return err
	}
	for _, prefix := range []string{"", "secondary_", "tertiary_"} {
		mv, ok := c.Body.Get(prefix + "manager")
		calls, hasCalls := c.Body.Get(prefix + "calls")
		if ok {
			m, err := x.buildManager(mv, prefix)
			if err != nil {
				return err
			}
			x.managers[prefix+"manager"] = m
		}
		if hasCalls {
			for i, call := range calls.Items {
				if err := x.runCall(ctx, call, prefix+"manager"); err != nil {
					return fmt.Errorf("%scalls[%d]: %w", prefix, i, err)
				}
			}
		}
	}
	return x.checkExpected()
}

func (x *pmCase) buildBackends() error {
	bv, _ := x.body.Get("backends")
	if bv == nil {
		return nil
	}
	for _, item := range bv.Items {
		spec, _ := item.Native().(map[string]any)
		name, _ := spec["name"].(string)
		b := &pmBackend{name: name, clock: &pmClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
		var prompts []*prompt.Prompt
		list, _ := spec["prompts"].([]any)
		for _, raw := range list {
			p, err := pmPrompt(raw)
			if err != nil {
				return schemaErrorf(item.Pos, "backend %q: %v", name, err)
			}
			prompts = append(prompts, p)
		}
		unavailable, _ := spec["simulate_unavailable"].(bool)
		caching, _ := spec["caching"].(bool)
		var src prompt.Backend = &pmCounting{next: prompt.NewMemory(b.clock.Now, prompts...), unavailable: unavailable,
			count: func() { b.mu.Lock(); b.reads++; b.mu.Unlock() }}
		if caching {
			src = prompt.NewCache(src, prompt.CacheConfig{Now: b.clock.Now})
		}
		b.outer = &pmCounting{next: src, count: func() { b.mu.Lock(); b.calls++; b.mu.Unlock() }}
		x.backends[name] = b
		x.order = append(x.order, name)
	}
	return nil
}

// pmPrompt builds a prompt from its fixture form.
func pmPrompt(raw any) (*prompt.Prompt, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("a prompt is not a mapping")
	}
	p := &prompt.Prompt{Name: pmStr(m["name"]), Label: pmStr(m["label"]), Version: pmStr(m["version"]), TemplateHash: pmStr(m["template_hash"])}
	if t, ok := m["template"].(string); ok {
		tpl, err := prompt.ParseTemplate(t)
		if err != nil {
			return nil, err
		}
		p.Template = tpl
	}
	if ct, ok := m["chat_template"].([]any); ok {
		segs, err := prompt.ParseChat(ct)
		if err != nil {
			return nil, err
		}
		p.Chat = segs
	}
	if s, ok := m["sampling"].(map[string]any); ok {
		cfg, err := prompt.ParseSampling(s)
		if err != nil {
			return nil, err
		}
		p.Sampling = cfg
	}
	if tb, ok := m["token_budget"].(map[string]any); ok {
		p.TokenBudget = prompt.ParseTokenBudget(tb)
	}
	if oe, ok := m["observability_entities"].(map[string]any); ok {
		p.ObservabilityEntities = oe
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		p.Metadata = md
	}
	return p, nil
}

func (x *pmCase) buildManager(v *Value, prefix string) (*prompt.Manager, error) {
	spec, _ := v.Native().(map[string]any)
	var cfg prompt.ManagerConfig
	names := x.order
	if list, ok := spec["backends"].([]any); ok {
		names = nil
		for _, n := range list {
			s, _ := n.(string)
			names = append(names, s)
		}
	}
	for _, n := range names {
		b, ok := x.backends[n]
		if !ok {
			return nil, schemaErrorf(v.Pos, "manager names unknown backend %q", n)
		}
		cfg.Backends = append(cfg.Backends, b.outer)
	}
	if ref, ok := spec["label_resolver_ref"].(string); ok {
		rv, ok := x.body.Get(ref)
		if !ok {
			return nil, schemaErrorf(v.Pos, "label_resolver_ref %q names nothing", ref)
		}
		mapping, _ := rv.Native().(map[string]any)["mapping"].(map[string]any)
		labels := prompt.Labels{}
		for k, val := range mapping {
			labels[k], _ = val.(string)
		}
		cfg.Resolver = labels
	}
	if ttl, ok := spec["default_cache_ttl_seconds"]; ok {
		n, _ := pmNum(ttl)
		cfg.DefaultMaxAge = prompt.MaxAge(time.Duration(n) * time.Second)
	}
	return prompt.NewManager(cfg)
}

func (x *pmCase) runCall(ctx context.Context, cv *Value, defaultManager string) error {
	call, _ := cv.Native().(map[string]any)
	op, _ := call["operation"].(string)
	expected, _ := call["expected"].(map[string]any)
	var got any
	var err error
	switch target := call["target"].(type) {
	case string:
		if target == "construct_prompt_group" {
			got, err = x.group(call)
			break
		}
		m, ok := x.managers[target]
		if !ok {
			return schemaErrorf(cv.Pos, "unknown target %q", target)
		}
		got, err = x.managerCall(ctx, m, op, call)
	case map[string]any:
		switch {
		case target["manager"] == true:
			got, err = x.managerCall(ctx, x.managers[defaultManager], op, call)
		case target["backend"] != nil:
			name, _ := target["backend"].(string)
			b, ok := x.backends[name]
			if !ok {
				return schemaErrorf(cv.Pos, "unknown backend %q", name)
			}
			switch op {
			case "advance_clock":
				secs, _ := pmNum(call["seconds"])
				b.clock.advance(time.Duration(secs * float64(time.Second)))
				return nil
			case "fetch":
				got, err = b.outer.Fetch(ctx, pmStr(call["name"]), pmStr(call["label"]), fetchOpts(call))
			default:
				return schemaErrorf(cv.Pos, "unknown backend operation %q", op)
			}
		default:
			return schemaErrorf(cv.Pos, "unknown target %v", target)
		}
	default:
		return schemaErrorf(cv.Pos, "a call needs a target")
	}
	if r, ok := expected["raises"].(map[string]any); ok {
		if err == nil {
			return fmt.Errorf("expected %v to raise, got %v", r["category"], got)
		}
		if err := pmCheckRaise(r, err); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if name, ok := call["capture_as"].(string); ok && err == nil {
		x.captures[name] = got
	}
	mt := newMatcher()
	for k, want := range expected {
		switch k {
		case "raises":
		case "prompt", "prompt_result":
			if err := pmMatch(mt, k, want, got); err != nil {
				return err
			}
		case "backend_call_counts":
			for bn, n := range want.(map[string]any) {
				if err := x.checkCount(bn, n, false); err != nil {
					return err
				}
			}
		case "secondary_backend_call_count":
			if len(x.order) < 2 {
				return schemaErrorf(cv.Pos, "no secondary backend")
			}
			if err := x.checkCount(x.order[1], want, false); err != nil {
				return err
			}
		default:
			return schemaErrorf(cv.Pos, "unknown expected key %q", k)
		}
	}
	return nil
}

func (x *pmCase) checkCount(name string, want any, reads bool) error {
	b, ok := x.backends[name]
	if !ok {
		return fmt.Errorf("unknown backend %q", name)
	}
	b.mu.Lock()
	got := b.calls
	if reads {
		got = b.reads
	}
	b.mu.Unlock()
	if n, _ := pmNum(want); int(n) != got {
		what := "fetch calls"
		if reads {
			what = "source reads"
		}
		return fmt.Errorf("backend %q: %d %s, want %v", name, got, what, want)
	}
	return nil
}

func (x *pmCase) managerCall(ctx context.Context, m *prompt.Manager, op string, call map[string]any) (any, error) {
	if m == nil {
		return nil, errors.New("no manager for this call")
	}
	vars, _ := call["variables"].(map[string]any)
	ropts, err := renderOpts(call)
	if err != nil {
		return nil, err
	}
	switch op {
	case "fetch":
		return m.Fetch(ctx, pmStr(call["name"]), pmStr(call["label"]), fetchOpts(call))
	case "get":
		return m.Get(ctx, pmStr(call["name"]), pmStr(call["label"]), vars, fetchOpts(call), ropts)
	case "render":
		var p *prompt.Prompt
		if ref, ok := call["fetched_prompt_ref"].(string); ok {
			if p, ok = x.captures[ref].(*prompt.Prompt); !ok {
				return nil, fmt.Errorf("fetched_prompt_ref %q is not a captured prompt", ref)
			}
		} else {
			fp, _ := call["fetched_prompt"].(map[string]any)
			if p, err = m.Fetch(ctx, pmStr(fp["name"]), pmStr(fp["label"]), prompt.FetchOptions{}); err != nil {
				return nil, err
			}
		}
		return m.Render(p, vars, ropts)
	}
	return nil, fmt.Errorf("unknown manager operation %q", op)
}

func (x *pmCase) group(call map[string]any) (any, error) {
	var members []*prompt.Result
	refs, _ := call["members_refs"].([]any)
	for _, r := range refs {
		res, ok := x.captures[pmStr(r)].(*prompt.Result)
		if !ok {
			return nil, fmt.Errorf("members_refs: %v is not a captured render", r)
		}
		members = append(members, res)
	}
	return prompt.NewGroup(pmStr(call["group_name"]), members...)
}

func fetchOpts(call map[string]any) prompt.FetchOptions {
	var o prompt.FetchOptions
	if v, ok := call["cache_ttl_seconds"]; ok {
		n, _ := pmNum(v)
		o.MaxAge = prompt.MaxAge(time.Duration(n) * time.Second)
	}
	return o
}

func renderOpts(call map[string]any) (prompt.RenderOptions, error) {
	var o prompt.RenderOptions
	ph, ok := call["placeholders"].(map[string]any)
	if !ok {
		return o, nil
	}
	o.Placeholders = map[string][]llm.Message{}
	for name, v := range ph {
		data, err := json.Marshal(v)
		if err != nil {
			return o, err
		}
		var msgs []llm.Message
		if err := json.Unmarshal(data, &msgs); err != nil {
			return o, fmt.Errorf("placeholder %q: %w", name, err)
		}
		o.Placeholders[name] = msgs
	}
	return o, nil
}

func pmStr(v any) string { s, _ := v.(string); return s }

// pmCheckRaise checks a raised error against {category, carries}.
func pmCheckRaise(r map[string]any, err error) error {
	want := pmStr(r["category"])
	if !errors.Is(err, errcat.Category(want)) {
		return fmt.Errorf("raised %v (category %q), want %q", err, errcat.Of(err), want)
	}
	carries, _ := r["carries"].(map[string]any)
	if len(carries) == 0 {
		return nil
	}
	var re *prompt.RenderError
	if !errors.As(err, &re) {
		return fmt.Errorf("raised %v: not a render error carrying the prompt's identity", err)
	}
	for k, v := range carries {
		var got string
		switch k {
		case "name":
			got = re.Name
		case "version":
			got = re.Version
		case "label":
			got = re.Label
		case "description_mentions":
			if !strings.Contains(re.Description, pmStr(v)) {
				return fmt.Errorf("description %q does not mention %q", re.Description, v)
			}
			continue
		default:
			return fmt.Errorf("unknown carries key %q", k)
		}
		if got != pmStr(v) {
			return fmt.Errorf("raised error %s = %q, want %q", k, got, v)
		}
	}
	return nil
}

// pmNative renders a prompt, result or group with the spec's field names.
func pmNative(v any) (map[string]any, error) {
	out := map[string]any{}
	put := func(k string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var n any
		if err := json.Unmarshal(data, &n); err != nil {
			return err
		}
		out[k] = n
		return nil
	}
	sampling := func(c *llm.Config) error {
		if c == nil {
			return nil
		}
		m := map[string]any{}
		set := func(k string, v any, ok bool) {
			if ok {
				m[k] = v
			}
		}
		set("temperature", deref(c.Temperature), c.Temperature != nil)
		set("max_tokens", deref(c.MaxTokens), c.MaxTokens != nil)
		set("top_p", deref(c.TopP), c.TopP != nil)
		set("seed", deref(c.Seed), c.Seed != nil)
		set("frequency_penalty", deref(c.FrequencyPenalty), c.FrequencyPenalty != nil)
		set("presence_penalty", deref(c.PresencePenalty), c.PresencePenalty != nil)
		set("stop_sequences", c.StopSequences, c.StopSequences != nil)
		set("extras", c.Extras, c.Extras != nil)
		return put("sampling", m)
	}
	budget := func(tb *prompt.TokenBudget) error {
		if tb == nil {
			return nil
		}
		m := map[string]any{}
		if tb.InputMaxTokens != nil {
			m["input_max_tokens"] = *tb.InputMaxTokens
		}
		if tb.TotalMaxTokens != nil {
			m["total_max_tokens"] = *tb.TotalMaxTokens
		}
		return put("token_budget", m)
	}
	var err error
	switch x := v.(type) {
	case *prompt.Prompt:
		out["name"], out["version"], out["label"], out["template_hash"] = x.Name, x.Version, x.Label, x.TemplateHash
		if x.Template != nil {
			out["template"] = x.Template.Source()
		}
		if x.ObservabilityEntities != nil {
			out["observability_entities"] = x.ObservabilityEntities
		}
		if err = sampling(x.Sampling); err == nil {
			err = budget(x.TokenBudget)
		}
	case *prompt.Result:
		out["name"], out["version"], out["label"], out["template_hash"] = x.Name, x.Version, x.Label, x.TemplateHash
		out["rendered_hash"] = x.RenderedHash
		if x.ObservabilityEntities != nil {
			out["observability_entities"] = x.ObservabilityEntities
		}
		if err = put("messages", x.Messages); err == nil {
			err = put("variables", x.Variables)
		}
		if err == nil {
			err = sampling(x.Sampling)
		}
		if err == nil {
			err = budget(x.TokenBudget)
		}
	default:
		return nil, fmt.Errorf("%T is not a prompt or a rendered prompt", v)
	}
	return out, err
}

func deref[T any](p *T) any { return *p }

// pmMatch matches an expected prompt or result mapping: the keys given
// (and the _absent / _present / _non_empty_string flavours).
func pmMatch(m *matcher, path string, want, got any) error {
	w, ok := want.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: expected a mapping", path)
	}
	n, err := pmNative(got)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range sortedKeys(w) {
		v := w[k]
		switch {
		case strings.HasSuffix(k, "_absent"):
			f := strings.TrimSuffix(k, "_absent")
			if _, has := n[f]; has == (v == true) {
				return fmt.Errorf("%s.%s: present %v, want absent %v", path, f, has, v)
			}
		case strings.HasSuffix(k, "_present"):
			f := strings.TrimSuffix(k, "_present")
			if _, has := n[f]; has != (v == true) {
				return fmt.Errorf("%s.%s: present %v, want %v", path, f, has, v)
			}
		case strings.HasSuffix(k, "_non_empty_string"):
			f := strings.TrimSuffix(k, "_non_empty_string")
			if s, _ := n[f].(string); (s != "") != (v == true) {
				return fmt.Errorf("%s.%s = %q, want non-empty %v", path, f, s, v)
			}
		default:
			gv, has := n[k]
			if !has {
				return fmt.Errorf("%s.%s: absent, want %v", path, k, formatValue(v))
			}
			if err := m.match(path+"."+k, v, gv, exact); err != nil {
				return err
			}
		}
	}
	return nil
}

func (x *pmCase) checkExpected() error {
	mt := newMatcher()
	if ev, ok := x.body.Get("expected_backend_state"); ok {
		for bn, st := range ev.Native().(map[string]any) {
			for k, v := range st.(map[string]any) {
				if k != "source_read_count" {
					return schemaErrorf(ev.Pos, "unknown backend state %q", k)
				}
				if err := x.checkCount(bn, v, true); err != nil {
					return err
				}
			}
		}
	}
	for _, key := range []string{"expected_shared_prefix", "expected_message_equal"} {
		if ev, ok := x.body.Get(key); ok {
			if err := x.pairCheck(key, ev.Native().(map[string]any)); err != nil {
				return err
			}
		}
	}
	ev, ok := x.body.Get("expected")
	if !ok {
		return nil
	}
	exp, _ := ev.Native().(map[string]any)
	keys := make([]string, 0, len(exp))
	for k := range exp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := exp[k]
		switch k {
		case "rendered_hash_equal", "rendered_hash_different":
			for _, pair := range v.([]any) {
				p := pair.([]any)
				a, b, err := x.results(pmStr(p[0]), pmStr(p[1]))
				if err != nil {
					return err
				}
				if (a.RenderedHash == b.RenderedHash) != (k == "rendered_hash_equal") {
					return fmt.Errorf("%s: %v: %s vs %s", k, p, a.RenderedHash, b.RenderedHash)
				}
			}
		case "result_equivalence":
			spec := v.(map[string]any)
			of := spec["of"].([]any)
			a, b, err := x.results(pmStr(of[0]), pmStr(of[1]))
			if err != nil {
				return err
			}
			na, _ := pmNative(a)
			nb, _ := pmNative(b)
			for _, f := range spec["fields_must_match"].([]any) {
				if !deepEqual(normalize(na[pmStr(f)]), normalize(nb[pmStr(f)])) {
					return fmt.Errorf("result_equivalence: %s differs: %v vs %v", f, na[pmStr(f)], nb[pmStr(f)])
				}
			}
		case "prompt_group":
			spec := v.(map[string]any)
			g, ok := x.captures[pmStr(spec["of"])].(*prompt.Group)
			if !ok {
				return fmt.Errorf("prompt_group: %v is not a captured group", spec["of"])
			}
			var names []any
			for _, m := range g.Members {
				names = append(names, m.Name)
			}
			for f, w := range spec {
				switch f {
				case "of", "member_order_preserved":
				case "group_name":
					if g.Name != pmStr(w) {
						return fmt.Errorf("group_name %q, want %q", g.Name, w)
					}
				case "member_count":
					if n, _ := pmNum(w); int(n) != len(g.Members) {
						return fmt.Errorf("member_count %d, want %v", len(g.Members), w)
					}
				case "member_names":
					if err := mt.match("member_names", w, names, exact); err != nil {
						return err
					}
				default:
					return fmt.Errorf("unknown prompt_group key %q", f)
				}
			}
		default:
			got, ok := x.captures[k]
			if !ok {
				return fmt.Errorf("expected.%s: nothing was captured under that name", k)
			}
			if err := pmMatch(mt, k, v, got); err != nil {
				return err
			}
		}
	}
	return nil
}

func (x *pmCase) results(a, b string) (*prompt.Result, *prompt.Result, error) {
	ra, ok1 := x.captures[a].(*prompt.Result)
	rb, ok2 := x.captures[b].(*prompt.Result)
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("%s and %s are not both captured renders", a, b)
	}
	return ra, rb, nil
}

// pairCheck runs expected_shared_prefix / expected_message_equal.
func (x *pmCase) pairCheck(key string, spec map[string]any) error {
	between, _ := spec["between"].([]any)
	if len(between) != 2 {
		return fmt.Errorf("%s: between needs two captures", key)
	}
	a, b, err := x.results(pmStr(between[0]), pmStr(between[1]))
	if err != nil {
		return err
	}
	if key == "expected_shared_prefix" {
		i, _ := pmNum(spec["message_index"])
		prefix := pmStr(spec["prefix"])
		for _, r := range []*prompt.Result{a, b} {
			if int(i) >= len(r.Messages) || !strings.HasPrefix(r.Messages[int(i)].Text(), prefix) {
				return fmt.Errorf("%s: message %v of %s does not start with %q", key, i, r.Name, prefix)
			}
		}
		return nil
	}
	idx, _ := spec["message_indices"].([]any)
	for _, iv := range idx {
		i, _ := pmNum(iv)
		n := int(i)
		if n >= len(a.Messages) || n >= len(b.Messages) {
			return fmt.Errorf("%s: no message %d", key, n)
		}
		ja, _ := json.Marshal(a.Messages[n])
		jb, _ := json.Marshal(b.Messages[n])
		if string(ja) != string(jb) {
			return fmt.Errorf("%s: message %d differs: %s vs %s", key, n, ja, jb)
		}
	}
	return nil
}

// pmNum reads a fixture number.
func pmNum(v any) (float64, bool) { return toFloat(normalize(v)) }
