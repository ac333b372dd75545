package prompt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// DefaultLabel is the label a fetch uses when neither the caller nor a
// LabelResolver names one (prompt-management §6, §7).
const DefaultLabel = "production"

// Prompt is an unrendered prompt with its identity (prompt-management
// §3): a text prompt (Template) or a chat prompt (Chat), never both.
// Backends build prompts; callers render them with [Render] or a
// [Manager]. A Prompt is read-only once returned by a backend: backends
// and caches share it.
type Prompt struct {
	// Name is the prompt's identifier within its backend.
	Name string
	// Version identifies the prompt's content within its backend; two
	// versions denote two contents.
	Version string
	// Label is the label the prompt was fetched under.
	Label string
	// Template is a text prompt's template (nil for a chat prompt). It
	// renders to one user message.
	Template *Template
	// Chat is a chat prompt's segments (nil for a text prompt).
	Chat []Segment
	// TemplateHash is a content hash of the unrendered template: the
	// backend's, or "sha256:<hex>" of the canonical template (see
	// [HashTemplate]).
	TemplateHash string
	// FetchedAt is when the prompt was read from its source (a cached
	// prompt keeps its original time).
	FetchedAt time.Time
	// Sampling is the prompt's sampling configuration, if its backend
	// supplies one; pass it to the provider (llm.Request.Config).
	Sampling *llm.Config
	// TokenBudget is the prompt's advisory token budget, if any; it does
	// not change the request (observability only).
	TokenBudget *TokenBudget
	// ObservabilityEntities are backend-keyed references to the entities
	// the prompt is registered as in observability backends (key
	// "langfuse_prompt": the Langfuse prompt); nil when there are none.
	ObservabilityEntities map[string]any
	// Metadata is other backend-supplied metadata.
	Metadata map[string]any
}

// IsChat reports whether p is a chat prompt.
func (p *Prompt) IsChat() bool { return p.Chat != nil }

// Segment is one segment of a chat prompt (prompt-management §3.1): a
// content segment (Role with Text or Blocks) or a placeholder (Placeholder
// names the message list the caller injects at render time).
type Segment struct {
	// Role is a content segment's role: system, user or assistant.
	Role llm.Role
	// Text is a text segment's template.
	Text *Template
	// Blocks are a content-blocks segment's block templates; non-nil (and
	// then non-empty) for a content-blocks segment.
	Blocks []BlockTemplate
	// Placeholder is a placeholder segment's name.
	Placeholder string
}

// BlockTemplate is a content block of a chat prompt segment
// (prompt-management §3.1): a text block (Text) or an image block from a
// URL (URL) or inline base64 data (Base64Data with MediaType).
type BlockTemplate struct {
	// Type is llm.BlockText or llm.BlockImage.
	Type llm.BlockType
	// Text is a text block's template.
	Text *Template
	// Source is an image block's source variant: llm.SourceURL or
	// llm.SourceInline.
	Source llm.SourceType
	// URL is a URL image's template.
	URL *Template
	// Base64Data is an inline image's data template.
	Base64Data *Template
	// MediaType is an image's media type template (literal for a URL
	// image, a template for an inline one).
	MediaType *Template
	// Detail is an image's fidelity hint, literal.
	Detail llm.Detail
}

// TokenBudget is a prompt's advisory token budget (prompt-management §3):
// ceilings on a call's input tokens and on input plus output tokens. A
// nil bound is unset. It is the llm package's type, which the typed call
// events carry.
type TokenBudget = llm.TokenBudget

// Result is a rendered prompt (prompt-management §4): its messages, ready
// for a provider, and the prompt's identity.
type Result struct {
	Name, Version, Label string
	TemplateHash         string
	// RenderedHash is "sha256:<hex>" of the canonical JSON of Messages:
	// equal for equal renders, the cache key a memoizer wants.
	RenderedHash string
	// Messages are the rendered messages, never empty.
	Messages []llm.Message
	// Variables are the variables the prompt was rendered with.
	Variables map[string]any
	// FetchedAt is the prompt's fetch time; RenderedAt the render's.
	FetchedAt, RenderedAt time.Time
	// Sampling, TokenBudget and ObservabilityEntities are the prompt's.
	Sampling              *llm.Config
	TokenBudget           *TokenBudget
	ObservabilityEntities map[string]any
}

// Group is related rendered prompts traced as one unit (prompt-management
// §10): observability puts the group's name on every member's call.
type Group struct {
	// Name is the group's stable name.
	Name string
	// Members are the rendered prompts in the application's call order.
	Members []*Result
}

