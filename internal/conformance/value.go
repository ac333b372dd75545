package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Kind is the kind of a decoded YAML [Value].
type Kind uint8

// The value kinds.
const (
	KindNull Kind = iota
	KindBool
	KindInt
	KindFloat
	KindString
	KindList
	KindMap
)

var kindNames = [...]string{"null", "bool", "int", "float", "string", "list", "mapping"}

// String returns the kind's name as used in error messages.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Value is a decoded YAML node that keeps what a plain map[string]any
// loses: the document order of mapping keys (conformance-adapter §8.2
// requires an order-preserving load so a node's directives run in document
// order) and the source position of every node, for error messages.
//
// Values are immutable once loaded; [Value.Native] returns a fresh Go
// value each time it is called.
type Value struct {
	Kind Kind
	// Pos is where the value starts in its fixture file.
	Pos Pos

	Bool  bool
	Int   int64
	Float float64
	Str   string
	// Items holds a list's elements.
	Items []*Value
	// Fields holds a mapping's entries in document order.
	Fields []*Field
}

// Field is one mapping entry.
type Field struct {
	Key string
	// Pos is the position of the key.
	Pos   Pos
	Value *Value
}

// Get returns the value of the mapping entry named key.
func (v *Value) Get(key string) (*Value, bool) {
	if v == nil || v.Kind != KindMap {
		return nil, false
	}
	for _, f := range v.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// Field returns the mapping entry named key.
func (v *Value) Field(key string) (*Field, bool) {
	if v == nil || v.Kind != KindMap {
		return nil, false
	}
	for _, f := range v.Fields {
		if f.Key == key {
			return f, true
		}
	}
	return nil, false
}

// IsNull reports whether v is absent or a YAML null.
func (v *Value) IsNull() bool { return v == nil || v.Kind == KindNull }

// Native converts v to plain Go values: nil, bool, int, float64, string,
// []any and map[string]any. Integers that do not fit an int stay int64.
func (v *Value) Native() any {
	if v == nil {
		return nil
	}
	switch v.Kind {
	case KindBool:
		return v.Bool
	case KindInt:
		if v.Int >= math.MinInt && v.Int <= math.MaxInt {
			return int(v.Int)
		}
		return v.Int
	case KindFloat:
		return v.Float
	case KindString:
		return v.Str
	case KindList:
		out := make([]any, len(v.Items))
		for i, it := range v.Items {
			out[i] = it.Native()
		}
		return out
	case KindMap:
		out := make(map[string]any, len(v.Fields))
		for _, f := range v.Fields {
			out[f.Key] = f.Value.Native()
		}
		return out
	}
	return nil
}

// String renders v in YAML flow style, for messages.
func (v *Value) String() string { return formatValue(v.Native()) }

// Limits that keep hostile or broken YAML from exhausting memory or the
// stack while it is converted (alias expansion can be exponential).
const (
	maxValueNodes = 1 << 20
	maxValueDepth = 256
)

// ParseYAML decodes one YAML document into a [Value], recording file as
// the position's file name. Errors are *SchemaInvalidError.
func ParseYAML(file string, data []byte) (*Value, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, schemaErrorf(Pos{File: file, Line: 1}, "empty fixture")
		}
		return nil, yamlError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, schemaErrorf(Pos{File: file, Line: extra.Line}, "more than one YAML document")
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(file, err)
	}
	c := converter{file: file}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, schemaErrorf(Pos{File: file, Line: 1}, "empty fixture")
		}
		root = root.Content[0]
	}
	return c.convert(root, 0)
}

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError converts a YAML syntax error, moving its line number into the
// position.
func yamlError(file string, err error) error {
	pos := Pos{File: file, Line: 1}
	msg := err.Error()
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			pos.Line, msg = n, m[2]
		}
	}
	return schemaErrorf(pos, "invalid YAML: %s", msg)
}

type converter struct {
	file  string
	nodes int
}

func (c *converter) pos(n *yaml.Node) Pos { return Pos{File: c.file, Line: n.Line} }

func (c *converter) convert(n *yaml.Node, depth int) (*Value, error) {
	if depth > maxValueDepth {
		return nil, schemaErrorf(c.pos(n), "YAML nested deeper than %d levels", maxValueDepth)
	}
	c.nodes++
	if c.nodes > maxValueNodes {
		return nil, schemaErrorf(c.pos(n), "YAML expands to more than %d nodes", maxValueNodes)
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, schemaErrorf(c.pos(n), "unresolved alias")
		}
		return c.convert(n.Alias, depth+1)
	case yaml.ScalarNode:
		return c.scalar(n)
	case yaml.SequenceNode:
		v := &Value{Kind: KindList, Pos: c.pos(n), Items: make([]*Value, 0, len(n.Content))}
		for _, item := range n.Content {
			iv, err := c.convert(item, depth+1)
			if err != nil {
				return nil, err
			}
			v.Items = append(v.Items, iv)
		}
		return v, nil
	case yaml.MappingNode:
		if len(n.Content)%2 != 0 {
			return nil, schemaErrorf(c.pos(n), "malformed mapping")
		}
		v := &Value{Kind: KindMap, Pos: c.pos(n), Fields: make([]*Field, 0, len(n.Content)/2)}
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			for kn.Kind == yaml.AliasNode && kn.Alias != nil {
				kn = kn.Alias
			}
			if kn.Kind != yaml.ScalarNode {
				return nil, schemaErrorf(c.pos(kn), "mapping key must be a scalar")
			}
			if seen[kn.Value] {
				return nil, schemaErrorf(c.pos(kn), "duplicate key %q", kn.Value)
			}
			seen[kn.Value] = true
			fv, err := c.convert(vn, depth+1)
			if err != nil {
				return nil, err
			}
			v.Fields = append(v.Fields, &Field{Key: kn.Value, Pos: c.pos(kn), Value: fv})
		}
		return v, nil
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return &Value{Kind: KindNull, Pos: c.pos(n)}, nil
		}
		return c.convert(n.Content[0], depth+1)
	}
	return nil, schemaErrorf(c.pos(n), "unsupported YAML node kind %d", n.Kind)
}

func (c *converter) scalar(n *yaml.Node) (*Value, error) {
	v := &Value{Pos: c.pos(n)}
	switch n.ShortTag() {
	case "!!null":
		v.Kind = KindNull
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, schemaErrorf(v.Pos, "invalid bool %q", n.Value)
		}
		v.Kind, v.Bool = KindBool, b
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			// Out of int64 range: keep it as a float rather than fail.
			f, ferr := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
			if ferr != nil {
				return nil, schemaErrorf(v.Pos, "invalid int %q", n.Value)
			}
			v.Kind, v.Float = KindFloat, f
			return v, nil
		}
		v.Kind, v.Int = KindInt, i
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, schemaErrorf(v.Pos, "invalid float %q", n.Value)
		}
		v.Kind, v.Float = KindFloat, f
	default:
		// !!str, !!timestamp, !!binary and custom tags stay strings.
		v.Kind, v.Str = KindString, n.Value
	}
	return v, nil
}
