package prompt

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/armature-go/armature/errcat"
)

// Template is a parsed template text. The syntax is the substitution
// subset of Jinja2 that prompt files use across implementations:
//
//   - {{ name }} inserts the variable name; {{ a.b.c }} walks nested
//     mappings (map[string]any values). Spaces inside the braces are
//     optional.
//   - {# ... #} is a comment and renders nothing.
//   - {{ "{{" }} and {{ '}}' }} insert the literal delimiters.
//
// Statements ({% ... %}), filters and expressions are not supported: a
// template using them fails to parse with prompt_render_error rather than
// rendering something other than what its author meant.
//
// Rendering is strict (prompt-management §8): a variable the template
// names but the variables lack is a prompt_render_error naming it. A
// string renders as is; integers, floats and booleans in their Go
// decimal / true / false form; a fmt.Stringer by its String method; any
// other value as its JSON encoding. A value that cannot be written — a
// nil pointer whose String method cannot run on it, a String or
// MarshalJSON method that panics — is a prompt_render_error naming the
// variable, never a panic.
//
// A Langfuse prompt (see [Langfuse]) is parsed in Langfuse's own syntax
// instead: {{ name }} and {{ a.b }} only, every other brace being
// literal text.
//
// A Template is immutable and safe for concurrent use; its zero value
// renders the empty string.
type Template struct {
	src   string
	parts []part
	vars  []string // the variables named, in order of first use
}

// part is a literal (path == nil) or a substitution.
type part struct {
	lit  string
	path []string
}

// ParseTemplate parses src. A syntax error is a *RenderError in
// prompt_render_error whose description says where.
func ParseTemplate(src string) (*Template, error) {
	t := &Template{src: src}
	rest, off := src, 0
	var lit strings.Builder
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 || i+1 >= len(rest) {
			lit.WriteString(rest)
			break
		}
		lit.WriteString(rest[:i])
		open := rest[i : i+2]
		switch open {
		case "{#":
			end := strings.Index(rest[i+2:], "#}")
			if end < 0 {
				return nil, syntaxError(src, off+i, "unclosed comment {#")
			}
			rest, off = rest[i+2+end+2:], off+i+2+end+2
			continue
		case "{%":
			return nil, syntaxError(src, off+i, "statements ({% %}) are not supported")
		case "{{":
		default:
			lit.WriteByte('{')
			rest, off = rest[i+1:], off+i+1
			continue
		}
		end := closing(rest[i+2:])
		if end < 0 {
			return nil, syntaxError(src, off+i, "unclosed {{")
		}
		expr := strings.TrimSpace(rest[i+2 : i+2+end])
		if s, ok := stringLiteral(expr); ok {
			lit.WriteString(s)
		} else {
			path, err := parsePath(expr)
			if err != nil {
				return nil, syntaxError(src, off+i, err.Error())
			}
			t.addVar(&lit, path)
		}
		rest, off = rest[i+2+end+2:], off+i+2+end+2
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, part{lit: lit.String()})
	}
	return t, nil
}

// addVar ends the literal text lit holds (a part of its own, when not
// empty; lit is reset) and adds a variable part for path, recording its
// root variable.
func (t *Template) addVar(lit *strings.Builder, path []string) {
	if lit.Len() > 0 {
		t.parts = append(t.parts, part{lit: lit.String()})
		lit.Reset()
	}
	t.parts = append(t.parts, part{path: path})
	if !slices.Contains(t.vars, path[0]) {
		t.vars = append(t.vars, path[0])
	}
}

// parseLangfuseTemplate parses src in Langfuse's syntax, which is
// {{variable}} only (as Langfuse's SDKs compile prompts): a {{ name }}
// or {{ a.b }} tag is a variable, and every other brace is literal text —
// "{%", "{#", a "{{" without a closing "}}", and a tag whose body is not
// a variable name ({{#each}}, {{ x | upper }}, {{ "q" }}), which
// Langfuse leaves as written. A tag ends at the first "}}". It never
// fails.
func parseLangfuseTemplate(src string) *Template {
	t := &Template{src: src}
	rest := src
	var lit strings.Builder
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			lit.WriteString(rest)
			break
		}
		end := strings.Index(rest[i+2:], "}}")
		if end < 0 {
			lit.WriteString(rest)
			break
		}
		lit.WriteString(rest[:i])
		tag := rest[i : i+2+end+2]
		path, err := parsePath(strings.TrimSpace(rest[i+2 : i+2+end]))
		if err != nil {
			lit.WriteString(tag)
		} else {
			t.addVar(&lit, path)
		}
		rest = rest[i+len(tag):]
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, part{lit: lit.String()})
	}
	return t
}

