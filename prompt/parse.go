package prompt

import (
	"fmt"
	"math"

	"github.com/armature-go/armature/llm"
)

// ParseChat builds chat segments from their decoded JSON or YAML form
// (prompt-management §3.1): a list of {role, content} mappings, content
// being a template string or a list of block mappings ({type: text,
// text}, {type: image, source: {type: url, url} | {type: inline,
// base64_data}, media_type, detail}), and {placeholder: name} mappings.
// Templates are parsed; errors name the segment.
func ParseChat(segments []any) ([]Segment, error) {
	return parseChat(segments, ParseTemplate)
}

// parseChat is ParseChat with the template syntax parse.
func parseChat(segments []any, parse func(string) (*Template, error)) ([]Segment, error) {
	out := make([]Segment, 0, len(segments))
	for i, raw := range segments {
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("chat segment %d is not a mapping", i)
		}
		if ph, ok := m["placeholder"]; ok {
			name, ok := ph.(string)
			if !ok || len(m) != 1 {
				return nil, fmt.Errorf("chat segment %d: a placeholder segment is {placeholder: <name>}", i)
			}
			out = append(out, Segment{Placeholder: name})
			continue
		}
		role, _ := m["role"].(string)
		seg := Segment{Role: llm.Role(role)}
		switch c := m["content"].(type) {
		case string:
			t, err := parse(c)
			if err != nil {
				return nil, fmt.Errorf("chat segment %d: %w", i, err)
			}
			seg.Text = t
		case []any:
			seg.Blocks = make([]BlockTemplate, 0, len(c))
			for j, rb := range c {
				b, err := parseBlock(rb, parse)
				if err != nil {
					return nil, fmt.Errorf("chat segment %d, block %d: %w", i, j, err)
				}
				seg.Blocks = append(seg.Blocks, b)
			}
		default:
			return nil, fmt.Errorf("chat segment %d: content is neither a template string nor a list of blocks", i)
		}
		out = append(out, seg)
	}
	return out, nil
}

func parseBlock(raw any, parse func(string) (*Template, error)) (BlockTemplate, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return BlockTemplate{}, fmt.Errorf("not a mapping")
	}
	str := func(v any, what string) (*Template, error) {
		if v == nil {
			return nil, nil
		}
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s is not a string", what)
		}
		return parse(s)
	}
	typ, _ := m["type"].(string)
	b := BlockTemplate{Type: llm.BlockType(typ)}
	var err error
	switch b.Type {
	case llm.BlockText:
		if b.Text, err = str(m["text"], "text"); err == nil && b.Text == nil {
			err = fmt.Errorf("a text block needs text")
		}
	case llm.BlockImage:
		src, _ := m["source"].(map[string]any)
		st, _ := src["type"].(string)
		b.Source = llm.SourceType(st)
		if b.MediaType, err = str(m["media_type"], "media_type"); err != nil {
			return b, err
		}
		d, _ := m["detail"].(string)
		b.Detail = llm.Detail(d)
		switch b.Source {
		case llm.SourceURL:
			if b.URL, err = str(src["url"], "url"); err == nil && b.URL == nil {
				err = fmt.Errorf("a url image needs source.url")
			}
		case llm.SourceInline:
			if b.Base64Data, err = str(src["base64_data"], "base64_data"); err == nil && b.Base64Data == nil {
				err = fmt.Errorf("an inline image needs source.base64_data")
			}
		default:
			err = fmt.Errorf("image source type %q is not url or inline", st)
		}
	default:
		err = fmt.Errorf("block type %q is not text or image", typ)
	}
	return b, err
}

// ParseSampling builds a sampling configuration from its decoded form
// (prompt-management §3: temperature, max_tokens, top_p, seed,
// frequency_penalty, presence_penalty, stop_sequences, and an extras
// mapping of vendor fields). Any other key is an extra too.
func ParseSampling(m map[string]any) (*llm.Config, error) {
	var c llm.Config
	num := func(k string) (*float64, error) {
		v, ok := m[k]
		if !ok || v == nil {
			return nil, nil
		}
		f, ok := toFloat(v)
		if !ok {
			return nil, fmt.Errorf("sampling %s is not a number", k)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("sampling %s is not a finite number", k)
		}
		return &f, nil
	}
	integer := func(k string) (*int64, error) {
		f, err := num(k)
		if err != nil || f == nil {
			return nil, err
		}
		if *f != math.Trunc(*f) || math.Abs(*f) > 1<<53 {
			return nil, fmt.Errorf("sampling %s is not an integer", k)
		}
		n := int64(*f)
		return &n, nil
	}
	var err error
	if c.Temperature, err = num("temperature"); err != nil {
		return nil, err
	}
	if c.TopP, err = num("top_p"); err != nil {
		return nil, err
	}
	if c.FrequencyPenalty, err = num("frequency_penalty"); err != nil {
		return nil, err
	}
	if c.PresencePenalty, err = num("presence_penalty"); err != nil {
		return nil, err
	}
	if c.Seed, err = integer("seed"); err != nil {
		return nil, err
	}
	mt, err := integer("max_tokens")
	if err != nil {
		return nil, err
	}
	if mt != nil {
		if *mt < 1 {
			return nil, fmt.Errorf("sampling max_tokens must be at least 1, not %d", *mt)
		}
		n := int(*mt)
		c.MaxTokens = &n
	}
	if v, ok := m["stop_sequences"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("sampling stop_sequences is not a list")
		}
		c.StopSequences = []string{}
		for _, s := range list {
			str, ok := s.(string)
			if !ok {
				return nil, fmt.Errorf("sampling stop_sequences has a non-string")
			}
			c.StopSequences = append(c.StopSequences, str)
		}
	}
	for k, v := range m {
		switch k {
		case "temperature", "top_p", "frequency_penalty", "presence_penalty", "seed", "max_tokens", "stop_sequences":
		case "extras":
			ex, ok := v.(map[string]any)
			if !ok && v != nil {
				return nil, fmt.Errorf("sampling extras is not a mapping")
			}
			for ek, ev := range ex {
				if c.Extras == nil {
					c.Extras = map[string]any{}
				}
				c.Extras[ek] = ev
			}
		default:
			if c.Extras == nil {
				c.Extras = map[string]any{}
			}
			c.Extras[k] = v
		}
	}
	return &c, nil
}

// ParseTokenBudget builds a token budget from its decoded form
// ({input_max_tokens, total_max_tokens}). Unrecognized keys are ignored
// and a malformed bound is dropped (prompt-management §5: a budget never
// breaks a call); nil when no bound is usable.
func ParseTokenBudget(m map[string]any) *TokenBudget {
	bound := func(k string) *int {
		f, ok := toFloat(m[k])
		if !ok || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
			return nil
		}
		n := int(f)
		return &n
	}
	tb := &TokenBudget{InputMaxTokens: bound("input_max_tokens"), TotalMaxTokens: bound("total_max_tokens")}
	if tb.InputMaxTokens == nil && tb.TotalMaxTokens == nil {
		return nil
	}
	return tb
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
