package runtimetest

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/armature-go/armature/runtime"
)

// testFailedRunText: a run failed with an error whose text is not valid
// UTF-8 or holds NUL bytes (an upstream's message cut inside a
// character) ends failed on every store, its text made valid. Before,
// PostgreSQL refused the text and the run stayed started.
func testFailedRunText(t *testing.T, s runtime.Store) {
	ctx := t.Context()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rec.Close(ctx) }()
	turn, _, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "t", SessionID: "s", AgentID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Fail(ctx, runtime.RunError{Bucket: "retryable_transient", Category: "provider_unavailable\x00",
		Message: "the upstream said: caf\xc3 \x00 \xe2\x82"}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	run := getRun(t, s, "t", turn.ID())
	if run.Status != runtime.StatusFailed || run.Error == nil {
		t.Fatalf("run %+v, want failed", run)
	}
	for _, text := range []string{run.Error.Category, run.Error.Message} {
		if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			t.Fatalf("stored error text %q is not valid UTF-8 without NUL", text)
		}
	}
	if !strings.HasPrefix(run.Error.Message, "the upstream said: caf") {
		t.Fatalf("stored message %q", run.Error.Message)
	}
}