// MustParseTemplate is ParseTemplate for templates known to be valid; it
// panics on a syntax error.
func MustParseTemplate(src string) *Template {
	t, err := ParseTemplate(src)
	if err != nil {
		panic(err)
	}
	return t
}

// Source returns the template text as parsed.
func (t *Template) Source() string {
	if t == nil {
		return ""
	}
	return t.src
}

// Variables returns the names of the top-level variables the template
// uses, in order of first use.
func (t *Template) Variables() []string {
	if t == nil {
		return nil
	}
	return append([]string(nil), t.vars...)
}

// Execute renders the template with vars. A missing variable is an error
// naming it (the caller wraps it into a *RenderError); lenient renders a
// missing variable as the empty string instead.
func (t *Template) Execute(vars map[string]any, lenient bool) (string, error) {
	if t == nil {
		return "", nil
	}
	if len(t.parts) == 1 && t.parts[0].path == nil {
		return t.parts[0].lit, nil
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.path == nil {
			b.WriteString(p.lit)
			continue
		}
		v, ok := lookup(vars, p.path)
		if !ok {
			if lenient {
				continue
			}
			return "", &executeError{msg: fmt.Sprintf("undefined variable %q", strings.Join(p.path, "."))}
		}
		if err := writeValue(&b, v); err != nil {
			return "", &executeError{msg: fmt.Sprintf("variable %q", strings.Join(p.path, ".")), err: err}
		}
	}
	return b.String(), nil
}

func lookup(vars map[string]any, path []string) (any, bool) {
	var cur any = vars
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// writeValue writes v as text. A value that cannot be written — one whose
// String or MarshalJSON method panics, as a method called on a nil
// pointer does — is an error, never a panic: the variable holds no
// usable value (prompt-management §11: not coercible to text), and
// rendering it as "<nil>" or "null" would send the model a
// working-but-wrong prompt (§8).
func writeValue(b *strings.Builder, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
				err = fmt.Errorf("is a nil %T", v)
				return
			}
			err = fmt.Errorf("cannot be rendered as text: its %T method panicked: %v", v, r)
		}
	}()
	switch x := v.(type) {
	case string:
		b.WriteString(x)
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	case fmt.Stringer:
		b.WriteString(x.String())
	default:
		data, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("cannot be rendered as text: %w", err)
		}
		b.Write(data)
	}
	return nil
}

// parsePath parses name(.name)*, each name an ASCII identifier.
func parsePath(expr string) ([]string, error) {
	if expr == "" {
		return nil, fmt.Errorf("empty {{ }}")
	}
	path := strings.Split(expr, ".")
	for _, p := range path {
		if !IsIdentifier(p) {
			return nil, fmt.Errorf("{{ %s }} is not a variable name (only names and dotted paths are supported)", expr)
		}
	}
	return path, nil
}

// closing returns the index of the "}}" closing a tag whose body starts
// body, skipping a quoted literal (which may contain "}}"), or -1.
func closing(body string) int {
	trimmed := strings.TrimLeft(body, " \t\r\n")
	skip := len(body) - len(trimmed)
	if trimmed != "" && (trimmed[0] == '"' || trimmed[0] == '\'') {
		if q := strings.IndexByte(trimmed[1:], trimmed[0]); q >= 0 {
			skip += q + 2
		}
	}
	end := strings.Index(body[skip:], "}}")
	if end < 0 {
		return -1
	}
	return skip + end
}

// stringLiteral reads a quoted literal expression ("..." or '...'),
// without escapes.
func stringLiteral(expr string) (string, bool) {
	if len(expr) >= 2 && (expr[0] == '"' || expr[0] == '\'') && expr[len(expr)-1] == expr[0] &&
		!strings.ContainsRune(expr[1:len(expr)-1], rune(expr[0])) {
		return expr[1 : len(expr)-1], true
	}
	return "", false
}

// IsIdentifier reports whether s matches [A-Za-z_][A-Za-z0-9_]* (the
// shape of variable and placeholder names, prompt-management §3.1).
func IsIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// syntaxError reports a template that does not parse.
func syntaxError(src string, at int, msg string) error {
	line := 1 + strings.Count(src[:at], "\n")
	return &RenderError{Description: fmt.Sprintf("template syntax error at line %d: %s", line, msg)}
}

// executeError is a failed Execute: category prompt_render_error, as
// Render reports it, so that a direct caller of Execute can classify it
// too. Its text is the failure alone (Render adds its context).
type executeError struct {
	msg string
	err error
}

func (e *executeError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

// Category implements errcat.Categorized.
func (e *executeError) Category() errcat.Category { return errcat.PromptRenderError }

// Is matches the category.
func (e *executeError) Is(target error) bool { return errcat.Matches(errcat.PromptRenderError, target) }

// Unwrap returns the cause.
func (e *executeError) Unwrap() error { return e.err }
