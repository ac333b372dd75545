package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"unicode/utf8"
)

// ParseStructured applies the §6 parsed contract to resp for a request
// with the given response schema: when schema is nil or the response
// finished with tool calls, Parsed stays nil; otherwise the message text
// must parse as JSON and validate against schema, and Parsed is set to
// its compact form. A failure returns a *[StructuredOutputError] carrying
// the verbatim content, the failure, finish reason and usage.
// message.content is never rewritten. Every mapping calls it at the end
// of Complete; [Complete] calls it after assembling a stream.
func ParseStructured(resp *Response, schema json.RawMessage) error {
	resp.Parsed = nil
	if schema == nil || resp.FinishReason == FinishToolCalls || len(resp.Message.ToolCalls) > 0 {
		return nil
	}
	content := resp.Message.Text()
	fail := func(msg string, err error) error {
		return &StructuredOutputError{
			Schema: schema, OutputContent: content, ErrorMessage: msg,
			FinishReason: resp.FinishReason, Usage: resp.Usage, Response: resp, Err: err,
		}
	}
	v, err := decodeJSON([]byte(content))
	if err != nil {
		return fail("content is not valid JSON: "+err.Error(), err)
	}
	s, err := decodeJSON(schema)
	if err != nil {
		return fail("response schema is not valid JSON: "+err.Error(), err)
	}
	if err := validateSchema(s, v, ""); err != nil {
		return fail(err.Error(), err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(content)); err != nil {
		return fail("content is not valid JSON: "+err.Error(), err)
	}
	resp.Parsed = buf.Bytes()
	return nil
}

// ValidateJSON validates the JSON document doc against the JSON Schema
// schema. It supports the keywords structured output and tool schemas use:
// type, enum, const, properties, required, additionalProperties, items,
// prefixItems, min/maxItems, uniqueItems, min/maxLength, pattern,
// minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf,
// allOf, anyOf, oneOf, not, $defs/definitions with local $ref. Unknown
// keywords are ignored, as JSON Schema prescribes.
func ValidateJSON(schema, doc []byte) error {
	s, err := decodeJSON(schema)
	if err != nil {
		return fmt.Errorf("llm: schema: %w", err)
	}
	v, err := decodeJSON(doc)
	if err != nil {
		return fmt.Errorf("llm: document: %w", err)
	}
	root := s
	return schemaValidator{root: root}.validate(s, v, "")
}

func validateSchema(s, v any, path string) error {
	return schemaValidator{root: s}.validate(s, v, path)
}

// decodeJSON decodes one JSON value keeping numbers as json.Number.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data after JSON value")
	}
	if _, err := d.Token(); err == nil {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

// checkObjectSchema reports a *ValidationError unless raw is a JSON object
// whose "type", when present, is "object" (§5 response_schema).
func checkObjectSchema(raw json.RawMessage) *ValidationError {
	v, err := decodeJSON(raw)
	if err != nil {
		e := invalid("response_schema", "not valid JSON")
		e.Err = err
		return e
	}
	m, ok := v.(map[string]any)
	if !ok {
		return invalid("response_schema", "must be a JSON object schema")
	}
	if t, ok := m["type"]; ok && t != "object" {
		return invalid("response_schema", "the top-level schema must have type \"object\"")
	}
	return nil
}

type schemaValidator struct{ root any }

func at(path, key string) string {
	if path == "" {
		return "/" + key
	}
	return path + "/" + key
}

func schemaErr(path, format string, args ...any) error {
	if path == "" {
		path = "/"
	}
	return fmt.Errorf("at %s: "+format, append([]any{path}, args...)...)
}

func (sv schemaValidator) validate(schema, v any, path string) error {
	s, ok := schema.(map[string]any)
	if !ok {
		if b, isBool := schema.(bool); isBool && !b {
			return schemaErr(path, "no value is allowed here")
		}
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		target, err := sv.resolve(ref)
		if err != nil {
			return schemaErr(path, "%v", err)
		}
		if err := sv.validate(target, v, path); err != nil {
			return err
		}
	}
	if t, ok := s["type"]; ok {
		if err := checkType(t, v, path); err != nil {
			return err
		}
	}
	if e, ok := s["enum"].([]any); ok {
		found := false
		for _, x := range e {
			if jsonEqual(x, v) {
				found = true
				break
			}
		}
		if !found {
			return schemaErr(path, "value is not one of the enum values")
		}
	}
	if c, ok := s["const"]; ok && !jsonEqual(c, v) {
		return schemaErr(path, "value does not equal the const value")
	}
	switch x := v.(type) {
	case map[string]any:
		if err := sv.object(s, x, path); err != nil {
			return err
		}
	case []any:
		if err := sv.array(s, x, path); err != nil {
			return err
		}
	case string:
		n := utf8.RuneCountInString(x)
		if m, ok := intKeyword(s, "minLength"); ok && n < m {
			return schemaErr(path, "string shorter than minLength %d", m)
		}
		if m, ok := intKeyword(s, "maxLength"); ok && n > m {
			return schemaErr(path, "string longer than maxLength %d", m)
		}
		if p, ok := s["pattern"].(string); ok {
			re, err := regexp.Compile(p)
			if err == nil && !re.MatchString(x) {
				return schemaErr(path, "string does not match pattern %q", p)
			}
		}
	case json.Number:
		if err := number(s, x, path); err != nil {
			return err
		}
	}
	for _, key := range []string{"allOf", "anyOf", "oneOf"} {
		subs, ok := s[key].([]any)
		if !ok {
			continue
		}
		n := 0
		var first error
		for _, sub := range subs {
			if err := sv.validate(sub, v, path); err != nil {
				if key == "allOf" {
					return err
				}
				if first == nil {
					first = err
				}
				continue
			}
			n++
		}
		switch {
		case key == "anyOf" && n == 0:
			return schemaErr(path, "value matches no anyOf schema (%v)", first)
		case key == "oneOf" && n != 1:
			return schemaErr(path, "value matches %d oneOf schemas, want exactly 1", n)
		}
	}
	if not, ok := s["not"]; ok && sv.validate(not, v, path) == nil {
		return schemaErr(path, "value matches the \"not\" schema")
	}
	return nil
}

func (sv schemaValidator) resolve(ref string) (any, error) {
	if ref == "#" {
		return sv.root, nil
	}
	if len(ref) < 2 || ref[:2] != "#/" {
		return nil, fmt.Errorf("unsupported $ref %q", ref)
	}
	cur := sv.root
	start := 2
	for i := 2; i <= len(ref); i++ {
		if i < len(ref) && ref[i] != '/' {
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("unresolvable $ref %q", ref)
		}
		if cur, ok = m[ref[start:i]]; !ok {
			return nil, fmt.Errorf("unresolvable $ref %q", ref)
		}
		start = i + 1
	}
	return cur, nil
}

func (sv schemaValidator) object(s, x map[string]any, path string) error {
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			name, _ := r.(string)
			if _, ok := x[name]; !ok {
				return schemaErr(path, "missing required property %q", name)
			}
		}
	}
	props, _ := s["properties"].(map[string]any)
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ps, ok := props[k]; ok {
			if err := sv.validate(ps, x[k], at(path, k)); err != nil {
				return err
			}
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if !ap {
				return schemaErr(path, "additional property %q is not allowed", k)
			}
		case map[string]any:
			if err := sv.validate(ap, x[k], at(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (sv schemaValidator) array(s map[string]any, x []any, path string) error {
	if m, ok := intKeyword(s, "minItems"); ok && len(x) < m {
		return schemaErr(path, "array shorter than minItems %d", m)
	}
	if m, ok := intKeyword(s, "maxItems"); ok && len(x) > m {
		return schemaErr(path, "array longer than maxItems %d", m)
	}
	prefix, _ := s["prefixItems"].([]any)
	for i, e := range x {
		p := at(path, strconv.Itoa(i))
		if i < len(prefix) {
			if err := sv.validate(prefix[i], e, p); err != nil {
				return err
			}
			continue
		}
		if items, ok := s["items"]; ok {
			if err := sv.validate(items, e, p); err != nil {
				return err
			}
		}
	}
	if u, _ := s["uniqueItems"].(bool); u {
		for i := range x {
			for j := i + 1; j < len(x); j++ {
				if jsonEqual(x[i], x[j]) {
					return schemaErr(path, "array items %d and %d are equal", i, j)
				}
			}
		}
	}
	return nil
}

func number(s map[string]any, x json.Number, path string) error {
	v, ok := new(big.Rat).SetString(x.String())
	if !ok {
		return schemaErr(path, "invalid number %s", x)
	}
	cmp := func(key string, bad func(c int) bool, what string) error {
		n, ok := s[key].(json.Number)
		if !ok {
			return nil
		}
		lim, ok := new(big.Rat).SetString(n.String())
		if ok && bad(v.Cmp(lim)) {
			return schemaErr(path, "number %s %s %s", x, what, n)
		}
		return nil
	}
	for _, c := range []error{
		cmp("minimum", func(c int) bool { return c < 0 }, "is below minimum"),
		cmp("maximum", func(c int) bool { return c > 0 }, "is above maximum"),
		cmp("exclusiveMinimum", func(c int) bool { return c <= 0 }, "is not above exclusiveMinimum"),
		cmp("exclusiveMaximum", func(c int) bool { return c >= 0 }, "is not below exclusiveMaximum"),
	} {
		if c != nil {
			return c
		}
	}
	if n, ok := s["multipleOf"].(json.Number); ok {
		d, ok := new(big.Rat).SetString(n.String())
		if ok && d.Sign() > 0 && !new(big.Rat).Quo(v, d).IsInt() {
			return schemaErr(path, "number %s is not a multiple of %s", x, n)
		}
	}
	return nil
}

func intKeyword(s map[string]any, key string) (int, bool) {
	n, ok := s[key].(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return int(i), err == nil
}

func checkType(t, v any, path string) error {
	switch t := t.(type) {
	case string:
		if isType(t, v) {
			return nil
		}
		return schemaErr(path, "expected %s, got %s", t, typeName(v))
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && isType(s, v) {
				return nil
			}
		}
		return schemaErr(path, "value of type %s is not among the allowed types", typeName(v))
	}
	return nil
}

func isType(t string, v any) bool {
	switch t {
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		r, ok := new(big.Rat).SetString(n.String())
		return ok && r.IsInt()
	case "number":
		_, ok := v.(json.Number)
		return ok
	}
	return typeName(v) == t
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

// AugmentForSchema returns a copy of msgs prepared for the
// prompt-augmentation structured-output fallback (§8.1.5.1 and its §8.2
// and §8.3 counterparts): a system directive asking for only JSON that
// conforms to schema (included in canonical form) is appended to the
// existing system message, or inserted as a new first system message.
// msgs is not modified. The directive text is the same for every mapping.
func AugmentForSchema(msgs []Message, schema json.RawMessage) []Message {
	canon, err := CanonicalJSON(schema)
	if err != nil {
		canon = schema
	}
	directive := "Respond with only a JSON value that conforms to this JSON Schema, with no other text:\n" + string(canon)
	out := make([]Message, 0, len(msgs)+1)
	if len(msgs) > 0 && msgs[0].Role == RoleSystem {
		out = append(out, SystemText(msgs[0].Text()+"\n\n"+directive))
		return append(out, msgs[1:]...)
	}
	out = append(out, SystemText(directive))
	return append(out, msgs...)
}
