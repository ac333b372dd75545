package conformance

import (
	"errors"
	"fmt"
)

// Sentinel errors for the conformance-adapter §9 error categories. The
// structured error types below match them with [errors.Is]; their Error
// strings start with the category identifier, which is what the summary
// prints.
var (
	// ErrDirectiveUnknown is the fixture_directive_unknown category: a
	// fixture used a key or invariant name the adapter does not recognize.
	ErrDirectiveUnknown = errors.New("fixture_directive_unknown")
	// ErrSchemaInvalid is the fixture_schema_invalid category: a fixture is
	// structurally broken (bad YAML, wrong shape for a known directive,
	// missing required directive).
	ErrSchemaInvalid = errors.New("fixture_schema_invalid")
	// ErrVersionUnsupported is the fixture_version_unsupported category: a
	// fixture declares a conformance_version newer than the adapter's.
	ErrVersionUnsupported = errors.New("fixture_version_unsupported")
	// ErrNotImplemented marks a case that needs a capability Armature does
	// not implement yet. Such a case is reported but does not fail the run.
	ErrNotImplemented = errors.New("not implemented")
)

// Pos is a position in a fixture file.
type Pos struct {
	File string
	Line int
}

// String formats the position as "file:line".
func (p Pos) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// DirectiveUnknownError reports a directive (mapping key, invariant name)
// the adapter does not recognize. Per conformance-adapter §8.2 this is a
// failure, never a skip.
type DirectiveUnknownError struct {
	Name string
	Pos  Pos
}

// Error formats the error as "fixture_directive_unknown: <name> at <file>:<line>".
func (e *DirectiveUnknownError) Error() string {
	return fmt.Sprintf("%s: %s at %s", ErrDirectiveUnknown, e.Name, e.Pos)
}

// Is matches [ErrDirectiveUnknown].
func (e *DirectiveUnknownError) Is(target error) bool { return target == ErrDirectiveUnknown }

// SchemaInvalidError reports a structurally broken fixture.
type SchemaInvalidError struct {
	Msg string
	Pos Pos
}

// Error formats the error as "fixture_schema_invalid: <msg> at <file>:<line>".
func (e *SchemaInvalidError) Error() string {
	if e.Pos.File == "" {
		return fmt.Sprintf("%s: %s", ErrSchemaInvalid, e.Msg)
	}
	return fmt.Sprintf("%s: %s at %s", ErrSchemaInvalid, e.Msg, e.Pos)
}

// Is matches [ErrSchemaInvalid].
func (e *SchemaInvalidError) Is(target error) bool { return target == ErrSchemaInvalid }

// NotImplementedError reports that a case needs a capability that is not
// built yet. The runner counts the case as "not implemented": it does not
// pass, but it does not fail the Go test either.
type NotImplementedError struct {
	// Capability names what is missing, e.g. "sessions" or
	// "pipeline-utilities fan-out (§9)".
	Capability string
}

// Error formats the error as "not implemented: <capability>".
func (e *NotImplementedError) Error() string {
	return fmt.Sprintf("%s: %s", ErrNotImplemented, e.Capability)
}

// Is matches [ErrNotImplemented].
func (e *NotImplementedError) Is(target error) bool { return target == ErrNotImplemented }

func notImplemented(capability string) error {
	return &NotImplementedError{Capability: capability}
}

func schemaErrorf(pos Pos, format string, args ...any) error {
	return &SchemaInvalidError{Msg: fmt.Sprintf(format, args...), Pos: pos}
}
