package prompt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/prompt"
)

func TestTemplate(t *testing.T) {
	vars := map[string]any{"user": "Ann", "n": 3, "f": 1.5, "ok": true, "order": map[string]any{"id": "91"}, "list": []any{1, "a"}}
	tests := []struct {
		src, want, err string
	}{
		{src: "Hello, {{ user }}!", want: "Hello, Ann!"},
		{src: "{{user}}{{ user }}", want: "AnnAnn"},
		{src: "n={{ n }} f={{ f }} ok={{ ok }}", want: "n=3 f=1.5 ok=true"},
		{src: "order {{ order.id }}", want: "order 91"},
		{src: "{{ list }}", want: `[1,"a"]`},
		{src: "a {# note #}b", want: "a b"},
		{src: `{{ "{{" }}x{{ '}}' }}`, want: "{{x}}"},
		{src: "{ not a tag } {", want: "{ not a tag } {"},
		{src: "", want: ""},
		{src: "{{ missing }}", err: `undefined variable "missing"`},
		{src: "{{ order.nope }}", err: `undefined variable "order.nope"`},
		{src: "{{ user", err: "unclosed {{"},
		{src: "{# x", err: "unclosed comment"},
		{src: "{% if x %}y{% endif %}", err: "statements"},
		{src: "{{ user | upper }}", err: "not a variable name"},
		{src: "{{ }}", err: "empty"},
		{src: "{{ 1x }}", err: "not a variable name"},
	}
	for _, tt := range tests {
		tpl, err := prompt.ParseTemplate(tt.src)
		var got string
		if err == nil {
			got, err = tpl.Execute(vars, false)
		}
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want %q", tt.src, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: %q, %v; want %q", tt.src, got, err, tt.want)
		}
	}
	tpl := prompt.MustParseTemplate("{{ a }}-{{ b.c }}-{{ a }}")
	if got := tpl.Variables(); strings.Join(got, ",") != "a,b" {
		t.Errorf("Variables = %v", got)
	}
	if got, err := tpl.Execute(map[string]any{"a": "x"}, true); err != nil || got != "x--x" {
		t.Errorf("lenient: %q, %v", got, err)
	}
	var syntax *prompt.RenderError
	if _, err := prompt.ParseTemplate("{{ x"); !errors.As(err, &syntax) || !errors.Is(err, errcat.PromptRenderError) {
		t.Errorf("syntax error %T %v is not a categorized RenderError", err, err)
	}
}

func chat(t *testing.T, segs ...any) *prompt.Prompt {
	t.Helper()
	s, err := prompt.ParseChat(segs)
	if err != nil {
		t.Fatal(err)
	}
	return &prompt.Prompt{Name: "c", Version: "1", Label: "production", Chat: s}
}

