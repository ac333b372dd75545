package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// payloadSchemas caches compiled payload schemas by their text. A graph
// sees few distinct schemas (one per kind of suspension its nodes
// declare); the cache is bounded anyway.
type payloadSchemas struct {
	mu sync.Mutex
	m  map[string]*jsonschema.Schema
}

const maxPayloadSchemas = 256

// compile returns the compiled schema for raw.
func (c *payloadSchemas) compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	key := string(raw)
	c.mu.Lock()
	if s, ok := c.m[key]; ok {
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the payload schema is not JSON: %w", err)
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	if err := comp.AddResource("payload.json", doc); err != nil {
		return nil, fmt.Errorf("the payload schema: %w", err)
	}
	s, err := comp.Compile("payload.json")
	if err != nil {
		return nil, fmt.Errorf("the payload schema does not compile: %w", err)
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxPayloadSchemas {
		c.m = map[string]*jsonschema.Schema{}
	}
	c.m[key] = s
	c.mu.Unlock()
	return s, nil
}

// PayloadError reports a resume payload that does not satisfy the
// suspension's PayloadSchema: Path is the JSON pointer of the offending
// value ("" for the payload itself), Reason what is wrong with it.
type PayloadError struct {
	Path   string
	Reason string
}

// Error formats the failure.
func (e *PayloadError) Error() string {
	if e.Path == "" {
		return "the payload " + e.Reason
	}
	return fmt.Sprintf("payload field %s: %s", e.Path, e.Reason)
}

// validatePayload checks payload against the descriptor's schema.
func (c *payloadSchemas) validatePayload(schema json.RawMessage, payload Update) error {
	s, err := c.compile(schema)
	if err != nil {
		return err
	}
	if payload == nil {
		payload = Update{}
	}
	raw, err := json.Marshal(map[string]any(payload))
	if err != nil {
		return &PayloadError{Reason: "is not JSON-encodable: " + err.Error()}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &PayloadError{Reason: "is not JSON: " + err.Error()}
	}
	if err := s.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return payloadError(ve)
		}
		return &PayloadError{Reason: err.Error()}
	}
	return nil
}

// payloadError reduces a validation error to its first leaf cause.
func payloadError(ve *jsonschema.ValidationError) *PayloadError {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	path := ""
	if len(ve.InstanceLocation) > 0 {
		path = "/" + strings.Join(ve.InstanceLocation, "/")
	}
	return &PayloadError{Path: path, Reason: ve.ErrorKind.LocalizedString(message.NewPrinter(language.English))}
}
