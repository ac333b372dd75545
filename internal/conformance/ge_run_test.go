package conformance

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
)

func yamlValue(t *testing.T, src string) *Value {
	t.Helper()
	v, err := ParseYAML("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCheckCompileWarnings(t *testing.T) {
	warn := []graph.Warning{{Category: errcat.ProjectionReducerRoundTrip}}
	tests := []struct {
		want     string
		warnings []graph.Warning
		ok       bool
	}{
		{"projection_reducer_round_trip", warn, true},
		{"projection_reducer_round_trip", nil, false},
		{"[projection_reducer_round_trip]", warn, true},
		{"[projection_reducer_round_trip]", append(warn, graph.Warning{Category: "other"}), false},
		{"[]", nil, true},
		{"[]", warn, false},
	}
	for _, tt := range tests {
		err := checkCompileWarnings(yamlValue(t, tt.want), tt.warnings)
		if (err == nil) != tt.ok {
			t.Errorf("want %s with %d warnings: err = %v, want ok=%t", tt.want, len(tt.warnings), err, tt.ok)
		}
	}
}

// migrationError stands in for a later capability's structured error.
type migrationError struct {
	FromVersion               int
	ToVersion                 int
	RegisteredMigrationsCount int
	Detail                    map[string]any
	Err                       error
}

func (e *migrationError) Error() string             { return "migration missing" }
func (e *migrationError) Unwrap() error             { return e.Err }
func (e *migrationError) Category() errcat.Category { return "session_migration_missing" }

func TestCheckCarries(t *testing.T) {
	err := fmt.Errorf("loading: %w", &migrationError{
		FromVersion: 1, ToVersion: 3, RegisteredMigrationsCount: 0,
		Detail: map[string]any{"store": "in_memory", "extra": true},
		Err:    errors.New("no path from 1 to 3"),
	})
	run := &invocationRun{FinalState: map[string]any{"v": int64(1)}}
	tests := []struct {
		carries, errSubstr string
	}{
		{"{from_version: 1, to_version: 3, registered_migrations_count: 0}", ""},
		{"{category: session_migration_missing, message: no path from 1 to 3}", ""},
		{"{detail: {store: in_memory}}", ""}, // mapping fields match as a subset
		{"{from_version_present: true, nonexistent_present: false}", ""},
		{"{message_mentions: path from}", ""},
		{"{recoverable_state: {v: 1}}", ""},
		{"{to_version: 4}", "want 4, got 3"},
		{"{message_mentions: nothing}", "does not mention"},
		{"{nonexistent: 1}", `exposes no field "nonexistent"`},
	}
	for _, tt := range tests {
		got := checkCarries(newMatcher(), yamlValue(t, tt.carries), err, run)
		switch {
		case tt.errSubstr == "" && got != nil:
			t.Errorf("%s: %v", tt.carries, got)
		case tt.errSubstr != "" && (got == nil || !strings.Contains(got.Error(), tt.errSubstr)):
			t.Errorf("%s: err = %v, want it to contain %q", tt.carries, got, tt.errSubstr)
		}
	}
}

func TestInnermostMessage(t *testing.T) {
	user := errors.New("boom")
	if got := innermostMessage(fmt.Errorf("outer: %w", fmt.Errorf("mid: %w", user))); got != "boom" {
		t.Errorf("innermost = %q, want boom", got)
	}
	if got := innermostMessage(fmt.Errorf("wrapped: %w", errcat.NodeException)); got != "wrapped: node_exception" {
		t.Errorf("a bare category at the bottom must be skipped, got %q", got)
	}
	if got := innermostMessage(errors.Join(user, errors.New("second"))); got != "boom" {
		t.Errorf("joined errors follow the first, got %q", got)
	}
}

func TestMatchEvent(t *testing.T) {
	failed := &eventRec{Phase: "completed", NodeName: "a", Namespace: []string{"a"}, HasError: true,
		ErrCategory: "node_exception", ErrMessage: "boom", PreState: map[string]any{"v": int64(0)}}
	tests := []struct {
		want, errSubstr string
	}{
		{"{phase: completed, error: node_exception}", ""},
		{"{error: {category: node_exception}}", ""},
		{"{error: {category: node_exception, message: boom}}", ""},
		{"{error: routing_error}", `want "routing_error"`},
		{"{pre_state: {v: 0}, namespace: [a]}", ""},
		{"{post_state: {v: 1}}", "absent on the completed event"},
		{"{fan_out_index: 0}", "absent"},
	}
	for _, tt := range tests {
		err := matchEvent(newMatcher(), "e", yamlValue(t, tt.want), failed)
		switch {
		case tt.errSubstr == "" && err != nil:
			t.Errorf("%s: %v", tt.want, err)
		case tt.errSubstr != "" && (err == nil || !strings.Contains(err.Error(), tt.errSubstr)):
			t.Errorf("%s: err = %v, want it to contain %q", tt.want, err, tt.errSubstr)
		}
	}
	withPost := *failed
	withPost.HasPostState, withPost.PostState = true, map[string]any{"v": int64(1)}
	if err := matchEvent(newMatcher(), "e", yamlValue(t, "{error: node_exception}"), &withPost); err == nil {
		t.Error("a failed event carrying post_state must not match an expected error")
	}
}