func TestRenderChat(t *testing.T) {
	seg := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	img := func(role string) map[string]any {
		return map[string]any{"role": role, "content": []any{map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": "{{ u }}"}}}}
	}
	hist := []llm.Message{llm.UserText("hi"), llm.AssistantText("hello")}
	tests := []struct {
		name string
		p    *prompt.Prompt
		vars map[string]any
		ph   map[string][]llm.Message
		want int    // messages
		err  string // description substring
	}{
		{name: "segments", p: chat(t, seg("system", "S {{ a }}"), seg("user", "U {{ b }}")), vars: map[string]any{"a": 1, "b": 2}, want: 2},
		{name: "placeholder", p: chat(t, seg("system", "S"), map[string]any{"placeholder": "h"}), ph: map[string][]llm.Message{"h": hist}, want: 3},
		{name: "empty placeholder", p: chat(t, seg("system", "S"), map[string]any{"placeholder": "h"}), ph: map[string][]llm.Message{"h": {}}, want: 1},
		{name: "only empty placeholders", p: chat(t, map[string]any{"placeholder": "h"}), ph: map[string][]llm.Message{"h": nil}, err: "empty message list"},
		{name: "unfilled placeholder", p: chat(t, seg("system", "S"), map[string]any{"placeholder": "h"}), err: `placeholder "h"`},
		{name: "duplicate placeholder", p: chat(t, map[string]any{"placeholder": "h"}, map[string]any{"placeholder": "h"}), ph: map[string][]llm.Message{"h": hist}, err: "twice"},
		{name: "bad placeholder name", p: chat(t, map[string]any{"placeholder": "1h"}), ph: map[string][]llm.Message{"1h": hist}, err: "identifier"},
		{name: "undefined in segment 1", p: chat(t, seg("system", "S"), seg("user", "{{ x }}")), err: `segment 1 (user): undefined variable "x"`},
		{name: "empty render", p: chat(t, seg("user", "{{ x }}")), vars: map[string]any{"x": ""}, err: "empty string"},
		{name: "image as user", p: chat(t, img("user")), vars: map[string]any{"u": "https://x/y.png"}, want: 1},
		{name: "image as system", p: chat(t, img("system")), vars: map[string]any{"u": "https://x/y.png"}, err: "needs role user"},
		{name: "tool role", p: chat(t, seg("tool", "x")), err: "not system, user or assistant"},
		{name: "no blocks", p: chat(t, map[string]any{"role": "user", "content": []any{}}), err: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := prompt.Render(tt.p, tt.vars, prompt.RenderOptions{Placeholders: tt.ph})
			if tt.err != "" {
				var re *prompt.RenderError
				if !errors.As(err, &re) || !strings.Contains(re.Description, tt.err) || re.Name != "c" || re.Version != "1" {
					t.Fatalf("err %v, want a RenderError mentioning %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Messages) != tt.want {
				t.Fatalf("%d messages, want %d: %+v", len(res.Messages), tt.want, res.Messages)
			}
			for _, m := range res.Messages {
				if err := m.Validate(); err != nil {
					t.Errorf("rendered an invalid message: %v", err)
				}
			}
		})
	}
}

func TestRenderedHash(t *testing.T) {
	p := &prompt.Prompt{Name: "g", Template: prompt.MustParseTemplate("Hi {{ u }}")}
	r1, _ := prompt.Render(p, map[string]any{"u": "a"}, prompt.RenderOptions{})
	r2, _ := prompt.Render(p, map[string]any{"u": "a"}, prompt.RenderOptions{})
	r3, _ := prompt.Render(p, map[string]any{"u": "b"}, prompt.RenderOptions{})
	if r1.RenderedHash != r2.RenderedHash || r1.RenderedHash == r3.RenderedHash || !strings.HasPrefix(r1.RenderedHash, "sha256:") {
		t.Fatalf("hashes %s %s %s", r1.RenderedHash, r2.RenderedHash, r3.RenderedHash)
	}
	a := chat(t, map[string]any{"role": "user", "content": "x"}, map[string]any{"placeholder": "h"})
	b := chat(t, map[string]any{"role": "user", "content": "x"}, map[string]any{"placeholder": "k"})
	if prompt.HashTemplate(a) == prompt.HashTemplate(b) || prompt.HashTemplate(a) != prompt.HashTemplate(chat(t, map[string]any{"role": "user", "content": "x"}, map[string]any{"placeholder": "h"})) {
		t.Fatal("chat template hash is not content-addressed")
	}
}

func TestGroup(t *testing.T) {
	r := &prompt.Result{Name: "a"}
	if _, err := prompt.NewGroup("g", r); !errors.Is(err, errcat.PromptGroupInvalid) {
		t.Fatalf("one member: %v", err)
	}
	if _, err := prompt.NewGroup("g"); !errors.Is(err, errcat.PromptGroupInvalid) {
		t.Fatalf("no member: %v", err)
	}
	g, err := prompt.NewGroup("g", r, &prompt.Result{Name: "b"})
	if err != nil || len(g.Members) != 2 || g.Members[1].Name != "b" {
		t.Fatalf("%+v %v", g, err)
	}
}

// source is a backend that counts fetches and fails while down.
type source struct {
	mu    sync.Mutex
	reads int
	down  bool
	next  prompt.Backend
}

func (s *source) Fetch(ctx context.Context, name, label string, o prompt.FetchOptions) (*prompt.Prompt, error) {
	s.mu.Lock()
	s.reads++
	down := s.down
	s.mu.Unlock()
	if down {
		return nil, errcat.New(errcat.PromptStoreUnavailable, "down")
	}
	return s.next.Fetch(ctx, name, label, o)
}

func TestManagerFallback(t *testing.T) {
	ctx := context.Background()
	greet := func(v string) *prompt.Prompt {
		return &prompt.Prompt{Name: "greet", Version: v, Template: prompt.MustParseTemplate("hi")}
	}
	primary := &source{next: prompt.NewMemory(nil, greet("p"))}
	secondary := &source{next: prompt.NewMemory(nil, greet("s"), &prompt.Prompt{Name: "other", Template: prompt.MustParseTemplate("o")})}
	m, err := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{primary, secondary}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := m.Fetch(ctx, "greet", "", prompt.FetchOptions{}); err != nil || p.Version != "p" || p.Label != prompt.DefaultLabel {
		t.Fatalf("primary: %+v %v", p, err)
	}
	// Not found in the primary: the search stops (a retired prompt is not
	// served from the fallback).
	if _, err := m.Fetch(ctx, "other", "", prompt.FetchOptions{}); !errors.Is(err, errcat.PromptNotFound) || secondary.reads != 0 {
		t.Fatalf("not found: %v (secondary reads %d)", err, secondary.reads)
	}
	primary.down = true
	if p, err := m.Fetch(ctx, "greet", "", prompt.FetchOptions{}); err != nil || p.Version != "s" {
		t.Fatalf("fallback: %+v %v", p, err)
	}
	secondary.down = true
	_, err = m.Fetch(ctx, "greet", "", prompt.FetchOptions{})
	if !errors.Is(err, errcat.PromptStoreUnavailable) || !errcat.Of(err).Transient() {
		t.Fatalf("all down: %v", err)
	}
	if _, err := m.Fetch(ctx, "greet", "", prompt.FetchOptions{MaxAge: prompt.MaxAge(-time.Second)}); !errors.Is(err, prompt.ErrInvalidArgument) {
		t.Fatalf("negative max age: %v", err)
	}
	if _, err := prompt.NewManager(prompt.ManagerConfig{}); !errors.Is(err, prompt.ErrInvalidArgument) {
		t.Fatalf("no backend: %v", err)
	}
}

func TestLabels(t *testing.T) {
	l := prompt.Labels{"default": "stable", "a": "staging"}
	for name, want := range map[string]string{"a": "staging", "b": "stable"} {
		if got := l.Resolve(name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if got := (prompt.Labels{}).Resolve("x"); got != prompt.DefaultLabel {
		t.Errorf("empty: %s", got)
	}
}

func TestCache(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	src := &source{next: prompt.NewMemory(clock, &prompt.Prompt{Name: "g", Template: prompt.MustParseTemplate("x")})}
	c := prompt.NewCache(src, prompt.CacheConfig{TTL: time.Minute, Now: clock, ServeStale: true})
	fetch := func(o prompt.FetchOptions) error { _, err := c.Fetch(ctx, "g", "production", o); return err }
	steps := []struct {
		advance time.Duration
		opts    prompt.FetchOptions
		down    bool
		reads   int
		err     bool
	}{
		{reads: 1},                            // miss
		{advance: 30 * time.Second, reads: 1}, // within TTL
		{opts: prompt.FetchOptions{MaxAge: prompt.MaxAge(0)}, reads: 2},                                           // forced fresh
		{advance: 20 * time.Second, opts: prompt.FetchOptions{MaxAge: prompt.MaxAge(10 * time.Second)}, reads: 3}, // older than max age
		{advance: 2 * time.Minute, down: true, reads: 4},                                                          // TTL passed, source down: stale served
		{opts: prompt.FetchOptions{MaxAge: prompt.MaxAge(time.Second)}, down: true, reads: 5, err: true},          // max age forbids stale
		{reads: 5, down: true}, // within StaleRetry of the failed read: stale at once, no read
		{advance: prompt.DefaultStaleRetry, reads: 6, down: true},                              // past it: read again, stale again
		{advance: time.Second, reads: 6, down: true},                                           // a new StaleRetry
		{opts: prompt.FetchOptions{MaxAge: prompt.MaxAge(0)}, down: true, reads: 7, err: true}, // MaxAge 0 always reads
		{opts: prompt.FetchOptions{MaxAge: prompt.MaxAge(0)}, reads: 8},                        // the source is back
		{reads: 8}, // the fresh entry
		{advance: 2 * time.Minute, down: true, reads: 9}, // expired, the source down: stale
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		src.down = s.down
		err := fetch(s.opts)
		if (err != nil) != s.err || src.reads != s.reads {
			t.Fatalf("step %d: err %v, reads %d; want err %v, reads %d", i, err, src.reads, s.err, s.reads)
		}
	}
}

func TestDir(t *testing.T) {
	ctx := context.Background()
	d := prompt.NewDir("testdata/prompts")
	tests := []struct {
		name, label, version string
		chat                 bool
		err                  errcat.Category
	}{
		{name: "support", label: "production", version: "2"},
		{name: "support", label: "staging", version: "3", chat: true},
		{name: "support", label: "latest", version: "3", chat: true},
		{name: "support", label: "nope", err: errcat.PromptNotFound},
		{name: "missing", label: "production", err: errcat.PromptNotFound},
		{name: "../etc/passwd", label: "production", err: errcat.PromptNotFound},
	}
	for _, tt := range tests {
		p, err := d.Fetch(ctx, tt.name, tt.label, prompt.FetchOptions{})
		if tt.err != "" {
			if !errors.Is(err, tt.err) {
				t.Errorf("%s@%s: %v, want %s", tt.name, tt.label, err, tt.err)
			}
			continue
		}
		if err != nil || p.Version != tt.version || p.IsChat() != tt.chat || !strings.HasPrefix(p.TemplateHash, "sha256:") {
			t.Errorf("%s@%s: %+v %v", tt.name, tt.label, p, err)
		}
	}
	p, _ := d.Fetch(ctx, "support", "production", prompt.FetchOptions{})
	if p.Sampling.Extras["vendor_knob"] != 3 || *p.Sampling.MaxTokens != 256 || p.TokenBudget.TotalMaxTokens != nil {
		t.Errorf("sampling %+v budget %+v", p.Sampling, p.TokenBudget)
	}
	bad := fstest.MapFS{
		"broken.yaml":  {Data: []byte("versions: [")},
		"empty.yaml":   {Data: []byte("labels: {}")},
		"both.yaml":    {Data: []byte("labels: {production: '1'}\nversions: [{version: '1', template: a, chat_template: []}]")},
		"syntax.yaml":  {Data: []byte("labels: {production: '1'}\nversions: [{version: '1', template: '{{ a'}]")},
		"dangles.yaml": {Data: []byte("labels: {production: '9'}\nversions: [{version: '1', template: a}]")},
	}
	for name := range bad {
		_, err := prompt.NewDirFS(bad, nil).Fetch(ctx, strings.TrimSuffix(name, ".yaml"), "production", prompt.FetchOptions{})
		if !errors.Is(err, errcat.PromptStoreUnavailable) {
			t.Errorf("%s: %v, want prompt_store_unavailable", name, err)
		}
	}
	// An unreadable file is unavailable too.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "x.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := prompt.NewDir(dir).Fetch(ctx, "x", "production", prompt.FetchOptions{}); !errors.Is(err, errcat.PromptStoreUnavailable) {
		t.Errorf("unreadable: %v", err)
	}
}

func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"Hello {{ user }}", "{# c #}{{ a.b }}", "{{", "{%", `{{ "x" }}`, "{{ a }}{{ b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := prompt.ParseTemplate(src)
		if err != nil {
			if !errors.Is(err, errcat.PromptRenderError) {
				t.Fatalf("uncategorized: %v", err)
			}
			return
		}
		vars := map[string]any{}
		for _, v := range tpl.Variables() {
			vars[v] = "x"
		}
		if _, err := tpl.Execute(vars, true); err != nil {
			t.Fatalf("lenient render failed: %v", err)
		}
	})
}

func FuzzParseFile(f *testing.F) {
	data, err := os.ReadFile("testdata/prompts/support.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, "production")
	f.Add(data, "staging")
	f.Add([]byte("versions: [{version: '1', chat_template: [{placeholder: h}, {role: user, content: [{type: image, source: {type: inline, base64_data: '{{ d }}'}, media_type: '{{ m }}'}]}]}]"), "latest")
	f.Fuzz(func(t *testing.T, data []byte, label string) {
		p, err := prompt.ParseFile(data, "p", label)
		if err != nil {
			if errcat.Of(err) == "" {
				t.Fatalf("uncategorized: %v", err)
			}
			return
		}
		if (p.Template == nil) == (p.Chat == nil) {
			t.Fatal("a parsed prompt must be exactly one variant")
		}
		res, err := prompt.Render(p, nil, prompt.RenderOptions{Lenient: true, Placeholders: map[string][]llm.Message{}})
		if err == nil {
			if len(res.Messages) == 0 {
				t.Fatal("a successful render has messages")
			}
		} else if !errors.Is(err, errcat.PromptRenderError) {
			t.Fatalf("render: uncategorized %v", err)
		}
	})
}

func BenchmarkRenderCached(b *testing.B) {
	ctx := context.Background()
	m, err := prompt.NewManager(prompt.ManagerConfig{Backends: []prompt.Backend{
		prompt.NewCache(prompt.NewDir("testdata/prompts"), prompt.CacheConfig{})}})
	if err != nil {
		b.Fatal(err)
	}
	vars := map[string]any{"persona": "a courier", "question": "where is order 7"}
	hist := map[string][]llm.Message{"history": {llm.UserText("hi"), llm.AssistantText("hello")}}
	for _, label := range []string{"production", "staging"} {
		b.Run("label="+label, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Get(ctx, "support", label, vars, prompt.FetchOptions{}, prompt.RenderOptions{Placeholders: hist}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestParseFileRefuses: a prompt file whose versions or sampling cannot
// mean one thing is refused, never read one way silently: a version
// given twice (a label would pick either) or without its string, a
// temperature that is not a finite number, max_tokens below 1.
func TestParseFileRefuses(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"version twice", "versions:\n- {version: \"2\", template: a}\n- {version: \"2\", template: b}\n"},
		{"no version string", "versions:\n- {template: a}\n"},
		{"empty version string", "versions:\n- {version: \"\", template: a}\n"},
		{"NaN temperature", "versions:\n- {version: \"1\", template: a, sampling: {temperature: .nan}}\n"},
		{"infinite top_p", "versions:\n- {version: \"1\", template: a, sampling: {top_p: .inf}}\n"},
		{"negative max_tokens", "versions:\n- {version: \"1\", template: a, sampling: {max_tokens: -5}}\n"},
		{"zero max_tokens", "versions:\n- {version: \"1\", template: a, sampling: {max_tokens: 0}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p, err := prompt.ParseFile([]byte(tc.yaml), "p", "latest"); err == nil {
				t.Fatalf("accepted: %+v", p)
			}
		})
	}
	if _, err := prompt.ParseFile([]byte("versions:\n- {version: \"1\", template: a, sampling: {temperature: 0.2, max_tokens: 64}}\n"), "p", "latest"); err != nil {
		t.Fatalf("a valid file: %v", err)
	}
}

// TestExecuteCategorized: Template.Execute's failures are
// prompt_render_error, as Render's are, for a caller that executes a
// template directly.
func TestExecuteCategorized(t *testing.T) {
	tpl, err := prompt.ParseTemplate("hello {{ name }}")
	if err != nil {
		t.Fatal(err)
	}
	for _, vars := range []map[string]any{{}, {"name": make(chan int)}} {
		if _, err := tpl.Execute(vars, false); !errors.Is(err, errcat.PromptRenderError) || errcat.Of(err) != errcat.PromptRenderError {
			t.Errorf("Execute(%v) = %v, want prompt_render_error", vars, err)
		}
	}
}
