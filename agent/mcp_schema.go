package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	gjsonschema "github.com/google/jsonschema-go/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// mcpSchemaURL is the URL an MCP tool's input schema is compiled under. It
// names no document: a reference within the schema ("#/$defs/x")
// resolves against it, one to another document is refused.
const mcpSchemaURL = "urn:armature:mcp-tool-input"

// maxArgumentsProblems bounds the lines of an arguments' mismatch told to
// the model: arguments of 4 MiB may fail in every element of an array.
const maxArgumentsProblems = 20

// mcpSchemaFormats are the formats the validator knows. A draft-07 (or
// older) schema's format is asserted by default; the argument check
// registers each as accepting anything, so that format stays an
// annotation whatever the draft, as it is for 2020-12, and is left to the
// server, whose notion of an email or a URI may differ.
var mcpSchemaFormats = [...]string{
	"json-pointer", "relative-json-pointer", "uuid", "duration", "period",
	"ipv4", "ipv6", "hostname", "email", "date", "time", "date-time",
	"uri", "iri", "uri-reference", "iri-reference", "uri-template", "semver",
}

// noSchemaLoader refuses every document a schema refers to: the argument
// check reads nothing from the network or the file system at a server's
// word.
type noSchemaLoader struct{}

func (noSchemaLoader) Load(url string) (any, error) {
	return nil, errors.New("an MCP tool's input schema may not refer to another document")
}

// argumentsSchema is the compiled input schema params, or nil when the
// validator cannot compile it (a reference to another document, a draft
// or a keyword it does not know, a pattern Go's regexp does not take):
// the server then checks the arguments alone, as it must anyway. A
// schema without $schema is read as draft 2020-12, the MCP
// specification's default. The arguments' numbers are kept exact
// (json.Number, compared as rationals), so that multipleOf 0.01 takes
// 19.99; the schema's are as the MCP SDK decoded them, binary doubles
// (exact up to 15 significant digits: a bound such as 2^53+1 reads as
// 2^53).
func argumentsSchema(params json.RawMessage) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil
	}
	// Drafts up to 7 assert format, and the validator lets no checker
	// replace its "regex" one: format goes, so that it stays an
	// annotation left to the server whatever the draft.
	dropFormats(doc)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noSchemaLoader{})
	for _, name := range mcpSchemaFormats {
		c.RegisterFormat(&jsonschema.Format{Name: name, Validate: func(any) error { return nil }})
	}
	if err := c.AddResource(mcpSchemaURL, doc); err != nil {
		return nil
	}
	s, err := c.Compile(mcpSchemaURL)
	if err != nil {
		return nil
	}
	return s
}

// dropFormats deletes, in place, every format keyword (a "format" member
// whose value is a string) of the schema doc, but not in the values of
// const, enum, default and examples, which are data.
func dropFormats(doc any) {
	switch v := doc.(type) {
	case map[string]any:
		if _, ok := v["format"].(string); ok {
			delete(v, "format")
		}
		for k, sub := range v {
			switch k {
			case "const", "enum", "default", "examples":
				continue
			}
			dropFormats(sub)
		}
	case []any:
		for _, sub := range v {
			dropFormats(sub)
		}
	}
}

// argumentsCheck is the check of a tool call's arguments against the
// tool's input schema params, or nil when no validator takes the schema
// (the server then checks the arguments alone, as it must anyway): the
// exact one (argumentsSchema) when it compiles the schema, else, for a
// schema it refuses that jsonschema-go resolves (a duplicated required
// name, a draft-07 array of items), that one's check, on numbers read as
// doubles, as before the exact check.
func argumentsCheck(params json.RawMessage) func(json.RawMessage) error {
	if s := argumentsSchema(params); s != nil {
		return func(args json.RawMessage) error { return checkArguments(s, args) }
	}
	var legacy gjsonschema.Schema
	if json.Unmarshal(params, &legacy) != nil {
		return nil
	}
	r, err := legacy.Resolve(nil)
	if err != nil {
		return nil
	}
	return func(args json.RawMessage) error {
		var generic any
		if err := json.Unmarshal(args, &generic); err != nil {
			return err
		}
		return r.Validate(generic)
	}
}