// NewGroup returns the group of members named name. Fewer than two
// members is prompt_group_invalid.
func NewGroup(name string, members ...*Result) (*Group, error) {
	if len(members) < 2 {
		return nil, errcat.New(errcat.PromptGroupInvalid,
			fmt.Sprintf("prompt: group %q needs at least two members, got %d", name, len(members)))
	}
	return &Group{Name: name, Members: append([]*Result(nil), members...)}, nil
}

// RenderError is a failed render (prompt_render_error, prompt-management
// §11): the prompt's identity, the variables' names (their values are
// left out: they may be sensitive) and what failed.
type RenderError struct {
	Name, Version, Label string
	// Variables are the names of the variables the render was given.
	Variables []string
	// Description says what failed: which segment, block or placeholder,
	// and which variable.
	Description string
}

// Error implements error.
func (e *RenderError) Error() string {
	var b strings.Builder
	b.WriteString("prompt: render")
	if e.Name != "" {
		fmt.Fprintf(&b, " %q", e.Name)
		if e.Version != "" {
			fmt.Fprintf(&b, " version %q", e.Version)
		}
		if e.Label != "" {
			fmt.Fprintf(&b, " label %q", e.Label)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Description)
	return b.String()
}

// Category returns prompt_render_error.
func (e *RenderError) Category() errcat.Category { return errcat.PromptRenderError }

// Is matches errcat.PromptRenderError.
func (e *RenderError) Is(target error) bool { return target == errcat.PromptRenderError }

// RenderOptions are the optional inputs of a render.
type RenderOptions struct {
	// Placeholders are the message lists injected into a chat prompt's
	// placeholder segments, by name (ignored by a text prompt). A
	// placeholder absent here is a render error; an empty list injects
	// nothing.
	Placeholders map[string][]llm.Message
	// Lenient renders an undefined variable as the empty string instead
	// of failing (prompt-management §8's opt-out).
	Lenient bool
	// Now is the render time; zero means time.Now.
	Now time.Time
}

// Render applies vars (and, for a chat prompt, opts.Placeholders) to p
// (prompt-management §6 render). It does no I/O. Every failure is a
// *RenderError.
func Render(p *Prompt, vars map[string]any, opts RenderOptions) (*Result, error) {
	fail := func(format string, args ...any) error {
		return &RenderError{Name: p.Name, Version: p.Version, Label: p.Label,
			Variables: sortedKeys(vars), Description: fmt.Sprintf(format, args...)}
	}
	var msgs []llm.Message
	switch {
	case p.Chat == nil && p.Template == nil:
		return nil, fail("the prompt has neither a template nor a chat template")
	case p.Chat == nil:
		text, err := p.Template.Execute(vars, opts.Lenient)
		if err != nil {
			return nil, fail("%v", err)
		}
		msgs = []llm.Message{llm.UserText(text)}
	default:
		if err := checkPlaceholders(p.Chat); err != nil {
			return nil, fail("%v", err)
		}
		for i, seg := range p.Chat {
			if seg.Placeholder != "" {
				injected, ok := opts.Placeholders[seg.Placeholder]
				if !ok {
					return nil, fail("segment %d: placeholder %q was not given a message list", i, seg.Placeholder)
				}
				msgs = append(msgs, injected...)
				continue
			}
			m, err := renderSegment(seg, vars, opts.Lenient)
			if err != nil {
				return nil, fail("segment %d (%s): %v", i, seg.Role, err)
			}
			msgs = append(msgs, m)
		}
		if len(msgs) == 0 {
			return nil, fail("the chat prompt rendered an empty message list (every placeholder injected nothing)")
		}
	}
	hash, err := HashMessages(msgs)
	if err != nil {
		return nil, fail("%v", err)
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	return &Result{
		Name: p.Name, Version: p.Version, Label: p.Label, TemplateHash: p.TemplateHash,
		RenderedHash: hash, Messages: msgs, Variables: maps.Clone(vars),
		FetchedAt: p.FetchedAt, RenderedAt: now,
		Sampling: p.Sampling, TokenBudget: p.TokenBudget, ObservabilityEntities: p.ObservabilityEntities,
	}, nil
}

// checkPlaceholders enforces unique, identifier-shaped placeholder names.
func checkPlaceholders(segs []Segment) error {
	seen := map[string]bool{}
	for i, seg := range segs {
		if seg.Role != "" || seg.Text != nil || seg.Blocks != nil {
			continue
		}
		if !IsIdentifier(seg.Placeholder) {
			return fmt.Errorf("segment %d: placeholder name %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", i, seg.Placeholder)
		}
		if seen[seg.Placeholder] {
			return fmt.Errorf("segment %d: placeholder %q appears twice", i, seg.Placeholder)
		}
		seen[seg.Placeholder] = true
	}
	return nil
}

func renderSegment(seg Segment, vars map[string]any, lenient bool) (llm.Message, error) {
	switch seg.Role {
	case llm.RoleSystem, llm.RoleUser, llm.RoleAssistant:
	default:
		return llm.Message{}, fmt.Errorf("role %q is not system, user or assistant", seg.Role)
	}
	if seg.Blocks == nil {
		text, err := seg.Text.Execute(vars, lenient)
		if err != nil {
			return llm.Message{}, err
		}
		if text == "" {
			return llm.Message{}, errors.New("the segment rendered to the empty string")
		}
		return llm.Message{Role: seg.Role, Content: llm.Text(text)}, nil
	}
	if len(seg.Blocks) == 0 {
		return llm.Message{}, errors.New("the content blocks list is empty")
	}
	blocks := make([]llm.Block, 0, len(seg.Blocks))
	for j, bt := range seg.Blocks {
		b, err := renderBlock(seg.Role, bt, vars, lenient)
		if err != nil {
			return llm.Message{}, fmt.Errorf("block %d: %w", j, err)
		}
		blocks = append(blocks, b)
	}
	return llm.Message{Role: seg.Role, Content: llm.Blocks(blocks...)}, nil
}

func renderBlock(role llm.Role, bt BlockTemplate, vars map[string]any, lenient bool) (llm.Block, error) {
	switch bt.Type {
	case llm.BlockText:
		text, err := bt.Text.Execute(vars, lenient)
		if err != nil {
			return llm.Block{}, err
		}
		if text == "" {
			return llm.Block{}, errors.New("the text block rendered to the empty string")
		}
		return llm.TextBlock(text), nil
	case llm.BlockImage:
		if role != llm.RoleUser {
			return llm.Block{}, fmt.Errorf("an image block needs role user, not %s", role)
		}
		media, err := bt.MediaType.Execute(vars, lenient)
		if err != nil {
			return llm.Block{}, err
		}
		var b llm.Block
		switch bt.Source {
		case llm.SourceURL:
			url, err := bt.URL.Execute(vars, lenient)
			if err != nil {
				return llm.Block{}, err
			}
			b = llm.ImageURL(url)
			b.MediaType = media
		case llm.SourceInline:
			data, err := bt.Base64Data.Execute(vars, lenient)
			if err != nil {
				return llm.Block{}, err
			}
			b = llm.ImageInline(media, data)
		default:
			return llm.Block{}, fmt.Errorf("image source %q is not url or inline", bt.Source)
		}
		if bt.Detail != "" {
			b = b.WithDetail(bt.Detail)
		}
		return b, nil
	}
	return llm.Block{}, fmt.Errorf("block type %q is not text or image", bt.Type)
}

// HashMessages returns "sha256:<hex>" of the canonical JSON of msgs
// (roles, content with its block structure, tool calls): a rendered
// prompt's RenderedHash.
func HashMessages(msgs []llm.Message) (string, error) {
	data, err := json.Marshal(msgs)
	if err != nil {
		return "", err
	}
	return hashBytes(data), nil
}

// HashTemplate returns "sha256:<hex>" of p's canonical template: the text
// template's source, or the chat segments (kinds, roles, templates and
// block fields, placeholder names) in order.
func HashTemplate(p *Prompt) string {
	if p.Chat == nil {
		return hashBytes([]byte("text\x00" + p.Template.Source()))
	}
	type block struct {
		Type, Source, Text, URL, Data, Media, Detail string
	}
	type seg struct {
		Role, Text, Placeholder string
		Blocks                  []block
	}
	segs := make([]seg, len(p.Chat))
	for i, s := range p.Chat {
		segs[i] = seg{Role: string(s.Role), Text: s.Text.Source(), Placeholder: s.Placeholder}
		if s.Blocks != nil {
			segs[i].Blocks = []block{}
		}
		for _, b := range s.Blocks {
			segs[i].Blocks = append(segs[i].Blocks, block{string(b.Type), string(b.Source), b.Text.Source(),
				b.URL.Source(), b.Base64Data.Source(), b.MediaType.Source(), string(b.Detail)})
		}
	}
	data, _ := json.Marshal(segs) // strings only: cannot fail
	return hashBytes(append([]byte("chat\x00"), data...))
}

func hashBytes(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