// checkArguments checks args, a JSON text, against schema, reading its
// numbers exactly (jsonschema.UnmarshalJSON keeps them as json.Number,
// which the validator compares as rationals, so that multipleOf 0.01
// takes 19.99 and an integer type takes 12345678901234567890), within
// the bounds checkNumbers sets. The error says what does not fit, for
// the model.
func checkArguments(schema *jsonschema.Schema, args json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("the arguments are not JSON: %w", err)
	}
	if err := checkNumbers(doc); err != nil {
		return err
	}
	err = schema.Validate(doc)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return &argumentsMismatch{ve: ve}
	}
	return err
}

// argumentsMismatch is a validation failure, told the model line by line
// (where in the arguments, and what is wrong; up to
// maxArgumentsProblems lines), without the schema's URL.
type argumentsMismatch struct{ ve *jsonschema.ValidationError }

func (e *argumentsMismatch) Error() string {
	p := message.NewPrinter(language.English)
	var b strings.Builder
	b.WriteString("they do not fit the tool's input schema:")
	lines, more := 0, 0
	var walk func(ve *jsonschema.ValidationError, depth int)
	walk = func(ve *jsonschema.ValidationError, depth int) {
		_, ref := ve.ErrorKind.(*kind.Reference)
		_, root := ve.ErrorKind.(*kind.Schema)
		switch {
		case root, ref && len(ve.Causes) == 1:
			// "jsonschema validation failed with 'urn:…#'", and "at
			// '/a': validation failed" above a $ref's one cause, say
			// nothing their causes do not.
			depth--
		case lines == maxArgumentsProblems:
			more++
		default:
			lines++
			b.WriteString("\n" + strings.Repeat("  ", depth) + "- at '" + instancePointer(ve.InstanceLocation) + "': " + ve.ErrorKind.LocalizedString(p))
		}
		for _, c := range ve.Causes {
			walk(c, depth+1)
		}
	}
	walk(e.ve, 0)
	if more > 0 {
		fmt.Fprintf(&b, "\n- … and %d more", more)
	}
	return b.String()
}

func (e *argumentsMismatch) Unwrap() error { return e.ve }

// instancePointer is the JSON pointer of a location in the arguments.
func instancePointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// maxArgumentNumberChars and maxArgumentNumberExponent bound a number in
// a tool's arguments: the validator computes with it as a rational, and
// a number such as 1e999999 (10^999999, 400 KiB of bits, a tenth of a
// second to build) repeated over 4 MiB of arguments would hold the call
// for hours, while 1e9999999, which math/big refuses, would make the
// validator fail. Both bounds are far past what a server holds in a
// double (about ±1.8e308, down to 4.9e-324) or a 64-bit integer.
const (
	maxArgumentNumberChars    = 400
	maxArgumentNumberExponent = 400
)

// checkNumbers fails when a number in v, arguments decoded with
// jsonschema.UnmarshalJSON, is longer than maxArgumentNumberChars or has
// an exponent past ±maxArgumentNumberExponent.
func checkNumbers(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case json.Number:
		text := string(v)
		ok := len(text) <= maxArgumentNumberChars
		if i := strings.IndexAny(text, "eE"); ok && i >= 0 {
			exp, err := strconv.Atoi(strings.TrimPrefix(text[i+1:], "+"))
			ok = err == nil && exp >= -maxArgumentNumberExponent && exp <= maxArgumentNumberExponent
		}
		if !ok {
			if len(text) > 40 {
				text = text[:40] + "…"
			}
			return fmt.Errorf("the number %s is out of range: a number in the arguments may have up to %d characters and an exponent up to ±%d",
				text, maxArgumentNumberChars, maxArgumentNumberExponent)
		}
	}
	return nil
}
